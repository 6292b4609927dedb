#!/bin/sh
# Unpacks a recorded H200 trace and runs the executor on its INFERENCE
# launches with the plan the library made there (exec_replay.c).
# usage: exec_replay.sh <exec_replay> <tests/data dir> NAME
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc "$2/$3.trace.jsonl.gz" >"$tmp/trace.jsonl" || exit 1
# (a process that adopted a saved plan: its profile.json is the plan, and
# EXEC_REPLAY_BEGIN says where its forwards begin)
if [ -e "$2/$3.profile.json" ]; then
	"$1" "$tmp/trace.jsonl" - "$2/$3.profile.json"
else
	"$1" "$tmp/trace.jsonl" "$2/$3.truth.json" "$2/$3.plan.json"
fi
