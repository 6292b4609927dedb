#!/bin/sh
# flextensor-run: flags map to FT_* variables, LD_PRELOAD is prepended (an
# existing one kept), bad flags and bad values exit 2 before the command
# runs, a missing library is a clear error, and the command (a stand-in for
# `vllm serve`) and its children inherit library and configuration.
# usage: flextensor_run.sh <flextensor-run> <libflextensor.so>
set -u
run=$1 lib=$2
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
exit $fail
