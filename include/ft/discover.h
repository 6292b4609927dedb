/*
 * Weight identification (DISCOVERY).  The units are regions: an
 * (allocation, offset) some launch referred to, extending to the next
 * referred offset of the same allocation or to its end.  A region is a
 * weight when all of these hold:
 *   - its allocation existed before the first pass began (weights are
 *     loaded first; activations, caches grown during passes, workspaces
 *     made at the first GEMM are not);
 *   - it was read in every pass observed;
 *   - no copy or memset wrote into it after the first pass began (input
 *     staging buffers, KV caches filled by copies);
 *   - its content was the same at every pass boundary sampled (a checksum
 *     computed on the GPU; KV caches written by kernels change) — which
 *     needs two samples, so discovery lasts at least two passes;
 *   - it is at least FT_WEIGHT_MIN_BYTES (upstream's 0.1 MiB).
 * A referred offset that was not read in every completed pass does not
 * begin a region of its own when a region before it in its allocation
 * was: it is a view into that region's tensor chosen by the data (a token's
 * row of an embedding, a routed expert's slice of a stacked expert tensor),
 * a *part* of it.  The region then extends over its parts, is read in a
 * pass when any of them is, and its reads through them are known views
 * (ft_disc_region.views), which the executor loads the region's trap for.
 * Weights come out in first-touch order of the last completed pass.
 * Where the framework declared its parameters and buffers (ft_declare_tensor,
 * ft_discover.decl), no guess is needed: a region that begins a declared
 * parameter is a weight when it was read in every pass and never written by
 * copies (its content needs no checksum, its age does not matter, its
 * extent ends with the parameter), a region inside one is a part of it, and
 * any other region (a buffer, memory nobody declared) is no weight.  Pure C;
 * the caller serialises and computes the checksums.
 */
#ifndef FT_DISCOVER_H
#define FT_DISCOVER_H

#include <stdint.h>

#define FT_WEIGHT_MIN_BYTES 104858u /* 0.1 MiB, rounded up */
/* Tensors start 16-byte aligned; a reference that is not splits no region. */
#define FT_DISC_ALIGN 16u
#define FT_DISCOVER_MAX_PASSES 64

struct ft_disc_region {
	uint64_t alloc_id, offset;
	uint64_t alloc_base, alloc_size;
	uint64_t extent;           /* bytes, set by ft_disc_extents */
	uint64_t touched;          /* bit p: read in pass p */
	uint32_t order;            /* first-touch position in the pass last touched */
	uint32_t last_pass;        /* that pass */
	uint32_t order_done;       /* first-touch position in the last completed pass */
	uint32_t done_pass;        /* 1 + the pass order_done is from; 0: none */
	uint64_t first_feed;       /* the read (ft_discover.feeds) that first
				      touched it in the pass last touched */
	uint32_t reach;            /* at its latest read in the pass last
				      touched, how many regions that pass had
				      touched: those are read before it ends */
	uint32_t reach_done;       /* reach in the last completed pass */
	uint32_t order_prev, reach_prev; /* order and reach in the pass it was
				      read in before that (prev_pass) */
	uint32_t prev_pass;        /* 1 + that pass; 0: none */
	uint8_t written;           /* a copy/memset wrote into it after the cutoff */
	uint8_t nsums;
	uint8_t sums_differ;
	uint64_t sum;              /* first checksum */
	uint64_t sum_extent;       /* the extent the checksums covered */
	/* set by ft_disc_extents (and ft_disc_match), valid until the next
	 * ft_disc_read: */
	uint32_t owner;            /* the region this one is a part of; itself
				      when it begins a region */
	uint32_t morder;           /* first-touch position of the region or a
				      part, in the last completed pass */
	uint64_t mtouched;         /* touched, of the region and its parts */
	uint32_t mreach;           /* reach of the region or a part in the
				      last completed pass (0: not read there) */
	uint32_t morder2, mreach2; /* morder and mreach of the completed pass
				      before it (mreach2 0: not read there) */
	uint64_t views;            /* bytes from offset within which a read
				      inside the region is a view of it (its
				      parts, and one part's length beyond the
				      last); 0: none seen */
};

enum ft_disc_reason {
	FT_DISC_WEIGHT,
	FT_DISC_TOO_NEW,      /* allocated after the first pass began */
	FT_DISC_NOT_EVERY,    /* not read in every pass */
	FT_DISC_WRITTEN,      /* destination of a copy or memset */
	FT_DISC_CHANGED,      /* content changed between passes */
	FT_DISC_UNCHECKED,    /* fewer than two checksums */
	FT_DISC_SMALL,        /* below FT_WEIGHT_MIN_BYTES */
	FT_DISC_PART,         /* a view into the region before it */
	FT_DISC_UNDECLARED,   /* parameters were declared, and not this */
	FT_DISC_BUFFER,       /* a declared buffer */
	FT_DISC_REASONS
};

