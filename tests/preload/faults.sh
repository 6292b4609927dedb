#!/bin/sh
# Driver faults injected into the fake driver (FAKE_FAIL=name:n, the n-th
# call fails; name:n+, every call from the n-th on): the offload program's
# outputs stay byte-identical to a run without the library, the process
# exits 0, and the library says what happened (at most a few lines), in
# every phase the fault lands in: an allocation of the program, the plan
# (blocks, the pinned host store), inference (loads, events).
# usage: faults.sh <libflextensor.so> <offload program>
set -u
. "$(dirname "$0")/trace_stat.sh"
lib=$1 prog=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
fail=0
"$prog" "$tmp/plain.bin" || { echo "FAIL: the plain run"; exit 1; }
# fault, then what the library must have done: offloaded (some bytes moved
# to the host store), resident (none), made good (offloaded, and the
# executor's fallback counted in offload_faults), or any of these
while read -r fault want; do
	[ -z "$fault" ] && continue
	n=$(echo "$fault" | tr ':+' '__')
	FAKE_FAIL=$fault FT_PROFILING_ITERS=2 FT_TRANSFER_BUDGET_SCALE=1000 LD_PRELOAD="$lib" \
		FT_ENABLED=1 FT_LOG_LEVEL=warn FT_TRACE="$tmp/$n.trace" \
		"$prog" "$tmp/$n.bin" 2>"$tmp/$n.log"
	st=$?
	got=$(trace_stat "$tmp/$n.trace" offloaded_bytes)
	faults=$(trace_stat "$tmp/$n.trace" offload_faults)
	lines=$(wc -l <"$tmp/$n.log")
	msg=$(head -1 "$tmp/$n.log")
	if [ $st != 0 ]; then
		echo "FAIL: $fault: exit status $st"; tail -3 "$tmp/$n.log"; fail=1
	elif ! cmp -s "$tmp/plain.bin" "$tmp/$n.bin"; then
		echo "FAIL: $fault: outputs differ from the plain run's"; head -3 "$tmp/$n.log"; fail=1
	elif [ "$want" = made-good ] && { [ "${got:-0}" = 0 ] || [ "${faults:-0}" = 0 ]; }; then
		echo "FAIL: $fault: not made good (${got:-0} bytes offloaded, ${faults:-0} faults)"; fail=1
	elif [ "$want" = offloaded ] && [ "${got:-0}" = 0 ]; then
		echo "FAIL: $fault: nothing offloaded"; head -3 "$tmp/$n.log"; fail=1
	elif [ "$want" = resident ] && [ "${got:-0}" != 0 ]; then
		echo "FAIL: $fault: $got bytes offloaded"; fail=1
	elif [ "$lines" -gt 6 ]; then
		echo "FAIL: $fault: $lines lines of log"; head -8 "$tmp/$n.log"; fail=1
	else
		echo "ok: $fault: $want (${got:-0} bytes), ${msg:-nothing logged}"
	fi
done <<'CASES'
cuMemHostRegister:1+ resident
cuMemHostRegister:3 resident
cuMemCreate:1 offloaded
cuMemCreate:40 any
cuMemCreate:40+ any
cuMemMap:1 offloaded
cuMemMap:40 any
cuMemMap:60 any
cuMemSetAccess:1 offloaded
cuMemSetAccess:40 any
cuMemSetAccess:40+ any
cuStreamCreate:1 any
cuStreamCreate:2 any
cuEventRecord:1 any
cuEventRecord:400 made-good
cuEventRecord:400+ made-good
cuMemcpyHtoDAsync:1 any
cuMemcpyHtoDAsync:200 made-good
cuMemcpyHtoDAsync:200+ made-good
CASES
# Faults in the program's own calls: it must see what it sees without the
# library (the same exit status and outputs, the same fault injected into
# both runs).  mode is the offload program's (graph: a capture at step 12).
while read -r fault mode; do
	[ -z "$fault" ] && continue
	n=app-$(echo "$fault" | tr ':+' '__')
	FAKE_FAIL=$fault "$prog" "$tmp/$n-plain.bin" $mode 2>/dev/null
	want=$?
	FAKE_FAIL=$fault FT_PROFILING_ITERS=2 FT_TRANSFER_BUDGET_SCALE=1000 LD_PRELOAD="$lib" \
		FT_ENABLED=1 FT_LOG_LEVEL=warn "$prog" "$tmp/$n.bin" $mode 2>"$tmp/$n.log"
	st=$?
	if [ $st != $want ]; then
		echo "FAIL: $fault ($mode): exit status $st, without the library $want"; fail=1
	elif ! cmp -s "$tmp/$n-plain.bin" "$tmp/$n.bin"; then
		echo "FAIL: $fault ($mode): outputs differ from the run without the library"; fail=1
	else
		echo "ok: $fault ($mode): the program sees what it sees without the library (status $st)"
	fi
