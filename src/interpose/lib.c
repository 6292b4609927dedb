/*
 * The library context and its lifecycle.  Nothing runs at load time (no
 * constructor): LD_PRELOAD reaches every child process, and one that never
 * touches CUDA must not pay for us.  The first hook reached, by any route,
 * runs the initialisation once: options (bad ones end the process with
 * status 2 before any CUDA work), logging, the real driver table, the
 * routing table, and when FT_ENABLED=1 the observers.
 */
#include "ft/gate.h"
#include "lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flextensor.h"

extern char **environ;

struct ft_lib ft_g;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static __thread int in_init;

int ft_lib_in_init(void)
{
	return in_init;
}

static void report_error(void *ud, const char *msg)
{
	(void)ud;
	ft_log_write(FT_LOG_ERROR, "%s", msg);
}

static void report_info(void *ud, const char *msg)
{
	(void)ud;
	ft_info("%s", msg);
}

static void load_real(void)
{
	void *h = ft_g.libcuda;
#define FT_HOOK(sym, base, ver, sfx) \
	ft_g.real.sym = (__typeof__(ft_g.real.sym))ft_real_dlsym(h, #sym);
#define FT_USE FT_HOOK
#define FT_RT_HOOK(sym)
#include "ft/hooks.def"
#undef FT_HOOK
#undef FT_USE
#undef FT_RT_HOOK
	Dl_info info;
	if (ft_g.real.cuGetProcAddress_v2 &&
	    dladdr((void *)ft_g.real.cuGetProcAddress_v2, &info))
		ft_g.libcuda_base = info.dli_fbase;
}

static void print_stats(void)
{
	for (int i = 0; i < FT_STAT_COUNT; i++)
		ft_info("stat %-20s %12llu  %s", ft_stats_name(i),
			(unsigned long long)ft_stats_read(&ft_g.stats, i),
			ft_stats_help(i));
}

static void at_exit(void)
{
	if (!ft_g.enabled)
		return;
	ft_learn_exit(&ft_g.learn);
	ft_off_exit(ft_g.off); /* the shared store: the last user removes it */
	pthread_mutex_lock(&ft_g.vmm.lock);
	FT_STAT_ADD(&ft_g.stats, vmm_other_device, ft_g.vmm.other_device);
	pthread_mutex_unlock(&ft_g.vmm.lock);
	print_stats();
	if (ft_trace_on(&ft_g.trace)) {
		struct cJSON *rec = ft_trace_begin("stats");
		for (int i = 0; i < FT_STAT_COUNT; i++)
			ft_trace_num(rec, ft_stats_name(i),
				     (double)ft_stats_read(&ft_g.stats, i));
		ft_trace_emit(&ft_g.trace, rec);
		ft_trace_flush(&ft_g.trace);
	}
}

/* Fork: every lock is held across fork, taken in the order the library
 * nests them (the leaves, engine, timing stores and VMM, last), so the child
 * never inherits one another thread held.  The forking thread took them and
 * is the child's only thread: both sides unlock the mutexes (re-creating a
 * held lock is undefined; ThreadSanitizer flagged it; the registry's
 * reader-writer lock is replaced in the child, ft_registry_fork).  The child
 * then forgets the
 * parent's device state (its CUDA context is not usable there) and whatever
 * the parent had buffered for the trace. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&ft_g.learn.lock);
	pthread_mutex_lock(&ft_g.graphs->lock);
	pthread_mutex_lock(&ft_g.trace.lock);
	pthread_mutex_lock(&ft_g.kernels.lock);
	pthread_mutex_lock(&ft_g.tmaps->lock);
	ft_registry_fork(&ft_g.reg, 0);
	ft_off_fork(ft_g.off, 0);
	pthread_mutex_lock(&ft_g.timing.lock);
	pthread_mutex_lock(&ft_g.timing_window.lock);
	pthread_mutex_lock(&ft_g.vmm.lock);
}

/* The mutexes, and the registry's lock in the parent (step 1) or in the
 * child (2). */
static void fork_release(int step)
{
	pthread_mutex_unlock(&ft_g.vmm.lock);
	pthread_mutex_unlock(&ft_g.timing_window.lock);
	pthread_mutex_unlock(&ft_g.timing.lock);
	ft_off_fork(ft_g.off, 1);
	ft_registry_fork(&ft_g.reg, step);
	pthread_mutex_unlock(&ft_g.tmaps->lock);
	pthread_mutex_unlock(&ft_g.kernels.lock);
	pthread_mutex_unlock(&ft_g.trace.lock);
	pthread_mutex_unlock(&ft_g.graphs->lock);
	pthread_mutex_unlock(&ft_g.learn.lock);
}

static void fork_parent(void)
{
	fork_release(1);
}

static void fork_child(void)
{
	fork_release(2);
	ft_learn_after_fork(&ft_g.learn);
	ft_kernels_flush(&ft_g.kernels);
	ft_trace_after_fork(&ft_g.trace);
	atomic_store(&ft_g.active_captures, 0);
	ft_gate_after_fork();
	/* nor do the parent's VMM allocations and blocks (CUDA does not cross fork) */
	ft_g.vmm.n = 0;
	ft_off_after_fork(ft_g.off);
	/* nor its graphs: their clones and substitutes are not the child's to
	 * destroy (one thread runs here: no lock needed) */
	if (ft_g.graphs)
		ft_g.graphs->release = NULL;
}

static int start_observers(void)
{
	ft_g.tmaps = calloc(1, sizeof(*ft_g.tmaps));
	ft_g.graphs = calloc(1, sizeof(*ft_g.graphs));
	ft_g.off = ft_off_new();
	if (!ft_g.tmaps || !ft_g.graphs || !ft_g.off || ft_registry_init(&ft_g.reg) ||
	    ft_kernels_init(&ft_g.kernels, &ft_g.real)) {
		ft_error("out of memory while starting; passing every call through");
		return -1;
	}
	ft_tmaps_init(ft_g.tmaps);
	ft_graphs_init(ft_g.graphs);
	ft_sub_init();
	/* FT_GPU_DEVICE set: that device only; unset: the first allocated on */
	ft_vmm_init(&ft_g.vmm, &ft_g.real, (size_t)ft_g.opt.vmm_min_bytes,
		    ft_g.opt.max_gpu_mem_fraction, (int)ft_g.opt.gpu_device);
	const struct ft_learn_env env = {
		.real = &ft_g.real, .dlsym = ft_real_dlsym, .opt = &ft_g.opt, .stats = &ft_g.stats, .reg = &ft_g.reg,
		.graphs = ft_g.graphs, .trace = &ft_g.trace, .vmm = &ft_g.vmm, .off = ft_g.off,
		.timing = &ft_g.timing, .timing_window = &ft_g.timing_window,
		.captures = &ft_g.active_captures, .graphs_planned = ft_sub_plan_all,
	};
	if (ft_learn_init(&ft_g.learn, &env)) {
		ft_error("out of memory while starting; passing every call through");
		return -1;
	}
	ft_g.trace.fd = -1;
	if (ft_g.opt.trace) {
		int rc = ft_trace_open(&ft_g.trace, ft_g.opt.trace);
		if (rc) {
			ft_error("FT_TRACE=%s: cannot open the file: %s; choose a writable path",
				 ft_g.opt.trace, strerror(-rc));
			_exit(2);
		}
	}
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(at_exit);
	return 0;
}

static void init_once(void)
{
	if (ft_options_load(&ft_g.opt, environ, report_error, NULL)) {
		ft_log_write(FT_LOG_ERROR,
			     "refusing to run with this configuration: fix the FT_* "
			     "settings above (`flextensor-config --help` lists them)");
		_exit(2);
	}
	int rc = ft_log_configure(ft_g.opt.log_level, ft_g.opt.log_file);
	if (rc) {
		ft_log_write(FT_LOG_ERROR, "FT_LOG_FILE=%s: cannot open the file: %s",
			     ft_g.opt.log_file, strerror(-rc));
		_exit(2);
	}
	ft_options_note_planned(&ft_g.opt, report_info, NULL);
	ft_profile_set_rank(ft_g.opt.rank);

	ft_g.libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NODELETE);
	if (!ft_g.libcuda) {
		/* said only where the library was asked to act (the public API
		 * starts it in any process) */
		if (ft_g.opt.enabled)
			ft_warn("cannot load libcuda.so.1 (%s); passing every call through",
				dlerror());
		else
			ft_debug("cannot load libcuda.so.1 (%s); passing every call through",
				 dlerror());
		return;
	}
	load_real();
	ft_routes_build(&ft_g.real);
	if (!ft_g.opt.enabled) {
		ft_debug("FT_ENABLED=0: passing every call through");
		return;
	}
	if (start_observers())
		return;
	int drv = 0;
	if (ft_g.real.cuDriverGetVersion)
		ft_g.real.cuDriverGetVersion(&drv);
	ft_g.enabled = 1;
	ft_info("libflextensor %s observing (CUDA driver %d.%d)%s%s", ft_version(),
		drv / 1000, drv % 1000 / 10, ft_g.opt.trace ? ", trace " : "",
		ft_g.opt.trace ? ft_g.opt.trace : "");
}