/* At most this many pairs of regions read together are kept (and as many
 * interleaved weights). */
#define FT_DISC_MAX_PAIRS (1u << 18)

/* Two regions one launch read together, by key (allocation, offset). */
struct ft_disc_pair {
	uint64_t a_id, a_off, b_id, b_off;
};

/* A tensor the framework declared: [lo, hi) of the device's address space,
 * a parameter (a weight where read) or a buffer (never one). */
struct ft_disc_decl {
	uint64_t lo, hi;
	uint32_t name;             /* the caller's index of its name */
	uint8_t buffer;
};

struct ft_discover {
	uint64_t cutoff_id;        /* allocations with id < cutoff existed first */
	/* regions of allocations older than the cutoff (where weights are)
	 * that one launch read together: a set, open addressing, cap a power
	 * of two; full: some pairs were not kept */
	struct ft_disc_pair *pairs;
	uint32_t npairs, cappairs;
	int pairs_full;
	uint32_t pass;             /* current pass index (0-based) */
	uint32_t passes_done;      /* passes completed while observing */
	uint32_t order_next;       /* next first-touch position in this pass */
	uint64_t feeds;            /* reads so far (ft_disc_read calls) */
	/* the reach each read in this pass replaced, so that reads moved to
	 * the next pass can be taken back (ft_disc_unread_since) */
	struct ft_disc_undo {
		uint64_t alloc_id, offset, feed;
		uint32_t reach;
	} *undo;
	uint32_t nundo, capundo;
	uint32_t n, cap;
	struct ft_disc_region *r;  /* sorted by (alloc_id, offset) */
	int content_known;         /* a saved profile vouches for the contents
				      (FT_SKIP_DISCOVERY): no checksum needed */
	/* declared tensors, sorted by lo, not overlapping (the caller's; NULL:
	 * none, the rules above guess) */
	const struct ft_disc_decl *decl;
	uint32_t ndecl;
};

int ft_disc_init(struct ft_discover *d, uint64_t cutoff_id);
void ft_disc_destroy(struct ft_discover *d);
/* A launch in the current pass read this region. */
int ft_disc_read(struct ft_discover *d, uint64_t alloc_id, uint64_t offset,
		 uint64_t alloc_base, uint64_t alloc_size);
/* One launch read the regions at (ids[i], offs[i]), i < n (each already
 * given to ft_disc_read): they are read together.  Only regions of
 * allocations older than the cutoff count (weights are there). */
void ft_disc_together(struct ft_discover *d, const uint64_t *ids, const uint64_t *offs,
		      unsigned n);
/* Of the weights idx[0..n), the pairs (i, j), i < j, positions in idx,
 * sorted, that were each read after the other was first read in each of
 * the last two completed passes (their reads interleave: a loop over routed experts reads
 * expert e's up projection, its down projection, then expert e + 1's up
 * projection), at most FT_DISC_MAX_PAIRS; none of a weight read all over
 * the pass (a tied embedding read first and last, a table every layer
 * reads: the weights first read between its first and last reads hold more
 * than half of the weights' bytes).  Returns how many (*out malloc'd). */
uint32_t ft_disc_interleaved(const struct ft_discover *d, const uint32_t *idx, uint32_t n,
			     uint32_t (**out)[2]);
/* The weights idx[0..n) (first-touch order, ft_disc_weights) that are read
 * together: pairs (i, j), i < j, positions in idx, sorted, each once; a
 * launch read both, or weight i's extent ends where weight j's begins in
 * one allocation (one tensor may have been seen through two pointers: a
 * read of i reads j's bytes), or they are among inter[0..ninter) (their
 * reads interleave: ft_disc_interleaved's).  Returns how many (*out
 * malloc'd, NULL when none or out of memory). */
uint32_t ft_disc_weight_pairs(const struct ft_discover *d, const uint32_t *idx, uint32_t n,
			      const uint32_t (*inter)[2], uint32_t ninter, uint32_t (**out)[2]);
/* A copy or memset wrote [offset, offset + bytes) of the allocation. */
void ft_disc_write(struct ft_discover *d, uint64_t alloc_id, uint64_t offset, uint64_t bytes);
/* Computes every region's owner, extent (the next referred offset that is
 * not a part, or the allocation's end) and merged fields. */
void ft_disc_extents(struct ft_discover *d);
/* The reads from the since-th on (ft_discover.feeds counts them) belong
 * to the next pass: its boundary was confirmed after it happened, and the
 * caller reads them again once the pass ended.  Regions they touched first
 * in the current pass are as if it had not read them. */
