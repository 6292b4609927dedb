#!/bin/sh
# GPU check of discovery and profiling (see discovery.py): for each workload
# a plain run and a preloaded run (FT_PROFILING_ITERS=5, trace and
# profile.json kept), then the report.  Exits 77 where there is no GPU.
# usage: discovery.sh <libflextensor.so> <output dir>
set -u
lib=$1 out=$2
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
command -v nvidia-smi >/dev/null 2>&1 || { echo "no nvidia-smi: skipping"; exit 77; }
"$py" -c 'import sys, torch, transformers; sys.exit(0 if torch.cuda.is_available() else 1)' \
	2>/dev/null || { echo "no CUDA-capable torch + transformers: skipping"; exit 77; }
for f in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$f"; done
export PYTHONUNBUFFERED=1
mkdir -p "$out"
set -e
for w in hf manual; do
	rm -rf "$out/$w" "$out/$w.trace.jsonl"
	"$py" "$here/discovery.py" run "$w" "$out"
	LD_PRELOAD="$lib" FT_ENABLED=1 FT_PROFILING_ITERS=5 FT_LOG_LEVEL=info \
		FT_TRACE="$out/$w.trace.jsonl" FT_PROFILE_STORAGE_DIR="$out/$w" \
		"$py" "$here/discovery.py" run "$w" "$out"
done
"$py" "$here/discovery.py" report "$out"
