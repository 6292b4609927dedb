#!/bin/sh
# One scenario of offloading end to end against the fake driver (see
# offload.c), each registered as its own test (tests/preload/meson.build),
# each in its own temporary directory, so that they run in parallel and
# none depends on another having run.  Every run under the library writes
# an FT_TRACE file; checks read the counters from its closing "stats"
# record (include/ft/stats.def), and log wording only where no counter
# says the same (marked "log:").  Outputs are compared byte for byte with
# a run of the same program without the library, made here.
#
# The scenarios: the outputs of every forward are byte-identical without the
# library and with it in each transfer mode (allocation_block_transfer,
# raw_block_transfer, strategy), with a pageable store (pageable), with
# FT_OFFLOAD_TIMING=eager, whose tables appear (timing), with a forward
# captured as a CUDA graph after offloading began and replayed, in each mode
# (graph-*), replays and eager forwards in turn (mixed-*), also with copy
# kernels in the graph (mixed-kernel), with FT_VERIFY=1 (verify), and when
# the program rewrites a weight and saves another mid-run (modify); a graph
# captured before any plan is paged by a substitute once the plan offloads
# what it reads (early, early-lifo, early-verify), also with copy kernels as
# its loads (early-kernel), and FT_VERIFY=1 turns a reader inside it that
# the library cannot see into NaN (early-hidden), also with programmatic
# edges in it (early-pdl); on a restart with the profile.json of the first
# start, the plan comes after the first forward and the graph pages itself
# (early-restart), also for a model built on the device, whose first forward
# carries a stale pointer to the last weight built (built), and for forwards
# on new kernels after stale slots placed the pass wrong (prefill), also after
# cuGraphExecUpdate (update), also through the CUDA 11 ABIs of instantiation,
# update and kernel node parameters (legacy), and new kernel node
# parameters (params, also through the generic setter), not after another change to one of its nodes
# (enabled), a graph per piece of the pass at its launch boundaries
# (pieces), and when the driver refuses the clone or the substitute, what
# the graph reads stays on the GPU (early-noclone, early-nosub); a stray
# reference to a weight in a minority of the profiled passes does not keep
# its trap resident (stale), one in every pass does (shared); a stale
# pointer to a later layer's weight neither moves it in the pass nor loads
# it out of turn (stray), nor does one that a new kernel always carries to
# weights out of the pass's turn (roam); a tensor placed in a weight's free
# tail brings back only that tail (tail-*); profile.json is written (prof),
# adopted and left as it was with decode, read-only, or too few passes
# (prof-decode, prof-read_only, prof-incomplete), written per rank
# (prof-rank), its timings refreshed from eager passes (prof-refresh) or
# from graph replays and then no more timed (prof-graph); FT_OFFLOAD_TIMING=cuda_graph times every
# replay (gtime-*); over a budget smaller than the model, before any plan,
# allocations get host memory and results stay the same (over); a model
# bigger than the budget is offloaded and its profile's timings, slowed by
# the host memory while profiled, are refreshed after the plan (big); a
# worker on device 1 offloads there (device1), and leaves it to the driver
# when FT_GPU_DEVICE names another (gpu_device); two ranks of one job
# running at once on one device each offload and write their own
# profile.rank<r>.json (two_ranks); a coded store gives the same outputs
# eagerly in each block mode (zip-*), in graphs and substitutes (zip-mixed,
# zip-early); auto codes a trap only where its coded load is faster by the
# copy and decode curves (zip-auto); two processes share one host store (shm, shm-zip, shm-verify),
# also when their plans differ (shm-plans) or their discoveries found other
# weights (shm-weights), one started after another takes its plan from the
# profile it left beside the segments (shm-profile), also another rank's
# (shm-ranks),
# one's writes to its weights do not reach the other (shm-modify), and one
# refuses a damaged store (shm-damaged); the NVMe tier reads the traps
# beyond the host's share from a file (nvme, nvme-raw, nvme-verify,
# nvme-pieces, nvme-early), with cuFile into GPU memory where GPUDirect
# Storage is there, else with pread, said (nvme-cufile, nvme-cufile-zip,
# nvme-cufile-none); a stacked expert tensor read through routed
# experts' slices is paged per slice, in each block mode and under
# FT_VERIFY, with fewer bytes a slice copy than whole (stacked, stacked-raw,
# stacked-verify), also for an expert discovery never saw routed
# (stacked-hidden); two stacked tensors whose reads interleave are one
# trap, paged per slice (moe).
# usage: offload_case.sh <libflextensor.so> <offload> <case>   (KEEP=1: its
# temporary directory, logs and traces are kept)
set -u
. "$(dirname "$0")/trace_stat.sh"
lib=$1 prog=$2 case=$3
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
for v in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
fail=0
no() { echo "FAIL: $case: $*"; fail=1; }

# plain <name> [mode] [VAR=value...]: the program without the library
plain() {
	n=$1 mod=${2:-}
	shift
	[ $# -gt 0 ] && shift
	env "$@" "$prog" "$tmp/$n.bin" $mod || { echo "FAIL: $case: plain $n run"; exit 1; }
}
# launch <name> <mode or ""> VAR=value...: under the library, with a trace
launch() {
	n=$1 mod=$2
	shift 2
	env FT_PROFILING_ITERS=2 "$@" LD_PRELOAD="$lib" FT_ENABLED=1 FT_LOG_LEVEL=info \
		FT_TRACE="$tmp/$n.trace" "$prog" "$tmp/$n.bin" $mod 2>"$tmp/$n.log"
}
# spawn <name> <mode or ""> VAR=value...: launch in the background; reap: waits
# for each of them, which must exit 0 with no sanitizer report in its log
pids=""
spawn() {
	launch "$@" &
	pids="$pids $!:$1"
}
reap() {
	for p in $pids; do
		wait "${p%%:*}" || no "${p#*:} exited $?"
		! grep -q "AddressSanitizer\|runtime error" "$tmp/${p#*:}.log" ||
			no "${p#*:}: a sanitizer report"
	done
	pids=""
}
# stat <name> <counter>: the counter in the last "stats" record of the trace
stat() { trace_stat "$tmp/$1.trace" "$2"; }
# is <name> <counter> <test operator> <value>
is() {
	is_v=$(stat "$1" "$2") # (not v: cases use it)
	[ -n "$is_v" ] && test "$is_v" "$3" "$4" || { no "$1: $2 is ${is_v:-missing}, not $3 $4"; return 1; }
}
# same <reference> <name>: byte-identical outputs
same() { cmp -s "$tmp/$1.bin" "$tmp/$2.bin" || no "$2: outputs differ from $1"; }
# logs <name> <pattern>, nologs <name> <pattern>: checks on log wording that
# no counter says yet
logs() { grep -q "$2" "$tmp/$1.log" || { no "$1: log: no \"$2\""; return 1; }; }
nologs() { ! grep -q "$2" "$tmp/$1.log" || { no "$1: log: \"$2\""; return 1; }; }
# run <name> <mode or ""> VAR=value...: launch, which must succeed, enter
# INFERENCE (the trace's pass record), wait on no event recorded in a capture
# that is over (the fake driver's message), offload and copy weights back
run() {
	n=$1
	launch "$@" FT_TRANSFER_BUDGET_SCALE=1000 ||
		{ echo "FAIL: $case: $n exited $?"; tail -5 "$tmp/$n.log"; fail=1; return 1; }
	grep -qs '"ev":"pass".*"phase":"INFERENCE"' "$tmp/$n.trace" || no "$n: no INFERENCE"
	! grep -m1 "CUDA_ERROR_CAPTURED_EVENT" "$tmp/$n.log" ||
		no "$n: waited on an event recorded in a capture that is over"
	is "$n" offloaded_bytes -gt 0
	is "$n" offload_copies -gt 0
	echo "$n: offloaded $(stat "$n" offloaded_bytes) bytes, $(stat "$n" offload_copies) copies"
}
# the profile a first run writes, kept as prof-first.json
profile_first() {
	run prof "" FT_PROFILE_STORAGE_DIR="$tmp/prof" &&
		cp "$tmp/prof/profile.json" "$tmp/prof-first.json" ||
		{ echo "FAIL: $case: the first run wrote no profile.json"; exit 1; }
}
# slow_profile <profile.json> <out> <drop | ms>: the profile with 1 ms of
# compute a trap and a link of 8 MB/s, its plan kept, the plan's copy times
# dropped (a profile written before 0.3) or set to ms per offloaded trap
slow_profile() {
	python3 - "$@" <<-'EOF' || no "cannot edit the profile"
	import json, sys
	p = json.load(open(sys.argv[1]))
	for t in p["traps"]:
	    t["compute_ms"] = {"median": 1.0, "min": 1.0, "max": 1.0, "samples": t["compute_ms"]["samples"]}
	for c in p["copy_curve"]:
	    c["ms"] = c["bytes"] / 8e6 * 1e3
	for t in p["plan"]["traps"]:
	    if sys.argv[3] == "drop":
	        t.pop("copy_ms", None)
	    else:
	        t["copy_ms"] = float(sys.argv[3]) if t["block"] >= 0 else 0
	json.dump(p, open(sys.argv[2], "w"))
	EOF
}
# lingering <n>: waits (90 s at most) until n runs with OFFLOAD_LINGER=$tmp/linger
# are at their end, alive
lingering() {
	i=0
	while [ "$(ls "$tmp/linger" | grep -c ready)" -lt "$1" ] && [ $i -lt 900 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
# the shared segments in $tmp/shm (not the namespace's profile directory)
segments() { ls "$tmp/shm" | grep -v '\.profile$'; }
# the pass at which a run entered INFERENCE
inference_at() { grep -m1 '"ev":"pass".*"phase":"INFERENCE"' "$tmp/$1.trace" | sed 's/.*"passes":\([0-9]*\).*/\1/'; }
# the distinct "samples" of a profile's timings
samples() { grep -o '"samples":[[:space:]]*[0-9]*' "$1" | awk '{print $NF}' | sort -nu | tr '\n' ' '; }

case $case in
allocation_block_transfer | raw_block_transfer | strategy)
	plain plain
	run "$case" "" FT_TRANSFER_MODE="$case"
	same plain "$case"
	;;
pageable)
	plain plain
	run pageable "" FT_PINNED_MEMORY=0
	same plain pageable
	;;
timing)
	plain plain
	run timing "" FT_OFFLOAD_TIMING=eager FT_ENABLE_DIAGNOSTICS=1
	same plain timing
	logs timing "plan diagnostics: trap.13" # the FT_ENABLE_DIAGNOSTICS=1 plan table
	logs timing "offload timing, the last 10 passes" # a table every 10 passes
	# ft_offload_timing_collect's report, which the program prints
	grep -q "^Offload Timing (" "$tmp/timing.log" && grep -q "^Avg/pass" "$tmp/timing.log" ||
		no "timing: ft_offload_timing_collect gave no report"
	;;
