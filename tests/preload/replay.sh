#!/bin/sh
# Replays an H200 recording (tests/data/NAME.trace.jsonl.gz with its
# NAME.truth.json) under the preload and checks what discovery concluded
# about the model whose parameters are named PREFIX* (see replay.c).
# usage: replay.sh <libflextensor.so> <replay> <tests/data> NAME LAST_SEQ PREFIX TRAPS
#        [SHRINK (sizes divided by it, default 1) [FT_PROFILING_ITERS, default 5]]
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$3/$4.trace.jsonl.gz" >"$tmp/rec.jsonl" || exit 1
# no NAME.truth.json: only the phase and the trap count are checked
truth="$3/$4.truth.json"
[ -e "$truth" ] || truth=-
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
REPLAY_SHRINK=${8:-1} LD_PRELOAD="$1" FT_ENABLED=1 FT_PROFILING_ITERS=${9:-5} FT_TRACE="$tmp/lib.jsonl" \
	FT_PROFILE_STORAGE_DIR="$tmp/profile" "$2" "$tmp/rec.jsonl" "$5" "$truth" "$6" "$7"
