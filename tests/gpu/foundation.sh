#!/bin/sh
# GPU check of the foundation issue (see foundation.py): plain and preloaded
# PyTorch processes (outputs, launch counts, graph), two traced processes
# (parameter coverage with the default and the expandable-segments
# allocator), alternating decode-only processes pinned to the same cores
# (overhead), then the report.  Exits 77 where there is no GPU.
# usage: foundation.sh <libflextensor.so> <output dir> [full rounds] [overhead rounds]
set -u
lib=$1 out=$2 rounds=${3:-1} ovh_rounds=${4:-5}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}

. "$here/gpu_env.sh"
require_gpu transformers

mkdir -p "$out"
rm -f "$out"/plain-* "$out"/preload-* "$out"/trace-* "$out"/expandable-* "$out"/ovh-* \
	"$out"/trace.jsonl
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
for f in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$f"; done
pin=
command -v taskset >/dev/null 2>&1 && pin="taskset -c 2-7"
set -e
r=1
while [ "$r" -le "$rounds" ]; do
	"$py" "$here/foundation.py" run --tag plain --round "$r" --out "$out"
	LD_PRELOAD="$lib" FT_ENABLED=1 "$py" "$here/foundation.py" run --tag preload --round "$r" --out "$out"
	r=$((r + 1))
done
LD_PRELOAD="$lib" FT_ENABLED=1 FT_TRACE="$out/trace.jsonl" \
	"$py" "$here/foundation.py" run --tag trace --round 1 --out "$out"
# PyTorch's expandable segments map VMM handles it gets through
# cudaGetDriverEntryPointByVersion: the fourth route.
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True LD_PRELOAD="$lib" FT_ENABLED=1 \
	FT_TRACE="$out/trace-expandable.jsonl" \
	"$py" "$here/foundation.py" run --tag expandable --round 1 --out "$out"
r=1
while [ "$r" -le "$ovh_rounds" ]; do
	$pin "$py" "$here/foundation.py" overhead --tag plain --round "$r" --out "$out"
	LD_PRELOAD="$lib" FT_ENABLED=1 $pin "$py" "$here/foundation.py" overhead --tag preload --round "$r" --out "$out"
	r=$((r + 1))
done
"$py" "$here/foundation.py" compare --out "$out"
