#!/bin/sh
# profile.json across runs: an eager run writes it; a second run of the same
# model takes it at the end of its first forward, whose weights have the
# saved contents (also when a forward read them before they were loaded), and
# skips profiling (the file is left as it was), and its plan only under the
# settings it was made with; a file whose checksums are not this model's is
# taken after discovery's passes and written again with this run's, as is a
# file of 0.2, which has none;
# with FT_SKIP_DISCOVERY=1 a run takes it after one pass on its sizes, and
# without a file warns and discovers;
# a corrupt file is refused with a warning, profiling runs and the file is
# rewritten.
# usage: phases_profile.sh <libflextensor.so> <phases>
set -u
lib=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # run <mode> [VAR=value...]
	m=$1
	shift
	env "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_DISCOVERY_ITERS=1 FT_PROFILING_ITERS=2 \
		FT_LOG_LEVEL=info FT_PROFILE_STORAGE_DIR="$tmp/p" FT_TRACE="$tmp/t.jsonl" \
		"$prog" "$m" 2>"$tmp/err"
}
run eager || { echo "FAIL: first run"; cat "$tmp/err"; fail=1; }
cp "$tmp/p/profile.json" "$tmp/first.json"
run again || { echo "FAIL: second run"; cat "$tmp/err"; fail=1; }
grep -q "profiling skipped" "$tmp/err" || { echo "FAIL: profile not used"; cat "$tmp/err"; fail=1; }
grep -q "the first forward) read the weights of the saved profile, with their contents: entering INFERENCE" \
	"$tmp/err" || { echo "FAIL: profile not taken at the end of the first forward"; cat "$tmp/err"; fail=1; }
cmp -s "$tmp/p/profile.json" "$tmp/first.json" || { echo "FAIL: profile rewritten"; fail=1; }
# a serving engine's start: a weight's bytes final only at the end of the
# first forward, then a capture: taken before the capture begins
run engine || { echo "FAIL: engine run"; cat "$tmp/err"; fail=1; }
grep -q "the launches before the first stream capture read the weights of the saved profile" \
	"$tmp/err" || { echo "FAIL: engine: profile not taken as the capture began"; cat "$tmp/err"; fail=1; }
# weights read once with other contents, then loaded: taken soon after all
run reload || { echo "FAIL: reload run"; cat "$tmp/err"; fail=1; }
grep -q "the first forward) read the weights of the saved profile, with their contents" "$tmp/err" ||
	{ echo "FAIL: reload: profile not taken by the watch"; cat "$tmp/err"; fail=1; }
# another model's contents (one checksum changed): discovery's passes, then
# the profile, written again with this run's checksums
sums() { grep -o '"weight_sums":[^]]*' "$1"; }
[ -n "$(sums "$tmp/first.json")" ] || { echo "FAIL: profile.json has no weight_sums"; fail=1; }
sed 's/\("weight_sums":[^"]*"\)0/\1z/; s/\("weight_sums":[^"]*"\)[1-9a-f]/\10/; s/\("weight_sums":[^"]*"\)z/\11/' \
	"$tmp/first.json" >"$tmp/p/profile.json"
[ "$(sums "$tmp/p/profile.json")" != "$(sums "$tmp/first.json")" ] || { echo "FAIL: sums not changed"; fail=1; }
# slow_start <what> <pattern>: a run that cannot take profile.json after one
# pass (the log says why: pattern) takes it after discovery's passes and
# writes it again with this run's checksums
slow_start() {
	run slow || { echo "FAIL: $1: run"; cat "$tmp/err"; fail=1; }
	grep -q "$2" "$tmp/err" && grep -q "profiling skipped" "$tmp/err" ||
		{ echo "FAIL: $1: not discovered, or the profile not taken"; cat "$tmp/err"; fail=1; }
	[ "$(sums "$tmp/p/profile.json")" = "$(sums "$tmp/first.json")" ] ||
		{ echo "FAIL: $1: profile.json not written again with this run's checksums"; fail=1; }
}
slow_start "other contents" "did not read the 22 weights .* with their contents"
# a file of 0.2 (no checksums): taken after discovery's passes, and written
# again with them
sed 's/"weight_sums":/"weight_sums_not_read":/' "$tmp/first.json" >"$tmp/p/profile.json"
[ -z "$(sums "$tmp/p/profile.json")" ] || { echo "FAIL: weight_sums not removed"; fail=1; }
slow_start "a file of 0.2" "has no checksums of its weights (written by 0.2): discovery runs its passes"
# another device: the weights are found at the end of the first forward,
# but the file cannot be taken; discovery then starts as it would have, and
# finds every weight (the first forward's watch is not a discovery pass)
sed 's/"Fake GPU"/"Other GPU"/' "$tmp/first.json" >"$tmp/p/profile.json"
run eager || { echo "FAIL: another device: run"; cat "$tmp/err"; fail=1; }
grep -q "discovery: 22 weights" "$tmp/err" ||
	{ echo "FAIL: another device: discovery did not find the 22 weights"; cat "$tmp/err"; fail=1; }