graph-allocation_block_transfer | graph-raw_block_transfer | graph-strategy)
	# a forward captured after offloading began, replayed: the graph pages
	plain plain-graph graph
	run "$case" graph FT_TRANSFER_MODE="${case#graph-}"
	same plain-graph "$case"
	is "$case" hidden_readers -eq 0 # every replay paged
	is "$case" offload_copy_kernels -eq 0 # memcpy nodes by default
	;;
mixed-allocation_block_transfer | mixed-raw_block_transfer)
	# graph replays and eager forwards in turn, checked by FT_VERIFY too
	plain plain-mixed mixed
	run "$case" mixed FT_TRANSFER_MODE="${case#mixed-}" FT_VERIFY=1
	same plain-mixed "$case"
	is "$case" hidden_readers -eq 0
	is "$case" verify_failures -eq 0
	;;
zip-allocation_block_transfer | zip-raw_block_transfer)
	# a coded store (FT_TRANSFER_COMPRESSION=always): the same outputs,
	# fewer host bytes than offloaded, every load decoded on the GPU (the
	# fake runs the decoder as the host's reference decoder), the timing
	# table with its decode columns
	plain plain
	run "$case" "" FT_TRANSFER_MODE="${case#zip-}" FT_TRANSFER_COMPRESSION=always \
		FT_OFFLOAD_TIMING=eager
	same plain "$case"
	logs "$case" "Transfer |      med |     Wait |      med |   Decode |      med"
	is "$case" offload_coded_traps -gt 0
	is "$case" offload_decodes -gt 0
	is "$case" offload_store_bytes -lt "$(stat "$case" offloaded_bytes)"
	# fewer bytes a load than the same run's loads with a raw store
	run raw "" FT_TRANSFER_MODE="${case#zip-}"
	z=$(($(stat "$case" offload_copy_bytes) / $(stat "$case" offload_copies)))
	r=$(($(stat raw offload_copy_bytes) / $(stat raw offload_copies)))
	[ "$z" -lt "$r" ] || no "$case: $z bytes copied a load, raw $r"
	echo "$case: $z bytes copied a load, raw $r"
	# the store coded on the GPU (the weights are there when the plan is
	# applied); with a driver whose module lacks the encoder, on the host's
	# CPUs: the same image, so the same bytes held and the same outputs
	logs "$case" "FT_TRANSFER_COMPRESSION: [0-9]* of the offloaded traps coded ([1-9][0-9]* on the GPU, 0 on the host's CPUs)"
	run cpu "" FT_TRANSFER_MODE="${case#zip-}" FT_TRANSFER_COMPRESSION=always \
		FAKE_NO_KERNEL=ft_z_code
	same plain cpu
	logs cpu "FT_TRANSFER_COMPRESSION: [0-9]* of the offloaded traps coded (0 on the GPU, [1-9][0-9]* on the host's CPUs)"
	[ "$(stat cpu offload_store_bytes)" = "$(stat "$case" offload_store_bytes)" ] ||
		no "$case: the host encoder's store holds $(stat cpu offload_store_bytes) bytes, the GPU's $(stat "$case" offload_store_bytes)"
	# the GPU encoder failing halfway through a trap (the driver refuses
	# the second trap's coding pass, its image pinned and its descriptors
	# on the GPU): that trap is coded on the host instead, the same
	# outputs and store
	run half "" FT_TRANSFER_MODE="${case#zip-}" FT_TRANSFER_COMPRESSION=always \
		FAKE_FAIL=ft_z_code:2
	same plain half
	logs half "FT_TRANSFER_COMPRESSION: [0-9]* of the offloaded traps coded ([1-9][0-9]* on the GPU, 1 on the host's CPUs)"
	[ "$(stat half offload_store_bytes)" = "$(stat "$case" offload_store_bytes)" ] ||
		no "$case: after the GPU encoder failed, the store holds $(stat half offload_store_bytes) bytes, $(stat "$case" offload_store_bytes) without"
	;;
zip-auto)
	# FT_TRANSFER_COMPRESSION=auto codes a trap only where its coded load
	# beats its raw copy by the copy curve and the decoder's, timed when
	# the plan is applied.  The profile's times are set, whatever this
	# machine's speed, so that the copies outlast the compute.  With a link
	# of 16 GB/s, faster than the fake's decoder (the host's, 0.3-3 GB/s),
	# every trap stays raw (slowgpu), said, and the decoder's staging slots
	# are freed (the blocks take what they take with
	# FT_TRANSFER_COMPRESSION=none); with a link of 8 MB/s every trap is
	# coded (slowlink); with copies of 16 MiB and more taking hours, the
	# rest at 16 GB/s (mixed), the one trap of 6 MiB (copied at a rate
	# between) is coded, the 4 MiB ones are not; the plain outputs in all
	plain plain
	run prof "" FT_TRANSFER_MODE=raw_block_transfer FT_PROFILE_STORAGE_DIR="$tmp/prof"
	mkdir -p "$tmp/slowgpu" "$tmp/slowlink" "$tmp/mixed"
	python3 - "$tmp/prof/profile.json" "$tmp" <<-'EOF' || no "cannot edit the profile"
	import json, sys
	for d in ("slowgpu", "slowlink", "mixed"):
	    p = json.load(open(sys.argv[1]))
	    del p["plan"]
	    for t in p["traps"]:
	        for k in ("median", "min", "max"):
	            t["compute_ms"][k] = 1.0 if d == "slowlink" else 0.05
	    for c in p["copy_curve"]:
	        c["ms"] = c["bytes"] / (8e6 if d == "slowlink" else 16e9) * 1e3
	        if d == "mixed" and c["bytes"] >= 16 << 20:  # (a profile's ms are < 1e7)
	            c["ms"] = 5e6 if c["bytes"] == 16 << 20 else 9.9e6
	    json.dump(p, open(sys.argv[2] + "/" + d + "/profile.json", "w"))
	EOF
	for n in slowgpu slowlink mixed; do
		run "$n" "" FT_TRANSFER_MODE=raw_block_transfer FT_TRANSFER_COMPRESSION=auto \
			FT_PROFILE_STORAGE_DIR="$tmp/$n" FT_PROFILE_READ_ONLY=1
		same plain "$n"
		logs "$n" "FT_TRANSFER_COMPRESSION=auto: the decoder writes"
	done
	run slowgpu-none "" FT_TRANSFER_MODE=raw_block_transfer FT_TRANSFER_COMPRESSION=none \
		FT_PROFILE_STORAGE_DIR="$tmp/slowgpu" FT_PROFILE_READ_ONLY=1
	is slowgpu offload_coded_traps -eq 0
	logs slowgpu "14 traps kept raw: by the measured curves"
	logs slowgpu "the traps filled here take .* ms a pass as stored, .* ms raw (1.000x)"
	is slowgpu block_bytes -eq "$(stat slowgpu-none block_bytes)"
	is slowlink offload_coded_traps -eq 14
	nologs slowlink "kept raw"
	is mixed offload_coded_traps -eq 1
	logs mixed "13 traps kept raw"
	# a restart that takes its saved plan weighs its copies too: here a
	# plan saved without their times (before 0.3; they were read as 0
	# ms, and every restart stayed raw), by the slow link's curve
	mkdir -p "$tmp/again"
	slow_profile "$tmp/prof/profile.json" "$tmp/again/profile.json" drop
	run again "" FT_TRANSFER_MODE=raw_block_transfer FT_TRANSFER_COMPRESSION=auto \
		FT_PROFILE_STORAGE_DIR="$tmp/again" FT_PROFILE_READ_ONLY=1
	same plain again
	logs again "plan from the saved profile"
	is again offload_coded_traps -eq 14
	;;
