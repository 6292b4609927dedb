/*
 * Saved profiles (include/ft/learn.h): FT_PROFILE_STORAGE_DIR's
 * profile.json is read at start and adopted when discovery finds the same
 * model on the same device (its traps, timings, plan); FT_SKIP_DISCOVERY
 * takes its weights after one pass; ft_save_profile / ft_load_profile.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/shm.h"
#include "learn_int.h"

const char *ft_learn_profile_name(const struct ft_learn *L)
{
	return L->env.opt->profile_storage_dir ? L->env.opt->profile_storage_dir
	       : L->shm_prof[0]		     ? L->shm_prof
						     : "(none)";
}

int ft_learn_skip_discovery(const struct ft_learn *L)
{
	return L->env.opt->skip_discovery && L->env.opt->profile_storage_dir;
}

const char *ft_learn_profile_dir(struct ft_learn *L)
{
	if (L->env.opt->profile_storage_dir || !L->shm_prof[0])
		return L->env.opt->profile_storage_dir;
	char why[512];
	if (!ft_shm_profile_ok(L->shm_prof, why, sizeof(why)))
		return L->shm_prof;
	if (!__atomic_fetch_add(&L->shm_prof_bad, 1, __ATOMIC_RELAXED)) /* (threads: refresh) */
		ft_warn("FT_SHM_ENABLED: %s; no profile is shared (each process discovers the model "
			"itself; FT_PROFILE_STORAGE_DIR sets a directory of your own)", why);
	return NULL;
}

/* A saved profile of the same model on the same device: its traps and
 * timings are taken, and profiling is skipped.  Returns 1 when adopted. */
int ft_learn_adopt_saved(struct ft_learn *L, enum ft_disc_end end)
{
	struct ft_profile *p = &L->prof;
	char why[512];
	enum ft_profile_refusal r = ft_profile_check_compatible(&L->saved, p, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		if (end == FT_END_CONTENT)
			ft_info("the first pass read the weights %s/%s lists, but the file does not "
				"describe this run (%s): discovery runs its passes",
				ft_learn_profile_name(L), FT_PROFILE_FILE, why);
		else if (end == FT_END_SIZES)
			ft_warn("FT_SKIP_DISCOVERY=1: the first pass does not match %s/%s (%s); "
				"discovery runs", ft_learn_profile_name(L), FT_PROFILE_FILE, why);
		else
			ft_warn("%s/%s not used: %s; profiling runs and the file will be rewritten",
				ft_learn_profile_name(L), FT_PROFILE_FILE, why);
		return 0;
	}
	/* what discovery found is kept (weights, device); the rest is the
	 * saved profile's */
	struct ft_profile mine = *p;
	/* a file without this run's checksums is written again, so that the
	 * next start takes it after one pass */
	L->resave = mine.sums && (!L->saved.sums ||
				  memcmp(mine.sums, L->saved.sums, mine.nweights * sizeof(*mine.sums)));
	/* without checksums of its own (a run that took the saved weights
	 * before its passes sampled them), the saved ones stand: a file
	 * written without them would make the next start wait for
	 * discovery's passes, and its graphs be captured before the plan */
	uint64_t *sums = mine.sums ? mine.sums : L->saved.sums;
	free(L->saved.weights);
	if (sums != L->saved.sums)
		free(L->saved.sums);
	*p = L->saved;
	memset(&L->saved, 0, sizeof(L->saved));
	p->weights = mine.weights;
	p->sums = sums;
	p->nweights = mine.nweights;
	memcpy(&p->device, &mine.device, sizeof(p->device));
	memcpy(p->library, mine.library, sizeof(p->library));
	p->schema = mine.schema;
	mine.weights = NULL;
	mine.sums = NULL;
	ft_profile_free(&mine);
	L->adopted = 1;
	FT_STAT_INC(L->env.stats, profile_adopted);
	ft_info("%s/%s describes this model on this device: %u traps and their timings "
		"taken, profiling skipped", ft_learn_profile_name(L), FT_PROFILE_FILE, p->ntraps);
	return 1;
}

/* The shared namespace's directory holds no profile of this rank: another
 * rank's, the first by name, into path (data-parallel replicas plan alike;
 * it is taken only if it describes this process's weights): 0, or -1. */
static int other_rank(const char *dir, char *path, size_t len)
{
	char best[256] = "";
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (!strncmp(e->d_name, "profile", 7) && n >= 12 && n < sizeof(best) &&
		    !strcmp(e->d_name + n - 5, ".json") && strcmp(e->d_name, FT_PROFILE_FILE) &&
		    (!best[0] || strcmp(e->d_name, best) < 0))
			memcpy(best, e->d_name, n + 1);
	}
	if (d)
		closedir(d);
	return best[0] && snprintf(path, len, "%s/%s", dir, best) < (int)len ? 0 : -1;
}

