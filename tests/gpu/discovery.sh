#!/bin/sh
# GPU check of discovery and profiling (see discovery.py): for each workload
# a plain run and a preloaded run (FT_PROFILING_ITERS=5, trace and
# profile.json kept), then the report.  Exits 77 where there is no GPU.
# usage: discovery.sh <libflextensor.so> <output dir>
set -u
lib=$1 out=$2
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu transformers
clean_ft_env
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
