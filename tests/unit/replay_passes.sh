#!/bin/sh
# Unpacks a recorded H200 trace with graph replays and checks pass
# detection on it (replay_passes.c).
# usage: replay_passes.sh <replay_passes> <tests/data dir> NAME
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$2/$3.trace.jsonl.gz" >"$tmp/trace.jsonl" || exit 1
"$1" "$tmp/trace.jsonl"
