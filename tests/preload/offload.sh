#!/bin/sh
# Offloading end to end against the fake driver (see offload.c): the outputs
# of every forward are byte-identical without the library, with it in each
# transfer mode, with a pageable store, with FT_OFFLOAD_TIMING=eager (whose
# tables appear), with a forward captured as a CUDA graph after offloading
# began and replayed (in each mode), replays and eager forwards in turn,
# with FT_VERIFY=1, and when the
# program rewrites a weight
# and saves another mid-run; a stray reference to a weight in a minority of
# the profiled passes does not keep its trap resident, one in every pass
# does; a stale pointer to a later layer's weight neither moves it in the
# pass nor loads it out of turn, nor does one that a new kernel always
# carries to weights out of the pass's turn; a tensor placed in a weight's free tail
# brings back only that tail; profile.json's timings are refreshed from
# eager passes while serving (not with decode, read-only, or too few
# passes); the weights really left (offloaded_bytes) and
# were copied back (offload_copies); over a budget smaller than the model,
# before any plan, allocations get host memory and results stay the same;
# a model bigger than the budget is offloaded and its profile's timings,
# slowed by the host memory while profiled, are refreshed after the plan;
# two ranks of one job running at once on one device each offload and
# write their own profile.rank<r>.json; a worker on device 1 offloads
# there, and leaves it to the driver when FT_GPU_DEVICE names another.
# usage: offload.sh <libflextensor.so> <offload>
set -u
lib=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
fail=0
run() { # run <name> <modify or ""> VAR=value...
	n=$1 mod=$2
	shift 2
	env FT_PROFILING_ITERS=2 "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_LOG_LEVEL=info \
		FT_TRANSFER_BUDGET_SCALE=1000 "$prog" "$tmp/$n.bin" $mod 2>"$tmp/$n.log" ||
		{ echo "FAIL: $n exited $?"; tail -5 "$tmp/$n.log"; fail=1; return; }
	grep -q "entering INFERENCE" "$tmp/$n.log" || { echo "FAIL: $n: no INFERENCE"; fail=1; }
	! grep -m1 "CUDA_ERROR_CAPTURED_EVENT" "$tmp/$n.log" ||
		{ echo "FAIL: $n: waited on an event recorded in a capture that is over"; fail=1; }
	off=$(sed -n 's/.*stat offloaded_bytes *\([0-9]*\).*/\1/p' "$tmp/$n.log")
	copies=$(sed -n 's/.*stat offload_copies *\([0-9]*\).*/\1/p' "$tmp/$n.log")
	[ "${off:-0}" -gt 0 ] && [ "${copies:-0}" -gt 0 ] ||
		{ echo "FAIL: $n: offloaded ${off:-?} bytes, ${copies:-?} copies"; fail=1; }
	echo "$n: offloaded $off bytes, $copies copies"
}
"$prog" "$tmp/plain.bin" || { echo "FAIL: plain run"; exit 1; }
"$prog" "$tmp/plain-modify.bin" modify || { echo "FAIL: plain modify run"; exit 1; }
for m in allocation_block_transfer raw_block_transfer strategy; do
	run "$m" "" FT_TRANSFER_MODE=$m
	cmp -s "$tmp/plain.bin" "$tmp/$m.bin" || { echo "FAIL: $m: outputs differ"; fail=1; }
done
run pageable "" FT_PINNED_MEMORY=0
cmp -s "$tmp/plain.bin" "$tmp/pageable.bin" || { echo "FAIL: pageable: outputs differ"; fail=1; }
run timing "" FT_OFFLOAD_TIMING=eager FT_ENABLE_DIAGNOSTICS=1
grep -q "plan diagnostics: trap.13" "$tmp/timing.log" ||
	{ echo "FAIL: FT_ENABLE_DIAGNOSTICS=1 printed no plan table"; fail=1; }
cmp -s "$tmp/plain.bin" "$tmp/timing.bin" || { echo "FAIL: timing: outputs differ"; fail=1; }
grep -q "offload timing, the last 10 passes" "$tmp/timing.log" ||
	{ echo "FAIL: timing: no table every 10 passes"; fail=1; }
