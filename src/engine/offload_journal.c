/* FT_VERIFY's journal: the executor's latest steps (launches with the traps
 * they read and ignored, loads, releases, tails, copies), one text line
 * each in a ring, written out by ft_verify_journal (include/flextensor.h).
 * A poisoned block read shows only as NaN in the program's output; the
 * journal lets the program, once it sees one, name the launch that read a
 * trap the executor did not load for it.  Kept only under FT_VERIFY, whose
 * synchronisations cost far more than a line per launch. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/offload.h"
#include "offload_int.h"

#define LINES 32768 /* a Mixtral prefill is about 2,200 launches */
#define WIDTH 480 /* a launch's line: its twelve references last */

static struct {
	pthread_mutex_t lock;
	char (*line)[WIDTH];
	uint64_t n;
	int failed;
} j = { .lock = PTHREAD_MUTEX_INITIALIZER };

void ft_off_journal(const struct ft_offload *o, const char *fmt, ...)
{
	if (!o->gpu)
		return;
	pthread_mutex_lock(&j.lock);
	if (!j.line && !j.failed && !(j.line = malloc(sizeof(*j.line) * LINES)))
		j.failed = 1;
	if (j.line) {
		char *l = j.line[j.n % LINES];
		int at = snprintf(l, WIDTH, "%llu ",
				  (unsigned long long)ft_stats_read(o->stats, FT_STAT_launches));
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(l + at, WIDTH - (size_t)at, fmt, ap);
		va_end(ap);
		j.n++;
	}
	pthread_mutex_unlock(&j.lock);
}

int ft_off_journal_write(const char *path)
{
	pthread_mutex_lock(&j.lock);
	FILE *f = j.line && path ? fopen(path, "w") : NULL;
	int rc = f ? 0 : -1;
	if (f) {
		for (uint64_t i = j.n > LINES ? j.n - LINES : 0; i < j.n; i++)
			fprintf(f, "%s\n", j.line[i % LINES]);
		rc = ferror(f) ? -1 : 0;
		if (fclose(f))
			rc = -1; /* (a full disk) */
	}
	pthread_mutex_unlock(&j.lock);
	return rc;
}

/* Address a as the journal says it: "t<trap>/w<weight>+<offset>" and 'b'
 * when the trap is in its block, '!' when it is out of it, 'x' in a chunk
 * back on the GPU for good, 'r' in a trap that stayed on the GPU; "-"
 * outside every weight. */
const char *ft_off_journal_addr(const struct ft_offload *o, uint64_t a, char *buf, size_t len)
{
	int k = ft_off_weight_of(o, a);
	if (k < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	const struct ft_off_weight *w = &o->w[k];
	const struct ft_off_trap *x = &o->t[w->trap];
	char st = x->block < 0 ? 'r' : !ft_off_live(x, a, a + 1) ? 'x'
				 : o->b[x->block].occupant == (int)w->trap ? 'b' : '!';
	snprintf(buf, len, "t%u/w%d+%llx%c", w->trap, k, (unsigned long long)(a - w->lo), st);
	return buf;
}

/* The blocks' occupants, "3,7,-1,12". */
const char *ft_off_journal_occ(const struct ft_offload *o, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	for (uint32_t k = 0; k < o->nblocks && at + 1 < len; k++)
		at += (size_t)snprintf(buf + at, len - at, "%s%d", k ? "," : "", o->b[k].occupant);
	return buf;
}
