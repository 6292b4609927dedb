#!/bin/sh
# flextensor-run: flags map to FT_* variables, LD_PRELOAD is prepended (an
# existing one kept), bad flags and bad values exit 2 before the command
# runs, a missing library is a clear error, and the command (a stand-in for
# `vllm serve`) and its children inherit library and configuration.
# Issue 20: a library the dynamic loader would not preload (not a shared
# object, not libflextensor, a path LD_PRELOAD splits) and a log or trace
# file that cannot be written are refused with exit 2 before the command
# starts, never run unprotected with exit 0; --check checks and stops.
# usage: flextensor_run.sh <flextensor-run> <libflextensor.so>
#                          <flextensor-config> <a shared object without ft_version>
set -u
run=$1 lib=$2 config=$3 other_so=$4
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check <description> <condition command...>
	desc=$1
	shift
	if "$@"; then echo "ok: $desc"; else echo "FAIL: $desc"; fail=1; fi
}

sh "$run" --help >"$tmp/help"
check "--help exits 0 and lists --mem-fraction" grep -q -- "--mem-fraction" "$tmp/help"

sh "$run" --bogus -- true 2>"$tmp/err"; st=$?
check "unknown flag exits 2" [ "$st" = 2 ]
check "unknown flag message" grep -q "unknown option '--bogus'" "$tmp/err"

sh "$run" --mem-fraction 2>"$tmp/err"; st=$?
check "missing value exits 2" [ "$st" = 2 ]

sh "$run" --mem-fraction 0.3 2>"$tmp/err"; st=$?
check "missing command exits 2" [ "$st" = 2 ]
check "missing command message" grep -q "no command given" "$tmp/err"

sh "$run" --mem-fraction 1.7 -- touch "$tmp/ran" 2>"$tmp/err"; st=$?
check "bad value exits 2" [ "$st" = 2 ]
check "bad value: command not started" [ ! -e "$tmp/ran" ]
check "bad value message" grep -q "FT_MAX_GPU_MEM_FRACTION=1.7 is not valid" "$tmp/err"

(ulimit -v 4000000; exec timeout 20 sh "$run" --config /dev/zero -- touch "$tmp/ran") \
	2>"$tmp/err"; st=$?
check "--config /dev/zero exits 2 at once" [ "$st" = 2 ]
check "--config /dev/zero: command not started" [ ! -e "$tmp/ran" ]
check "--config /dev/zero message" grep -q "FT_CONFIG_FILE=/dev/zero: is a character device" "$tmp/err"

sh "$run" --num-blocks +4 -- touch "$tmp/ran" 2>"$tmp/err"; st=$?
check "a number with a sign exits 2" [ "$st" = 2 ]
check "a number with a sign: message" grep -q "FT_NUM_BLOCKS=+4 is not valid" "$tmp/err"

FT_NUM_BLOK=3 sh "$run" -- touch "$tmp/ran" 2>"$tmp/err"; st=$?
check "misspelled FT_ variable in the environment exits 2" [ "$st" = 2 ]
check "did-you-mean" grep -q "did you mean FT_NUM_BLOCKS?" "$tmp/err"

sh "$run" --library /nonexistent/libflextensor.so -- true 2>"$tmp/err"; st=$?
check "missing library exits 2" [ "$st" = 2 ]
check "missing library message" grep -q "does not exist" "$tmp/err"

# A stand-in server that starts a worker: both see the library and settings.
cat >"$tmp/serve" <<'SERVE'
#!/bin/sh
echo "server LD_PRELOAD=$LD_PRELOAD FT_ENABLED=$FT_ENABLED FT_MAX_GPU_MEM_FRACTION=$FT_MAX_GPU_MEM_FRACTION FT_TRANSFER_MODE=$FT_TRANSFER_MODE"
sh -c 'echo "worker LD_PRELOAD=$LD_PRELOAD FT_MAX_GPU_MEM_FRACTION=$FT_MAX_GPU_MEM_FRACTION"'
SERVE
chmod +x "$tmp/serve"
LD_PRELOAD=libm.so.6 sh "$run" --mem-fraction=0.3 --transfer-mode raw_block_transfer \
	-- "$tmp/serve" serve model >"$tmp/out" 2>"$tmp/err"; st=$?
real=$(CDPATH= cd -- "$(dirname -- "$lib")" && pwd)/libflextensor.so
check "command runs (exit 0)" [ "$st" = 0 ]
check "server sees library first, existing preload kept" \
	grep -q "server LD_PRELOAD=$real:libm.so.6 FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION=0.3 FT_TRANSFER_MODE=raw_block_transfer" "$tmp/out"
check "worker inherits library and budget" \
	grep -q "worker LD_PRELOAD=$real:libm.so.6 FT_MAX_GPU_MEM_FRACTION=0.3" "$tmp/out"

sh "$run" --disable -- sh -c 'echo "FT_ENABLED=$FT_ENABLED"' >"$tmp/out"
check "--disable sets FT_ENABLED=0" grep -q "FT_ENABLED=0" "$tmp/out"

sh "$run" --trace "$tmp/t.jsonl" --log-level info -- sh -c 'echo "$FT_TRACE $FT_LOG_LEVEL"' >"$tmp/out"
check "--trace and --log-level map" grep -q "$tmp/t.jsonl info" "$tmp/out"

