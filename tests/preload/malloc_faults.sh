#!/bin/sh
# Host allocation faults in the library's own paths (malloc_fault.c,
# preloaded before the library): the offload program, eager (no mode),
# with a graph captured after the plan (graph) and with one captured before
# it (early: kept, then substituted), runs with the n-th of the library's
# allocations failed, and with every one from the n-th on, for n spread
# over all the allocations the library makes in that run (discovery, the
# plan, inference, captures).  Each run must exit 0 with outputs
# byte-identical to a run without the library: the library keeps weights
# resident or stops offloading, and says so; it never crashes.
# usage: malloc_faults.sh <libflextensor.so> <malloc_fault.so> <offload program>
set -u
lib=$1 shim=$2 prog=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
fail=0 runs=0
# run <name> <MALLOC_FAIL> <mode>: status, outputs into $tmp/<name>.bin
run() {
	MALLOC_FAIL=$2 FT_PROFILING_ITERS=2 FT_TRANSFER_BUDGET_SCALE=1000 \
		LD_PRELOAD="$shim $lib" FT_ENABLED=1 FT_LOG_LEVEL=warn \
		"$prog" "$tmp/$1.bin" $3 2>"$tmp/$1.log"
}
for mode in eager graph early; do
	m=$mode
	[ $m = eager ] && m=
	"$prog" "$tmp/plain-$mode.bin" $m || { echo "FAIL: the plain $mode run"; exit 1; }
	run count-$mode 0 "$m" || { echo "FAIL: $mode: the run without faults"; exit 1; }
	total=$(sed -n 's/^malloc_fault: \([0-9]*\) allocations.*/\1/p' "$tmp/count-$mode.log")
	cmp -s "$tmp/plain-$mode.bin" "$tmp/count-$mode.bin" && [ "${total:-0}" -gt 0 ] ||
		{ echo "FAIL: $mode: no faults, yet outputs differ or no allocation counted"; exit 1; }
	# the first 2 one by one (start-up), then 8 spread to the end, each
	# once and for good
	points=$(awk -v t="$total" 'BEGIN { for (n = 1; n <= 2 && n <= t; n++) print n;
		for (k = 1; k <= 8; k++) { n = int(2 + (t - 2) * k / 8); if (n > 2) print n } }' |
		uniq)
	for n in $points; do
		for f in $n $n+; do
			name=$mode-$(echo "$f" | tr '+' 'p')
			run "$name" "$f" "$m"
			st=$?
			runs=$((runs + 1))
			if [ $st != 0 ]; then
				echo "FAIL: $mode MALLOC_FAIL=$f: exit status $st"; tail -3 "$tmp/$name.log"
				fail=1
			elif ! cmp -s "$tmp/plain-$mode.bin" "$tmp/$name.bin"; then
				echo "FAIL: $mode MALLOC_FAIL=$f: outputs differ from the plain run's"
				head -3 "$tmp/$name.log"
				fail=1
			fi
		done
	done
	echo "$mode: $total allocations by the library; faults at $(echo $points | wc -w) points"
done
echo "$runs runs with host allocation faults"
exit $fail
