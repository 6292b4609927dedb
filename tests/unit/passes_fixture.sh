#!/bin/sh
# Unpacks a recorded H200 trace and scores pass detection on it.
# usage: passes_fixture.sh <passes_fixture> <tests/data dir> NAME WORKLOADS
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$2/$3.trace.jsonl.gz" >"$tmp/trace.jsonl" || exit 1
"$1" "$tmp/trace.jsonl" "$2/$3.truth.json" "$4"
