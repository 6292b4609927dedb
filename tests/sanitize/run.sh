#!/bin/sh
# The unit and preload tests that exercise the library's own code, again in
# the sanitized builds scripts/setup.sh makes beside ./build: build-asan
# (AddressSanitizer + UndefinedBehaviorSanitizer: any report fails, a leak
# in a unit test too) and
# build-tsan (ThreadSanitizer, on the tests that run threads and fork).
# Exits 77 where those builds do not exist (a compiler without the
# sanitizer runtimes).
# usage: run.sh <source dir>
set -u
src=$1
here=$src/tests/sanitize
status=0
ran=0
# ASan's runtime must come first among a process's libraries; a preloaded
# library comes before the test program's own libasan, and the order check
# is all that objects (the programs are instrumented themselves).  The unit
# tests are checked for leaks too; the preloaded runs and the learner
# replay are not (the library's state lives as long as the process, and the
# replay tool does not take the learner down).  The coded store runs
# under them with every trap coded (offload_zip-raw_block_transfer): auto's
# choices (offload_zip-auto) weigh the host decoder's measured speed,
# which the sanitizers slow past what that test's curves allow.
asan="verify_asan_link_order=0:abort_on_error=0:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
if [ -d "$src/build-asan" ]; then
	ran=1
	# built first: meson test given test names rebuilds only some targets
	ninja -C "$src/build-asan" >/dev/null || status=1
	ASAN_OPTIONS=$asan:detect_leaks=1 meson test -C "$src/build-asan" \
		--num-processes 2 --print-errorlogs \
		test_traps test_plan test_discover test_passes test_graphs test_kernels \
		test_offload test_profile test_refresh test_registry test_scan test_timing \
		test_input test_trace test_options test_codec test_shm passes_fixture_h200-hf8 || status=1
	ASAN_OPTIONS=$asan:detect_leaks=0 meson test -C "$src/build-asan" --no-rebuild \
		--num-processes 2 --print-errorlogs learn_replay_capture \
		route_direct route_dlsym route_getproc route_runtime inert rtld_next \
		fork_child threads nccl_alloc phases_fresh phases_graph faults \
		offload_allocation_block_transfer offload_raw_block_transfer offload_strategy \
		offload_graph-raw_block_transfer offload_mixed-allocation_block_transfer \
		offload_verify offload_early offload_update offload_pieces offload_early-nosub offload_tail-raw_block_transfer replay_h200-hf8 \
		offload_shm-weights offload_shm-profile offload_zip-raw_block_transfer offload_built offload_prefill \
		offload_nvme-cufile offload_stacked offload_legacy config_refusal || status=1
fi
if [ -d "$src/build-tsan" ]; then
	ran=1
	ninja -C "$src/build-tsan" >/dev/null || status=1
	TSAN_OPTIONS="suppressions=$here/tsan.supp halt_on_error=1" \
		meson test -C "$src/build-tsan" --print-errorlogs threads fork_child || status=1
	# threads launching on their own streams once the plan is in effect
	# (stress_steady: under TSan, discovery with four threads at once finds
	# too few weights to plan), once: about 95 s on 2 cores
	TSAN_OPTIONS="suppressions=$here/tsan.supp halt_on_error=1" ROUNDS=1 \
		STRESS_MODES=allocation_block_transfer LD_LIBRARY_PATH="$src/build-tsan/tests/fake" \
		sh "$src/tests/preload/stress.sh" "$src/build-tsan/src/libflextensor.so" \
		"$src/build-tsan/tests/preload/stress_steady" || status=1
fi
if [ $ran = 0 ]; then
	echo "sanitize: no build-asan or build-tsan (scripts/setup.sh makes them where the compiler can): skipped"
	exit 77
fi
exit $status