void ft_lib_init_slow(void)
{
	if (in_init)
		return;
	in_init = 1;
	pthread_once(&once, init_once);
	atomic_store_explicit(&ft_g.ready, 1, memory_order_release);
	in_init = 0;
}

/* Public API (include/flextensor.h). */

FT_EXPORT const char *ft_version(void)
{
	return FT_VERSION;
}

FT_EXPORT int ft_is_observing(void)
{
	return atomic_load(&ft_g.ready) && ft_g.enabled;
}

FT_EXPORT int ft_stat_get(const char *name, unsigned long long *value)
{
	int id = name ? ft_stats_find(name) : -1;
	if (id < 0 || !value)
		return -1;
	*value = (unsigned long long)ft_stats_read(&ft_g.stats, id);
	return 0;
}

FT_EXPORT long long ft_mark_pass(void)
{
	ft_lib_ensure();
	if (!ft_is_observing())
		return -1;
	return ft_learn_mark(&ft_g.learn);
}

FT_EXPORT int ft_phase(void)
{
	if (!ft_is_observing())
		return -1;
	return ft_learn_phase(&ft_g.learn);
}

FT_EXPORT unsigned long long ft_iters_before_inference(void)
{
	ft_lib_ensure();
	if (!ft_is_observing())
		return 0;
	return ft_learn_iters_before_inference(&ft_g.learn);
}

