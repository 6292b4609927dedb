#!/bin/sh
# GPU check of offloading (see offload.py): for each workload a plain run,
# then preloaded runs: hf and manual offload every trap (latency mode with
# FT_TRANSFER_BUDGET_SCALE=1000) in each transfer mode and run once in
# memory mode with 60% of the weights' size as budget; big (16 GB) runs in
# memory mode with a 6 GiB budget in each transfer mode.  Then the report
# (logits bitwise equal to the plain run's, memory, step times against the
# resident step and the transfer floor).  Exits 77 where there is no GPU.
# usage: offload.sh <libflextensor.so> <output dir> [workloads]
set -u
lib=$1 out=$2
workloads=${3:-hf manual big}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu transformers
clean_ft_env
rm -rf "$out"
mkdir -p "$out"
pre() { # pre <workload> <tag> VAR=value...
	w=$1 tag=$2
	shift 2
	# OFFLOAD_TRACE=1 keeps each run's FT_TRACE beside its log, for diagnosis
	[ "${OFFLOAD_TRACE:-0}" = 1 ] && set -- "$@" FT_TRACE="$out/$w-$tag.trace.jsonl"
	env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info \
		"$py" "$here/offload.py" run "$w" "$tag" "$out" 2>"$out/$w-$tag.log" ||
		{ echo "$w $tag failed:"; tail -20 "$out/$w-$tag.log"; }
	grep -E "plan|offloading|error|warn" "$out/$w-$tag.log" | sed "s/^/  $w $tag: /"
}
frac() { "$py" "$here/offload.py" fraction "$1" "$out" "$2"; }
for w in $workloads; do
	"$py" "$here/offload.py" run "$w" plain "$out" || exit 1
	case $w in
	big) # a 16 GB model under a 6 GiB budget for its weights, each mode
		f=$(frac "$w" 6442450944)
		for m in ${BIG_MODES:-allocation_block_transfer raw_block_transfer strategy}; do
			pre "$w" "memory-${m%%_*}" FT_MAX_GPU_MEM_FRACTION="$f" FT_TRANSFER_MODE=$m
		done ;;
	*) # every trap offloaded (latency mode, stalls accepted), each mode
		for m in allocation_block_transfer raw_block_transfer strategy; do
			pre "$w" "all-${m%%_*}" FT_TRANSFER_BUDGET_SCALE=1000 FT_TRANSFER_MODE=$m
		done
		# FT_VERIFY on a correct program changes nothing in its results
		pre "$w" all-verify FT_TRANSFER_BUDGET_SCALE=1000 FT_VERIFY=1
		if [ "$w" = manual ]; then
			# a weight rewritten by a copy and one saved to the host, in
			# INFERENCE: the same results as without offloading
			"$py" "$here/offload.py" run "$w" plain-modify "$out" || exit 1
			pre "$w" modify-allocation FT_TRANSFER_BUDGET_SCALE=1000
			# decode steps as a CUDA graph captured in INFERENCE
			"$py" "$here/offload.py" run "$w" plain-graph "$out" || exit 1
			for m in allocation_block_transfer raw_block_transfer strategy; do
				pre "$w" "graph-${m%%_*}" FT_TRANSFER_BUDGET_SCALE=1000 FT_TRANSFER_MODE=$m
			done
		fi
		# (manual's 198 MB are below the planner's 256 MiB minimum budget)
		[ "$w" = hf ] && pre "$w" memory-allocation FT_MAX_GPU_MEM_FRACTION="$(frac "$w" 0.6)" ;;
	esac
done
"$py" "$here/offload.py" report "$out"
