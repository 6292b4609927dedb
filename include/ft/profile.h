/*
 * What discovery and profiling learn, as plain data, and its persistent form
 * profile.json (written with cJSON, atomically: temporary file, fsync,
 * rename).  Loading checks everything before anything is used: a missing,
 * unreadable, corrupt, newer-schema, foreign-model or foreign-device profile
 * is refused with one reason and the caller falls back to discovery; a
 * profile is either applied whole or not at all.
 */
#ifndef FT_PROFILE_H
#define FT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define FT_PROFILE_SCHEMA 1
/* The file's name in its directory: profile.json, or profile.rank<r>.json
 * for a process of rank r among several (ft_profile_set_rank), so that the
 * workers of one job never overwrite each other's. */
#define FT_PROFILE_FILE ft_profile_file()
const char *ft_profile_file(void);
void ft_profile_set_rank(int rank);

struct ft_stat_ms {
	double median, min, max;
	uint32_t samples;
};

/* A trap's label with its terminating zero: long enough for a module path
 * such as "model.language_model.layers.31" (ft_traps_label_by_name). */
#define FT_LABEL_MAX 64

struct ft_trap {
	char label[FT_LABEL_MAX]; /* "trap.7", or a module path ("model.layers.7") */
	char role[16];           /* "embedding", "layer", "head", "other" */
	uint32_t first_weight;   /* index into ft_profile.weights */
	uint32_t nweights;       /* consecutive weights, in first-touch order */
	uint64_t bytes;
	struct ft_stat_ms compute;
};

/* A plan (the planner, include/ft/plan.h, makes it; profile.json keeps it
 * with the profile it was made from). */
struct ft_plan_trap {
	int offloaded;
	int block;          /* -1 when resident */
	double copy_ms;     /* predicted copy time */
	double issue_ms;    /* when the copy starts, from the pass's start */
	double start_ms;    /* when the trap starts computing */
	double wait_ms;     /* compute stream stalled for the copy */
};

#define FT_PLAN_MAX_BLOCKS 64

struct ft_plan {
	uint32_t ntraps;
	struct ft_plan_trap *t;
	uint32_t nblocks;
	uint64_t block_bytes[FT_PLAN_MAX_BLOCKS];
	uint64_t peak_bytes;      /* blocks + resident traps */
	uint64_t offloaded_bytes;
	double pass_ms;           /* predicted, steady state */
	double stall_ms;
	double compute_ms;        /* all traps resident */
	double floor_ms;          /* max(compute, copies of what is offloaded, disk) */
	double disk_ms;           /* the NVMe tier's reads a pass (0: none) */
	/* recorded with it: the budget the traps were planned for (0: latency
	 * mode) and the FT_* settings it was made under (it is applied again
	 * only under the same) */
	uint64_t budget;
	char settings[256];
};

struct ft_curve_point {
	uint64_t bytes;
	double ms;
};

struct ft_profile {
	int schema;
	char library[16];
	struct {
		char name[128];
		uint64_t total_bytes;
		int driver;
	} device;
	uint64_t fingerprint;    /* of the ordered weight sizes */
	uint32_t nweights;
	uint64_t *weights;       /* sizes, in first-touch order */
	/* their contents' checksums (ft_gpu_checksums) when discovery ended;
	 * NULL: not known (profiles of 0.2).  A restart that finds the same
	 * sizes with the same checksums after its first pass needs no more
	 * discovery passes. */
	uint64_t *sums;
	uint32_t ntraps;
	struct ft_trap *traps;
	uint32_t ncurve;
	struct ft_curve_point *curve;
	/* pairs of traps (a < b, sorted) that one launch reads together, seen
	 * in discovery and profiling, or whose weights abut in one allocation:
	 * the plan never gives them one block (ft_coread_*) */
	uint32_t ncoread;
	uint32_t (*coread)[2];
	/* weights (indices into weights, increasing) read again after later
	 * traps began in most profiled passes (a rotary table, biases packed
	 * in one segment): they stay on the GPU, out of their traps */
	uint32_t nshared;
	uint32_t *shared;
	/* stacked tensors paged per expert (FT_EXPERT_PAGING): nslices[k]
	 * slice starts of weight k (offsets from its start, increasing, the
	 * weight's own start not among them) follow in slices, weight after
	 * weight; nslices NULL: none (profiles before 0.3).  A restart takes
	 * them, which its one discovery pass cannot tell. */
	uint32_t *nslices;
	uint64_t *slices;
	struct ft_plan *plan;    /* NULL = none */
};

/* Whether traps a and b are read together. */
int ft_coread_has(const struct ft_profile *p, uint32_t a, uint32_t b);
/* Adds the pair (a, b) (nothing when a == b): 1 added, 0 known, -1 out of
 * memory.  ft_pairs_add does the same for any sorted set of pairs
 * (*v)[0..*n), grown as it fills. */
int ft_coread_add(struct ft_profile *p, uint32_t a, uint32_t b);
int ft_pairs_add(uint32_t (**v)[2], uint32_t *n, uint32_t a, uint32_t b);
/* Adds the traps of n pairs of weights read together (indices into
 * p->weights, ft_disc_weight_pairs): 0 or -1. */
int ft_coread_from_weights(struct ft_profile *p, const uint32_t (*pairs)[2], uint32_t n);

enum ft_profile_refusal {
	FT_PROFILE_OK = 0,
	FT_PROFILE_MISSING,      /* no file */
	FT_PROFILE_UNREADABLE,   /* I/O error, not a regular file, or too large */
	FT_PROFILE_CORRUPT,      /* not JSON, or a field missing or of the wrong type */
	FT_PROFILE_NEWER,        /* written by a newer schema */
	FT_PROFILE_OLDER,        /* written by an older schema */
	FT_PROFILE_INCONSISTENT, /* traps do not cover the weights, fingerprint wrong, ... */
	FT_PROFILE_OTHER_MODEL,  /* weight sizes differ from this process's */
	FT_PROFILE_OTHER_DEVICE, /* another GPU model or memory size */
};

const char *ft_profile_refusal_name(enum ft_profile_refusal r);

/* FNV-1a over the ordered sizes. */
uint64_t ft_profile_fingerprint(const uint64_t *sizes, uint32_t n);

void ft_profile_free(struct ft_profile *p);
/* The plan goes (p->plan NULL after). */
void ft_profile_drop_plan(struct ft_profile *p);

/* Serialises to a malloc'd string (NULL when out of memory). */
char *ft_profile_to_json(const struct ft_profile *p);
/* Parses and checks internal consistency; on refusal *why (may be NULL)
 * gets a sentence and *p is left empty. */
enum ft_profile_refusal ft_profile_from_json(const char *text, struct ft_profile *p,
					     char *why, size_t why_len);

/* Writes dir/profile.json atomically.  0 or -errno. */
int ft_profile_save(const struct ft_profile *p, const char *dir);
/* Reads dir/profile.json (or the file itself when path names a file): a
 * regular file of at most FT_INPUT_PROFILE_MAX bytes (ft/input.h), else
 * FT_PROFILE_UNREADABLE with the reason. */
enum ft_profile_refusal ft_profile_load(const char *path, struct ft_profile *p,
					char *why, size_t why_len);

/* Compatibility of a loaded profile with what this process sees: the same
 * ordered weight sizes and the same device.  expect may leave device.name
 * empty or weights NULL to skip that check. */
enum ft_profile_refusal ft_profile_check_compatible(const struct ft_profile *loaded,
						    const struct ft_profile *expect,
						    char *why, size_t why_len);

#endif