grep -q "^Offload Timing (" "$tmp/timing.log" && grep -q "^Avg/pass" "$tmp/timing.log" ||
	{ echo "FAIL: timing: ft_offload_timing_collect gave no report"; fail=1; }
"$prog" "$tmp/plain-graph.bin" graph || { echo "FAIL: plain graph run"; exit 1; }
for m in allocation_block_transfer raw_block_transfer strategy; do
	run "graph-$m" graph FT_TRANSFER_MODE=$m
	cmp -s "$tmp/plain-graph.bin" "$tmp/graph-$m.bin" ||
		{ echo "FAIL: graph-$m: outputs differ"; fail=1; }
	grep -q "stat hidden_readers *[1-9]" "$tmp/graph-$m.log" &&
		{ echo "FAIL: graph-$m: a replay was not paged"; fail=1; }
done
# graph replays and eager forwards in turn, checked by FT_VERIFY too
"$prog" "$tmp/plain-mixed.bin" mixed || { echo "FAIL: plain mixed run"; exit 1; }
for m in allocation_block_transfer raw_block_transfer; do
	run "mixed-$m" mixed FT_TRANSFER_MODE=$m FT_VERIFY=1
	cmp -s "$tmp/plain-mixed.bin" "$tmp/mixed-$m.bin" ||
		{ echo "FAIL: mixed-$m: outputs differ"; fail=1; }
	grep -q "stat hidden_readers *[1-9]\|FT_VERIFY: offloaded trap" "$tmp/mixed-$m.log" &&
		{ echo "FAIL: mixed-$m: a replay was not paged, or verify reported"; fail=1; }
done
# a graph captured before any plan: what it reads stays resident
"$prog" "$tmp/plain-early.bin" early || { echo "FAIL: plain early run"; exit 1; }
env LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=2 FT_LOG_LEVEL=info \
	FT_TRANSFER_BUDGET_SCALE=1000 "$prog" "$tmp/early.bin" early 2>"$tmp/early.log" ||
	{ echo "FAIL: early graph run"; tail -5 "$tmp/early.log"; fail=1; }
cmp -s "$tmp/plain-early.bin" "$tmp/early.bin" || { echo "FAIL: early: outputs differ"; fail=1; }
grep -q "read by a CUDA graph captured before offloading began" "$tmp/early.log" ||
	{ echo "FAIL: early: the graph's traps were not kept resident"; fail=1; }
grep -q "stat hidden_readers *[1-9]" "$tmp/early.log" &&
	{ echo "FAIL: early: a replay read offloaded weights"; fail=1; }
# a stray reference to layer 1's weight in a minority of the profiled
# passes: still offloaded; in every pass: layer 1 stays resident
run stale stale FT_PROFILING_ITERS=4
cmp -s "$tmp/plain.bin" "$tmp/stale.bin" || { echo "FAIL: stale: outputs differ"; fail=1; }
grep -q "read again after later traps began" "$tmp/stale.log" &&
	{ echo "FAIL: stale: a stray reference kept a trap resident"; fail=1; }
run shared shared FT_PROFILING_ITERS=4
cmp -s "$tmp/plain.bin" "$tmp/shared.bin" || { echo "FAIL: shared: outputs differ"; fail=1; }
grep -q "read again after later traps began" "$tmp/shared.log" ||
	{ echo "FAIL: shared: a weight read again in every pass was offloaded"; fail=1; }