zip-mixed | zip-early)
	# coded loads in graphs captured after the plan (replays and eager
	# forwards in turn) and in a substitute for a graph captured before
	# it, checked by FT_VERIFY; the fake runs ready nodes highest first,
	# so that a decode not ordered after its copy, or a slot refilled
	# before its decode, changes the outputs
	w=${case#zip-}
	plain "plain-$w" "$w"
	run "$case" "$w" FT_TRANSFER_MODE=raw_block_transfer FT_TRANSFER_COMPRESSION=always \
		FT_VERIFY=1 FAKE_GRAPH_ORDER=lifo
	same "plain-$w" "$case"
	is "$case" hidden_readers -eq 0
	is "$case" verify_failures -eq 0
	is "$case" offload_decodes -gt 0
	[ "$w" = early ] && is "$case" graphs_substituted -eq 1
	;;
shm | shm-zip | shm-verify)
	# FT_SHM_ENABLED: two processes that plan the same weights at once:
	# one fills the shared store, the other checks it against its own
	# weights and maps it (no store of its own); both give the plain
	# outputs (shm-verify: FT_VERIFY checks every block against it); the
	# segment is gone once both exited
	plain plain
	z=none v=0
	[ "$case" = shm-zip ] && z=always
	[ "$case" = shm-verify ] && v=1
	mkdir -p "$tmp/shm" "$tmp/linger"
	for n in a b; do
		spawn "shm-$n" "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
			FT_SHM_NAMESPACE=t FT_TRANSFER_COMPRESSION=$z FT_VERIFY=$v \
			OFFLOAD_LINGER="$tmp/linger"
	done
	lingering 2
	[ -n "$(segments)" ] || no "no shared segment while both run"
	touch "$tmp/linger/go"
	reap
	for n in a b; do
		same plain "shm-$n"
		is "shm-$n" offloaded_bytes -gt 0
		[ "$v" = 1 ] && is "shm-$n" verify_failures -eq 0
	done
	ca=$(stat shm-a shm_created_bytes) cb=$(stat shm-b shm_created_bytes)
	m=$(($(stat shm-a shm_attached_bytes) + $(stat shm-b shm_attached_bytes)))
	[ "$((ca + cb))" -gt 0 ] && [ "$((ca + cb))" = "$m" ] && [ "$ca" = 0 -o "$cb" = 0 ] ||
		no "created $ca and $cb bytes, attached $m: not one creator and one follower"
	[ "$m" = "$(stat shm-a offload_store_bytes)" ] || no "attached $m bytes, the store is not"
	[ -z "$(segments)" ] || no "segments left after both exited: $(segments)"
	echo "$case: created $ca + $cb bytes, attached $m"
	;;
shm-plans)
	# two processes whose plans differ (the first's profile.json keeps
	# one trap on the GPU that the second's offloads): the second maps
	# the traps both offload from the first's store and keeps the other
	# in a store of its own; both give the plain outputs
	plain plain
	profile_first
	mkdir -p "$tmp/profA" "$tmp/shm" "$tmp/linger"
	python3 - "$tmp/prof/profile.json" "$tmp/profA/profile.json" <<-'EOF' || no "cannot edit the plan"
	import json, sys
	p = json.load(open(sys.argv[1]))
	off = [t for t in p["plan"]["traps"] if t["block"] >= 0]
	off[1]["block"] = -1
	json.dump(p, open(sys.argv[2], "w"))
	EOF
	spawn shm-a "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
		FT_PROFILE_STORAGE_DIR="$tmp/profA" FT_PROFILE_READ_ONLY=1 OFFLOAD_LINGER="$tmp/linger"
	lingering 1
	spawn shm-b "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
		FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILE_READ_ONLY=1 OFFLOAD_LINGER="$tmp/linger"
	lingering 2
	touch "$tmp/linger/go"
	reap
	same plain shm-a
	same plain shm-b
	is shm-a shm_created_bytes -gt 0
	is shm-b shm_attached_bytes -gt 0
	is shm-b shm_attached_bytes -lt "$(stat shm-b offload_store_bytes)"
	logs shm-b "the others are not in it"
	echo "$case: A filled $(stat shm-a shm_created_bytes), B mapped $(stat shm-b shm_attached_bytes) of its $(stat shm-b offload_store_bytes)"
	;;
shm-weights)
	# processes whose weights were found otherwise (B and C read one
	# more weight in the last layer: their segment's key differs from
	# A's): B maps the traps A's segment holds from it and fills the one
	# it has not into its own; C, like B, maps that one from B's and the
	# rest from A's, and has no store of its own; all give their plain
	# outputs, and no segment is left once they exited.  (Each discovers
	# the model itself: a profile directory of its own, so that B and C do
	# not take A's plan, as shm-profile does)
	plain plain
	plain plain-extra "" OFFLOAD_EXTRA=1
	mkdir -p "$tmp/shm" "$tmp/linger"
	k=0
	for n in a b c; do
		x=""
		[ $n = a ] || x=OFFLOAD_EXTRA=1
		spawn "shm-$n" "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
			FT_PROFILE_STORAGE_DIR="$tmp/prof-$n" OFFLOAD_LINGER="$tmp/linger" $x
		k=$((k + 1))
		lingering $k
	done
	touch "$tmp/linger/go"
	reap
	same plain shm-a
	same plain-extra shm-b
	same plain-extra shm-c
	is shm-a shm_created_bytes -gt 0
	is shm-a shm_attached_bytes -eq 0
	is shm-b shm_attached_bytes -gt 0
	is shm-b shm_created_bytes -gt 0
	is shm-b shm_created_bytes -eq "$(($(stat shm-b offload_store_bytes) - $(stat shm-b shm_attached_bytes)))"
	is shm-c shm_attached_bytes -eq "$(stat shm-c offload_store_bytes)"
	is shm-c shm_created_bytes -eq 0
	logs shm-b "mapped from 1 segment that processes whose weights were found otherwise filled"
	logs shm-c "mapped from 1 segment that processes whose weights were found otherwise filled"
	[ -z "$(segments)" ] || no "segments left after all exited: $(segments)"
	echo "$case: A filled $(stat shm-a shm_created_bytes); B mapped $(stat shm-b shm_attached_bytes), filled $(stat shm-b shm_created_bytes); C mapped $(stat shm-c shm_attached_bytes) of its $(stat shm-c offload_store_bytes)"
	;;
shm-profile)
	# FT_SHM_ENABLED without FT_PROFILE_STORAGE_DIR: the first process
	# writes its profile beside the segments (FT_SHM_DIR/ft-<ns>-u<uid>.profile,
	# owner-only); one started after it takes that plan after one pass
	# (INFERENCE passes sooner, no profiling), offloads the same traps
	# and maps all of its store; both give the plain outputs; the profile
	# stays for the next start, the segment goes.  A directory readable by
	# others is made owner-only and used; one others may write into is
	# refused, said, and the process discovers the model itself, as it
	# does with FT_PROFILE_STORAGE_DIR=none
	plain plain
	mkdir -p "$tmp/shm" "$tmp/linger"
	spawn shm-a "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
		OFFLOAD_LINGER="$tmp/linger"
	lingering 1
	spawn shm-b "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
		OFFLOAD_LINGER="$tmp/linger"
	lingering 2
	touch "$tmp/linger/go"
	reap
	same plain shm-a
	same plain shm-b
	is shm-b profile_adopted -eq 1
	logs shm-b "describes this model on this device"
	a=$(inference_at shm-a) b=$(inference_at shm-b)
	[ -n "$b" ] && [ "$b" -lt "$a" ] || no "shm-b entered INFERENCE at pass $b, shm-a at $a"
	is shm-a shm_created_bytes -gt 0
	is shm-b shm_attached_bytes -eq "$(stat shm-b offload_store_bytes)"
	is shm-b shm_attached_bytes -eq "$(stat shm-a shm_created_bytes)"
	[ -f "$tmp/shm/ft-ft-u$(id -u).profile/profile.json" ] || no "no profile beside the segments"
	[ -z "$(segments)" ] || no "segments left after both exited: $(segments)"
	echo "$case: A entered INFERENCE at pass $a, B at pass $b; B mapped $(stat shm-b shm_attached_bytes) bytes"
	pd="$tmp/shm/ft-ft-u$(id -u).profile"
	chmod 0755 "$pd"
	run shm-c "" FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm"
	same plain shm-c
	is shm-c profile_adopted -eq 1
	m=$(ls -ld "$pd" | cut -c1-10)
	[ "$m" = drwx------ ] || no "$pd: $m, not made owner-only"
	chmod 0777 "$pd"
	run shm-d "" FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm"
	same plain shm-d
	logs shm-d "FT_SHM_ENABLED: .*profile is not a directory of this user that only this user may write"
	is shm-d profile_adopted -eq 0
	chmod 0700 "$pd"
	run shm-e "" FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" FT_PROFILE_STORAGE_DIR=none
	same plain shm-e
	is shm-e profile_adopted -eq 0
	nologs shm-e "profiles in"
	;;
