#!/bin/sh
# Unpacks a recorded H200 trace and drives the phase machine with its
# events (learn_replay.c).
# usage: learn_replay.sh <learn_replay> <tests/data dir> NAME [capture-profiling]
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$2/$3.trace.jsonl.gz" >"$tmp/trace.jsonl" || exit 1
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
"$1" "$tmp/trace.jsonl" ${4:+"$4"}
