#!/bin/sh
# FT_VERIFY soak of one zoo model (see zoo.py): W runs at once on the GPU,
# each the FT_VERIFY run of zoo.sh (allocation mode, half the decoder off
# the GPU, ZOO_DECODE decode steps then ZOO_PREFILLS prefills, ZOO_NAN=1),
# started again until STOP seconds have passed.  Runs side by side are
# what made Mixtral's rare poisoned read common (11 of 64 on the H100, one
# at a time about 2 in 32).  A run whose forward held NaN keeps its log
# and the library's journal (ft_verify_journal) under <out>/failed/; at
# the end every forward of every run is compared bit for bit with the
# plain run.  With OLD=<another libflextensor.so>, the odd workers run it
# instead (an A/B in one call; its runs are named *-old-*).  Not part of
# the meson suite (minutes of GPU time).  Exits 77 where there is no GPU,
# 1 when a run of <libflextensor.so> read NaN or differs.
# usage: zoo_soak.sh <libflextensor.so> <output dir> [model, default mixtral]
# (W, default 4; STOP, default 300; RUN_LIMIT, seconds one run may take
# before it is killed, default 300; ZOO_DECODE, default zoo.py
# verify-decode's; ZOO_PREFILLS, default 2)
set -u
lib=$1 out=$2 m=${3:-mixtral}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu transformers
clean_ft_env
rm -rf "$out"
mkdir -p "$out/failed"
start=$(date +%s)
"$py" "$here/zoo.py" run "$m" plain "$out" >"$out/$m-plain.out" 2>&1 ||
	{ echo "$m plain failed:"; tail -20 "$out/$m-plain.out"; exit 1; }
f=$("$py" "$here/zoo.py" fraction "$m" "$out" 0.5) || exit 1
dec=${ZOO_DECODE:-$("$py" "$here/zoo.py" verify-decode "$m")}
worker() {
	w=$1 use=$lib tag=""
	if [ -n "${OLD:-}" ] && [ $((w % 2)) = 1 ]; then
		use=$OLD tag=-old
	fi
	i=0
	while [ $(($(date +%s) - start)) -lt "${STOP:-300}" ]; do
		i=$((i + 1))
		run=w$w-$i$tag-verify
		env FT_MAX_GPU_MEM_FRACTION="$f" FT_VERIFY=1 ZOO_PREFILLS="${ZOO_PREFILLS:-2}" \
			ZOO_DECODE="$dec" ZOO_NAN=1 LD_PRELOAD="$use" FT_ENABLED=1 \
			FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info \
			timeout "${RUN_LIMIT:-300}" "$py" "$here/zoo.py" run "$m" "$run" "$out" >"$out/$m-$run.out" 2>"$out/$m-$run.log"
		rc=$?
		nan=$(grep -c "^ZOO_NAN" "$out/$m-$run.log")
		if [ "$nan" -gt 0 ]; then
			mkdir -p "$out/failed/$run"
			mv "$out/$m-$run.log" "$out/$m-$run.out" "$out/failed/$run/"
			j=$(sed -n 's/.*; journal \(\/[^ ]*\.txt\)$/\1/p' "$out/failed/$run/$m-$run.log")
			[ -n "$j" ] && [ -f "$j" ] && mv "$j" "$out/failed/$run/journal.txt"
		fi
		echo "$run rc=$rc nan=$nan $(($(date +%s) - start)) s" >>"$out/runs.txt"
	done
}
for w in $(seq 1 "${W:-4}"); do
	worker "$w" &
done
wait
"$py" - "$out" "$m" "$here" <<'EOF' >"$out/same.txt" 2>&1
import glob, os, sys
import torch
out, m = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from zoo import same  # noqa: E402
plain = torch.load(os.path.join(out, f"{m}-plain.pt"))
for old in (False, True):
    runs = sorted(f for f in glob.glob(os.path.join(out, f"{m}-w*-verify.pt"))
                  if ("-old-" in f) == old)
    n = bad = 0
    for f in runs:
        r = torch.load(f)
        for kind in ("prefill", "decode"):
            for a, b in zip(plain["rec"][kind], r["rec"][kind]):
                n += 1
                if not same(a["logits"], b["logits"]):
                    bad += 1
                    print("differs:", os.path.basename(f), kind)
    print(f"{'OLD' if old else 'library'}: {len(runs)} runs, {n} forwards compared, {bad} differ")
EOF
tail -2 "$out/same.txt"
echo "runs that read NaN: $(grep -v -- -old- "$out/runs.txt" | grep -vc 'nan=0')" \
	"of $(grep -vc -- -old- "$out/runs.txt");" \
	"OLD's: $(grep -- -old- "$out/runs.txt" | grep -vc 'nan=0')" \
	"of $(grep -c -- -old- "$out/runs.txt")"
grep -v -- -old- "$out/runs.txt" | grep -vq 'nan=0' && exit 1
grep -q "^library: .* 0 differ$" "$out/same.txt" || exit 1
exit 0
