#!/bin/sh
# Replays the H200 recording (tests/data) under the preload and checks what
# discovery concluded about its first model (see replay.c).
# usage: replay.sh <libflextensor.so> <replay> <tests/data>
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$3/h200-workloads.trace.jsonl.gz" >"$tmp/rec.jsonl" || exit 1
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
LD_PRELOAD="$1" FT_ENABLED=1 FT_PROFILING_ITERS=5 FT_TRACE="$tmp/lib.jsonl" \
	FT_PROFILE_STORAGE_DIR="$tmp/profile" "$2" "$tmp/rec.jsonl" 4000 "$3/h200-workloads.truth.json"
