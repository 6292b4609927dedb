#!/bin/sh
# flextensor-profile show / validate / diff on profiles the suite writes.
# usage: profile_tool.sh <flextensor-profile> <make_profile>
set -u
tool=$1 make=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { desc=$1; shift; if "$@"; then echo "ok: $desc"; else echo "FAIL: $desc"; fail=1; fi; }

"$make" "$tmp/a" 32 "NVIDIA H200" 1.0 && "$make" "$tmp/b" 32 "NVIDIA H200" 1.2 &&
	"$make" "$tmp/c" 30 "NVIDIA H200" 1.0 && "$make" "$tmp/d" 32 "NVIDIA H100" 1.0 ||
	{ echo "FAIL: make_profile"; exit 1; }

"$tool" show "$tmp/a" >"$tmp/show"; st=$?
check "show exits 0" [ "$st" = 0 ]
check "show lists 34 traps with roles" sh -c "grep -qE '^trap.0 +embedding +1 ' '$tmp/show' &&
	grep -qE '^trap.1 +layer +9 ' '$tmp/show' && grep -qE '^trap.33 +head +2 ' '$tmp/show'"
check "show prints the copy curve" grep -q "GB/s" "$tmp/show"

"$tool" validate "$tmp/a/profile.json" >"$tmp/out"; st=$?
check "validate accepts a good profile" [ "$st" = 0 ]
sed 's/"schema":[[:space:]]*1/"schema": 9/' "$tmp/a/profile.json" >"$tmp/newer.json"
"$tool" validate "$tmp/newer.json" >"$tmp/out"; st=$?
check "validate refuses a newer schema (exit 1)" [ "$st" = 1 ]
check "validate says why" grep -q "refused (newer schema)" "$tmp/out"
head -c 300 "$tmp/a/profile.json" >"$tmp/cut.json"
"$tool" validate "$tmp/cut.json" >"$tmp/out"; st=$?
check "validate refuses a truncated file" sh -c "[ $st = 1 ] && grep -q 'refused (corrupt)' '$tmp/out'"
"$tool" validate "$tmp/nothing" >"$tmp/out"; st=$?
check "validate refuses a missing profile" sh -c "[ $st = 1 ] && grep -q 'refused (missing)' '$tmp/out'"

# bounded: /dev/zero once took 4.8 GB of memory in 10 s
(ulimit -v 4000000; exec timeout 20 "$tool" validate /dev/zero) >"$tmp/out"; st=$?
check "validate refuses /dev/zero at once (exit 1)" sh -c "[ $st = 1 ] &&
	grep -q 'refused (unreadable): /dev/zero: is a character device' '$tmp/out'"

"$tool" diff "$tmp/a" "$tmp/b" >"$tmp/out"; st=$?
check "diff of timings only exits 0" [ "$st" = 0 ]
check "diff shows the timing change" grep -q "trap.1: compute median .* (+20.0%)" "$tmp/out"
"$tool" diff "$tmp/a" "$tmp/c" >"$tmp/out"; st=$?
check "diff of another model exits 1" sh -c "[ $st = 1 ] && grep -q 'other model' '$tmp/out'"
"$tool" diff "$tmp/a" "$tmp/d" >"$tmp/out"; st=$?
check "diff of another device exits 1" sh -c "[ $st = 1 ] && grep -q 'other device' '$tmp/out'"
"$tool" frobnicate 2>/dev/null; st=$?
check "bad usage exits 2" [ "$st" = 2 ]
# flextensor-plan on the same profiles.
plan=$(dirname "$tool")/flextensor-plan
"$plan" "$tmp/a" --fraction 0.05 >"$tmp/out"; st=$?
check "plan at 5% of the device exits 0" [ "$st" = 0 ]
check "plan prints the memory-mode summary" grep -q "^mode memory, allocation_block_transfer" "$tmp/out"
check "plan stays within the budget" sh -c "grep -q 'budget 7188.5 MiB' '$tmp/out'"
"$plan" "$tmp/a" --budget-gib 0.5 >"$tmp/out" 2>&1; st=$?
check "an impossible budget exits 2 with the reason" sh -c "[ $st = 2 ] && grep -q 'cannot hold the traps' '$tmp/out'"
# Numbers are strict and range-checked: these once planned silently in
# latency mode, or (a negative budget) converted -5 GiB to an integer.
for args in "--fraction abc" "--fraction -1" "--fraction nan" "--fraction 0x1p-2" \
	"--fraction 1.5" "--fraction 0.5x" "--budget-gib -5" "--budget-gib inf" \
	"--budget-gib 1e30" "--reserve-gib -1" "--blocks 1" "--blocks 4x" "--blocks +4" \
	"--min-blocks 99999999999999999999" "--scale 0" "--scale nan"; do
	set -- $args
	"$plan" "$tmp/a" "$1" "$2" >"$tmp/out" 2>&1; st=$?
	check "plan $args exits 2 and says so" sh -c "[ $st = 2 ] &&
		grep -qF -- '$1 $2 is not valid: expected a ' '$tmp/out'"
done
"$plan" "$tmp/a" --fraction 0.05 --budget-gib 3 >"$tmp/out" 2>&1; st=$?
check "plan refuses two budgets" sh -c "[ $st = 2 ] && grep -q 'give one of them' '$tmp/out'"
"$plan" "$tmp/a" --reserve-gib 1 >"$tmp/out" 2>&1; st=$?
check "plan refuses a reserve without a budget" sh -c "[ $st = 2 ] && grep -q 'taken off a budget' '$tmp/out'"
"$plan" "$tmp/a" --blocks 4 --min-blocks 8 >"$tmp/out" 2>&1; st=$?
check "plan refuses --min-blocks over --blocks" sh -c "[ $st = 2 ] && grep -q 'larger than --blocks' '$tmp/out'"
"$plan" "$tmp/a" --blocks 2 --fraction .05 >"$tmp/out"; st=$?
check "plan --blocks 2 alone lowers the default minimum" [ "$st" = 0 ]
"$plan" "$tmp/a" --raw >"$tmp/out"; st=$?
check "latency mode, raw transfers" sh -c "[ $st = 0 ] && grep -q '^mode latency, raw_block_transfer' '$tmp/out'"

# A profile.json the library wrote on the H200 (hand-written decoder).
"$tool" validate "$(dirname "$0")/../data/h200-manual-decoder.profile.json" >"$tmp/out"; st=$?
check "the profile written on the H200 validates" [ "$st" = 0 ]
exit $fail