# a stale pointer to layer 4's weight after layer 0, every forward: layer 4
# keeps its place in the pass and is copied no more often
run stray stray
cmp -s "$tmp/plain.bin" "$tmp/stray.bin" || { echo "FAIL: stray: outputs differ"; fail=1; }
c0=$(sed -n 's/.*stat offload_copies *\([0-9]*\).*/\1/p' "$tmp/allocation_block_transfer.log")
c1=$(sed -n 's/.*stat offload_copies *\([0-9]*\).*/\1/p' "$tmp/stray.log")
[ "$c1" = "$c0" ] || { echo "FAIL: stray: $c1 copies, $c0 without the stale pointer"; fail=1; }
grep -q "stat refs_stale *[1-9]" "$tmp/stray.log" || { echo "FAIL: stray: no stale reference"; fail=1; }
# a new kernel whose word always points three layers on: four loads (a few
# misses each), then
# the word is taken for stale
"$prog" "$tmp/plain-roam.bin" roam || { echo "FAIL: plain roam run"; exit 1; }
run roam roam
cmp -s "$tmp/plain-roam.bin" "$tmp/roam.bin" || { echo "FAIL: roam: outputs differ"; fail=1; }
c2=$(sed -n 's/.*stat offload_copies *\([0-9]*\).*/\1/p' "$tmp/roam.log")
[ "${c2:-999}" -le $((c0 + 16)) ] || { echo "FAIL: roam: $c2 copies, $c0 without the roaming word"; fail=1; }
grep -q "stat offload_roaming_refs *[1-9]" "$tmp/roam.log" || { echo "FAIL: roam: nothing roamed"; fail=1; }
# a tensor placed in a weight's free tail after discovery: that tail comes
# back to the GPU, the trap stays offloaded, in each block mode
"$prog" "$tmp/plain-tail.bin" tail || { echo "FAIL: plain tail run"; exit 1; }
for m in allocation_block_transfer raw_block_transfer; do
	run "tail-$m" tail FT_TRANSFER_MODE=$m FT_VERIFY=1
	cmp -s "$tmp/plain-tail.bin" "$tmp/tail-$m.bin" || { echo "FAIL: tail-$m: outputs differ"; fail=1; }
	grep -q "stat offload_tails *1 " "$tmp/tail-$m.log" && grep -q "stat offload_demoted *0 " "$tmp/tail-$m.log" ||
		{ echo "FAIL: tail-$m: $(grep -o 'offload_\(tails\|demoted\) *[0-9]*' "$tmp/tail-$m.log" | tr '\n' ' ')"; fail=1; }
	grep -q "FT_VERIFY: offloaded trap" "$tmp/tail-$m.log" && { echo "FAIL: tail-$m: verify reported"; fail=1; }
done
# profile.json refreshed while serving: a first run writes it (2 profiled
# passes); a second adopts it and, with FT_VLLM_TIMING_BATCH=prefill,
# rewrites its timings from 3 timed passes; with decode (no graph replays
# in this program), read-only, or too few passes before exit, the file
# stays as it was; with decode, a program replaying a graph captured after
# the plan rewrites them from 3 replays
run prof "" FT_PROFILE_STORAGE_DIR="$tmp/prof"
cp "$tmp/prof/profile.json" "$tmp/prof-first.json"
samples() { grep -o '"samples":[[:space:]]*[0-9]*' "$1" | awk '{print $NF}' | sort -nu | tr '\n' ' '; }
for how in "decode" "read_only" "incomplete"; do
	case $how in
	decode) run "prof-$how" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 ;;
	read_only) run "prof-$how" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 \
		FT_VLLM_TIMING_BATCH=prefill FT_PROFILE_READ_ONLY=1 ;;
	incomplete) run "prof-$how" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=500 \
		FT_VLLM_TIMING_BATCH=prefill ;;
	esac
	grep -q "profiling skipped" "$tmp/prof-$how.log" || { echo "FAIL: prof-$how: profile not adopted"; fail=1; }
	cmp -s "$tmp/prof/profile.json" "$tmp/prof-first.json" || { echo "FAIL: prof-$how: profile.json changed"; fail=1; }
done
grep -q "not refreshed: 0 of the 3 passes" "$tmp/prof-decode.log" ||
	{ echo "FAIL: prof-decode: no message at exit"; fail=1; }
grep -q "not refreshed: [0-9]* of the 500 passes" "$tmp/prof-incomplete.log" ||
	{ echo "FAIL: prof-incomplete: no message at exit"; fail=1; }