shm-ranks)
	# data-parallel replicas (RANK set) keep a profile per rank
	# (profile.rank<r>.json); rank 1, finding none of its own beside the
	# segments, loads rank 0's, which describes its weights: it takes that
	# plan after one pass and maps all of its store
	plain plain
	mkdir -p "$tmp/shm" "$tmp/linger"
	for r in 0 1; do
		spawn "shm-$r" "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
			RANK=$r WORLD_SIZE=2 OFFLOAD_LINGER="$tmp/linger"
		lingering $((r + 1))
	done
	touch "$tmp/linger/go"
	reap
	same plain shm-0
	same plain shm-1
	[ -f "$tmp/shm/ft-ft-u$(id -u).profile/profile.rank0.json" ] || no "no rank 0 profile"
	logs shm-1 "loaded .*profile.rank0.json (another rank's)"
	is shm-1 profile_adopted -eq 1
	is shm-1 shm_attached_bytes -eq "$(stat shm-1 offload_store_bytes)"
	;;
shm-modify)
	# a process that rewrites a weight after the plan (modify: a host
	# copy into it after step 10) shares the store with one that does
	# not: the write brings its trap back to its own GPU memory, and the
	# store, which nothing writes, stays the other's weights
	plain plain
	plain plain-modify modify
	mkdir -p "$tmp/shm" "$tmp/linger"
	for n in a b; do
		w=""
		[ $n = a ] && w=modify
		spawn "shm-$n" "$w" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 \
			FT_SHM_DIR="$tmp/shm" OFFLOAD_LINGER="$tmp/linger"
	done
	lingering 2
	touch "$tmp/linger/go"
	reap
	same plain-modify shm-a
	same plain shm-b
	m=$(($(stat shm-a shm_attached_bytes) + $(stat shm-b shm_attached_bytes)))
	[ "$m" -gt 0 ] || no "the two processes did not share the store"
	is shm-a offload_demoted -gt 0
	;;
shm-damaged | shm-damaged-desc)
	# a segment whose bytes changed after it was filled is refused by the
	# process about to map it (its checksums, on the GPU, differ): it
	# keeps a private store, said, and gives the plain outputs; so is one
	# whose coded store's descriptors changed (a chunk's mode: the image
	# is intact, the decode would not be)
	plain plain
	z=none
	[ "$case" = shm-damaged-desc ] && z=always
	mkdir -p "$tmp/shm" "$tmp/linger"
	spawn shm-a "" FT_TRANSFER_BUDGET_SCALE=1000 FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" \
		FT_TRANSFER_COMPRESSION=$z OFFLOAD_LINGER="$tmp/linger"
	lingering 1
	seg=$(segments)
	[ -n "$seg" ] || no "no shared segment"
	if [ $z = none ]; then
		printf 'damaged' | dd of="$tmp/shm/$seg" bs=1 seek=8192 conv=notrunc 2>/dev/null
	else
		# include/ft/shm.h: the head's table offset, the entries (80
		# bytes); the first coded entry's first descriptor made raw
		python3 - "$tmp/shm/$seg" <<-'EOF' || no "cannot change a descriptor"
		import struct, sys
		f = open(sys.argv[1], "r+b")
		head = f.read(56)
		nent, table = struct.unpack_from("<I", head, 20)[0], struct.unpack_from("<Q", head, 40)[0]
		for k in range(nent):
		    f.seek(table + 80 * k)
		    e = f.read(80)
		    desc = struct.unpack_from("<Q", e, 32)[0]
		    if desc:
		        f.seek(desc)
		        d = struct.unpack("<Q", f.read(8))[0]
		        f.seek(desc)
		        f.write(struct.pack("<Q", d & ~(3 << 40)))
		        sys.exit(0)
		sys.exit(1)
		EOF
	fi
	run shm-b "" FT_SHM_ENABLED=1 FT_SHM_DIR="$tmp/shm" FT_TRANSFER_COMPRESSION=$z
	touch "$tmp/linger/go"
	reap
	same plain shm-b
	is shm-b shm_attached_bytes -eq 0
	is shm-b shm_created_bytes -eq 0
	logs shm-b "FT_SHM_ENABLED: .*: its bytes differ from what was stored"
	is shm-a shm_created_bytes -gt 0
	;;
nvme | nvme-raw | nvme-verify | nvme-pieces | nvme-early | nvme-zip | nvme-zip-verify | nvme-zip-early | \
	nvme-cufile | nvme-cufile-zip | nvme-cufile-none)
	# FT_NVME_OFFLOAD_ENABLED: the traps beyond FT_NVME_HOST_BYTES (half
	# of the store; none with nvme-verify) are read from a file ahead of
	# their copies: the plain outputs, eagerly in each block mode, with
	# FT_VERIFY, with PIECEWISE graphs paged at their launch boundaries
	# (read from the file as eager loads are); a graph captured before the
	# plan copies its traps inside itself: they move to host memory
	# (promoted).  With a coded store (nvme-zip*) the file holds the coded
	# images: fewer bytes to read.  The disk's read rate is measured before
	# the plan, which counts the disk's reads.  The file has no name: nothing is left
	# in the directory.  With FT_NVME_TRANSFER_MODE=cufile and a cuFile
	# that finds GPUDirect Storage (tests/fake/cufile) the reads go to a
	# ring in GPU memory, all of them (nvme-cufile, nvme-cufile-zip);
	# without libcufile, or without nvidia-fs (cuFile's compatibility
	# mode), the tier reads with pread, said (nvme-cufile-none).
	w="" m=allocation_block_transfer h=30000000 v=0 z=none g=posix
	case $case in
	nvme-raw) m=raw_block_transfer ;;
	nvme-verify) h=0 v=1 ;;
	nvme-pieces) w=pieces ;;
	nvme-early) w=early ;;
	nvme-zip) m=raw_block_transfer z=always ;;
	nvme-zip-verify) h=0 v=1 z=always ;;
	nvme-zip-early) w=early z=always ;;
	nvme-cufile) h=0 v=1 g=cufile ;;
	nvme-cufile-zip) m=raw_block_transfer z=always g=cufile ;;
	nvme-cufile-none) g=cufile ;;
	esac
	plain "plain$w" $w
	mkdir -p "$tmp/nvme"
	gds=$FAKE_CUFILE_DIR:$LD_LIBRARY_PATH
	if [ $case = nvme-cufile-none ]; then
		# no libcufile on the path; then one without nvidia-fs
		run "$case" "" FT_NVME_OFFLOAD_ENABLED=1 FT_NVME_OFFLOAD_PATH="$tmp/nvme" \
			FT_NVME_HOST_BYTES=$h FT_NVME_TRANSFER_MODE=cufile
		# (a host with GPUDirect Storage has a libcufile of its own)
		ldconfig -p 2>/dev/null | grep -q libcufile.so.0 ||
			logs "$case" "FT_NVME_TRANSFER_MODE=cufile: libcufile.so.0 cannot be loaded .*reads with pread"
		# without nvidia-fs; with GPU buffers cuFile does not register;
		# with reads that fail (after that, through the host into the
		# GPU ring)
		for f in no-nvfs no-register read-fails; do
			run "$f" "" FT_NVME_OFFLOAD_ENABLED=1 FT_NVME_OFFLOAD_PATH="$tmp/nvme" \
				FT_NVME_HOST_BYTES=$h FT_NVME_TRANSFER_MODE=cufile \
				LD_LIBRARY_PATH="$gds" FAKE_CUFILE=$f
			same plain "$f"
			is "$f" nvme_reads -gt 0
			is "$f" nvme_cufile_reads -eq 0
		done
		logs no-nvfs "FT_NVME_TRANSFER_MODE=cufile: nvidia-fs is not loaded.*reads with pread"
		logs no-register "cannot be allocated and registered with cuFile.*reads with pread"
		logs read-fails "cuFile could not read trap .*reads with pread and copies to the GPU"
		is read-fails offload_stuck -eq 0
	else
		run "$case" "$w" FT_TRANSFER_MODE=$m FT_NVME_OFFLOAD_ENABLED=1 FT_NVME_OFFLOAD_PATH="$tmp/nvme" \
			FT_NVME_HOST_BYTES=$h FT_VERIFY=$v FT_TRANSFER_COMPRESSION=$z \
			FT_NVME_TRANSFER_MODE=$g LD_LIBRARY_PATH="$gds"
	fi
	same "plain$w" "$case"
	if [ $g = cufile ] && [ $case != nvme-cufile-none ]; then
		# every read of the reader thread by cuFile, into GPU memory (the
		# executor's own, its misses, through the host: it holds the
		# engine's lock, which cuFile's driver calls could wait for)
		is "$case" nvme_cufile_reads -gt 0
		is "$case" nvme_cufile_reads -eq $(($(stat "$case" nvme_reads) - $(stat "$case" nvme_misses)))
		logs "$case" "FT_NVME_TRANSFER_MODE=cufile: the NVMe tier reads with GPUDirect Storage"
		# cuFile's own driver calls pass the hooks untouched: the
		# program's copies counted are the same when its reads copy
		# through the (preloaded) driver
		run callback "$w" FT_TRANSFER_MODE=$m FT_NVME_OFFLOAD_ENABLED=1 \
			FT_NVME_OFFLOAD_PATH="$tmp/nvme" FT_NVME_HOST_BYTES=$h FT_VERIFY=$v \
			FT_TRANSFER_COMPRESSION=$z FT_NVME_TRANSFER_MODE=$g LD_LIBRARY_PATH="$gds" \
			FAKE_CUFILE=callback
		same "plain$w" callback
		is callback nvme_cufile_reads -gt 0
		is callback copies -eq "$(stat "$case" copies)"
	else
		is "$case" nvme_cufile_reads -eq 0
	fi
	is "$case" nvme_bytes -gt 0
	is "$case" offload_stuck -eq 0
	held=$(($(stat "$case" nvme_bytes) + $(stat "$case" offload_store_bytes)))
	if [ $z = none ]; then
		[ "$held" = "$(stat "$case" offloaded_bytes)" ] ||
			no "$case: the file and the host do not hold the store"
	else
		[ "$held" -lt "$(stat "$case" offloaded_bytes)" ] || no "$case: the file holds no coded images"
		is "$case" offload_decodes -gt 0
	fi
	is "$case" offload_store_bytes -le "$h"
	[ "$v" = 1 ] && is "$case" verify_failures -eq 0
	if [ "$w" = early ]; then
		# a promoted trap's bytes come from the file, then decode as
		# the host store's do
		is "$case" nvme_promoted -gt 0
	else
		is "$case" nvme_reads -gt 0
		is "$case" nvme_promoted -eq 0
	fi
	[ -z "$(ls "$tmp/nvme")" ] || no "$case: files left in FT_NVME_OFFLOAD_PATH"
	logs "$case" "FT_NVME_OFFLOAD_ENABLED: .* MiB of the store in a file"
	# the disk's rate, measured before the plan, which counts its reads
	logs "$case" "FT_NVME_OFFLOAD_PATH=.* reads at .* GB/s" &&
		logs "$case" "plan: the NVMe tier reads .* MiB a pass beyond the host's"
	echo "$case: $(stat "$case" nvme_bytes) bytes in the file, $(stat "$case" nvme_reads) reads, $(stat "$case" nvme_misses) misses, $(stat "$case" nvme_promoted) promoted"
	;;
