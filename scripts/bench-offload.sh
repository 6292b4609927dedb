#!/bin/sh
# The offloading benchmark (scripts/bench_offload.py says what it measures):
# the resident run and the side-stream baseline, then the library in memory
# mode at each share of the decoder weights (SHARES, default 0.25 0.5 0.75)
# in each block mode (MODES) and each FT_TRANSFER_COMPRESSION (COMPRESS,
# default none; a coded run's label is MODE+COMPRESSION; BENCH_FT="FT_X=v ..."
# adds settings to every library run, BENCH_LABEL=@name to their labels), then the table (OUT/bench.md) and the plot
# (OUT/bench.png).  A benchmark, not a test: run it on the GPU machine.
# usage: bench-offload.sh <libflextensor.so> <output dir>
set -u
lib=$1 out=$2
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
bench="$here/bench_offload.py"
for f in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$f"; done
export PYTHONUNBUFFERED=1
mkdir -p "$out"
if [ ! -e "$out/resident.pt" ]; then
	timeout "${BENCH_TIMEOUT:-900}" "$py" "$bench" plain "$out" || exit 1
fi
for share in ${SHARES:-0.25 0.5 0.75}; do
	f=$("$py" "$bench" fraction "$out" "$share") || exit 1
	for run in $(for m in ${MODES:-allocation_block_transfer raw_block_transfer}; do
		for z in ${COMPRESS:-none}; do [ "$z" = none ] && echo "$m" || echo "$m+$z"; done
	done); do
		mode=${run%%+*} z=none
		[ "$run" = "$mode" ] || z=${run#*+}
		run="$run${BENCH_LABEL:-}"
		tag="$run-$share"
		# BENCH_TRACE=1 keeps each library run's FT_TRACE beside its log
		trace=none
		[ "${BENCH_TRACE:-0}" = 1 ] && trace="$out/$tag.trace.jsonl"
		env LD_PRELOAD="$lib" FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION="$f" FT_TRANSFER_MODE="$mode" \
			FT_TRANSFER_COMPRESSION="$z" FT_TRACE="$trace" \
			FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info FT_ENABLE_DIAGNOSTICS=1 ${BENCH_FT:-} \
			timeout "${BENCH_TIMEOUT:-900}" "$py" "$bench" lib "$out" "$share" "$run" \
			2>"$out/$tag.log"
		rc=$?
		[ $rc = 0 ] || { echo "$tag failed ($rc):"; tail -20 "$out/$tag.log"; }
		# FAIL_FAST=1: wrong outputs end the benchmark
		[ $rc = 3 ] && [ "${FAIL_FAST:-0}" = 1 ] && break 2
		grep -E "plan|offloading|moved|COMPRESSION|error|warn" "$out/$tag.log" | head -20 | sed "s/^/  $tag: /"
	done
done
"$py" "$bench" report "$out"
