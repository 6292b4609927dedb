#!/bin/sh
# Bad FT_* settings stop a CUDA program with status 2 at its first CUDA call,
# with messages that name the variable, the value, what is accepted and the
# nearest known name; a program that never touches CUDA is not affected.
# usage: config_refusal.sh <libflextensor.so> <cuda program> <non-cuda program>
set -u
for v in $(env | sed -n "s/^\(FT_[A-Z_]*\)=.*/\1/p"); do unset "$v"; done
lib=$1 cuda_prog=$2 plain_prog=$3
fail=0
out=$(mktemp)
trap 'rm -f "$out" "$out.trace"' EXIT

expect() { # expect <status> <needle> env...
	want=$1 needle=$2
	shift 2
	# a file read for ever (FT_CONFIG_FILE=/dev/zero) fails the test
	# (124) instead of hanging it
	timeout 20 env "$@" LD_PRELOAD="$lib" "$cuda_prog" >/dev/null 2>"$out"
	st=$?
	if [ "$st" != "$want" ] || ! grep -qF -- "$needle" "$out"; then
		echo "FAIL: $* -> status $st (want $want), stderr:"; cat "$out"
		fail=1
	else
		echo "ok: $* -> $st"
	fi
}

expect 2 "did you mean FT_NUM_BLOCKS?" FT_ENABLED=1 FT_NUM_BLOCK=8
expect 2 "expected one of allocation_block_transfer, raw_block_transfer, strategy" \
	FT_ENABLED=1 FT_TRANSFER_MODE=fast
expect 2 "FT_MAX_GPU_MEM_FRACTION=1.5 is not valid" FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION=1.5
expect 2 "selects PyTorch modules by name" FT_ENABLED=1 FT_INCLUDE_PATTERNS=model.*
expect 2 "needs FT_ENABLED=1" FT_TRACE=/tmp/ft-refusal.jsonl
expect 2 "FT_CONFIG_FILE=/nonexistent.ini: cannot open" FT_ENABLED=1 FT_CONFIG_FILE=/nonexistent.ini
expect 2 "refusing to run" FT_ENABLED=1 FT_LOG_LEVEL=loud
# Only a regular file under the size limit is read as FT_CONFIG_FILE.
expect 2 "FT_CONFIG_FILE=/dev/zero: is a character device, not a regular file" \
	FT_ENABLED=1 FT_CONFIG_FILE=/dev/zero
expect 2 "FT_CONFIG_FILE=/: is a directory, not a regular file" FT_ENABLED=1 FT_CONFIG_FILE=/
expect 2 "FT_CONFIG_FILE=/proc/self/mem: cannot read the file" \
	FT_ENABLED=1 FT_CONFIG_FILE=/proc/self/mem
# A path longer than the library's buffers is refused, never cut.
long=/tmp/$(printf '%4079s' '' | tr ' ' a)/x
expect 2 "is not valid: the path is 4086 bytes long" FT_ENABLED=1 FT_TRACE="$long"
# A binary file is one error line (an ELF file once gave 480), then the refusal.
expect 2 "not a text file (byte 0 is 0x7f)" FT_ENABLED=1 FT_CONFIG_FILE="$cuda_prog"
if [ "$(grep -c "error:" "$out")" != 2 ]; then
	echo "FAIL: a binary FT_CONFIG_FILE gave more than one error:"; cat "$out"
	fail=1
fi
# An unusable profile.json is warned about and ignored; the program runs.
expect 0 "/dev/zero: is a character device, not a regular file, nor a directory that holds" \
	FT_ENABLED=1 FT_PROFILE_STORAGE_DIR=/dev/zero FT_TRACE="$out.trace"
# Planned options are accepted and said so at info level.
expect 0 "FT_PIECEWISE_PREFETCH=off accepted" FT_ENABLED=1 FT_PIECEWISE_PREFETCH=off FT_LOG_LEVEL=info \
	FT_TRACE="$out.trace"

env FT_ENABLED=1 FT_NUM_BLOCK=8 LD_PRELOAD="$lib" "$plain_prog" >/dev/null 2>"$out"
if [ $? != 0 ] || [ -s "$out" ]; then
	echo "FAIL: a process without CUDA was disturbed by a bad setting:"; cat "$out"
	fail=1
else
	echo "ok: non-CUDA process untouched by a bad setting"
fi
# The public API starts the library in any process; with FT_ENABLED=0 and no
# libcuda.so.1 to load it says nothing.
if command -v python3 >/dev/null 2>&1; then
	env -u LD_LIBRARY_PATH FT_ENABLED=0 LD_PRELOAD="$lib" python3 -c \
		'import ctypes; ctypes.CDLL(None).ft_mark_pass()' >/dev/null 2>"$out"
	if [ -s "$out" ]; then
		echo "FAIL: the public API with FT_ENABLED=0 printed:"; cat "$out"
		fail=1
	else
		echo "ok: the public API with FT_ENABLED=0 is silent"
	fi
fi
exit $fail