mixed-kernel)
	# the same with FT_GRAPH_COPY=kernel: the copies captured into the
	# graph are copy kernels reading the host store (FT_VERIFY checks
	# every block they filled); the fake runs ready nodes highest first,
	# so that a missing edge changes the outputs
	plain plain-mixed mixed
	run "$case" mixed FT_TRANSFER_MODE=raw_block_transfer FT_GRAPH_COPY=kernel FT_VERIFY=1 \
		FAKE_GRAPH_ORDER=lifo
	same plain-mixed "$case"
	is "$case" hidden_readers -eq 0
	is "$case" verify_failures -eq 0
	is "$case" offload_copy_kernels -gt 0
	;;
early | early-lifo)
	# a graph captured before any plan (the application destroys its
	# graph after instantiating it): once the plan offloads what it reads,
	# a substitute with the loads added runs in its place; the fake runs
	# a graph's ready nodes lowest first, or highest first (lifo), so that
	# a missing edge before or after a copy changes the outputs
	order=fifo
	[ "$case" = early-lifo ] && order=lifo
	plain plain-early early
	launch early early FT_TRANSFER_BUDGET_SCALE=1000 FAKE_GRAPH_ORDER=$order ||
		{ echo "FAIL: $case: early graph run"; tail -5 "$tmp/early.log"; fail=1; }
	same plain-early early
	is early graphs_kept -eq 1
	is early graphs_substituted -eq 1
	is early offloaded_bytes -gt 0
	is early graph_kept_traps -eq 0 # nothing kept resident for the graph
	is early hidden_readers -eq 0 # every replay paged
	is early offload_copies -gt 0
	;;
early-verify)
	# the same with FT_VERIFY=1: no block read where the executor did not
	# load it
	plain plain-early early
	run early early FT_VERIFY=1
	same plain-early early
	is early graphs_substituted -eq 1
	is early verify_failures -eq 0
	;;
early-kernel)
	# a substitute whose loads are copy kernels, checked by FT_VERIFY too
	# (a kernel node that read a block before its copy kernel wrote it
	# would read NaN)
	plain plain-early early
	run early early FT_GRAPH_COPY=kernel FT_VERIFY=1 FAKE_GRAPH_ORDER=lifo
	same plain-early early
	is early graphs_substituted -eq 1
	is early verify_failures -eq 0
	is early offload_copy_kernels -gt 0
	;;
early-pdl)
	# programmatic edges in the graph (offload.c pdl): the substitute keeps
	# them and is built (no second edge beside one), with FT_VERIFY=1 too,
	# where every kernel node is joined
	plain plain-pdl pdl
	run pdl pdl
	same plain-pdl pdl
	is pdl graphs_substituted -eq 1
	run pdl-verify pdl FT_VERIFY=1
	same plain-pdl pdl-verify
	is pdl-verify graphs_substituted -eq 1
	;;
early-restart)
	# a restart with the profile.json the first start wrote: the plan comes
	# at the end of the first forward (before pass detection has found a
	# boundary), before the capture at step 1, as a serving engine captures
	# right after its profile forward, so the graph is planned as it is
	# instantiated (kept, substituted: FT_GRAPH_PAGING=instantiate), or
	# pages itself in its capture (nothing kept, nothing substituted:
	# capture); outputs as without the library, every time
	plain plain-early early
	run early early FT_PROFILE_STORAGE_DIR="$tmp/prof"
	same plain-early early
	is early graphs_substituted -eq 1
	plain plain-first early OFFLOAD_CAPTURE_AT=1
	run restart early FT_PROFILE_STORAGE_DIR="$tmp/prof" OFFLOAD_CAPTURE_AT=1
	same plain-first restart
	is restart profile_adopted -eq 1
	is restart graphs_kept -eq 1
	is restart graphs_substituted -eq 1
	is restart hidden_readers -eq 0
	logs restart "the first forward) read the weights of the saved profile, with their contents: entering INFERENCE"
	run restart-capture early FT_PROFILE_STORAGE_DIR="$tmp/prof" OFFLOAD_CAPTURE_AT=1 \
		FT_GRAPH_PAGING=capture
	same plain-first restart-capture
	is restart-capture profile_adopted -eq 1
	is restart-capture graphs_kept -eq 0
	is restart-capture graphs_substituted -eq 0
	is restart-capture hidden_readers -eq 0
	;;
built)
	# the model built on the device (each weight written by a kernel) and
	# restarted with the first start's profile.json: the plan comes once
	# the building kernels wrote the weights, before the first forward,
	# whose first new kernel carries a stale pointer to the last weight
	# built (no statistics of that kernel mark it yet): it must not place
	# the pass there and have the layers' reads taken for roaming ones
	# (they would load nothing; on an H100 a restart loaded nothing and
	# gave wrong logits)
	plain plain built
	run first built FT_PROFILE_STORAGE_DIR="$tmp/prof"
	same plain first
	run restart built FT_PROFILE_STORAGE_DIR="$tmp/prof"
	same plain restart
	is restart profile_adopted -eq 1
	is restart offload_ignored_refs -eq 0
	is restart offload_roaming_refs -eq 0
	;;
early-hidden)
	# the captured forward also reads layer 5's first weight through an
	# address in device memory, which no parameter shows: with FT_VERIFY=1
	# the substitute poisons every block a node is not seen to read, so
	# the read gives NaN from the first replay after the plan on (without
	# the library, none)
	plain plain-hidden hidden >"$tmp/plain-hidden.out"
	grep -q "outputs with NaN: 0" "$tmp/plain-hidden.out" || no "plain hidden run: NaN"
	run hidden hidden FT_VERIFY=1 >"$tmp/hidden.out"
	is hidden graphs_substituted -eq 1
	n=$(sed -n 's/^outputs with NaN: //p' "$tmp/hidden.out")
	[ "${n:-0}" -gt 0 ] || no "hidden: FT_VERIFY=1 did not turn the unseen read into NaN"
	echo "hidden: $n outputs with NaN"
	;;
update)
	# the executable updated with a new capture of the forward after the
	# plan (cuGraphExecUpdate): that capture is kept and the executable
	# substituted again (FT_GRAPH_PAGING=instantiate); or (capture) it
	# pages itself, and the loads in it change its topology, so the
	# driver refuses the update the application's graphs allow; the new
	# graph's executable runs in the executable's place (the update
	# succeeds, as without the library)
	plain plain-update update
	run update update FAKE_GRAPH_ORDER=lifo
	same plain-update update
	is update graphs_kept -eq 2
	is update graphs_substituted -eq 2
	is update hidden_readers -eq 0
	run update-capture update FAKE_GRAPH_ORDER=lifo FT_GRAPH_PAGING=capture
	same plain-update update-capture
	is update-capture graphs_kept -eq 1
	is update-capture graphs_substituted -eq 2
	is update-capture hidden_readers -eq 0
	;;
