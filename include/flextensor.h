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
 * observing.  After ft_declare_done: passes from it to the start of
 * INFERENCE, max(1, FT_DISCOVERY_ITERS) + max(1, FT_PROFILING_ITERS). */
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

/* What the framework knows, declared (the Python package's offload() does
 * it for a PyTorch model).  ft_declare_tensor: the device memory [ptr,
 * ptr + bytes) holds a parameter (FT_PARAMETER: a weight, offloaded if the
 * plan says so, when the passes read it) or a buffer (FT_BUFFER: never
 * offloaded) called name (its module path, "model.layers.7.mlp.up_proj.
 * weight"); a tensor declared twice keeps its first name.  Call it for
 * every tensor, then ft_declare_done: discovery starts at once and takes
 * the declarations (no guesswork: a declared parameter read in every pass
 * is a weight without content samples, a region nobody declared is none,
 * traps follow the module names and carry them in the log, the timing
 * table and profile.json), and from then on passes are what ft_mark_pass
 * marks, which the caller must call after each pass (one forward).
 * DISCOVERY then lasts max(1, FT_DISCOVERY_ITERS) passes and PROFILING
 * max(1, FT_PROFILING_ITERS).  Both return 0, or -1 when the library is not
 * observing, a bad argument, out of memory, or discovery has ended (the
 * library learnt the model already: declare before the first forward);
 * ft_declare_done also -1 when nothing new was declared. */
enum { FT_PARAMETER = 0, FT_BUFFER = 1 };
int ft_declare_tensor(const void *ptr, unsigned long long bytes, const char *name, int kind);
int ft_declare_done(void);

/* Options by name (as in the INI file: "num_blocks"; any case).
 * ft_option_get writes the running value as text ("none" when unset) into
 * buf (len bytes, always terminated when len > 0) and returns its length,
 * or -1 for an unknown name.  ft_options_check validates the n settings
 * names[k] = values[k] together, as FT_<NAME>=value is validated, with the
 * running values of the others: 0, or -1 with the first problem in msg (the
 * message the variable would get).  ft_options_set makes them the running
 * values: 0 when they are now (already, or set), -1 with the reason in msg
 * (nothing changed) when one is bad, or differs and is read when the
 * program starts (all but discovery_iters, profiling_iters, transfer_mode,
 * num_blocks, min_blocks, transfer_budget_scale, offload_timing,
 * enable_diagnostics, profile_read_only and piecewise_prefetch), or
 * differs after DISCOVERY has ended. */
int ft_option_get(const char *name, char *buf, unsigned long len);
int ft_options_check(const char *const *names, const char *const *values, int n, char *msg,
		     unsigned long len);
int ft_options_set(const char *const *names, const char *const *values, int n, char *msg,
		   unsigned long len);

/* The name of counter index (0, 1, ... until NULL), for ft_stat_get. */
const char *ft_stat_name(int index);

/* Writes out what the FT_TRACE file has buffered.  Returns 0, or -1 when no
 * trace is open. */
int ft_flush_trace(void);

/* FT_VERIFY: writes the executor's latest steps to the file path, one line
 * each, oldest first: each launch with the offloaded traps it reads, the
 * blocks' occupants and its references ('!' into a trap out of its
 * block), the traps loaded, the blocks released (poisoned), the weight
 * tails given back, the copies.  A program that sees NaN in an output
 * calls it to name the launch that read a trap the library did not load.
 * Returns 0, or -1 without FT_VERIFY, before any step, or when path cannot
 * be written. */
int ft_verify_journal(const char *path);

#ifdef __cplusplus
}
#endif

#endif