# rank 1 of a job of two writes its own file, beside rank 0's
run prof-rank "" FT_PROFILE_STORAGE_DIR="$tmp/prof" RANK=1 WORLD_SIZE=2
[ -f "$tmp/prof/profile.rank1.json" ] && cmp -s "$tmp/prof/profile.json" "$tmp/prof-first.json" ||
	{ echo "FAIL: prof-rank: no profile.rank1.json, or profile.json changed"; fail=1; }
# a worker on device 1 offloads there; told FT_GPU_DEVICE=0, it leaves
# device 1's allocations to the driver and offloads nothing
run device1 "" FAKE_DEVICE=1
cmp -s "$tmp/plain.bin" "$tmp/device1.bin" || { echo "FAIL: device1: outputs differ"; fail=1; }
env FT_PROFILING_ITERS=2 FAKE_DEVICE=1 FT_GPU_DEVICE=0 LD_PRELOAD="$lib" FT_ENABLED=1 \
	FT_LOG_LEVEL=info "$prog" "$tmp/device1-not.bin" 2>"$tmp/device1-not.log"
cmp -s "$tmp/plain.bin" "$tmp/device1-not.bin" &&
	grep -q "allocations on CUDA device 1 are left to the driver.*FT_GPU_DEVICE" "$tmp/device1-not.log" &&
	grep -q "stat vmm_allocs *0 " "$tmp/device1-not.log" ||
	{ echo "FAIL: FT_GPU_DEVICE=0 on device 1"; fail=1; }
# two ranks of one job at once, one storage directory (two processes on
# one device): each learns, offloads and writes its own profile
for r in 0 1; do
	env FT_PROFILING_ITERS=2 RANK=$r WORLD_SIZE=2 FT_PROFILE_STORAGE_DIR="$tmp/two" \
		LD_PRELOAD="$lib" FT_ENABLED=1 FT_LOG_LEVEL=info FT_TRANSFER_BUDGET_SCALE=1000 \
		"$prog" "$tmp/two-$r.bin" 2>"$tmp/two-$r.log" &
done
wait
for r in 0 1; do
	cmp -s "$tmp/plain.bin" "$tmp/two-$r.bin" && [ -f "$tmp/two/profile.rank$r.json" ] &&
		grep -q "stat offload_copies *[1-9]" "$tmp/two-$r.log" ||
		{ echo "FAIL: two ranks: rank $r's outputs, profile or copies"; fail=1; }
done
run prof-refresh "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 FT_VLLM_TIMING_BATCH=prefill
cmp -s "$tmp/plain.bin" "$tmp/prof-refresh.bin" || { echo "FAIL: prof-refresh: outputs differ"; fail=1; }
grep -q "compute timings refreshed from 3 passes" "$tmp/prof-refresh.log" ||
	{ echo "FAIL: prof-refresh: no refresh"; fail=1; }
[ "$(samples "$tmp/prof/profile.json")" = "3 " ] && [ "$(samples "$tmp/prof-first.json")" != "3 " ] &&
	[ "$(grep '"fingerprint"' "$tmp/prof/profile.json")" = "$(grep '"fingerprint"' "$tmp/prof-first.json")" ] ||
	{ echo "FAIL: prof-refresh: samples $(samples "$tmp/prof-first.json")-> $(samples "$tmp/prof/profile.json")"; fail=1; }
cp "$tmp/prof/profile.json" "$tmp/prof-second.json"
run prof-graph graph FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3
cmp -s "$tmp/plain-graph.bin" "$tmp/prof-graph.bin" || { echo "FAIL: prof-graph: outputs differ"; fail=1; }
grep -q "refreshed from the first 3 CUDA graph replays" "$tmp/prof-graph.log" &&
	grep -q "compute timings refreshed from 3 passes" "$tmp/prof-graph.log" &&
	! cmp -s "$tmp/prof/profile.json" "$tmp/prof-second.json" ||
	{ echo "FAIL: prof-graph: not refreshed from graph replays"; fail=1; }
