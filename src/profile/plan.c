/* The planner (include/ft/plan.h). */
#include "ft/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/copy_curve.h"

#define MIB (1024.0 * 1024.0)

void ft_plan_free(struct ft_plan *p)
{
	free(p->t);
	memset(p, 0, sizeof(*p));
}

uint64_t ft_plan_budget(double fraction, uint64_t total, uint64_t free_bytes, uint64_t weights)
{
	if (isnan(fraction) || !total)
		return 0;
	double budget = fraction * (double)total, cap = (double)free_bytes + (double)weights;
	if (budget > cap)
		budget = cap;
	return budget > 1 ? (uint64_t)budget : 1;
}

double ft_plan_copies(const struct ft_plan *p, const struct ft_curve_point *c, uint32_t n)
{
	double ms = 0;
	for (uint32_t t = 0; t < p->ntraps; t++)
		if (p->t[t].offloaded)
			ms += p->t[t].copy_ms;
	if (ms <= 0 && p->offloaded_bytes && n)
		ms = ft_curve_ms(c, n, p->offloaded_bytes);
	return ms;
}

static double copy_ms(const struct ft_plan_input *in, uint32_t t)
{
	const struct ft_profile *pr = in->profile;
	const struct ft_trap *tr = &pr->traps[t];
	if (in->raw)
		return ft_curve_ms(pr->curve, pr->ncurve, tr->bytes);
	double ms = 0;
	for (uint32_t k = 0; k < tr->nweights; k++)
		ms += ft_curve_ms(pr->curve, pr->ncurve, pr->weights[tr->first_weight + k]);
	return ms;
}

/* Whether trap i may take block c: no trap read together with it holds c
 * (of those given blocks so far: traps before i, or all with all). */
static int free_for(const struct ft_plan *p, const struct ft_profile *pr, uint32_t i, int c,
		    int all)
{
	for (uint32_t k = 0; k < pr->ncoread; k++) {
		uint32_t a = pr->coread[k][0], b = pr->coread[k][1];
		uint32_t j = a == i ? b : b == i ? a : UINT32_MAX;
		if (j < p->ntraps && (all || j < i) && p->t[j].block == c)
			return 0;
	}
	return 1;
}

/* Blocks round-robin over the offloaded traps; the last one must differ
 * from the first too (the pass wraps; with one block, loaded as each trap
 * is first read, neither applies), and traps read together
 * (pr->coread) never share one: such a trap takes the next block that
 * fits, and stays on the GPU when none does (memory pays for the pair, not
 * the plan).  A trap with no bytes that can leave is never offloaded.  0,
 * or -1 when b blocks cannot (the pass cannot wrap). */
static int assign(struct ft_plan *p, const struct ft_profile *pr, uint32_t b)
{
	uint32_t m = 0, last = 0, first = 0;
	int prev = -1;
	memset(p->block_bytes, 0, sizeof(p->block_bytes));
	for (uint32_t i = 0; i < p->ntraps; i++)
		p->t[i].block = -1;
	for (uint32_t i = 0; i < p->ntraps; i++) {
		if (!pr->traps[i].bytes)
			p->t[i].offloaded = 0;
		if (!p->t[i].offloaded)
			continue;
		int c = -1;
		for (uint32_t k = 0; k < b && c < 0; k++) {
			int x = (int)((m + k) % b);
			if ((b == 1 || x != prev) && free_for(p, pr, i, x, 0))
				c = x;
		}
		if (c < 0) {
			p->t[i].offloaded = 0;
			continue;
		}
		p->t[i].block = c;
		prev = c;
		if (!m++)
			first = i;
		last = i;
	}
	if (b > 1 && m >= 2 && p->t[last].block == p->t[first].block) {
		/* the pass wraps: the last trap's block is the first's */
		int before = -1, c = -1;
		for (uint32_t i = 0; i < last; i++)
			if (p->t[i].block >= 0)
				before = p->t[i].block;
		for (uint32_t k = 1; k < b && c < 0; k++) {
			int x = (int)k;
			if (x != before && x != p->t[first].block && free_for(p, pr, last, x, 1))
				c = x;
		}
		if (c < 0)
			return -1; /* e.g. an odd cycle cannot alternate between two blocks */
		p->t[last].block = c;
	}
	p->nblocks = b;
	p->peak_bytes = p->offloaded_bytes = 0;
	for (uint32_t i = 0; i < p->ntraps; i++) {
		uint64_t bytes = pr->traps[i].bytes;
		if (p->t[i].block < 0) {
			p->peak_bytes += bytes;
		} else {
			p->offloaded_bytes += bytes;
			if (bytes > p->block_bytes[p->t[i].block])
				p->block_bytes[p->t[i].block] = bytes;
		}
	}
	for (uint32_t k = 0; k < b; k++)
		p->peak_bytes += p->block_bytes[k];
	return 0;
}

