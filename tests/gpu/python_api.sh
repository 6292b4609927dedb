#!/bin/sh
# GPU check of the Python package (python_api.py): plain run, the seed's
# timing example under the library with offload(), the same model under the
# library without it; then the report.  Exits 77 where there is no GPU.
# usage: python_api.sh <libflextensor.so> <python package dir> <output dir>
set -u
lib=$1 pkg=$2 out=$3
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu transformers
clean_ft_env
rm -rf "$out"
mkdir -p "$out"
"$py" "$here/python_api.py" plain "$out" >"$out/plain.out" 2>&1 ||
	{ tail -20 "$out/plain.out"; exit 1; }
f=$("$py" "$here/python_api.py" fraction "$out") || exit 1
for mode in seed guess; do
	# guess: the timing the seed's config sets, so that the two runs differ
	# by the declaration alone
	timing=off
	[ $mode = guess ] && timing=eager
	PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" LD_PRELOAD="$lib" FT_ENABLED=1 \
		FT_MAX_GPU_MEM_FRACTION="$f" FT_LOG_LEVEL=info FT_OFFLOAD_TIMING=$timing \
		"$py" "$here/python_api.py" $mode "$out" >"$out/$mode.out" 2>"$out/$mode.log" ||
		{ echo "$mode failed:"; tail -20 "$out/$mode.log"; }
	grep -E "warn|error|declared:|plan \(|offloading \(" "$out/$mode.log" | head -8 | sed "s/^/  $mode: /"
done
cat "$out/seed.out"
"$py" "$here/python_api.py" report "$out"