done <<'CASES'
cuGraphInstantiate:1 graph
cuGraphInstantiate:1 early
CASES
# Faults in the library's own calls around and inside CUDA graph captures:
# keeping a clone, building a substitute (its capture of the loads, the
# edges, its instantiation: early), paging an application's capture itself
# (graph with FT_GRAPH_PAGING=capture), pieces planned at their launch
# boundaries (pieces).  The same fault goes into the run without the
# library (where the program makes none of these calls, or the same ones
# first); the program must see what it sees there, the same status and
# outputs.  Counts (FAKE_FAIL=name:0): early makes 2 clones, 4 streams (the
# fourth for the capture of the loads), 1 capture of
# loads, 26 dependency updates, 14 edges, 49 copies, 136 event records;
# graph-capture 92 copies, 277 event records.
while read -r fault mode; do
	[ -z "$fault" ] && continue
	n=cap-$mode-$(echo "$fault" | tr ':+' '__')
	set --
	m=$mode
	[ "$mode" = graph-capture ] && { m=graph; set -- FT_GRAPH_PAGING=capture; }
	FAKE_FAIL=$fault "$prog" "$tmp/$n-plain.bin" $m 2>/dev/null
	want=$?
	env "$@" FAKE_FAIL=$fault FT_PROFILING_ITERS=2 FT_TRANSFER_BUDGET_SCALE=1000 \
		LD_PRELOAD="$lib" FT_ENABLED=1 FT_LOG_LEVEL=warn "$prog" "$tmp/$n.bin" $m \
		2>"$tmp/$n.log"
	st=$?
	lines=$(wc -l <"$tmp/$n.log")
	if [ $st != $want ]; then
		echo "FAIL: $fault ($mode): exit status $st, without the library $want"
		tail -3 "$tmp/$n.log"; fail=1
	elif ! cmp -s "$tmp/$n-plain.bin" "$tmp/$n.bin"; then
		echo "FAIL: $fault ($mode): outputs differ from the run without the library"
		head -5 "$tmp/$n.log"; fail=1
	elif [ "$lines" -gt 8 ]; then
		echo "FAIL: $fault ($mode): $lines lines of log"; head -9 "$tmp/$n.log"; fail=1
	else
		echo "ok: $fault ($mode): as without the library (status $st), $(head -1 "$tmp/$n.log")"
	fi
done <<'CASES'
cuGraphClone:1 early
cuGraphClone:2 early
cuStreamBeginCaptureToGraph:1 early
cuStreamCreate:4 early
cuGraphInstantiate:2 early
cuStreamUpdateCaptureDependencies:13 early
cuGraphAddDependencies:14 early
cuMemcpyHtoDAsync:40 early
cuMemcpyHtoDAsync:30+ early
cuEventRecord:120 early
cuStreamWaitEvent:1 early
cuStreamWaitEvent:10 early
cuStreamWaitEvent:30+ early
cuStreamWaitEvent:90 graph-capture
cuMemcpyHtoDAsync:60 graph-capture
cuMemcpyHtoDAsync:60+ graph-capture
cuEventRecord:250 graph-capture
cuEventRecord:200+ graph-capture
cuGraphClone:4 pieces
cuMemcpyHtoDAsync:150 pieces
CASES
exit $fail