/* The NVMe tier's reads a pass, ms, for the offloaded bytes: those beyond
 * the host's share (0 without a tier). */
static double disk_ms(const struct ft_plan_input *in, uint64_t offloaded)
{
	if (in->disk_rate <= 0 || offloaded <= in->host_bytes)
		return 0;
	return (double)(offloaded - in->host_bytes) / in->disk_rate * 1e3;
}

/* The bytes of the traps p offloads. */
static uint64_t offloaded_bytes(const struct ft_plan *p, const struct ft_profile *pr)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < p->ntraps; i++)
		if (p->t[i].offloaded)
			n += pr->traps[i].bytes;
	return n;
}

/* Three passes of the execution model; the last one is reported. */
static void simulate(struct ft_plan *p, const struct ft_profile *pr,
		     const struct ft_plan_input *in)
{
	p->disk_ms = disk_ms(in, offloaded_bytes(p, pr));
	double block_free[FT_PLAN_MAX_BLOCKS] = { 0 }, copy_free = 0, end = 0, pass_start = 0, copies = 0;
	for (int pass = 0; pass < 3; pass++) {
		pass_start = end;
		p->stall_ms = 0;
		for (uint32_t i = 0; i < p->ntraps; i++) {
			struct ft_plan_trap *t = &p->t[i];
			double start = end;
			t->wait_ms = t->issue_ms = 0; /* resident: no copy, no wait */
			if (t->block >= 0) {
				double cs = copy_free > block_free[t->block] ? copy_free
									     : block_free[t->block];
				double ce = cs + t->copy_ms;
				copy_free = ce;
				t->issue_ms = cs - pass_start;
				if (ce > start) {
					t->wait_ms = ce - start;
					start = ce;
				} else {
					t->wait_ms = 0;
				}
				p->stall_ms += t->wait_ms;
			}
			t->start_ms = start - pass_start;
			end = start + pr->traps[i].compute.median;
			if (t->block >= 0)
				block_free[t->block] = end;
		}
	}
	p->pass_ms = end - pass_start;
	for (uint32_t i = 0; i < p->ntraps; i++)
		if (p->t[i].block >= 0)
			copies += p->t[i].copy_ms;
	p->floor_ms = copies > p->compute_ms ? copies : p->compute_ms;
	/* the disk's reads run ahead of the copies, in parallel with them:
	 * a pass is no shorter than they are */
	if (p->disk_ms > p->pass_ms)
		p->pass_ms = p->disk_ms;
	if (p->disk_ms > p->floor_ms)
		p->floor_ms = p->disk_ms;
}

/* Memory mode, once the greedy choice fits: the same number of traps
 * spread evenly over the pass, among those no bigger than the largest it
 * took, when that fits too and is predicted no slower.  Spread, every
 * stretch of resident traps between two offloaded ones hides copies, with
 * its compute and with the host's own launch time, which this model leaves
 * out: the copies of the next traps are issued only as the program reaches
 * them, so after a long resident stretch the copy stream has sat idle once
 * its blocks were full (a contiguous half of Llama-3-8B's layers ran decode
 * at 1.4x the transfer floor on the H200, the baseline that spreads them
 * at 1.03x). */
