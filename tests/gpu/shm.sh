#!/bin/sh
# GPU check of the shared host store (FT_SHM_ENABLED): the benchmark's
# model (scripts/bench_offload.py) with half of the decoder offloaded, two
# processes one after the other that stay alive together, first with
# private stores, then sharing one.  Each process runs the benchmark's
# workloads alone on the GPU (the second starts when the first is done and
# waiting), so both are timed against the floor; with both alive, each
# one's host memory is read from /proc (RSS, its shared part, PSS, pinned
# pages) with the host's shared memory, into OUT/memory.md; OUT/bench.md
# has the runs' ratios, ready times, stores and bit-identity.  The second
# shared run takes the first one's plan from the profile it kept beside
# its segment (so it skips discovery and profiling, and maps all its store).
# Exits 77 where there is no GPU.
# usage: shm.sh <libflextensor.so> <output dir> [share, default 0.5]
# (SHM_MODE: the transfer mode, default raw_block_transfer; SHM_COMPRESS:
# FT_TRANSFER_COMPRESSION, default auto; SHM_VARIANTS: "private shm", the
# default, or "shm" alone; SHM_TRACE=1: each process's FT_TRACE in OUT, and
# the shared runs' profile.json copied there)
set -u
lib=$1 out=$2 share=${3:-0.5}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
bench="$here/../../scripts/bench_offload.py"
. "$here/gpu_env.sh"
require_gpu
clean_ft_env
rm -rf "$out"
mkdir -p "$out"
SHARES="" "$py" "$bench" plain "$out" || exit 1
f=$("$py" "$bench" fraction "$out" "$share") || exit 1
mode=${SHM_MODE:-raw_block_transfer}
# mem <label> <pid>: the process's host memory, one table row
mem() {
	s=/proc/$2/status r=/proc/$2/smaps_rollup
	kb() { awk -v k="$1:" '$1 == k { print $2 }' "$2"; }
	echo "| $1 | $(kb VmRSS "$s") | $(kb RssShmem "$s") | $(kb Pss "$r") | $(kb VmPin "$s") | $(kb VmLck "$s") |"
}
{
	echo "| process | RSS KiB | of it shared memory KiB | PSS KiB | pinned KiB (VmPin) | locked KiB |"
	echo "|---|---|---|---|---|---|"
} > "$out/memory.md"
rc=0
# the profile the shared runs keep beside their segments: the first of them
# discovers the model, the second takes its plan after one pass
rm -rf "/dev/shm/ft-benchshm-u$(id -u).profile"
for v in ${SHM_VARIANTS:-private shm}; do
	on=0
	[ $v = shm ] && on=1
	mkdir -p "$out/linger-$v"
	for p in A B; do
		env LD_PRELOAD="$lib" FT_ENABLED=1 FT_MAX_GPU_MEM_FRACTION="$f" FT_TRANSFER_MODE="$mode" \
			FT_TRANSFER_COMPRESSION="${SHM_COMPRESS:-auto}" FT_SHM_ENABLED=$on \
			FT_SHM_NAMESPACE=benchshm FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info \
			BENCH_LINGER="$out/linger-$v" ${SHM_TRACE:+FT_TRACE="$out/$p-$v.trace.jsonl"} \
			"$py" "$bench" lib "$out" "$share" "$p-$v" 2>"$out/$p-$v.log" &
		eval "job_$p=$!"
		# the next one starts when this one is done and waiting
		i=0
		while [ "$(ls "$out/linger-$v" | grep -c ready)" -lt "$([ $p = A ] && echo 1 || echo 2)" ] &&
			kill -0 $! 2>/dev/null && [ $i -lt 6000 ]; do
			sleep 0.1
			i=$((i + 1))
		done
	done
	free -b | sed "s/^/  $v: /"
	grep -E "^Shmem:|^Mlocked:" /proc/meminfo | sed "s/^/  $v: /"
	for p in A B; do
		pid=$(eval echo \$job_$p)
		kill -0 "$pid" 2>/dev/null && mem "$p-$v" "$pid" >> "$out/memory.md"
	done
	echo "| host Shmem while both ran ($v) | $(awk '$1 == "Shmem:" { print $2 }' /proc/meminfo) | | | | |" >> "$out/memory.md"
	touch "$out/linger-$v/go"
	for p in A B; do
		wait "$(eval echo \$job_$p)" || { echo "$p-$v failed:"; tail -5 "$out/$p-$v.log"; rc=1; }
		grep -E "FT_SHM|offloading \(|COMPRESSION|describes this model|entering INFERENCE" \
			"$out/$p-$v.log" | cut -c1-240 | sed "s/^/  $p-$v: /"
	done
	left=$(ls /dev/shm | grep -c "^ft-benchshm-u[0-9]*-[0-9a-f]\{32\}$")
	[ "$left" = 0 ] || { echo "$v: $left shared segments left after both exited"; rc=1; }
done
[ -n "${SHM_TRACE:-}" ] && cp "/dev/shm/ft-benchshm-u$(id -u).profile/profile.json" "$out/" 2>/dev/null
"$py" "$bench" report "$out" || rc=1
cat "$out/memory.md"
# one process filled the shared store; the other took its plan from the
# profile beside the segment and mapped all of it; the seconds each took to
# apply its plan
"$py" - "$out" "$share" <<'EOF' || rc=1
import os, sys, torch
out, share = sys.argv[1], float(sys.argv[2])
st = {p: torch.load(os.path.join(out, f"{p}-{share}.pt"))["stats"]
      for p in ("A-shm", "B-shm", "A-private", "B-private")
      if os.path.exists(os.path.join(out, f"{p}-{share}.pt"))}
a, b = st["A-shm"], st["B-shm"]
made, mapped, store = a["shm_created_bytes"], b["shm_attached_bytes"], b["offload_store_bytes"]
print(f"shared store: A filled {made / 1e9:.2f} GB, B mapped {mapped / 1e9:.2f} GB of its "
      f"{store / 1e9:.2f} GB store ({100 * mapped / store if store else 0:.1f} %) and filled "
      f"{b['shm_created_bytes'] / 1e9:.2f} GB itself")
print("plan applied in (s): " + ", ".join(
    f"{p} {s.get('offload_stage_us', 0) / 1e6:.2f}" for p, s in st.items()))
print(f"B took A's plan: {'yes' if b.get('profile_adopted') else 'no'}")
sys.exit(0 if made and b.get("profile_adopted") == 1 and mapped == made == store else 1)
EOF
exit $rc
