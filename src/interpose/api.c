/*
 * Public API (include/flextensor.h) for a framework that says what it
 * knows: its tensors (ft_declare_*), the options it wants (ft_option_*),
 * the counters by index.  The Python package (python/flextensor) calls
 * these through ctypes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "flextensor.h"
#include "lib.h"

FT_EXPORT int ft_declare_tensor(const void *ptr, unsigned long long bytes, const char *name,
				int kind)
{
	ft_lib_ensure();
	if (!ft_is_observing() || !ptr || (kind != FT_PARAMETER && kind != FT_BUFFER))
		return -1;
	return ft_learn_declare(&ft_g.learn, (uint64_t)(uintptr_t)ptr, bytes, name,
				kind == FT_BUFFER);
}

FT_EXPORT int ft_declare_done(void)
{
	ft_lib_ensure();
	if (!ft_is_observing())
		return -1;
	return ft_learn_declare_done(&ft_g.learn);
}

FT_EXPORT const char *ft_stat_name(int index)
{
	return index >= 0 && index < FT_STAT_COUNT ? ft_stats_name(index) : NULL;
}

/* Options that are read when the plan is made or later (and the phase
 * counts, which learning takes again): the Python package's offload() may
 * set them until then.  Every other option shapes what happens from the
 * first CUDA call on. */
static const char *const settable[] = {
	"discovery_iters", "profiling_iters", "transfer_mode", "num_blocks", "min_blocks",
	"transfer_budget_scale", "offload_timing", "enable_diagnostics", "profile_read_only",
	"piecewise_prefetch", NULL,
};

static int is_settable(const char *name)
{
	for (const char *const *s = settable; *s; s++)
		if (!strcasecmp(name, *s))
			return 1;
	return 0;
}

struct msg {
	char *buf;
	unsigned long len;
};

static void to_msg(void *ud, const char *text)
{
	struct msg *m = ud;
	if (m->buf && m->len && !m->buf[0]) /* the first problem */
		snprintf(m->buf, m->len, "%s", text);
}

static void say(struct msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct msg *m, const char *fmt, ...)
{
	if (!m->buf || !m->len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->buf, m->len, fmt, ap);
	va_end(ap);
}

FT_EXPORT int ft_option_get(const char *name, char *buf, unsigned long len)
{
	ft_lib_ensure();
	char v[4096 + 8];
	pthread_mutex_lock(&ft_g.learn.lock); /* ft_options_set may replace a value */
	int bad = !name || ft_options_format(&ft_g.opt, name, v, sizeof(v));
	pthread_mutex_unlock(&ft_g.learn.lock);
	if (bad)
		return -1;
	if (buf && len)
		snprintf(buf, len, "%s", v);
	return (int)strlen(v);
}

FT_EXPORT int ft_options_check(const char *const *names, const char *const *values, int n,
				char *msg, unsigned long len)
{
	ft_lib_ensure();
	struct msg m = { msg, len };
	if (msg && len)
		msg[0] = 0;
	if (n < 0 || (n && (!names || !values))) {
		say(&m, "no option names or values given");
		return -1;
	}
	for (int k = 0; k < n; k++)
		if (!names[k] || !values[k]) {
			say(&m, "no option names or values given");
			return -1;
		}
	pthread_mutex_lock(&ft_g.learn.lock);
	int bad = ft_options_try(&ft_g.opt, names, values, n, 0, to_msg, &m);
	pthread_mutex_unlock(&ft_g.learn.lock);
	return bad ? -1 : 0;
}

FT_EXPORT int ft_options_set(const char *const *names, const char *const *values, int n,
			      char *msg, unsigned long len)
{
	if (ft_options_check(names, values, n, msg, len))
		return -1;
	struct msg m = { msg, len };
	struct ft_learn *L = &ft_g.learn;
	pthread_mutex_lock(&L->lock);
	int rc = -1, nc = 0;
	const char **cn = calloc((size_t)n + 1, sizeof(*cn));
	const char **cv = calloc((size_t)n + 1, sizeof(*cv));
	/* each value as the library writes it, against the running one */
	struct ft_options want;
	if (!cn || !cv || ft_options_copy(&want, &ft_g.opt)) {
		say(&m, "out of memory");
		pthread_mutex_unlock(&L->lock);
		free(cn);
		free(cv);
		return -1;
	}
	ft_options_try(&want, names, values, n, 1, NULL, NULL);
	for (int k = 0; k < n; k++) {
		char now[4096 + 8], v[4096 + 8], env[96];
		if (ft_options_same(&ft_g.opt, &want, names[k]) == 1)
			continue;
		ft_options_format(&ft_g.opt, names[k], now, sizeof(now));
		ft_options_format(&want, names[k], v, sizeof(v));
		ft_options_env_name(names[k], env, sizeof(env));
		if (!is_settable(names[k])) {
			say(&m, "%s is read when the program starts (at its first CUDA call): it "
				"runs with %s=%s, not %s; set %s=%s in the environment (or the "
				"flextensor-run flag for it) before the program starts",
			    names[k], env, now, v, env, v);
			goto out;
		}
		if (!ft_g.enabled || ft_learn_phase(L) != FT_PHASE_DISCOVERY || L->adopted) {
			say(&m, "%s can change only before the library has learnt the model (it "
				"runs with %s=%s; the plan is made or taken already): set %s=%s "
				"before the program starts", names[k], env, now, env, v);
			goto out;
		}
		cn[nc] = names[k];
		cv[nc++] = values[k];
	}
	/* only what changes is set: a start-time path given again unchanged
	 * is never replaced under a reader */
	if (nc) {
		if (ft_options_try(&ft_g.opt, cn, cv, nc, 1, to_msg, &m))
			goto out;
		ft_learn_phase_counts(L);
		for (int k = 0; k < nc; k++) {
			char v[4096 + 8], env[96];
			ft_options_format(&ft_g.opt, cn[k], v, sizeof(v));
			ft_options_env_name(cn[k], env, sizeof(env));
			ft_info("%s=%s set by the program", env, v);
		}
	}
	rc = 0;
out:
	ft_options_free(&want);
	pthread_mutex_unlock(&L->lock);
	free(cn);
	free(cv);
	return rc;
}