static void spread(struct ft_plan *p, const struct ft_profile *pr, uint32_t b,
		   const struct ft_plan_input *in)
{
	uint32_t n = p->ntraps, m = 0, nc = 0;
	uint64_t big = 0;
	for (uint32_t i = 0; i < n; i++)
		if (p->t[i].offloaded) {
			m++;
			if (pr->traps[i].bytes > big)
				big = pr->traps[i].bytes;
		}
	uint32_t *c = malloc((n + 1) * sizeof(*c));
	int *was = malloc((n + 1) * sizeof(*was));
	if (!c || !was || m < 2) {
		free(c), free(was);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		was[i] = p->t[i].offloaded;
		if (pr->traps[i].bytes && pr->traps[i].bytes <= big)
			c[nc++] = i;
	}
	if (nc > m) {
		simulate(p, pr, in);
		double before = p->pass_ms;
		for (uint32_t i = 0; i < n; i++)
			p->t[i].offloaded = 0;
		for (uint32_t k = 0; k < m; k++)
			p->t[c[(uint64_t)(2 * k + 1) * nc / (2 * m)]].offloaded = 1;
		int keep = !assign(p, pr, b) && p->peak_bytes <= in->budget;
		if (keep) {
			simulate(p, pr, in);
			keep = p->pass_ms <= before + 1e-9;
		}
		if (!keep) {
			for (uint32_t i = 0; i < n; i++)
				p->t[i].offloaded = was[i];
		}
	}
	assign(p, pr, b);
	free(c);
	free(was);
}

/* Offload order: the traps whose copies hide best behind the trap before
 * them (the pass wraps: trap 0 follows the last trap). */
static const double *rank_key;
static int by_key(const void *a, const void *b)
{
	double x = rank_key[*(const uint32_t *)a], y = rank_key[*(const uint32_t *)b];
	return x < y ? -1 : x > y;
}

/* Why no plan of bmin to bmax blocks fits the budget, into why: the least
 * any block count needs with every trap offloaded (cand: scratch). */
static void refuse_budget(const struct ft_plan_input *in, struct ft_plan *cand, uint32_t bmin,
			  uint32_t bmax, char *why, size_t len)
{
	const struct ft_profile *pr = in->profile;
	uint32_t n = pr->ntraps;
	uint64_t least_peak = UINT64_MAX, total = 0;
	for (uint32_t b = bmin; b <= bmax; b++) {
		for (uint32_t i = 0; i < n; i++)
			cand->t[i].offloaded = 1;
		if (!assign(cand, pr, b) && cand->peak_bytes < least_peak)
			least_peak = cand->peak_bytes;
	}
	for (uint32_t i = 0; i < n; i++)
		total += pr->traps[i].bytes;
	if (least_peak == UINT64_MAX)
		snprintf(why, len, "the budget of %.0f MiB cannot hold the traps: no way to give "
			 "%u to %u blocks to the traps lets the pass wrap (traps read together "
			 "cannot share one); raise FT_MAX_GPU_MEM_FRACTION or FT_NUM_BLOCKS",
			 (double)in->budget / MIB, bmin, bmax);
	else
		snprintf(why, len, "the budget of %.0f MiB cannot hold the traps: offloading every "
			 "one still needs %.0f MiB of blocks (the largest traps, %u blocks or more), "
			 "of %.0f MiB of weights; raise FT_MAX_GPU_MEM_FRACTION or lower "
			 "FT_MIN_BLOCKS", (double)in->budget / MIB, (double)least_peak / MIB, bmin,
			 (double)total / MIB);
}