legacy)
	# executables made and updated through the CUDA 10.2-11 ABIs
	# (cuGraphInstantiate_v2, cuGraphExecUpdate), found as a CUDA 11
	# runtime finds them: paged as through today's (unhooked, a graph
	# captured before the plan read blocks holding other traps)
	plain plain-early early OFFLOAD_LEGACY=1
	run early early OFFLOAD_LEGACY=1 FAKE_GRAPH_ORDER=lifo
	same plain-early early
	is early graphs_substituted -eq 1
	is early hidden_readers -eq 0
	plain plain-update update OFFLOAD_LEGACY=1
	run update update OFFLOAD_LEGACY=1 FAKE_GRAPH_ORDER=lifo
	same plain-update update
	is update graphs_substituted -eq 2
	plain plain-pieces pieces OFFLOAD_LEGACY=1
	run pieces pieces OFFLOAD_LEGACY=1 FAKE_GRAPH_ORDER=lifo
	same plain-pieces pieces
	is pieces graphs_boundary -gt 0
	# a kernel node changed through those ABIs' setters
	# (cuGraph[Exec]KernelNodeSetParams): the substitute made again; in
	# an executable with no clone, the graph's node changed first
	plain plain-params params OFFLOAD_LEGACY=1
	run params params OFFLOAD_LEGACY=1 FAKE_GRAPH_ORDER=lifo
	same plain-params params
	is params graphs_substituted -eq 2
	plain plain-late params OFFLOAD_LEGACY=1 OFFLOAD_CAPTURE_AT=12
	launch first params FT_TRANSFER_BUDGET_SCALE=1000 FAKE_GRAPH_ORDER=lifo OFFLOAD_LEGACY=1 \
		OFFLOAD_CAPTURE_AT=12 FT_GRAPH_PAGING=capture OFFLOAD_GRAPH_FIRST=1 ||
		no "first run exited $?"
	same plain-late first
	is first offload_demoted -gt 0
	;;
params)
	# a kernel node of the substituted executable gets new parameters (it
	# reads another layer's weight): the substitute is built again from the
	# changed clone, reading the nodes' parameters anew
	plain plain-params params
	run params params FAKE_GRAPH_ORDER=lifo
	same plain-params params
	is params graphs_substituted -eq 2
	is params graphs_resident -eq 0
	is params hidden_readers -eq 0
	# the same through the generic setter (cuGraphExecNodeSetParams)
	run generic params FAKE_GRAPH_ORDER=lifo OFFLOAD_GENERIC=1
	same plain-params generic
	is generic graphs_substituted -eq 2
	is generic graphs_resident -eq 0
	is generic hidden_readers -eq 0
	# captured after the plan, paging itself (its loads in it, no clone
	# to plan it again from): the node now reads a trap it did not, which
	# comes back to the GPU for good before the new parameters run
	plain plain-late params OFFLOAD_CAPTURE_AT=12
	launch late params FT_TRANSFER_BUDGET_SCALE=1000 FAKE_GRAPH_ORDER=lifo \
		OFFLOAD_CAPTURE_AT=12 FT_GRAPH_PAGING=capture || no "late run exited $?"
	same plain-late late
	is late offload_copies -gt 0 # (offloaded until then)
	is late graphs_substituted -eq 0
	is late offload_demoted -gt 0
	logs late "cannot page again got new parameters"
	# the same after the node changed in the application's graph first:
	# the executable's change is then compared with that (it would have
	# shown nothing new), so the graph's change brings the trap back
	launch first params FT_TRANSFER_BUDGET_SCALE=1000 FAKE_GRAPH_ORDER=lifo \
		OFFLOAD_CAPTURE_AT=12 FT_GRAPH_PAGING=capture OFFLOAD_GRAPH_FIRST=1 ||
		no "first run exited $?"
	same plain-late first
	is first offload_demoted -gt 0
	logs first "(cuGraphKernelNodeSetParams): those come back"
	;;
enabled)
	# a node of the substituted executable switched (cuGraphNodeSetEnabled):
	# the substitute cannot follow, so what the graph reads comes back to
	# the GPU and the application's executable runs
	plain plain-enabled enabled
	launch enabled enabled FT_TRANSFER_BUDGET_SCALE=1000 FAKE_GRAPH_ORDER=lifo ||
		no "enabled run exited $?"
	same plain-enabled enabled
	is enabled graphs_substituted -eq 1
	is enabled graphs_resident -eq 1
	is enabled offload_demoted -gt 0
	is enabled hidden_readers -eq 0
	;;
pieces)
	# a graph per piece of the forward (embedding, each layer, head), with
	# eager work between them, all captured before any plan: replays'
	# launches feed pass detection, and pieces reading traps with blocks
	# of their own are paged at their launch boundaries
	plain plain-pieces pieces
	run pieces pieces FAKE_GRAPH_ORDER=lifo
	same plain-pieces pieces
	is pieces graphs_boundary -gt 0
	is pieces offloaded_bytes -gt 0
	is pieces hidden_readers -eq 0
	is pieces passes_graph -eq 0 # no replay taken for a whole pass
	# the same pieces captured after the plan (FT_GRAPH_PAGING=instantiate):
	# planned as they are instantiated, paged at their launch boundaries,
	# none substituted; with capture, each pages itself
	run pieces-late pieces FAKE_GRAPH_ORDER=lifo OFFLOAD_PIECES_AT=20
	same plain-pieces pieces-late
	is pieces-late graphs_boundary -gt 0
	is pieces-late graphs_substituted -eq 0
	is pieces-late hidden_readers -eq 0
	nologs pieces-late "CUDA graphs captured before the plan" # (after it)
	# layers 0 and 1 in one graph, made by two captures (the second into
	# the first's graph with cuStreamBeginCaptureToGraph): both captures'
	# traps are loaded at its launch boundary
	plain plain-joined pieces OFFLOAD_PIECES_AT=20 OFFLOAD_PIECES_JOINED=1
	run pieces-joined pieces FAKE_GRAPH_ORDER=lifo OFFLOAD_PIECES_AT=20 OFFLOAD_PIECES_JOINED=1
	same plain-joined pieces-joined
	is pieces-joined graphs_boundary -gt 0
	is pieces-joined hidden_readers -eq 0
	run pieces-capture pieces FAKE_GRAPH_ORDER=lifo OFFLOAD_PIECES_AT=20 FT_GRAPH_PAGING=capture
	same plain-pieces pieces-capture
	is pieces-capture graphs_boundary -eq 0
	is pieces-capture hidden_readers -eq 0
	;;
late-noclone)
	# a graph captured after the plan that the driver refuses to clone:
	# planned at instantiation, it cannot be, so what it reads comes back
	# to the GPU (FT_GRAPH_PAGING=instantiate); with capture it pages
	# itself; outputs as without the library both times
	plain plain-graph graph
	launch late graph FT_TRANSFER_BUDGET_SCALE=1000 FAKE_FAIL=cuGraphClone:1+ ||
		no "late run exited $?"
	same plain-graph late
	is late graphs_kept -eq 0
	is late graphs_resident -eq 1
	is late offload_demoted -gt 0
	is late hidden_readers -eq 0
	launch late-capture graph FT_TRANSFER_BUDGET_SCALE=1000 FAKE_FAIL=cuGraphClone:1+ \
		FT_GRAPH_PAGING=capture || no "late-capture run exited $?"
	same plain-graph late-capture
	is late-capture graphs_resident -eq 0
	is late-capture hidden_readers -eq 0
	;;
early-noclone)
	# the driver refuses to clone the graph: what it reads stays resident
	plain plain-early early
	launch early early FT_TRANSFER_BUDGET_SCALE=1000 FAKE_FAIL=cuGraphClone:1+ ||
		no "early run exited $?"
	same plain-early early
	is early graphs_kept -eq 0
	is early graph_kept_traps -gt 0
	is early hidden_readers -eq 0
	;;
early-nosub)
	# the substitute cannot be built (the driver refuses the capture into
	# the clone): what the graph reads comes back to the GPU for good
	plain plain-early early
	launch early early FT_TRANSFER_BUDGET_SCALE=1000 FAKE_FAIL=cuStreamBeginCaptureToGraph:1+ ||
		no "early run exited $?"
	same plain-early early
	is early graphs_resident -eq 1
	is early offload_demoted -gt 0
	is early hidden_readers -eq 0
	;;
stale)
	# a stray reference to layer 1's weight in a minority of the profiled
	# passes: still offloaded
	plain plain
	run stale stale FT_PROFILING_ITERS=4
	same plain stale
	is stale shared_weights -eq 0
	;;
shared)
	# the same reference in every pass: layer 1's weight stays resident;
	# the launch that reads it with layer 4's makes no pair of traps read
	# together (it was one, from before the weight was known to be shared)
	plain plain
	run shared shared FT_PROFILING_ITERS=4 FT_PROFILE_STORAGE_DIR="$tmp/prof"
	same plain shared
	is shared shared_weights -gt 0
	grep -q '"coread":[[:space:]]*\[[[:space:]]*\]' "$tmp/prof/profile.json" ||
		no "shared: traps read together in profile.json: $(tr -d ' \t\n' <"$tmp/prof/profile.json" |
			grep -o '"coread":\[[][0-9,]*\]')"
	;;
stray)
	# a stale pointer to layer 4's weight after layer 0, every forward:
	# layer 4 keeps its place in the pass and is copied no more often
	plain plain
	run base "" FT_TRANSFER_MODE=allocation_block_transfer
	run stray stray
	same plain stray
	c0=$(stat base offload_copies)
	is stray offload_copies -eq "${c0:-missing}"
	is stray refs_stale -gt 0
	;;
