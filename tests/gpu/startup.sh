#!/bin/sh
# GPU check of graphs captured before the plan (see startup.py): the
# harness without the library for each variant (full, piecewise), then with
# it at about half of the decoder weights off the GPU: a first start (no
# profile.json: the library learns from the eager passes and the replays,
# and pages the graphs when its plan arrives) and a restart (the profile the
# first start wrote), in allocation mode, and a first start in raw mode;
# then the report (logits bit for bit per request, decode step against the
# resident step and the transfer floor, host time per step and per launch).
# Exits 77 where there is no GPU.
# usage: startup.sh <libflextensor.so> <output dir> [share, default 0.5]
# (STARTUP_VARIANTS: default "full piecewise"; STARTUP_RUNS: the library
# runs, NAME:MODE each, NAME first|restart|verify, or one of them with
# -kernel: FT_GRAPH_COPY=kernel, -timed: FT_OFFLOAD_TIMING=cuda_graph, or
# -timed-kernel, and any of them with -zip: FT_TRANSFER_COMPRESSION=always,
# or -raw: FT_TRANSFER_COMPRESSION=none (the default is auto);
# repeats allowed; STARTUP_TRACE=1 keeps each library run's
# FT_TRACE, STARTUP_TRACE=fail only those of runs whose logits differ: a
# failure seen in some runs only is then traced without keeping every run's)
set -u
lib=$1 out=$2 share=${3:-0.5}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu
clean_ft_env
rm -rf "$out"
mkdir -p "$out"
for v in ${STARTUP_VARIANTS:-full piecewise}; do
	"$py" "$here/startup.py" run "plain-$v" "$out" "$v" || exit 1
done
f=$("$py" "$here/startup.py" fraction "$out" "$share") || exit 1
runs=${STARTUP_RUNS:-"first:allocation_block_transfer restart:allocation_block_transfer first:raw_block_transfer"}
i=0
for v in ${STARTUP_VARIANTS:-full piecewise}; do
	for run in $runs; do
		name=${run%:*} m=${run#*:} i=$((i + 1))
		tag=$v-$name-${m%%_*}
		# a run named again (a failure seen in some runs only) gets its own tag
		[ -e "$out/$tag.pt" ] && tag=$tag-$i
		set --
		case $name in *-zip) set -- FT_TRANSFER_COMPRESSION=always; name=${name%-zip} ;; esac
		case $name in *-raw) set -- FT_TRANSFER_COMPRESSION=none; name=${name%-raw} ;; esac
		case $name in *-kernel) set -- "$@" FT_GRAPH_COPY=kernel ;; esac
		name=${name%-kernel}
		case $name in *-timed) set -- "$@" FT_OFFLOAD_TIMING=cuda_graph ;; esac
		name=${name%-timed}
		[ "$name" = verify ] && set -- "$@" FT_VERIFY=1
		case ${STARTUP_TRACE:-0} in 1 | fail) set -- "$@" FT_TRACE="$out/$tag.trace.jsonl" ;; esac
		# a restart finds the profile its variant's first start wrote
		prof="$out/profile-$v-$m"
		[ "$name" = restart ] || rm -rf "$prof"
		mkdir -p "$prof"
		env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION="$f" \
			FT_TRANSFER_MODE="$m" FT_PROFILE_STORAGE_DIR="$prof" FT_LOG_LEVEL=info \
			"$py" "$here/startup.py" run "$tag" "$out" "$v" >"$out/$tag.out" \
			2>"$out/$tag.log" || { echo "$tag failed:"; tail -20 "$out/$tag.log"; }
		cat "$out/$tag.out"
		grep -E "plan \(|offloading \(|substitut|launch boundar|captured before|error|warn" \
			"$out/$tag.log" | head -12 | sed "s/^/  $tag: /"
	done
done
"$py" "$here/startup.py" report "$out" >"$out/report.txt"
rc=$?
cat "$out/report.txt"
if [ "${STARTUP_TRACE:-0}" = fail ]; then
	for t in "$out"/*.trace.jsonl; do
		[ -e "$t" ] || continue
		tag=$(basename "$t" .trace.jsonl)
		grep -q "^$tag: logits differ" "$out/report.txt" || rm -f "$t"
	done
fi
exit $rc
