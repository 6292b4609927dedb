#!/bin/sh
# GPU check of the model zoo (see zoo.py): for each model, a plain run, then
# the library in memory mode at a budget that leaves half the decoder's
# weights off the GPU, in both block modes, and with FT_VERIFY=1 (fewer
# forwards: it is slow); then the report (every forward's logits bit for
# bit against the plain run, prefill and decode time against max(resident,
# floor)).  Exits 77 where there is no GPU; 1 when a run differs.
# usage: zoo.sh <libflextensor.so> <output dir> [models, default: all]
# (ZOO_SHARE: the share of the decoder off the GPU, default 0.5; ZOO_RUNS:
# which library runs, default "alloc raw alloc-verify raw-verify"; a run
# named with "declare" (alloc-declare) calls the Python package's offload()
# on the model first, from PYTHONPATH; one with "zip" (alloc-zip) codes the
# store, FT_TRANSFER_COMPRESSION=always; one with "noexp" (alloc-noexp)
# loads stacked experts with their layer, FT_EXPERT_PAGING=0;
# ZOO_TRACE=1 keeps each library run's FT_TRACE; ZOO_NAN=1 says on stderr
# the first module whose output held NaN in a forward (under FT_VERIFY:
# where a launch read a poisoned block) and writes the library's journal
# of its steps beside the results (ft_verify_journal); ZOO_FT: more FT_*=value
# settings for every library run; ZOO_VERIFY_PREFILLS and
# ZOO_VERIFY_DECODE, default 10 and 6 (30 for a model that decodes first,
# so that its decode steps run in INFERENCE too): the FT_VERIFY runs' forwards)
set -u
lib=$1 out=$2
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu transformers
clean_ft_env
models=${3:-$("$py" -c "import sys; sys.path.insert(0, '$here'); import zoo; print(' '.join(zoo.MODELS))")}
rm -rf "$out"
mkdir -p "$out"
for m in $models; do
	"$py" "$here/zoo.py" run "$m" plain "$out" >"$out/$m-plain.out" 2>&1 ||
		{ echo "$m plain failed:"; tail -20 "$out/$m-plain.out"; exit 1; }
	f=$("$py" "$here/zoo.py" fraction "$m" "$out" "${ZOO_SHARE:-0.5}") || exit 1
	for run in ${ZOO_RUNS:-alloc raw alloc-verify raw-verify}; do
		set -- FT_MAX_GPU_MEM_FRACTION="$f" ${ZOO_FT:-}
		case $run in
		raw*) set -- "$@" FT_TRANSFER_MODE=raw_block_transfer ;;
		esac
		case $run in
		*zip*) set -- "$@" FT_TRANSFER_COMPRESSION=always ;;
		esac
		case $run in
		*noexp*) set -- "$@" FT_EXPERT_PAGING=0 ;;
		esac
		case $run in
		*verify) set -- "$@" FT_VERIFY=1 ZOO_PREFILLS="${ZOO_VERIFY_PREFILLS:-10}" \
			ZOO_DECODE="$("$py" "$here/zoo.py" verify-decode "$m")" ;;
		esac
		[ "${ZOO_TRACE:-0}" = 1 ] && set -- "$@" FT_TRACE="$out/$m-$run.trace.jsonl"
		env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info \
			"$py" "$here/zoo.py" run "$m" "$run" "$out" >"$out/$m-$run.out" 2>"$out/$m-$run.log" ||
			{ echo "$m $run failed:"; tail -20 "$out/$m-$run.log"; }
		grep -E "warn|error|plan \(|offloading \(|discovery:" "$out/$m-$run.log" | head -12 |
			sed "s/^/  $m $run: /"
	done
done
"$py" "$here/zoo.py" report "$out"
