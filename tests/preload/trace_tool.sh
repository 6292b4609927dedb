#!/bin/sh
# flextensor-trace answers "which kernels read this weight?" from a real trace:
# run the direct-route workload with FT_TRACE, then ask about allocation 1
# (read by four vec_add launches, one of them captured) and about an
# address inside allocation 2, and about allocation 1 again from the trace
# compressed with gzip.
# usage: trace_tool.sh <flextensor-trace> <libflextensor.so> <route_direct>
set -u
tool=$1 lib=$2 prog=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
FT_ENABLED=1 FT_TRACE="$tmp/t.jsonl" LD_PRELOAD="$lib" "$prog" >/dev/null || fail=1
python3 "$tool" summary "$tmp/t.jsonl" >"$tmp/sum" || fail=1
grep -q "vec_add" "$tmp/sum" || { echo "FAIL: summary"; cat "$tmp/sum"; fail=1; }
python3 "$tool" readers "$tmp/t.jsonl" 1 >"$tmp/r1" || fail=1
grep -qE "^ +3 eager +vec_add +\(offsets 0, 64\)" "$tmp/r1" && grep -qE "^ +1 captured +vec_add" "$tmp/r1" ||
	{ echo "FAIL: readers of allocation 1"; cat "$tmp/r1"; fail=1; }
ptr=$(sed -n 's/.*"id":2,"kind":"device","ptr":"\(0x[0-9a-f]*\)".*/\1/p' "$tmp/t.jsonl")
inside=$(printf '0x%x' $((ptr + 300)))
python3 "$tool" readers "$tmp/t.jsonl" "$inside" >"$tmp/r2" || fail=1
grep -q "allocation 2 " "$tmp/r2" && grep -q "tma_sum" "$tmp/r2" ||
	{ echo "FAIL: readers of $inside"; cat "$tmp/r2"; fail=1; }
python3 "$tool" readers "$tmp/t.jsonl" 0x10 >/dev/null 2>&1 && { echo "FAIL: unknown address accepted"; fail=1; }
# the same trace compressed, as the recordings in tests/data are
python3 -m gzip "$tmp/t.jsonl" || fail=1
python3 "$tool" readers "$tmp/t.jsonl.gz" 1 >"$tmp/z1" 2>&1 && cmp -s "$tmp/r1" "$tmp/z1" ||
	{ echo "FAIL: readers of the compressed trace"; cat "$tmp/z1"; fail=1; }
[ $fail = 0 ] && echo "trace tool: ok"
exit $fail
