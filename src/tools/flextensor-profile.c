/*
 * flextensor-profile: read profile.json files without a GPU.
 *   show PROFILE            traps, bytes, compute times, copy curve
 *   validate PROFILE        exit 0 when the library would accept it, 1 with
 *                           the reason when it would refuse it
 *   diff A B                what differs (device, model, traps, timings);
 *                           exit 0 when device, model and traps agree
 * PROFILE is a profile.json file or the directory holding it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ft/copy_curve.h"
#include "ft/profile.h"

#define MIB (1024.0 * 1024.0)

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: flextensor-profile show PROFILE\n"
		   "       flextensor-profile validate PROFILE\n"
		   "       flextensor-profile diff PROFILE_A PROFILE_B\n"
		   "PROFILE: a profile.json file or the directory that holds it\n");
	return rc;
}

static int load(const char *path, struct ft_profile *p)
{
	char why[512];
	enum ft_profile_refusal r = ft_profile_load(path, p, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		printf("%s: refused (%s): %s\n", path, ft_profile_refusal_name(r), why);
		return 1;
	}
	return 0;
}

static uint64_t total(const struct ft_profile *p)
{
	uint64_t t = 0;
	for (uint32_t i = 0; i < p->nweights; i++)
		t += p->weights[i];
	return t;
}

static int show(const char *path)
{
	struct ft_profile p;
	if (load(path, &p))
		return 1;
	printf("profile %s: schema %d, libflextensor %s\n", path, p.schema, p.library);
	printf("device  %s, %.1f GiB, driver %d.%d\n", p.device.name,
	       (double)p.device.total_bytes / (MIB * 1024), p.device.driver / 1000,
	       p.device.driver % 1000 / 10);
	printf("model   fingerprint %016llx, %u weights, %.1f MiB\n\n",
	       (unsigned long long)p.fingerprint, p.nweights, (double)total(&p) / MIB);
	printf("%-10s %-10s %7s %10s %10s %10s %10s %8s\n", "Trap", "Role", "Weights", "MiB",
	       "Median ms", "Min ms", "Max ms", "Samples");
	double sum = 0;
	for (uint32_t i = 0; i < p.ntraps; i++) {
		const struct ft_trap *t = &p.traps[i];
		printf("%-10s %-10s %7u %10.2f %10.3f %10.3f %10.3f %8u\n", t->label, t->role,
		       t->nweights, (double)t->bytes / MIB, t->compute.median, t->compute.min,
		       t->compute.max, t->compute.samples);
		sum += t->compute.median;
	}
	printf("%-10s %-10s %7u %10.2f %10.3f\n", "Sum", "", p.nweights, (double)total(&p) / MIB,
	       sum);
	if (p.ncurve) {
		printf("\ncopy curve (pinned host to device):\n");
		for (uint32_t i = 0; i < p.ncurve; i++)
			printf("  %10.3f MiB  %9.4f ms  %6.1f GB/s\n", (double)p.curve[i].bytes / MIB,
			       p.curve[i].ms, (double)p.curve[i].bytes / (p.curve[i].ms * 1e6));
		printf("  all weights once: %.2f ms\n", ft_curve_ms(p.curve, p.ncurve, total(&p)));
	}
	if (p.plan)
		printf("\nplan: %s mode, %u blocks, offloads %.2f MiB, peak %.2f MiB, predicted pass "
		       "%.3f ms (floor %.3f); made under %s\n", p.plan->budget ? "memory" : "latency",
		       p.plan->nblocks, (double)p.plan->offloaded_bytes / MIB,
		       (double)p.plan->peak_bytes / MIB, p.plan->pass_ms, p.plan->floor_ms,
		       p.plan->settings);
	else
		printf("\nplan: none\n");
	ft_profile_free(&p);
	return 0;
}

/* Whether two plans put every trap in the same block, under the same
 * settings. */
static int same_plan(const struct ft_plan *a, const struct ft_plan *b)
{
	if (!a || !b)
		return a == b;
	if (a->ntraps != b->ntraps || a->nblocks != b->nblocks || strcmp(a->settings, b->settings))
		return 0;
	for (uint32_t i = 0; i < a->ntraps; i++)
		if (a->t[i].block != b->t[i].block)
			return 0;
	return 1;
}

static int diff(const char *a, const char *b)
{
	struct ft_profile x, y;
	if (load(a, &x))
		return 1;
	if (load(b, &y)) {
		ft_profile_free(&x);
		return 1;
	}
	int differ = 0;
	char why[512];
	enum ft_profile_refusal r = ft_profile_check_compatible(&y, &x, why, sizeof(why));
	if (r != FT_PROFILE_OK) {
		printf("%s: %s\n", ft_profile_refusal_name(r), why);
		differ = 1;
	}
	if (x.ntraps != y.ntraps) {
		printf("traps: %u vs %u\n", x.ntraps, y.ntraps);
		differ = 1;
	}
	for (uint32_t i = 0; i < x.ntraps && i < y.ntraps; i++) {
		const struct ft_trap *s = &x.traps[i], *t = &y.traps[i];
		if (strcmp(s->label, t->label) || s->first_weight != t->first_weight ||
		    s->nweights != t->nweights) {
			printf("%s: weights %u..%u vs %s: %u..%u\n", s->label, s->first_weight,
			       s->first_weight + s->nweights, t->label, t->first_weight,
			       t->first_weight + t->nweights);
			differ = 1;
		} else if (s->compute.median != t->compute.median) {
			double d = s->compute.median > 0
					   ? 100.0 * (t->compute.median - s->compute.median) / s->compute.median
					   : INFINITY;
			printf("%s: compute median %.3f -> %.3f ms (%+.1f%%)\n", s->label,
			       s->compute.median, t->compute.median, d);
		}
	}
	if (!same_plan(x.plan, y.plan))
		printf("plan differs\n");
	printf("%s\n", differ ? "profiles describe different runs" : "same device, model and traps");
	ft_profile_free(&x);
	ft_profile_free(&y);
	return differ;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout, 0);
	if (argc == 3 && !strcmp(argv[1], "show"))
		return show(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "validate")) {
		struct ft_profile p;
		if (load(argv[2], &p))
			return 1;
		printf("%s: valid (schema %d, %u weights, %u traps)\n", argv[2], p.schema,
		       p.nweights, p.ntraps);
		ft_profile_free(&p);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "diff"))
		return diff(argv[2], argv[3]);
	return usage(stderr, 2);
}
