#!/bin/sh
# GPU check of serving with CUDA graphs (see serve.py): the harness without
# the library (twice: it must repeat itself bit for bit), then with it in
# memory mode at about half of the decoder weights offloaded, in both block
# modes with FT_OFFLOAD_TIMING=cuda_graph (the timing tables are printed)
# and in allocation mode without timing,
# then the report (every request's logits bit for bit, the batch-1 graph
# decode step against the resident step and the transfer floor, the table's
# wait per step against the measured stall).
# Exits 77 where there is no GPU.
# usage: serve.sh <libflextensor.so> <output dir> [share, default 0.5]
# (SERVE_LAYERS: the depth; SERVE_TRACE=1 keeps each library run's FT_TRACE;
# SERVE_RUNS, below: which library runs)
set -u
lib=$1 out=$2 share=${3:-0.5}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu
clean_ft_env
rm -rf "$out"
mkdir -p "$out"
"$py" "$here/serve.py" run plain "$out" || exit 1
# the control: the harness alone must repeat itself bit for bit
"$py" "$here/serve.py" run plain-again "$out" || exit 1
f=$("$py" "$here/serve.py" fraction "$out" "$share") || exit 1
# SERVE_RUNS: the library runs, MODE:TIMING each (repeats allowed, for
# a mismatch that shows in some runs only)
runs=${SERVE_RUNS:-"allocation_block_transfer:off allocation_block_transfer:cuda_graph raw_block_transfer:cuda_graph"}
i=0
for run in $runs; do
	m=${run%:*} t=${run#*:} i=$((i + 1))
	tag=$m-timing_$t
	[ -e "$out/$tag.pt" ] && tag=$tag-$i
	# SERVE_TRACE=1 keeps each run's FT_TRACE beside its log, for diagnosis
	set --
	[ "${SERVE_TRACE:-0}" = 1 ] && set -- FT_TRACE="$out/$tag.trace.jsonl"
	env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION="$f" FT_TRANSFER_MODE=$m \
		FT_PROFILING_ITERS=3 FT_OFFLOAD_TIMING=$t FT_LOG_LEVEL=info \
		"$py" "$here/serve.py" run "$tag" "$out" >"$out/$tag.out" 2>"$out/$tag.log" ||
		{ echo "$tag failed:"; tail -20 "$out/$tag.log"; }
	cat "$out/$tag.out"
	grep -E "plan \(|offloading|error|warn|captured before" "$out/$tag.log" | head -20 |
		sed "s/^/  $tag: /"
done
"$py" "$here/serve.py" report "$out"
