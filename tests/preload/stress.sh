#!/bin/sh
# stress.c, ROUNDS (5) times: without the library, then under it in each
# block mode with every trap offloaded (latency mode, stalls accepted):
# outputs byte-identical, the plan applied (offloaded_bytes > 0) and the
# other threads launching with it in effect, no crash or hang.
# (STRESS_MODES: the block modes, default both; STRESS_ANY=1: a run that
# offloads nothing passes too, as when TSan's slowness changes which
# launches discovery sees)
# usage: stress.sh <libflextensor.so> <stress program>
# (LD_LIBRARY_PATH must find the fake libcuda.so.1: build/tests/fake)
set -u
. "$(dirname "$0")/trace_stat.sh"
lib=$1 prog=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
"$prog" "$tmp/plain.bin" || { echo "FAIL: the run without the library"; exit 1; }
fail=0
for round in $(seq "${ROUNDS:-5}"); do
	for mode in ${STRESS_MODES:-allocation_block_transfer raw_block_transfer}; do
		n=$mode-$round
		FT_TRANSFER_MODE=$mode FT_PROFILING_ITERS=2 FT_TRANSFER_BUDGET_SCALE=1000 \
			LD_PRELOAD="$lib" FT_ENABLED=1 FT_TRACE="$tmp/$n.trace" \
			"$prog" "$tmp/$n.bin" 2>"$tmp/$n.log" ||
			{ echo "FAIL: $n: exit status $?"; tail -3 "$tmp/$n.log"; fail=1; continue; }
		got=$(trace_stat "$tmp/$n.trace" offloaded_bytes)
		if ! cmp -s "$tmp/plain.bin" "$tmp/$n.bin"; then
			echo "FAIL: $n: outputs differ from the run without the library"; fail=1
		elif [ "${got:-0}" = 0 ] && [ -z "${STRESS_ANY:-}" ]; then
			echo "FAIL: $n: nothing offloaded"; head -3 "$tmp/$n.log"; fail=1
		else
			echo "ok: $n: $got bytes offloaded, outputs identical"
		fi
	done
done
exit $fail