# The installed layout (flextensor-config beside flextensor-run in bin/), in
# which --library may name any file: before issue 20 each case below ran the
# command without the library and exited 0.
mkdir "$tmp/bin"
cp "$run" "$tmp/bin/flextensor-run"
cp "$config" "$tmp/bin/flextensor-config"
irun=$tmp/bin/flextensor-run

refused() { # refused <description> <message pattern> <flextensor-run options...>
	what=$1 pattern=$2
	shift 2
	rm -f "$tmp/ran"
	sh "$irun" "$@" -- touch "$tmp/ran" 2>"$tmp/err"; st=$?
	check "$what: exit 2" [ "$st" = 2 ]
	check "$what: command not started" [ ! -e "$tmp/ran" ]
	check "$what: message" grep -q -- "$pattern" "$tmp/err"
}

printf 'not a shared object\n' >"$tmp/junk.so"
refused "--library of a text file" \
	"library '$tmp/junk.so' cannot be preloaded as libflextensor (the dynamic loader says: .*cannot be preloaded" \
	--library "$tmp/junk.so"
check "one line for a library refused" [ "$(wc -l <"$tmp/err")" = 1 ]
: >"$tmp/empty.so"
refused "--library of an empty file" "cannot be preloaded as libflextensor" --library "$tmp/empty.so"
refused "--library of a shared object that is not libflextensor" \
	"does not export ft_version, so it is not libflextensor" --library "$other_so"
refused "--library of a directory" "is a directory" --library "$tmp"
mkdir "$tmp/with space" "$tmp/with:colon" "$tmp/good"
cp "$lib" "$tmp/with space/libflextensor.so"
cp "$lib" "$tmp/with:colon/libflextensor.so"
cp "$lib" "$tmp/good/libflextensor.so"
refused "--library path with a space" "contains a space or a colon, where LD_PRELOAD splits" \
	--library "$tmp/with space/libflextensor.so"
refused "--library path with a colon" "contains a space or a colon, where LD_PRELOAD splits" \
	--library "$tmp/with:colon/libflextensor.so"

# Log and trace files the library could not open (it would stop the program
# at its first CUDA call) are refused before the command starts, whether
# they come from a flag, the environment or the INI file.  No case relies on
# permissions: the tests may run as root.
: >"$tmp/a-file"
refused "--log-file in a missing directory" \
	"FT_LOG_FILE=$tmp/missing/ft.log cannot be opened for writing" \
	--library "$tmp/good/libflextensor.so" --log-file "$tmp/missing/ft.log"
refused "--trace under a regular file" \
	"FT_TRACE=$tmp/a-file/t.%p.jsonl cannot be opened for writing" \
	--library "$tmp/good/libflextensor.so" --trace "$tmp/a-file/t.%p.jsonl"
refused "--trace naming a directory" "FT_TRACE=$tmp cannot be opened for writing (it is a directory)" \
	--library "$tmp/good/libflextensor.so" --trace "$tmp"
FT_LOG_FILE=$tmp/missing/env.log refused "FT_LOG_FILE from the environment" \
	"FT_LOG_FILE=$tmp/missing/env.log cannot be opened" --library "$tmp/good/libflextensor.so"
printf '[flextensor]\ntrace = %s\n' "$tmp/missing/ini.jsonl" >"$tmp/ft.ini"
refused "trace from the INI file" "FT_TRACE=$tmp/missing/ini.jsonl cannot be opened" \
	--library "$tmp/good/libflextensor.so" --config "$tmp/ft.ini"

rm -f "$tmp/ran"
sh "$irun" --library "$tmp/good/libflextensor.so" --log-file "$tmp/ft.log" \
	--trace "$tmp/t.%p.jsonl" -- touch "$tmp/ran" 2>"$tmp/err"; st=$?
check "a good library and writable files: the command runs" [ "$st" = 0 ] && [ -e "$tmp/ran" ]
check "the check creates no log file" [ ! -e "$tmp/ft.log" ]

# --check: the same checks, and no command.
sh "$irun" --library "$tmp/good/libflextensor.so" --trace "$tmp/t.%p.jsonl" --check \
	>"$tmp/out" 2>"$tmp/err"; st=$?
check "--check on good settings exits 0" [ "$st" = 0 ]
check "--check says what it checked" grep -q "flextensor-run: ok: .*preloads" "$tmp/out"
rm -f "$tmp/ran"
sh "$irun" --library "$tmp/good/libflextensor.so" --check -- touch "$tmp/ran" >"$tmp/out"; st=$?
check "--check with a command exits 0 and does not run it" [ "$st" = 0 ] && [ ! -e "$tmp/ran" ]
check "--check says the command was not run" grep -q "the command was not run" "$tmp/out"
sh "$irun" --library "$tmp/good/libflextensor.so" --trace "$tmp/missing/t.jsonl" --check \
	>"$tmp/out" 2>"$tmp/err"; st=$?
check "--check on an unwritable trace exits 2" [ "$st" = 2 ]
sh "$irun" --library "$tmp/junk.so" --check >"$tmp/out" 2>"$tmp/err"; st=$?
check "--check on a bad library exits 2" [ "$st" = 2 ]
exit $fail
