/*
 * libflextensor public API.  The library works without any call to this API
 * (LD_PRELOAD=libflextensor.so FT_ENABLED=1 program); these functions let a
 * program or a test ask what it has observed.  Resolve them with
 * dlsym(RTLD_DEFAULT, "ft_version") to stay runnable without the library.
 *
 * All functions are thread-safe and may be called at any time, also before
 * the first CUDA call (they then report the library idle).
 */
#ifndef FLEXTENSOR_H
#define FLEXTENSOR_H

#ifdef __cplusplus
extern "C" {
#endif

#define FT_API_VERSION 1

/* Library version, the project version meson.build declares (e.g.
 * "0.2.0").  Never NULL. */
const char *ft_version(void);

/* 1 when the library observes CUDA calls in this process (FT_ENABLED=1 and
 * the CUDA driver was found), 0 otherwise. */
int ft_is_observing(void);

/* Reads counter `name` (see `flextensor-config --stats` for the list) into
 * *value.  Returns 0, or -1 for an unknown name or a NULL argument. */
int ft_stat_get(const char *name, unsigned long long *value);

/* Phases, upstream's meaning: the library spends max(2, FT_DISCOVERY_ITERS)
 * passes in DISCOVERY (two content samples prove a weight unchanged),
 * max(1, FT_PROFILING_ITERS) + 1 in PROFILING (it starts inside a pass, so
 * it lasts one pass more than it times), then is in INFERENCE, where the
 * plan is made and applied.  DISCOVERY starts once two consecutive passes
 * had about the same number of launches.  A profile.json adopted when
 * DISCOVERY ends skips PROFILING (and, with FT_SKIP_DISCOVERY=1, most of
 * DISCOVERY).  A pass is one iteration of the program's loop (one
 * forward), found by the library itself (graph replays, the repeating
 * order of the memory eager launches touch) unless the program marks
 * passes. */
enum { FT_DISCOVERY = 0, FT_PROFILING = 1, FT_INFERENCE = 2 };

/* Marks the end of one pass (call once per iteration, after the forward).
 * Once called, only marks count passes.  Returns the number of passes
 * completed so far, or -1 when the library is not observing. */
long long ft_mark_pass(void);

/* The current phase (0 DISCOVERY, 1 PROFILING, 2 INFERENCE), or -1 when
 * the library is not observing. */
int ft_phase(void);

/* Passes from the first pass boundary the library finds to the start of
 * INFERENCE, when nothing is skipped: 2 (two passes of about the same
 * length before DISCOVERY starts) + max(2, FT_DISCOVERY_ITERS) +
 * max(1, FT_PROFILING_ITERS) + 1, which is 15 with the defaults.  What
 * runs before the first boundary is not counted: in eager execution the
 * first forward (its end is found at the start of the second), with
 * ft_mark_pass the forward before the first mark.  It takes more when the
 * passes before DISCOVERY differ in length (weights still loading), fewer
 * when a profile.json is adopted (no PROFILING) or FT_SKIP_DISCOVERY=1
 * applies; the count returned stays the same.  0 when the library is not
 * observing. */
unsigned long long ft_iters_before_inference(void);

/* Writes what the library learnt (weights, traps, timings, the plan) to
 * dir/profile.json, atomically; dir NULL = FT_PROFILE_STORAGE_DIR.  Returns
 * 0, or -1 when the library is not observing, has not reached INFERENCE
 * (nothing complete to save), no directory is given, FT_PROFILE_READ_ONLY=1
 * or the write failed (the log says which). */
int ft_save_profile(const char *dir);

/* Reads dir/profile.json (dir NULL = FT_PROFILE_STORAGE_DIR) as the profile
 * to use when discovery ends: if it describes the model found, on this
 * device, its traps, timings and plan are taken and profiling is skipped.
 * Returns 0, or -1 when the library is not observing, discovery has already
 * ended, or the file is missing, corrupt or of another schema (the log says
 * why; discovery then runs as without it). */
int ft_load_profile(const char *dir);

/* Offload timing (FT_OFFLOAD_TIMING=eager or cuda_graph, once offloading
 * has begun): per trap and pass, the compute time of its own work, the
 * transfer time of its copy and the wait of the launch stream for that
 * copy, kept for the last 1024 passes.
 * ft_offload_timing_collect ends the pass in progress, writes the report
 * of every stored pass as text (upstream's table: Trap | Compute avg | med
 * | +-std | min | max | Transfer avg | med | Wait avg | med, a left arrow
 * where the mean wait exceeds 0.01 ms, rows Avg/pass and Sum (all)) into
 * buf (len bytes, always terminated when len > 0) and empties the store;
 * it returns the length the whole text needs, or -1 when timing is off
 * (or offloading has not begun) or nothing was recorded.
 * ft_offload_timing_reset empties the store: 0, or -1 when timing is off. */
long ft_offload_timing_collect(char *buf, unsigned long len);
int ft_offload_timing_reset(void);

/* FT_OFFLOAD_TIMING=cuda_graph also times CUDA graphs captured after the
 * plan: each replay of one is a pass, published by itself when the next
 * replay of that graph begins (if the previous one is done by then; else
 * it is dropped and counted in the stat timing_dropped) and by collect.
 * ft_offload_timing_update publishes every replay not published yet,
 * waiting for it: call it after a replay when you want that replay counted
 * now.  Returns how many it published, or -1 when graphs are not timed. */
int ft_offload_timing_update(void);

/* Writes out what the FT_TRACE file has buffered.  Returns 0, or -1 when no
 * trace is open. */
int ft_flush_trace(void);

#ifdef __cplusplus
}
#endif

#endif