void ft_disc_unread_since(struct ft_discover *d, uint64_t since);
/* The current pass ended; the next begins. */
void ft_disc_pass_end(struct ft_discover *d);
/* Records one checksum of region i (same index as d->r), taken over its
 * current extent.  When the extent changed since the earlier checksums (a
 * tensor placed in what looked like the region's tail), they describe other
 * bytes and are forgotten. */
void ft_disc_sum(struct ft_discover *d, uint32_t i, uint64_t sum);
/* The declared tensor whose bytes hold address va, or -1. */
int ft_disc_declared(const struct ft_discover *d, uint64_t va);
/* Verdict for region i. */
enum ft_disc_reason ft_disc_classify(const struct ft_discover *d, uint32_t i);
const char *ft_disc_reason_name(enum ft_disc_reason r);
/* Indices of the weights in first-touch order of the last pass; returns how
 * many (idx malloc'd). */
uint32_t ft_disc_weights(const struct ft_discover *d, uint32_t **idx);

/* The slices of region i's first `extent` bytes (a weight): the starts,
 * as offsets from the region's, of the regions inside, when they are the
 * views the data chooses into a stacked tensor (a routed expert's slice):
 * each aligned, never written, with stable contents, two or more read in
 * some completed passes and not all (others read in every pass are
 * experts the router always picks, parts by experts_read_every_pass),
 * their offsets all multiples of at least FT_DISC_SLICE_MIN bytes (a
 * token's rows are far smaller).  Up to
 * cap of them into out, ascending; how many there are (0: not sliced, also
 * when any region inside is something else). */
#define FT_DISC_SLICE_MIN (1u << 20)
uint32_t ft_disc_slices(const struct ft_discover *d, uint32_t i, uint64_t extent,
			uint64_t *out, uint32_t cap);
/* The views into regions sliced at a stride of a MiB or more (stacked
 * experts) first read in the last `since` completed passes (extents as
 * ft_disc_extents left them). */
uint32_t ft_disc_new_slices(const struct ft_discover *d, uint32_t since);
/* A region that begins an allocation's regions past its start, read
 * through views at a stride (ft_disc_slices) of which its offset is a
 * multiple, is a stacked tensor whose first experts were never read: a
 * region at the allocation's start, never read, is made before it (its
 * owner from then on, whose bytes are checked as any weight's).  Without
 * it the tensor's weight would begin at its first expert read, the bytes
 * before it would stay on the GPU, and its layer's sizes would differ from
 * the others'. */
void ft_disc_lead_slices(struct ft_discover *d);
/* Of region i, sliced (ft_disc_slices) at a stride (the gcd of its views'
 * offsets), the slots of that stride within its first extent bytes that no
 * view begins (a stacked tensor's experts not routed to yet, or bytes of
 * the tensor after it: its first experts, not read yet); 0 when not
 * sliced. */
uint64_t ft_disc_unread_slices(const struct ft_discover *d, uint32_t i, uint64_t extent);

/* The checksum of the first `bytes` bytes of region r (as
 * ft_gpu_checksums makes it), 0 when it cannot be made. */
typedef uint64_t (*ft_disc_sum_fn)(void *ctx, const struct ft_disc_region *r, uint64_t bytes);

/* A saved profile after one pass: picks, of the candidate weights
 * idx[0..n) (first-touch order), one region for each of the saved
 * profile's weights, in the saved order, into (*idx)[0..nsizes).  Without
 * sums, the first subsequence whose extents are exactly sizes[0..nsizes).
 * With sums, whatever the order (where a pass begins in a forward can
 * differ from run to run): a region is weight k when it starts with
 * sizes[k] bytes whose checksum is sums[k] (and not 0: all-zero bytes
 * prove nothing), taken from the pass's sample where it covered exactly
 * those bytes, else made by sum(ctx, ...); its extent is cut to sizes[k] (a
 * tensor placed after the weight, which cut its extent when the profile was
 * made, may not have been read yet), and its views and parts are the
 * regions inside those bytes (the saved size may hold regions this pass
 * read apart; the size-only match, without sums, takes no such weight).
 * With split (at a pass's end only: bytes no launch read yet are taken by
 * their checksum), a saved weight that begins where another found one
 * ends, inside one of this process's regions (a stack slot split the
 * weight in the run that saved the profile), is found there too: a region
 * is made at its start (d->r grows, *idx may move; up to 8 such weights).
 * Returns nsizes, or 0 when some weight was not found (then *found: how
 * many were, and *missing: the first that was not). */
uint32_t ft_disc_match(struct ft_discover *d, uint32_t **idx, uint32_t n,
		       const uint64_t *sizes, const uint64_t *sums, uint32_t nsizes,
		       ft_disc_sum_fn sum, void *ctx, int split, uint32_t *found,
		       uint32_t *missing);

#endif