# FT_OFFLOAD_TIMING=cuda_graph: every replay of the graph captured after the
# plan is a timed pass (published at the next replay, the last by collect)
for m in allocation_block_transfer raw_block_transfer; do
	run "gtime-$m" graph FT_TRANSFER_MODE=$m FT_OFFLOAD_TIMING=cuda_graph
	cmp -s "$tmp/plain-graph.bin" "$tmp/gtime-$m.bin" || { echo "FAIL: gtime-$m: outputs differ"; fail=1; }
	grep -q "stat timed_replays *12 " "$tmp/gtime-$m.log" &&
		grep -q "stat timing_dropped *0 " "$tmp/gtime-$m.log" &&
		grep -q "^Offload Timing (" "$tmp/gtime-$m.log" ||
		{ echo "FAIL: gtime-$m: $(grep -o 'timed_replays *[0-9]*\|timing_dropped *[0-9]*' "$tmp/gtime-$m.log" | tr '\n' ' ')"; fail=1; }
done
run verify "" FT_VERIFY=1
cmp -s "$tmp/plain.bin" "$tmp/verify.bin" || { echo "FAIL: verify: outputs differ"; fail=1; }
grep -q "FT_VERIFY: offloaded trap" "$tmp/verify.log" && { echo "FAIL: verify reported a correct program"; fail=1; }
run modify modify
cmp -s "$tmp/plain-modify.bin" "$tmp/modify.bin" || { echo "FAIL: modify: outputs differ"; fail=1; }
grep -q "back on the GPU for good" "$tmp/modify.log" ||
	{ echo "FAIL: modify: the rewritten weight's trap did not come back"; fail=1; }
# a GPU budget smaller than the model before any plan exists: allocations
# over it get host memory at their address, results stay the same (the
# planner then refuses a budget under its 256 MiB minimum: nothing offloaded)
env LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=2 FT_LOG_LEVEL=info \
	FT_MAX_GPU_MEM_FRACTION=0.003 "$prog" "$tmp/over.bin" 2>"$tmp/over.log" ||
	{ echo "FAIL: over budget run"; tail -5 "$tmp/over.log"; fail=1; }
host=$(sed -n 's/.*stat vmm_host_bytes *\([0-9]*\).*/\1/p' "$tmp/over.log")
[ "${host:-0}" -gt 0 ] || { echo "FAIL: nothing got host memory over the budget"; fail=1; }
cmp -s "$tmp/plain.bin" "$tmp/over.bin" || { echo "FAIL: over budget: outputs differ"; fail=1; }
echo "over budget: $host bytes in host memory"
# bigger than the budget before the plan (32 MiB tensors, a 300 MiB budget)
# with FT_PROFILE_STORAGE_DIR: offloaded, same outputs, and the timings
# taken while weights were in host memory are replaced in profile.json by
# those of the first passes after the plan
OFFLOAD_MIB=32 "$prog" "$tmp/plain-big.bin" || { echo "FAIL: plain big run"; exit 1; }
env OFFLOAD_MIB=32 LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=2 FT_LOG_LEVEL=info \
	FT_MAX_GPU_MEM_FRACTION=0.0366 FT_PROFILE_STORAGE_DIR="$tmp/prof-big" "$prog" "$tmp/big.bin" \
	2>"$tmp/big.log" || { echo "FAIL: big run"; tail -5 "$tmp/big.log"; fail=1; }
cmp -s "$tmp/plain-big.bin" "$tmp/big.bin" || { echo "FAIL: big: outputs differ"; fail=1; }
grep -q "stat vmm_host_bytes *[1-9]" "$tmp/big.log" && grep -q "stat offloaded_bytes *[1-9]" "$tmp/big.log" &&
	grep -q "timed with weights in host memory" "$tmp/big.log" &&
	grep -q "compute timings refreshed from 2 passes" "$tmp/big.log" ||
	{ echo "FAIL: big: not over budget, not offloaded, or timings not refreshed"; fail=1; }
[ $fail = 0 ] && echo "offload: ok"
exit $fail