/* Reads dir's profile.json as the one to adopt when discovery ends. */
static int load_saved(struct ft_learn *L, const char *dir)
{
	char why[512], other[4400];
	ft_profile_free(&L->saved);
	L->have_saved = 0;
	enum ft_profile_refusal r = ft_profile_load(dir, &L->saved, why, sizeof(why));
	if (r == FT_PROFILE_MISSING && dir == L->shm_prof && !other_rank(dir, other, sizeof(other)) &&
	    ft_profile_load(other, &L->saved, why, sizeof(why)) == FT_PROFILE_OK) {
		L->have_saved = 1;
		ft_info("no %s in %s yet: loaded %s (another rank's), used if discovery finds "
			"the same weights", FT_PROFILE_FILE, dir, other);
		return 0;
	}
	if (r == FT_PROFILE_OK) {
		L->have_saved = 1;
		ft_info("loaded %s/%s (%u weights, %u traps); it is used if discovery finds the "
			"same model on the same device", dir, FT_PROFILE_FILE, L->saved.nweights,
			L->saved.ntraps);
		return 0;
	}
	if (r == FT_PROFILE_MISSING) {
		if (ft_learn_skip_discovery(L))
			ft_warn("FT_SKIP_DISCOVERY=1 but there is no %s in %s: discovery runs, and "
				"the file is written when INFERENCE begins", FT_PROFILE_FILE, dir);
		else
			ft_info("no %s in %s yet: it is written when INFERENCE begins",
				FT_PROFILE_FILE, dir);
	} else {
		ft_warn("%s/%s refused (%s): %s; discovery and profiling run as without it", dir,
			FT_PROFILE_FILE, ft_profile_refusal_name(r), why);
	}
	return -1;
}

void ft_learn_saved_start(struct ft_learn *L)
{
	/* (the namespace's shared profile is taken only on its contents) */
	if (!L->env.opt->profile_storage_dir && L->env.opt->skip_discovery)
		ft_warn("FT_SKIP_DISCOVERY=1 needs FT_PROFILE_STORAGE_DIR with a profile.json of "
			"this model on this device: discovery runs");
	const char *dir = ft_learn_profile_dir(L);
	if (dir && !load_saved(L, dir))
		ft_learn_watch_start(L);
}

int ft_learn_load(struct ft_learn *L, const char *dir)
{
	dir = dir ? dir : ft_learn_profile_dir(L);
	if (!dir || L->nwmap || L->phases.phase != FT_PHASE_DISCOVERY) {
		ft_warn("ft_load_profile: %s", !dir ? "no directory given and FT_PROFILE_STORAGE_DIR "
			"is not set" : "discovery has already ended");
		return -1;
	}
	/* the watch seeks the weights of the file it started with */
	ft_learn_watch_stop(L);
	int rc = load_saved(L, dir);
	if (!rc)
		ft_learn_watch_start(L);
	return rc;
}

int ft_learn_save(struct ft_learn *L, const char *dir)
{
	struct ft_profile *p = &L->prof;
	dir = dir ? dir : ft_learn_profile_dir(L);
	if (!dir || !p->nweights || L->phases.phase != FT_PHASE_INFERENCE) {
		ft_warn("profile not saved: %s", !dir ? "no directory given and "
			"FT_PROFILE_STORAGE_DIR is not set" : "nothing learnt yet (not in INFERENCE, "
			"or no weights found)");
		return -1;
	}
	if (L->env.opt->profile_read_only) {
		ft_info("FT_PROFILE_READ_ONLY=1: %s/%s not written", dir, FT_PROFILE_FILE);
		return -1;
	}
	int rc = ft_profile_save(p, dir);
	if (rc)
		ft_warn("cannot write %s/%s: %s", dir, FT_PROFILE_FILE, strerror(-rc));
	else
		ft_info("profile written to %s/%s", dir, FT_PROFILE_FILE);
	if (ft_trace_on(L->env.trace)) {
		cJSON *rec = ft_trace_begin("profile");
		ft_trace_str(rec, "dir", dir);
		ft_trace_num(rec, "result", rc);
		ft_trace_emit(L->env.trace, rec);
	}
	return rc ? -1 : 0;
}

/* A loaded profile, after the first discovery pass (its content sample
 * taken): the regions read in it (not written, large enough, in first-touch
 * order) are taken as the weights if they match the saved profile exactly,
 * in size and, unless FT_SKIP_DISCOVERY=1 takes them on the file's word, in
 * content (the saved checksums); then INFERENCE begins at once, so that a
 * serving engine's start-up captures, which follow its first forward, page
 * from the start.  Returns 1 when it did. */
int ft_learn_after_first_pass(struct ft_learn *L, const char *when)
{
	if (!L->have_saved || L->skip_tried)
		return 0;
	L->skip_tried = 1;
	enum ft_disc_end end = ft_learn_skip_discovery(L) ? FT_END_SIZES : FT_END_CONTENT;
	if (end == FT_END_CONTENT && !L->saved.sums) {
		ft_info("%s/%s has no checksums of its weights (written by 0.2): discovery runs "
			"its passes; the file gets them when it is written again",
			ft_learn_profile_name(L), FT_PROFILE_FILE);
		return 0;
	}
	L->disc.content_known = 1;
	int adopted = ft_learn_finish_discovery(L, end) > 0;
	L->disc.content_known = 0;
	if (!adopted)
		return 0;
	L->phases.phase = FT_PHASE_INFERENCE;
	atomic_store_explicit(&L->phase, FT_PHASE_INFERENCE, memory_order_relaxed);
	ft_info("pass %llu: %s read the weights of the saved profile%s: entering INFERENCE",
		(unsigned long long)L->phases.total, when,
		end == FT_END_SIZES ? " (FT_SKIP_DISCOVERY=1: their sizes)" : ", with their contents");
	ft_learn_offload(L);
	return 1;
}
