#!/bin/sh
# GPU check of FT_VERIFY (see verify.py): a kernel writing to an offloaded
# weight is reported with the trap, the bytes and the kernel; a graph
# captured before the plan is paged once the plan comes and its replay
# reads no poison; a reader planted in such a graph that no parameter shows
# reads NaN.  Exits 77 where there is no GPU.
# usage: verify.sh <libflextensor.so> <output dir>
set -u
lib=$1 out=$2
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu
clean_ft_env
mkdir -p "$out"
fail=0
for what in writer hidden planted; do
	LD_PRELOAD="$lib" FT_ENABLED=1 FT_VERIFY=1 FT_TRANSFER_BUDGET_SCALE=1000 \
		FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info "$py" "$here/verify.py" "$what" \
		>"$out/$what.out" 2>"$out/$what.log" ||
		{ echo "FAIL: $what"; tail -20 "$out/$what.log"; fail=1; }
	cat "$out/$what.out"
	grep -E "error" "$out/$what.log" | head -3
done
grep -q "FT_VERIFY: offloaded trap .* changed in its block.*last kernel that read it: [^?]" \
	"$out/writer.log" || { echo "FAIL: the write was not reported with its kernel"; fail=1; }
grep -q "CUDA graphs captured before the plan: " "$out/hidden.log" ||
	{ echo "FAIL: the plan did not say how it pages the graph"; fail=1; }
[ $fail = 0 ] && echo "verify: ok"
exit $fail
