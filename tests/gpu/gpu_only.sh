#!/bin/sh
# Runs a GPU program, or exits 77 (skipped) on a machine without an NVIDIA GPU.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
	{ echo "no NVIDIA GPU: skipping"; exit 77; }
exec "$@"
