#!/bin/sh
# Steady INFERENCE on an H200 recording (see replay.c): under a memory
# budget, the recording's last forward is replayed LOOPS more times; on the
# real launch sequence (its parameter words and stale pointers as recorded)
# every forward copies each offloaded trap once, nothing is loaded late
# after the first, no launch refers to two traps of one block.  With
# FORWARDS, the recording already holds that many INFERENCE forwards (LOOPS
# 0); GRANULARITY_KIB keeps a shrunk recording's chunk alignment.
# usage: replay_steady.sh <libflextensor.so> <replay> <tests/data> NAME FROM_SEQ SHRINK
#        FRACTION LOOPS [FORWARDS [GRANULARITY_KIB]]
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$3/$4.trace.jsonl.gz" >"$tmp/rec.jsonl" || exit 1
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
FAKE_GRANULARITY_KIB=${10:-2048} REPLAY_SHRINK=$6 REPLAY_LOOP="$5:$8" LD_PRELOAD="$1" FT_ENABLED=1 FT_PROFILING_ITERS=3 \
	FT_MAX_GPU_MEM_FRACTION=$7 FT_LOG_LEVEL=info FT_ENABLE_DIAGNOSTICS=1 \
	"$2" "$tmp/rec.jsonl" 100000 2>"$tmp/log" || { tail -5 "$tmp/log"; exit 1; }
stat() { sed -n "s/.*stat $1 *\([0-9]*\).*/\1/p" "$tmp/log"; }
off=$(awk '$4 == "diagnostics:" && $5 ~ /^trap\./ && $8 >= 0' "$tmp/log" | wc -l)
copies=$(stat offload_copies) misses=$(stat offload_misses)
conflicts=$(stat offload_conflicts) loops=$8 forwards=${9:-$(($8 + 1))}
echo "$off traps offloaded; $copies copies in $forwards forwards, $misses late, $conflicts conflicts"
fail=0
[ "$off" -gt 0 ] || { echo "FAIL: nothing offloaded"; fail=1; }
# (a few loads more: the first forward after the plan, a returned tail)
slack=$((off / 4 > 3 ? off / 4 : 3))
[ "${copies:-0}" -ge $((off * (forwards - 1))) ] && [ "${copies:-0}" -le $((off * forwards + slack)) ] ||
	{ echo "FAIL: $copies copies, expected one per offloaded trap and forward"; fail=1; }
[ "${misses:-9}" -le 2 ] || { echo "FAIL: $misses late loads"; fail=1; }
[ "${conflicts:-1}" = 0 ] || { echo "FAIL: $conflicts block conflicts"; fail=1; }
exit $fail