grouped)
	# a kernel reads the weight the kernel before it read through an
	# address in device memory (a grouped GEMM's pointer array): no block
	# changes between the two launches without FT_VERIFY, and with it
	# neither (it once poisoned every block at the second launch)
	plain plain-grouped grouped
	run grouped grouped FT_VERIFY=1
	same plain-grouped grouped
	is grouped verify_failures -eq 0
	is grouped offloaded_bytes -gt 0
	# that kernel's word it does not read holds another layer's weight
	# once (Mixtral's grouped GEMM on the H100): the weight it reads
	# through the table stays in its block (it was released and
	# poisoned under FT_VERIFY: NaN)
	run stray grouped FT_VERIFY=1 OFFLOAD_GROUPED_STRAY=20
	same plain-grouped stray
	is stray verify_failures -eq 0
	is stray offload_table_holds -gt 0
	# the same word holding the next layer's weight: in the pass's turn,
	# it moves the pass, from a word not known to read in turn: the
	# table's weight is held too (else poisoned before the read)
	run ahead grouped FT_VERIFY=1 OFFLOAD_GROUPED_STRAY=20 OFFLOAD_GROUPED_STRAY_BY=1
	same plain-grouped ahead
	is ahead verify_failures -eq 0
	is ahead offload_table_holds -gt 0
	# and without FT_VERIFY: the move's prefetch would load the next
	# layer's weight over the table's
	run ahead-eager grouped OFFLOAD_GROUPED_STRAY=20 OFFLOAD_GROUPED_STRAY_BY=1
	same plain-grouped ahead-eager
	is ahead-eager offload_table_holds -gt 0
	;;
experts)
	# experts in allocations of their own, two of sixteen read per forward:
	# not weights, they stay on the GPU, and discovery says so
	plain plain-experts experts
	run experts experts
	same plain-experts experts
	logs experts "a mixture-of-experts model's experts"
	;;
stacked | stacked-raw | stacked-verify)
	# a stacked expert tensor read through two routed experts' slices a
	# forward: one weight, paged per slice (FT_EXPERT_PAGING); the same
	# outputs, fewer bytes a slice copy than the whole tensor.  In
	# discovery's first pass the experts it routes to are read in every
	# pass so far (no views yet); the tensor's extent changes when they
	# become views, and discovery takes one more pass to check it twice
	plain plain-stacked stacked
	case $case in
	stacked) x=FT_TRANSFER_MODE=allocation_block_transfer ;;
	stacked-raw) x=FT_TRANSFER_MODE=raw_block_transfer ;;
	stacked-verify) x=FT_VERIFY=1 ;;
	esac
	run "$case" stacked "$x"
	same plain-stacked "$case"
	is "$case" offload_slice_copies -gt 0
	is "$case" offload_sliced_bytes -gt 0
	is "$case" verify_failures -eq 0
	logs "$case" "FT_EXPERT_PAGING: 1 offloaded traps hold"
	if [ "$case" = stacked-verify ]; then
		# a kernel that writes into a routed expert (through its
		# address in device memory), the trap loaded in part (two
		# slices): FT_VERIFY checks those parts and says so (it checked
		# sliced traps only when loaded whole)
		run spoil stacked FT_VERIFY=1 OFFLOAD_SPOIL_STEP=22
		is spoil verify_failures -gt 0
		logs spoil "FT_VERIFY: offloaded trap .* changed in its block (loaded in part"
		# over 80 forwards each piece's sum of the store is taken once
		# (without the cache: 472 MiB summed for 64 MiB of slices)
		run sums stacked FT_VERIFY=1 OFFLOAD_STEPS=80
		is sums verify_failures -eq 0
		is sums verify_summed_bytes -gt 0
		is sums verify_summed_bytes -le "$(stat sums offload_sliced_bytes)"
	fi
	logs "$case" "discovery: regions whose extent changed.*one more pass"
	run whole stacked FT_EXPERT_PAGING=0 "$x"
	same plain-stacked whole
	is whole offload_slice_copies -eq 0
	# FT_TRANSFER_COMPRESSION=auto, where coding pays (the profile's link
	# made slow, its compute long; its plan kept), leaves the sliced trap
	# raw: a coded trap loads whole
	run prof stacked FT_PROFILE_STORAGE_DIR="$tmp/prof" "$x"
	# a restart takes the slices from profile.json (its one discovery
	# pass cannot tell them)
	run again stacked FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILE_READ_ONLY=1 "$x"
	same plain-stacked again
	is again profile_adopted -eq 1
	is again offload_slice_copies -gt 0
	# the experts its pass did not read are views of the tensor, not
	# tensors placed in its tail (2 and 2 before)
	is again offload_foreign_refs -eq 0
	is again offload_tails -eq 0
	mkdir -p "$tmp/slow"
	slow_profile "$tmp/prof/profile.json" "$tmp/slow/profile.json" 100
	run auto stacked FT_TRANSFER_COMPRESSION=auto FT_PROFILE_STORAGE_DIR="$tmp/slow" \
		FT_PROFILE_READ_ONLY=1 "$x"
	same plain-stacked auto
	logs auto "FT_TRANSFER_COMPRESSION=auto: 1 traps kept raw: their stacked experts are paged per expert"
	is auto offload_slice_copies -gt 0
	is auto offload_coded_traps -gt 0
	# a slice copied on its own holds fewer bytes than the stacked tensor
	# (the runs' totals differ with their plans, made from timings)
	a=$(($(stat "$case" offload_slice_bytes) / $(stat "$case" offload_slice_copies)))
	b=$(stat "$case" offload_sliced_bytes)
	[ "$a" -lt "$b" ] || no "$case: $a bytes copied a slice, of a $b-byte stacked tensor"
	echo "$case: $a bytes a slice copy of $b ($(stat "$case" offload_slice_copies) slices," \
		"$(stat "$case" offload_slice_wholes) whole); bytes copied $(stat "$case" offload_copy_bytes)," \
		"$(stat whole offload_copy_bytes) with whole traps"
	;;
stacked-hidden)
	# an expert that no forward routes to before step 16 (discovery never
	# sees its start: the slice before it runs on to the next expert's):
	# read at step 23 from the word that reads one slice at a time, it is
	# copied with the slice that holds it, not with every slice of the
	# tensor, and the outputs are the plain ones
	plain plain-hidden stacked OFFLOAD_HIDDEN_EXPERT=3
	run "$case" stacked OFFLOAD_HIDDEN_EXPERT=3
	same plain-hidden "$case"
	is "$case" offload_slice_copies -gt 0
	is "$case" verify_failures -eq 0
	nologs "$case" "every slice of trap [0-9]* loaded .*refers to no slice's start"
	run hidden-verify stacked OFFLOAD_HIDDEN_EXPERT=3 FT_VERIFY=1
	same plain-hidden hidden-verify
	is hidden-verify verify_failures -eq 0
	;;
moe)
	# a loop over two routed experts of two stacked tensors, an expert's
	# up slice then its down slice: the tensors' reads interleave, so they
	# are one trap (apart, the first would be read again after the
	# second's trap began, and stay on the GPU as read all over the pass),
	# paged per expert
	plain plain-moe moe
	run moe moe
	same plain-moe moe
	logs moe "weights whose reads interleave.*joined"
	is moe shared_weights -eq 0
	is moe offload_slice_copies -gt 0
	;;
prefill)
	# every other forward on new kernels after stale slots that place the
	# pass at layer 3 (sure, and wrong): the new GEMM word must not be
	# judged roaming and layers dropped; the shadow moves the position
	plain plain-prefill prefill
	run prefill prefill
	same plain-prefill prefill
	is prefill offload_relocations -gt 0
	is prefill offload_roaming_refs -eq 0
	;;
roam)
	# a new kernel whose word always points three layers on: four loads (a
	# few misses each), then the word is taken for stale
	plain plain-roam roam
	run base "" FT_TRANSFER_MODE=allocation_block_transfer
	run roam roam
	same plain-roam roam
	c0=$(stat base offload_copies)
	is roam offload_copies -le $((${c0:-0} + 16))
	is roam offload_roaming_refs -gt 0
	;;
tail-allocation_block_transfer | tail-raw_block_transfer)
	# a tensor placed in a weight's free tail after discovery: that tail
	# comes back to the GPU, the trap stays offloaded
	plain plain-tail tail
	run "$case" tail FT_TRANSFER_MODE="${case#tail-}" FT_VERIFY=1
	same plain-tail "$case"
	is "$case" offload_tails -eq 1
	is "$case" offload_demoted -eq 0
	is "$case" verify_failures -eq 0
	;;
