/* What the learning files share beyond include/ft/learn.h. */
#ifndef FT_LEARN_INT_H
#define FT_LEARN_INT_H

#include "ft/learn.h"
#include "ft/log.h"

/* passes.c: a pass completed (source: enum ft_pass_source), under L->lock.
 * The host-backed allocations pick(L, base) chooses (not weights) move to
 * the GPU, said with what they are. */
void ft_learn_pass(struct ft_learn *L, int source, uint64_t start);
/* The trace's "pass" record: source (eager, graph, mark; watch: the end of
 * the first forward, found by watch.c), the launch that began the pass (0:
 * not known). */
void ft_learn_trace_pass(struct ft_learn *L, const char *source, uint64_t start);
void ft_learn_to_gpu(struct ft_learn *L, int (*pick)(void *L, CUdeviceptr base),
		     const char *what);

/* How discovery ends: its passes done, or after one pass with a saved
 * profile, on its word (FT_SKIP_DISCOVERY: the saved sizes) or proven by
 * the contents (the saved sizes with the saved checksums). */
enum ft_disc_end { FT_END_PASSES, FT_END_SIZES, FT_END_CONTENT };

/* discovery.c.  Regions read into a discovery state, L->disc or the
 * watch's (one launch's when launch is set: read together too).  A content
 * sample of the candidates at a boundary.  The end of discovery: 1 when a
 * saved profile was adopted (INFERENCE comes now), -1 when a one-pass end
 * did not match, else 0.  The order of L->wmap. */
void ft_learn_feed(struct ft_discover *d, const struct ft_region_ref *r, unsigned n, int launch);
void ft_learn_sample(struct ft_learn *L);
/* After a discovery pass's sample: FT_UNSETTLED_ONCE when regions read
 * through views, of a 32nd or more of the candidate weights' bytes, were
 * checked once only, at an extent that changed (views became parts of
 * them: a stacked expert tensor read through routed experts' slices, whose
 * first pass made each slice a region of its own; one more pass checks
 * them again); else FT_UNSETTLED_SLICES when a region read through views
 * at a stride has slots no view began yet (ft_disc_unread_slices: experts
 * not routed to yet, whose tensor's start and size are not known until
 * they are); else 0. */
enum { FT_UNSETTLED_ONCE = 1, FT_UNSETTLED_SLICES };
int ft_learn_unsettled(struct ft_learn *L);
/* ft_disc_sum_fn (ctx: L): a checksum of a region's first bytes, on the
 * GPU; 0 when its allocation is gone or the GPU cannot make it, or while a
 * stream capture is under way (then L->sums_refused is set). */
uint64_t ft_learn_region_sum(void *ctx, const struct ft_disc_region *r, uint64_t bytes);
int ft_learn_finish_discovery(struct ft_learn *L, enum ft_disc_end end);
/* The traps read together (L->prof.coread) get the pairs of L->wpairs
 * whose weights both leave the GPU with their traps (a weight read all
 * over the pass stays: it pairs with every layer, and matters with none). */
void ft_learn_coread(struct ft_learn *L);
int ft_learn_wmap_cmp(const void *a, const void *b);

/* profiling.c: the launches of the pass that ended before launch `end` are
 * one sample; the end of profiling (then INFERENCE). */
void ft_learn_analyse(struct ft_learn *L, uint64_t end);
/* The launch seq on stream s (ptsz) ran: its "after" event, under L->lock. */
void ft_learn_timed(struct ft_learn *L, CUstream s, int ptsz, uint64_t seq);
void ft_learn_finish_profiling(struct ft_learn *L);

/* saved.c: the saved profile read at start; adopted when it describes this
 * model (1), else 0; after the first pass, taken at once when the pass
 * read its weights (1: INFERENCE began). */
void ft_learn_saved_start(struct ft_learn *L);
/* The directory of profile.json: FT_PROFILE_STORAGE_DIR, or the shared
 * namespace's (L->shm_prof, checked again at each use); NULL: none.
 * ft_learn_profile_name: the same for messages (not checked). */
const char *ft_learn_profile_dir(struct ft_learn *L);
const char *ft_learn_profile_name(const struct ft_learn *L);
/* FT_SKIP_DISCOVERY=1 with FT_PROFILE_STORAGE_DIR (the user's own file;
 * the shared namespace's is taken only on its contents) */
int ft_learn_skip_discovery(const struct ft_learn *L);
int ft_learn_adopt_saved(struct ft_learn *L, enum ft_disc_end end);
int ft_learn_after_first_pass(struct ft_learn *L, const char *when);

/* watch.c: before discovery starts, with a saved profile that has
 * checksums, the regions each launch read (r[0..n), launch: one launch's)
 * are watched for the saved weights; once found with their contents, the
 * watch becomes discovery's first pass and the profile is taken
 * (INFERENCE begins).  Start (after the profile is loaded) and stop (when
 * discovery starts). */
void ft_learn_watch_start(struct ft_learn *L);
void ft_learn_watch(struct ft_learn *L, const struct ft_region_ref *r, unsigned n, int launch);
void ft_learn_watch_stop(struct ft_learn *L);

/* apply.c: memory mode's GPU budget for weights totalling `weights` bytes
 * (0: latency mode); INFERENCE begins: the plan is made or taken and
 * applied. */
uint64_t ft_learn_budget(struct ft_learn *L, uint64_t weights);
void ft_learn_offload(struct ft_learn *L);
/* Whether the weight of first-touch index k is read all over the pass
 * (profile.shared_weights): it stays on the GPU, out of its trap. */
int ft_learn_shared(const struct ft_profile *p, uint32_t k);

/* declared.c: traps from the declared names (their number; 0: the names
 * hold no stack of layers, group by sizes); the traps labelled with their
 * modules; before the plan, declared weights whose content changed stay
 * on the GPU. */
int ft_learn_group_declared(struct ft_learn *L);
/* The weights idx[0..n) (first-touch order) with each module's together,
 * modules where most of their weights were first touched. */
void ft_learn_order_declared(struct ft_learn *L, uint32_t *idx, uint32_t n);
/* Under L->lock after each launch: a declared program that marks no pass
 * is told so, once (within a bounded number of launches). */
void ft_learn_check_marks(struct ft_learn *L);
void ft_learn_label_declared(struct ft_learn *L);
void ft_learn_recheck_declared(struct ft_learn *L);

/* refresh.c: after the plan, the passes whose timings replace the
 * profile's. */
void ft_learn_arm_refresh(struct ft_learn *L, const struct ft_profile *p);

#endif