cp "$tmp/first.json" "$tmp/p/profile.json"
# other settings: the saved timings, but a new plan (the settings rule)
run again FT_NUM_BLOCKS=6 || { echo "FAIL: run with other settings"; cat "$tmp/err"; fail=1; }
grep -q "profiling skipped" "$tmp/err" && grep -q "the saved plan was made for .*FT_NUM_BLOCKS=4.*planning again" "$tmp/err" &&
	grep -q "plan (latency mode)" "$tmp/err" ||
	{ echo "FAIL: the saved plan was applied under other settings"; cat "$tmp/err"; fail=1; }
grep -q '"settings":.*"FT_MAX_GPU_MEM_FRACTION=0 FT_TRANSFER_MODE=allocation_block_transfer FT_NUM_BLOCKS=4' "$tmp/first.json" ||
	{ echo "FAIL: the plan does not record its settings"; fail=1; }
run skip FT_SKIP_DISCOVERY=1 || { echo "FAIL: FT_SKIP_DISCOVERY run"; cat "$tmp/err"; fail=1; }
grep -q "first pass read the weights of the saved profile (FT_SKIP_DISCOVERY=1: their sizes)" "$tmp/err" ||
	{ echo "FAIL: FT_SKIP_DISCOVERY not honoured"; cat "$tmp/err"; fail=1; }
# without a profile: a warning, and discovery runs as usual
mv "$tmp/p" "$tmp/kept"
run eager FT_SKIP_DISCOVERY=1 || { echo "FAIL: FT_SKIP_DISCOVERY without a profile"; cat "$tmp/err"; fail=1; }
grep -q "FT_SKIP_DISCOVERY=1 but there is no profile.json" "$tmp/err" ||
	{ echo "FAIL: no warning for FT_SKIP_DISCOVERY without a profile"; cat "$tmp/err"; fail=1; }
rm -rf "$tmp/p"
mv "$tmp/kept" "$tmp/p"
# the public API: ft_load_profile / ft_save_profile without FT_PROFILE_STORAGE_DIR
mkdir -p "$tmp/api"
env LD_PRELOAD="$lib" FT_ENABLED=1 FT_DISCOVERY_ITERS=1 FT_PROFILING_ITERS=2 FT_LOG_LEVEL=info \
	"$prog" api "$tmp/p" "$tmp/api" 2>"$tmp/err" || { echo "FAIL: api run"; cat "$tmp/err"; fail=1; }
grep -q "profiling skipped" "$tmp/err" || { echo "FAIL: ft_load_profile not used"; cat "$tmp/err"; fail=1; }
[ "$(grep '"fingerprint"' "$tmp/api/profile.json")" = "$(grep '"fingerprint"' "$tmp/first.json")" ] ||
	{ echo "FAIL: ft_save_profile did not write this model's profile"; fail=1; }
printf '{"schema": 1, "lib' >"$tmp/p/profile.json"
run eager || { echo "FAIL: run with a corrupt profile"; cat "$tmp/err"; fail=1; }
grep -q "profile.json refused (corrupt)" "$tmp/err" ||
	{ echo "FAIL: no refusal message"; cat "$tmp/err"; fail=1; }
# rewritten for the same model: same fingerprint (timings differ run to run)
fp() { grep '"fingerprint"' "$1"; }
[ -n "$(fp "$tmp/first.json")" ] && [ "$(fp "$tmp/p/profile.json")" = "$(fp "$tmp/first.json")" ] ||
	{ echo "FAIL: the corrupt profile was not rewritten for this model"; fail=1; }
[ $fail = 0 ] && echo "phases_profile: ok"
exit $fail