tail-hidden)
	# that tensor written first where the library cannot see, while its
	# trap is in its block: the tail that comes back keeps its bytes
	plain plain-hidden tail OFFLOAD_TAIL_HIDDEN=1
	for m in allocation_block_transfer raw_block_transfer; do
		run "$case-$m" tail OFFLOAD_TAIL_HIDDEN=1 FT_TRANSFER_MODE=$m
		same plain-hidden "$case-$m"
		is "$case-$m" offload_tails -eq 1
		is "$case-$m" offload_demoted -eq 0
	done
	# FT_VERIFY's journal (ft_verify_journal): the launches with the
	# traps they read, the loads, the releases, the tail given back;
	# none without FT_VERIFY
	j=$tmp/journal.txt
	run journal tail OFFLOAD_TAIL_HIDDEN=1 FT_VERIFY=1 OFFLOAD_JOURNAL="$j" >"$tmp/journal.out"
	same plain-hidden journal
	grep -q "^journal: 0$" "$tmp/journal.out" || no "journal: not written"
	for l in ' L .* read=\[[0-9][0-9,h]*\] occ=\[' ' L .* refs=\[.*t[0-9]*/w[0-9]*+[0-9a-f]*b' \
		' D t=[0-9]* b=[0-9]' ' R b=[0-9]* t=[0-9]' ' T t=[0-9]* w=[0-9]* a=' ' C s='; do
		grep -q "^[0-9]*$l" "$j" || no "journal: no line like '$l'"
	done
	run nojournal tail OFFLOAD_TAIL_HIDDEN=1 OFFLOAD_JOURNAL="$tmp/none.txt" >"$tmp/nojournal.out"
	grep -q "^journal: -1$" "$tmp/nojournal.out" || no "journal without FT_VERIFY: not refused"
	;;
prof)
	# a first run writes profile.json (2 profiled passes)
	profile_first
	;;
prof-decode | prof-read_only | prof-incomplete)
	# a second run adopts profile.json; with decode (no graph replays in
	# this program), read-only, or too few passes before exit, the file
	# stays as it was
	profile_first
	case $case in
	prof-decode) run "$case" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 ;;
	prof-read_only) run "$case" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 \
		FT_VLLM_TIMING_BATCH=prefill FT_PROFILE_READ_ONLY=1 ;;
	prof-incomplete) run "$case" "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=500 \
		FT_VLLM_TIMING_BATCH=prefill ;;
	esac
	is "$case" profile_adopted -eq 1
	cmp -s "$tmp/prof/profile.json" "$tmp/prof-first.json" || no "profile.json changed"
	case $case in
	prof-decode) is "$case" refresh_passes -eq 0 && is "$case" profile_refreshes -eq 0 ;;
	prof-incomplete) is "$case" refresh_passes -gt 0 && is "$case" profile_refreshes -eq 0 ;;
	esac
	;;
prof-rank)
	# rank 1 of a job of two writes its own file, beside rank 0's
	profile_first
	run prof-rank "" FT_PROFILE_STORAGE_DIR="$tmp/prof" RANK=1 WORLD_SIZE=2
	[ -f "$tmp/prof/profile.rank1.json" ] && cmp -s "$tmp/prof/profile.json" "$tmp/prof-first.json" ||
		no "no profile.rank1.json, or profile.json changed"
	;;
prof-refresh)
	# an adopted profile.json's timings rewritten, with
	# FT_VLLM_TIMING_BATCH=prefill, from 3 timed eager passes
	plain plain
	profile_first
	run prof-refresh "" FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3 \
		FT_VLLM_TIMING_BATCH=prefill
	same plain prof-refresh
	is prof-refresh refresh_passes -eq 3 && is prof-refresh profile_refreshes -eq 1
	[ "$(samples "$tmp/prof/profile.json")" = "3 " ] && [ "$(samples "$tmp/prof-first.json")" != "3 " ] &&
		[ "$(grep '"fingerprint"' "$tmp/prof/profile.json")" = "$(grep '"fingerprint"' "$tmp/prof-first.json")" ] ||
		no "samples $(samples "$tmp/prof-first.json")-> $(samples "$tmp/prof/profile.json")"
	;;
prof-graph)
	# with decode, a program replaying a graph captured after the plan
	# rewrites them from 3 replays
	plain plain-graph graph
	profile_first
	run prof-graph graph FT_PROFILE_STORAGE_DIR="$tmp/prof" FT_PROFILING_ITERS=3
	same plain-graph prof-graph
	logs prof-graph "refreshed from the first 3 CUDA graph replays" &&
		is prof-graph refresh_passes -eq 3 && is prof-graph profile_refreshes -eq 1
	is prof-graph timed_replays -eq 3
	! cmp -s "$tmp/prof/profile.json" "$tmp/prof-first.json" ||
		no "profile.json not refreshed from graph replays"
	;;
prof-graph-resident)
	# the same at a budget that keeps some traps on the GPU (32 MiB
	# tensors, 288 of 450 MiB offloaded): the restart's graph, captured
	# after the plan, is substituted, and its readers of resident traps
	# are timed too, or no replay would time every trap
	plain plain-big-graph graph OFFLOAD_MIB=32
	for n in pgr-first pgr; do
		launch $n graph OFFLOAD_MIB=32 FT_MAX_GPU_MEM_FRACTION=0.0366 \
			FT_PROFILE_STORAGE_DIR="$tmp/prof-pgr" FT_PROFILING_ITERS=3 ||
			no "$n run exited $?"
	done
	same plain-big-graph pgr
	is pgr profile_adopted -eq 1
	is pgr graphs_substituted -eq 1
	is pgr refresh_passes -eq 3 && is pgr profile_refreshes -eq 1
	# then its substitute is rebuilt without the events (they cost the
	# replays time): no replay after the third is timed
	is pgr timed_replays -eq 3
	;;
gtime-allocation_block_transfer | gtime-raw_block_transfer)
	# FT_OFFLOAD_TIMING=cuda_graph: every replay of the graph captured after
	# the plan is a timed pass (published at the next replay, the last by
	# collect)
	plain plain-graph graph
	run "$case" graph FT_TRANSFER_MODE="${case#gtime-}" FT_OFFLOAD_TIMING=cuda_graph
	same plain-graph "$case"
	is "$case" timed_replays -eq 12
	is "$case" timing_dropped -eq 0
	grep -q "^Offload Timing (" "$tmp/$case.log" || no "ft_offload_timing_collect gave no report"
	;;
verify)
	plain plain
	run verify "" FT_VERIFY=1
	same plain verify
	is verify verify_failures -eq 0 # FT_VERIFY reported nothing of a correct program
	;;
modify)
	# the program rewrites a weight and saves another mid-run: the
	# rewritten weight's trap comes back to the GPU for good
	plain plain-modify modify
	run modify modify
	same plain-modify modify
	is modify offload_demoted -gt 0
	;;
over)
	# a GPU budget smaller than the model before any plan exists:
	# allocations over it get host memory at their address, results stay
	# the same (the planner then refuses a budget under its 256 MiB
	# minimum: nothing offloaded)
	plain plain
	launch over "" FT_MAX_GPU_MEM_FRACTION=0.003 ||
		{ echo "FAIL: over budget run"; tail -5 "$tmp/over.log"; fail=1; }
	is over vmm_host_bytes -gt 0 # something got host memory over the budget
	same plain over
	echo "over budget: $(stat over vmm_host_bytes) bytes in host memory"
	;;
big)
	# bigger than the budget before the plan (32 MiB tensors, a 300 MiB
	# budget) with FT_PROFILE_STORAGE_DIR: offloaded, same outputs, and the
	# timings taken while weights were in host memory are replaced in
	# profile.json by those of the first passes after the plan
	# (the longest case: its reference is made meanwhile)
	plain plain-big "" OFFLOAD_MIB=32 &
	ref=$!
	launch big "" OFFLOAD_MIB=32 FT_MAX_GPU_MEM_FRACTION=0.0366 \
		FT_PROFILE_STORAGE_DIR="$tmp/prof-big" ||
		{ echo "FAIL: big run"; tail -5 "$tmp/big.log"; fail=1; }
	wait $ref || exit 1
	same plain-big big
	is big vmm_host_bytes -gt 0
	is big offloaded_bytes -gt 0
	is big estimated_traps -gt 0
	is big refresh_passes -eq 2 && is big profile_refreshes -eq 1
	;;
device1)
	# a worker on device 1 offloads there
	plain plain
	run device1 "" FAKE_DEVICE=1
	same plain device1
	;;
gpu_device)
	# told FT_GPU_DEVICE=0, a worker on device 1 leaves device 1's
	# allocations to the driver and offloads nothing
	plain plain
	launch device1-not "" FAKE_DEVICE=1 FT_GPU_DEVICE=0 ||
		{ echo "FAIL: gpu_device: run exited $?"; tail -5 "$tmp/device1-not.log"; fail=1; }
	same plain device1-not
	is device1-not vmm_other_device -gt 0
	is device1-not vmm_allocs -eq 0
	;;
two_ranks)
	# two ranks of one job at once, one storage directory (two processes
	# on one device): each learns, offloads and writes its own profile
	plain plain
	for r in 0 1; do
		spawn "two-$r" "" RANK=$r WORLD_SIZE=2 FT_PROFILE_STORAGE_DIR="$tmp/two" \
			FT_TRANSFER_BUDGET_SCALE=1000
	done
	reap
	for r in 0 1; do
		same plain "two-$r"
		[ -f "$tmp/two/profile.rank$r.json" ] || no "rank $r wrote no profile.rank$r.json"
		is "two-$r" offload_copies -gt 0
	done
	;;
*)
	echo "offload_case.sh: no case $case"
	exit 2
	;;
esac
[ $fail = 0 ] && echo "offload $case: ok"
exit $fail
