#!/bin/sh
# GPU check of offloading (see offload.py): for each workload a plain run,
# then preloaded runs that offload every trap (latency mode with
# FT_TRANSFER_BUDGET_SCALE=1000) in each transfer mode, and one in memory
# mode with a budget of about half the weights; then the report (logits
# bitwise equal to the plain run's, memory, step times).  Exits 77 where
# there is no GPU.
# usage: offload.sh <libflextensor.so> <output dir> [workloads]
set -u
lib=$1 out=$2
workloads=${3:-hf manual}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
command -v nvidia-smi >/dev/null 2>&1 || { echo "no nvidia-smi: skipping"; exit 77; }
"$py" -c 'import sys, torch, transformers; sys.exit(0 if torch.cuda.is_available() else 1)' \
	2>/dev/null || { echo "no CUDA-capable torch + transformers: skipping"; exit 77; }
for f in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$f"; done
export PYTHONUNBUFFERED=1
rm -rf "$out"
mkdir -p "$out"
pre() { # pre <workload> <tag> VAR=value...
	w=$1 tag=$2
	shift 2
	env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info \
		"$py" "$here/offload.py" run "$w" "$tag" "$out" 2>"$out/$w-$tag.log" ||
		{ echo "$w $tag failed:"; tail -20 "$out/$w-$tag.log"; }
	grep -E "plan|offloading|error|warn" "$out/$w-$tag.log" | sed "s/^/  $w $tag: /"
}
for w in $workloads; do
	"$py" "$here/offload.py" run "$w" plain "$out" || exit 1
	all="FT_TRANSFER_BUDGET_SCALE=1000"
	pre "$w" allocation $all FT_TRANSFER_MODE=allocation_block_transfer
	pre "$w" raw $all FT_TRANSFER_MODE=raw_block_transfer
	pre "$w" strategy $all FT_TRANSFER_MODE=strategy
	pre "$w" memory FT_MAX_GPU_MEM_FRACTION=$("$py" "$here/offload.py" fraction "$w" "$out")
done
"$py" "$here/offload.py" report "$out"