/* ft_save_profile / ft_load_profile: fn(dir) under the learning lock. */
static int profile_io(int (*fn)(struct ft_learn *, const char *), const char *dir)
{
	ft_lib_ensure();
	if (!ft_is_observing())
		return -1;
	pthread_mutex_lock(&ft_g.learn.lock);
	int rc = fn(&ft_g.learn, dir);
	pthread_mutex_unlock(&ft_g.learn.lock);
	return rc;
}

FT_EXPORT int ft_save_profile(const char *dir)
{
	return profile_io(ft_learn_save, dir);
}

FT_EXPORT int ft_load_profile(const char *dir)
{
	return profile_io(ft_learn_load, dir);
}

FT_EXPORT long ft_offload_timing_collect(char *buf, unsigned long len)
{
	ft_lib_ensure();
	if (!ft_is_observing() || !ft_off_timed(ft_g.off))
		return -1;
	ft_off_timing_flush(ft_g.off);
	struct ft_timing_report r;
	if (ft_timing_report(&ft_g.timing, 1, &r))
		return -1;
	long n = (long)ft_timing_format(&r, buf, len);
	ft_timing_report_free(&r);
	return n;
}

FT_EXPORT int ft_offload_timing_reset(void)
{
	ft_lib_ensure();
	if (!ft_is_observing() || !ft_off_timed(ft_g.off))
		return -1;
	ft_off_timing_reset(ft_g.off);
	ft_timing_reset(&ft_g.timing);
	ft_timing_reset(&ft_g.timing_window);
	return 0;
}

FT_EXPORT int ft_offload_timing_update(void)
{
	ft_lib_ensure();
	if (!ft_is_observing() || !ft_off_timed(ft_g.off))
		return -1;
	return ft_off_timing_update(ft_g.off);
}

FT_EXPORT int ft_flush_trace(void)
{
	if (!ft_is_observing() || !ft_trace_on(&ft_g.trace))
		return -1;
	ft_trace_flush(&ft_g.trace);
	return 0;
}

FT_EXPORT int ft_verify_journal(const char *path)
{
	if (!ft_is_observing())
		return -1;
	return ft_off_journal_write(path);
}
