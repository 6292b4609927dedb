#!/bin/sh
# Fuzzes the profile loader with the planner (fuzz_profile.c) and the FT_*
# option and INI parser (fuzz_options.c) with clang's libFuzzer under ASan
# and UBSan, FUZZ_SECONDS (10) each, from the seeds in tests/fuzz/seeds and
# tests/data's profiles.  A crash, leak or sanitizer report fails, with the
# input that caused it kept in $FUZZ_KEEP (default: the build's fuzz/).
# Exits 77 where clang cannot build with -fsanitize=fuzzer.
# usage: run.sh <source dir> <CUDA include dir> <build dir>
set -u
src=$1 cuda=$2 out=$3/fuzz
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-10}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
flags="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1
-I$src/include -isystem $cuda"
if ! printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }\n' |
	$cc $flags -x c -o "$tmp/probe" - >/dev/null 2>&1; then
	echo "fuzz: $cc cannot build with -fsanitize=fuzzer: skipped"
	exit 77
fi
mkdir -p "$out"
common="$src/src/common/input.c $src/src/common/log.c"
# the sources each target needs (the planning and option code, no driver)
$cc $flags -o "$tmp/profile" "$src/tests/fuzz/fuzz_profile.c" \
	"$src/src/profile/profile_json.c" "$src/src/profile/plan.c" \
	"$src/src/profile/coread.c" "$src/src/profile/copy_curve.c" $common -lcjson -lm ||
	{ echo "FAIL: fuzz_profile does not build"; exit 1; }
$cc $flags -o "$tmp/options" "$src/tests/fuzz/fuzz_options.c" \
	"$src/src/common/options.c" $common -linih ||
	{ echo "FAIL: fuzz_options does not build"; exit 1; }
status=0
for t in profile options; do
	mkdir "$tmp/corpus-$t"
	cp "$src/tests/fuzz/seeds/$t"/* "$tmp/corpus-$t/"
	[ $t = profile ] && cp "$src/tests/data/"*.profile.json "$tmp/corpus-$t/"
	if TMPDIR=$tmp "$tmp/$t" -max_total_time="$secs" -artifact_prefix="$out/$t-" \
		"$tmp/corpus-$t" >"$tmp/$t.log" 2>&1; then
		echo "ok: fuzz_$t: $(grep -o 'Done [0-9]* runs' "$tmp/$t.log")"
	else
		echo "FAIL: fuzz_$t (the input is kept as $out/$t-*):"
		grep -A12 "ERROR\|runtime error" "$tmp/$t.log" | head -30
		status=1
	fi
done
exit $status