int ft_plan_make(const struct ft_plan_input *in, struct ft_plan *out, char *why, uint32_t len)
{
	const struct ft_profile *pr = in->profile;
	uint32_t n = pr->ntraps;
	uint32_t bmin = in->min_blocks < 2 ? 2 : in->min_blocks;
	uint32_t bmax = in->num_blocks > FT_PLAN_MAX_BLOCKS ? FT_PLAN_MAX_BLOCKS : in->num_blocks;
	if (in->one_block)
		bmin = bmax = 1;
	double scale = in->scale > 0 ? in->scale : 1.0;
	memset(out, 0, sizeof(*out));
	if (bmax < bmin) {
		snprintf(why, len, "num_blocks %u is below min_blocks %u", bmax, bmin);
		return -1;
	}
	if (in->budget && in->budget < FT_PLAN_MIN_BUDGET) {
		snprintf(why, len, "the budget of %.0f MiB is below the minimum of 256 MiB: raise "
			 "FT_MAX_GPU_MEM_FRACTION", (double)in->budget / MIB);
		return -1;
	}
	out->ntraps = n;
	out->t = calloc(n + 1, sizeof(*out->t));
	double *ratio = calloc(n + 1, sizeof(*ratio));
	uint32_t *order = calloc(n + 1, sizeof(*order));
	struct ft_plan_trap *best = calloc(n + 1, sizeof(*best));
	if (!out->t || !ratio || !order || !best) {
		snprintf(why, len, "out of memory");
		free(ratio), free(order), free(best);
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		out->t[i].copy_ms = copy_ms(in, i);
		out->compute_ms += pr->traps[i].compute.median;
		double window = scale * pr->traps[i ? i - 1 : n - 1].compute.median;
		ratio[i] = window > 0 ? out->t[i].copy_ms / window : 1e30;
		order[i] = i;
	}
	rank_key = ratio;
	qsort(order, n, sizeof(*order), by_key);

	/* cand works in out's per-trap array; the best one is kept aside */
	struct ft_plan cand = *out;
	double best_ms = -1;
	uint32_t best_b = 0;
	for (uint32_t b = bmin; b <= bmax; b++) {
		for (uint32_t i = 0; i < n; i++)
			cand.t[i].offloaded = 0;
		int ok = !assign(&cand, pr, b) && (!in->budget || cand.peak_bytes <= in->budget);
		/* memory mode: add traps until the peak fits; latency mode: every
		 * trap whose copy hides */
		for (uint32_t k = 0; k < n && !(in->budget && ok); k++) {
			uint32_t i = order[k];
			if (!in->budget && ratio[i] > 1.0)
				break;
			/* latency mode: no more than the disk reads in the
			 * pass's compute (a smaller trap may still fit) */
			if (!in->budget && disk_ms(in, offloaded_bytes(&cand, pr) + pr->traps[i].bytes) >
						   scale * cand.compute_ms)
				continue;
			cand.t[i].offloaded = 1;
			ok = !assign(&cand, pr, b) && (!in->budget || cand.peak_bytes <= in->budget);
		}
		if (in->budget && !ok) {
			/* the last odd-cycle case: one more trap may make it even */
			for (uint32_t k = 0; k < n && !ok; k++)
				if (!cand.t[order[k]].offloaded) {
					cand.t[order[k]].offloaded = 1;
					ok = !assign(&cand, pr, b) && cand.peak_bytes <= in->budget;
				}
		}
		if (!ok && in->budget)
			continue;
		if (in->budget)
			spread(&cand, pr, b, in);
		if (assign(&cand, pr, b))
			continue;
		simulate(&cand, pr, in);
		if (best_ms < 0 || cand.pass_ms < best_ms - 1e-9) {
			best_ms = cand.pass_ms;
			best_b = b;
			memcpy(best, cand.t, n * sizeof(*best));
		}
	}
	free(ratio);
	free(order);
	if (best_ms < 0) {
		refuse_budget(in, &cand, bmin, bmax, why, len);
		free(best);
		ft_plan_free(out);
		return -1;
	}
	memcpy(out->t, best, n * sizeof(*best));
	free(best);
	assign(out, pr, best_b);
	simulate(out, pr, in);
	return 0;
}
