/*
 * Option parsing and validation, generated from options.def.  This is the
 * only file that reads the environment (a consistency test greps for getenv
 * elsewhere).  Messages name the variable, the value, what is accepted and,
 * for misspellings, the nearest known name.
 */
#include "ft/options.h"
#include "ft/input.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

enum otype { T_BOOL, T_INT, T_FLOAT, T_ENUM, T_PATH, T_NAME };

/* options held as owned text */
#define TEXT(t) ((t) == T_PATH || (t) == T_NAME)
enum ostate { S_ACTIVE, S_PLANNED };

struct desc {
	const char *name;
	enum otype type;
	size_t off;
	const char *def;
	double min, max;
	const char *choices;
	enum ostate state;
	const char *help;
};

/* "a|b|c" from a choices list (FT_CHOICES_*), NULL when there is none */
#define FT_CHOICE_TXT(prefix, id, text) "|" #text
#define CHOICES(ch) (sizeof("" ch(FT_CHOICE_TXT)) > 1 ? ("" ch(FT_CHOICE_TXT)) + 1 : NULL)

static const struct desc descs[FT_OPT_COUNT] = {
#define FT_OPT(n, t, d, mn, mx, ch, st, h) \
	{ #n, T_##t, offsetof(struct ft_options, n), d, mn, mx, CHOICES(ch), S_##st, h },
#define FT_OPT_REFUSED(n, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
};

/* Every ENUM option's value names, by value (NULL-terminated). */
#define FT_CHOICE_STR(prefix, id, text) #text,
#define FT_OPT(n, t, d, mn, mx, ch, st, h) \
	static const char *const names_##n[] = { ch(FT_CHOICE_STR) NULL };
#define FT_OPT_REFUSED(n, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
static const char *const *const choice_names[FT_OPT_COUNT] = {
#define FT_OPT(n, ...) names_##n,
#define FT_OPT_REFUSED(n, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
};

const char *ft_options_choice(enum ft_opt_id id, int v)
{
	if ((unsigned)id >= FT_OPT_COUNT || v < 0)
		return NULL;
	for (int i = 0; i <= v; i++)
		if (!choice_names[id][i])
			return NULL;
	return choice_names[id][v];
}

static const struct {
	const char *name;
	const char *why;
} refused[] = {
#define FT_OPT(n, ...)
#define FT_OPT_REFUSED(n, w) { #n, w },
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
};
#define N_REFUSED (sizeof(refused) / sizeof(refused[0]))

struct ini_text;

struct loader {
	struct ft_options *o;
	ft_opt_report_fn report;
	void *ud;
	int errors;
	const char *file;
	struct ini_text *text;       /* the INI file being parsed */
	int file_line[FT_OPT_COUNT]; /* the line that set each option; 0 = none */
	char bad_section[64];        /* the unknown section last reported */
};

static void fail(struct loader *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(struct loader *l, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->errors++;
	if (l->report)
		l->report(l->ud, msg);
}

/* "transfer_mode" -> "FT_TRANSFER_MODE" */
static void env_name(const char *name, char *out, size_t n)
{
	size_t i = 0;
	snprintf(out, n, "FT_");
	for (i = 0; name[i] && i + 4 < n; i++)
		out[3 + i] = (char)toupper((unsigned char)name[i]);
	out[3 + i] = 0;
}

static int similarity_pct(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 63 || lb > 63)
		return 0;
	unsigned d[64][64];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			unsigned c = toupper((unsigned char)a[i - 1]) !=
				     toupper((unsigned char)b[j - 1]);
			unsigned v = d[i - 1][j - 1] + c;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			d[i][j] = v;
		}
	size_t mx = la > lb ? la : lb;
	return mx ? (int)(100 - 100 * d[la][lb] / mx) : 100;
}

const char *ft_did_you_mean(const char *word, const char *const *cands)
{
	const char *best = NULL;
	int best_s = 69;
	for (; *cands; cands++) {
		int s = similarity_pct(word, *cands);
		if (s > best_s) {
			best_s = s;
			best = *cands;
		}
	}
	return best;
}

static int is_none(const char *v)
{
	return !*v || !strcasecmp(v, "none") || !strcasecmp(v, "null");
}

/* Writes "a, b or c" for an enum's choices. */
static void list_choices(const char *choices, char *out, size_t n)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", choices);
	out[0] = 0;
	char *save = NULL;
	int first = 1;
	for (char *t = strtok_r(tmp, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		size_t len = strlen(out);
		snprintf(out + len, n - len, "%s%s", first ? "" : ", ", t);
		first = 0;
	}
	if (choices[strlen(choices) - 1] == '|') {
		size_t len = strlen(out);
		snprintf(out + len, n - len, " (empty or none disables)");
	}
}

static int enum_index(const char *choices, const char *v)
{
	int idx = 0;
	const char *p = choices;
	while (*p) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && strlen(v) == len && !strncasecmp(p, v, len))
			return idx;
		if (!e)
			break;
		p = e + 1;
		idx++;
	}
	return -1;
}

static const char *enum_choice(const char *choices, int idx, char *out, size_t n)
{
	const char *p = choices;
	for (int i = 0; i < idx && p; i++) {
		p = strchr(p, '|');
		if (p)
			p++;
	}
	if (idx < 0 || !p)
		return "none";
	const char *e = strchr(p, '|');
	size_t len = e ? (size_t)(e - p) : strlen(p);
	snprintf(out, n, "%.*s", (int)len, p);
	return out;
}

static int nullable(const struct desc *d)
{
	return !strcmp(d->def, "none") ||
	       (d->type == T_ENUM && d->choices[strlen(d->choices) - 1] == '|');
}

/* Parses v into the option; 0 or -1 with *why set to what is accepted. */
/* FLOAT: min is exclusive, but for an option whose default is min (0
 * meaning "no limit") */
static int min_inclusive(const struct desc *d)
{
	return d->type == T_FLOAT && !is_none(d->def) && strtod(d->def, NULL) == d->min;
}

static int name_ok(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > 64)
		return 0;
	for (; *v; v++)
		if (!isalnum((unsigned char)*v) && *v != '_' && *v != '.' && *v != '-')
			return 0;
	return 1;
}

static int parse(const struct desc *d, const char *v, struct ft_options *o,
		 char *why, size_t n)
{
	char *field = (char *)o + d->off;

	switch (d->type) {
	case T_BOOL: {
		static const char *const yes[] = { "1", "true", "yes", "y", "on" };
		static const char *const no[] = { "0", "false", "no", "n", "off" };
		for (size_t i = 0; i < 5; i++) {
			if (!strcasecmp(v, yes[i])) {
				*(bool *)field = true;
				return 0;
			}
			if (!strcasecmp(v, no[i])) {
				*(bool *)field = false;
				return 0;
			}
		}
		snprintf(why, n, "expected a boolean: 1, true, yes, on or 0, false, no, off");
		return -1;
	}
	case T_INT: {
		if (nullable(d) && is_none(v)) {
			*(long *)field = -1; /* ranges of nullable INTs start at 0 */
			return 0;
		}
		long x;
		if (ft_input_parse_long(v, (long)d->min, (long)d->max, &x)) {
			snprintf(why, n, "expected a whole number from %ld to %ld%s",
				 (long)d->min, (long)d->max, nullable(d) ? ", or none" : "");
			return -1;
		}
		*(long *)field = x;
		return 0;
	}
	case T_FLOAT: {
		if (nullable(d) && is_none(v)) {
			*(double *)field = NAN;
			return 0;
		}
		/* range checked on the double, before it is stored anywhere */
		double x;
		if (ft_input_parse_double(v, &x) ||
		    !((x > d->min || (min_inclusive(d) && x == d->min)) && x <= d->max)) {
			snprintf(why, n, "expected a number %s %g and at most %g%s",
				 min_inclusive(d) ? "from" : "greater than", d->min, d->max,
				 nullable(d) ? ", or none" : "");
			return -1;
		}
		*(double *)field = x;
		return 0;
	}
	case T_ENUM: {
		if (nullable(d) && is_none(v)) {
			*(int *)field = -1;
			return 0;
		}
		int idx = enum_index(d->choices, v);
		if (idx < 0) {
			char list[256];
			list_choices(d->choices, list, sizeof(list));
			snprintf(why, n, "expected one of %s", list);
			return -1;
		}
		*(int *)field = idx;
		return 0;
	}
	case T_NAME:
		if (!is_none(v) && !name_ok(v)) {
			snprintf(why, n, "expected a name of 1 to 64 letters, digits, '_', '.' or '-', "
				 "or none");
			return -1;
		}
		/* fall through */
	case T_PATH: {
		/* refused, never cut: a cut path names another file */
		size_t len = strlen(v);
		if (len > FT_INPUT_PATH_MAX) {
			snprintf(why, n, "the path is %zu bytes long, more than the %d accepted "
				 "(the system's limit, 4096, less room for what the library adds "
				 "to it); choose a shorter path", len, FT_INPUT_PATH_MAX);
			return -1;
		}
		char **p = (char **)field;
		free(*p);
		*p = is_none(v) ? NULL : strdup(v);
		return 0;
	}
	}
	return -1;
}

/* Did-you-mean over every known option (env form or INI form). */
static const char *suggest(const char *word, int env_form)
{
	static char names[FT_OPT_COUNT + N_REFUSED][48];
	const char *cands[FT_OPT_COUNT + N_REFUSED + 1];
	size_t k = 0;
	for (size_t i = 0; i < FT_OPT_COUNT + N_REFUSED; i++) {
		const char *n = i < FT_OPT_COUNT ? descs[i].name
						 : refused[i - FT_OPT_COUNT].name;
		if (env_form)
			env_name(n, names[k], sizeof(names[k]));
		else
			snprintf(names[k], sizeof(names[k]), "%s", n);
		cands[k] = names[k];
		k++;
	}
	cands[k] = NULL;
	return ft_did_you_mean(word, cands);
}

/* value, or its start and end around "..." when it is too long to show */
static const char *elide(const char *value, char *out, size_t n)
{
	size_t len = strlen(value);
	if (len < 100)
		return value;
	snprintf(out, n, "%.48s...%s", value, value + len - 32);
	return out;
}

/* Refuses a name that is no option: shown is what the user wrote (an
 * environment name, or the file and key), word the name to match against
 * the known ones in the same form. */
static void unknown(struct loader *l, const char *shown, const char *word, int env_form)
{
	const char *s = suggest(word, env_form);
	char hint[128] = "";
	/* FT_enabled for FT_ENABLED: the environment's names are exact */
	if (s)
		snprintf(hint, sizeof(hint), " (did you mean %s?%s)", s,
			 !strcasecmp(s, word) ? " the names are upper case" : "");
	fail(l, "%s is not a FlexTensor option%s; `flextensor-config --help` lists them",
	     shown, hint);
}

/* Applies NAME (lower-case option name) = value from src. */
static void apply(struct loader *l, const char *name, const char *value,
		  enum ft_opt_source src, const char *shown)
{
	for (size_t i = 0; i < N_REFUSED; i++)
		if (!strcmp(name, refused[i].name)) {
			fail(l, "%s is not supported: it %s; remove it", shown,
			     refused[i].why);
			return;
		}
	for (size_t i = 0; i < FT_OPT_COUNT; i++) {
		if (strcmp(name, descs[i].name))
			continue;
		if (i == FT_OPT_config_file && src == FT_SRC_FILE) {
			fail(l, "%s: a config file cannot name another config file; set "
			     "FT_CONFIG_FILE in the environment", shown);
			return;
		}
		char why[320], v[128];
		if (parse(&descs[i], value, l->o, why, sizeof(why)) < 0)
			fail(l, "%s=%s is not valid: %s", shown, elide(value, v, sizeof(v)), why);
		else
			l->o->source[i] = (unsigned char)src;
		return;
	}
	char word[96];
	if (src != FT_SRC_FILE)
		env_name(name, word, sizeof(word));
	else
		snprintf(word, sizeof(word), "%s", name);
	unknown(l, shown, word, src != FT_SRC_FILE);
}

/* The rank of a process among several, from the launcher's variables
 * (torchrun, MPI, PMI, Slurm); -1 for a process on its own. */
static int dist_rank(char *const *envp)
{
	static const char *const names[][2] = {
		{ "RANK=", "WORLD_SIZE=" }, { "OMPI_COMM_WORLD_RANK=", "OMPI_COMM_WORLD_SIZE=" },
		{ "PMI_RANK=", "PMI_SIZE=" }, { "SLURM_PROCID=", "SLURM_NTASKS=" },
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		long rank = -1, size = -1;
		for (char *const *e = envp; e && *e; e++) {
			for (int j = 0; j < 2; j++) {
				size_t n = strlen(names[k][j]);
				long v;
				if (!strncmp(*e, names[k][j], n) &&
				    !ft_input_parse_long(*e + n, 0, (1 << 20) - 1, &v))
					*(j ? &size : &rank) = v;
			}
		}
		if (rank >= 0 && (size > 1 || (size < 0 && rank > 0)))
			return (int)rank;
		if (rank >= 0)
			return -1;
	}
	return -1;
}

void ft_options_defaults(struct ft_options *o)
{
	memset(o, 0, sizeof(*o));
	o->rank = -1;
	for (size_t i = 0; i < FT_OPT_COUNT; i++) {
		char why[256];
		int rc = parse(&descs[i], descs[i].def, o, why, sizeof(why));
		(void)rc; /* defaults are checked by a unit test */
	}
}

/*
 * The INI file is handed to inih one line at a time by ini_next_line, which
 * knows what inih cannot tell the handler: the line's number, whether it is
 * indented, and whether it fits inih's line buffer.  inih (the system's
 * libinih) cuts a line at its compile-time INI_MAX_LINE and parses the rest
 * as a line of its own, so the tail of a long log_file line could set
 * `verify = 1`; its limit cannot be raised from here (libinih's settings are
 * the whole process's, and the host may parse INI files too), so a line that
 * does not fit is refused instead.
 */
struct ini_text {
	struct loader *l;
	const char *p, *end;
	int line;     /* the number of the line last handed to inih */
	int indented; /* whether it starts with a space or a tab */
};

static char *ini_next_line(char *str, int num, void *stream)
{
	struct ini_text *t = stream;
	if (t->p >= t->end)
		return NULL;
	const char *nl = memchr(t->p, '\n', (size_t)(t->end - t->p));
	size_t n = nl ? (size_t)(nl + 1 - t->p) : (size_t)(t->end - t->p);
	size_t text = n - (nl != NULL);
	if (text && t->p[text - 1] == '\r')
		text--;
	t->line++;
	t->indented = *t->p == ' ' || *t->p == '\t';
	/* inih needs room for "\r\n" and the NUL after the text */
	if (num < 4 || text > (size_t)num - 3) {
		fail(t->l, "%s line %d is %zu bytes long; the INI reader (libinih) takes "
		     "lines of at most %d bytes: shorten it, or set this option through its "
		     "FT_* environment variable", t->l->file, t->line, text, num > 3 ? num - 3 : 0);
		str[0] = 0; /* parsed as a blank line */
	} else {
		memcpy(str, t->p, n);
		str[n] = 0;
	}
	t->p += n;
	return str;
}

static int option_index(const char *name)
{
	for (int i = 0; i < FT_OPT_COUNT; i++)
		if (!strcmp(name, descs[i].name))
			return i;
	return -1;
}

/* Each option may be set once in the file; 0 = this is the first time. */
static int set_twice(struct loader *l, const char *name, int i)
{
	int line = l->text->line;
	if (i < 0 || !l->file_line[i]) {
		if (i >= 0)
			l->file_line[i] = line;
		return 0;
	}
	if (l->text->indented)
		/* inih (like Python's configparser) reads an indented line as
		 * more of the value above it */
		fail(l, "%s line %d is indented, so the INI reader takes it as more of the "
		     "value of %s (line %d), not as a line of its own: remove the indentation",
		     l->file, line, name, l->file_line[i]);
	else
		fail(l, "%s line %d sets %s again (line %d set it first): each option may be "
		     "set once in the file; remove one of them", l->file, line, name,
		     l->file_line[i]);
	return 1;
}

static int on_ini_line(void *ud, const char *section, const char *name,
		       const char *value)
{
	struct loader *l = ud;
	int line = l->text->line;
	if (strcasecmp(section, "flextensor")) {
		/* once per section, not once per key in it */
		if (!l->bad_section[0] || strcmp(l->bad_section, section))
			fail(l, "%s line %d: %s%s%s; options go in [flextensor]", l->file, line,
			     *section ? "unknown section [" : name,
			     *section ? section : " is outside any section", *section ? "]" : "");
		snprintf(l->bad_section, sizeof(l->bad_section), "%s", *section ? section : " ");
		return 1;
	}
	/* Keys in the file are matched without regard to case (as INI keys
	 * usually are; the environment's names are exact). */
	char lower[256], shown[320];
	size_t i;
	for (i = 0; name[i] && i < sizeof(lower) - 1; i++)
		lower[i] = (char)tolower((unsigned char)name[i]);
	lower[i] = 0;
	if (set_twice(l, name, option_index(lower)))
		return 1;
	snprintf(shown, sizeof(shown), "%s line %d: %s", l->file, line, name);
	apply(l, lower, value, FT_SRC_FILE, shown);
	return 1;
}

/* The offset of the first byte no text file holds (NUL, or a control
 * character other than tab, CR, LF, FF, VT), or -1. */
static long binary_at(const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)text[i];
		if (!c || c == 0x7f || (c < 0x20 && !strchr("\t\n\r\f\v", c)))
			return (long)i;
	}
	return -1;
}

static void load_file(struct loader *l, const char *path)
{
	char what[256], shown[128];
	char *text = NULL;
	size_t len = 0;
	/* l->file, for messages only while the file is read */
	const char *name = elide(path, shown, sizeof(shown));
	l->file = name;
	/* Bounded: /dev/zero, a FIFO or a directory is refused here instead
	 * of being read for ever (or silently parsed as nothing). */
	if (ft_input_read_file(path, FT_INPUT_CONFIG_MAX, &text, &len, what, sizeof(what))) {
		fail(l, "FT_CONFIG_FILE=%s: %s; name an INI file with a [flextensor] section",
		     name, what);
		return;
	}
	/* A binary file is one error, not one per line of junk. */
	long at = binary_at(text, len);
	if (at >= 0) {
		fail(l, "FT_CONFIG_FILE=%s: not a text file (byte %ld is 0x%02x); name an INI "
		     "file with a [flextensor] section", name, at, (unsigned char)text[at]);
		free(text);
		return;
	}
	struct ini_text t = { .l = l, .p = text, .end = text + len };
	l->text = &t;
	int rc = ini_parse_stream(ini_next_line, &t, on_ini_line, l);
	if (rc == -2)
		fail(l, "FT_CONFIG_FILE=%s: out of memory while reading it", name);
	else if (rc > 0)
		fail(l, "%s line %d is not `key = value`, a comment or a `[section]`", name, rc);
	l->text = NULL;
	free(text);
}

static void cross_check(struct loader *l)
{
	const struct ft_options *o = l->o;
	if (o->min_blocks > o->num_blocks)
		fail(l, "FT_MIN_BLOCKS=%ld is larger than FT_NUM_BLOCKS=%ld; "
		     "raise FT_NUM_BLOCKS or lower FT_MIN_BLOCKS",
		     o->min_blocks, o->num_blocks);
	if (o->offload_timing != FT_TIMING_OFF && o->transfer_mode == FT_TM_STRATEGY)
		fail(l, "FT_OFFLOAD_TIMING needs a block transfer mode; "
		     "FT_TRANSFER_MODE=strategy has no per-trap timing hooks: "
		     "use allocation_block_transfer or raw_block_transfer, or FT_OFFLOAD_TIMING=off");
	/* (auto, the default, leaves strategy's store raw) */
	if (o->transfer_compression == FT_TC_ALWAYS && o->transfer_mode == FT_TM_STRATEGY)
		fail(l, "FT_TRANSFER_COMPRESSION=always needs a block transfer mode (coded copies "
		     "are decoded on a stream of their own, ahead of the launches; strategy loads on "
		     "the launch stream): use allocation_block_transfer or raw_block_transfer, or "
		     "FT_TRANSFER_COMPRESSION=auto or none");
	if (o->graph_copy == FT_GC_KERNEL && !o->pinned_memory)
		fail(l, "FT_GRAPH_COPY=kernel needs FT_PINNED_MEMORY=1 (a copy kernel reads "
		     "only page-locked host memory, and graphs are paged only from it): "
		     "unset one of them");
	if (o->nvme_offload_enabled && !o->nvme_offload_path)
		fail(l, "FT_NVME_OFFLOAD_ENABLED=1 needs FT_NVME_OFFLOAD_PATH (a directory on a local "
		     "disk for the file of traps beyond FT_NVME_HOST_BYTES): set it, or unset "
		     "FT_NVME_OFFLOAD_ENABLED");
	/* (found here, not when the plan is applied and weights wait in
	 * host memory for room on the GPU) */
	struct stat st;
	const char *bad = NULL;
	if (o->nvme_offload_enabled && o->nvme_offload_path) {
		if (stat(o->nvme_offload_path, &st))
			bad = strerror(errno);
		else if (!S_ISDIR(st.st_mode))
			bad = "not a directory";
		else if (access(o->nvme_offload_path, W_OK | X_OK))
			bad = strerror(errno);
	}
	if (bad)
		fail(l, "FT_NVME_OFFLOAD_PATH=%s is not a directory this process can write to "
		     "(%s): create it (mkdir -p) or point it at one on a local disk",
		     o->nvme_offload_path, bad);
	if (o->nvme_alignment_bytes & (o->nvme_alignment_bytes - 1))
		fail(l, "FT_NVME_ALIGNMENT_BYTES=%ld is not a power of two (the disk's block size, "
		     "4096 on most): set 512, 4096, ...", o->nvme_alignment_bytes);
	if (o->nvme_offload_enabled && o->shm_enabled)
		fail(l, "FT_NVME_OFFLOAD_ENABLED=1 and FT_SHM_ENABLED=1 cannot be used together yet (a "
		     "shared store is in host memory only): unset one of them");
	if (o->nvme_offload_enabled && o->graph_paging == FT_GP_CAPTURE)
		fail(l, "FT_NVME_OFFLOAD_ENABLED=1 cannot serve FT_GRAPH_PAGING=capture (its loads go "
		     "into the capture as it is made, and a capture can neither read a file nor move a "
		     "trap to host memory): use FT_GRAPH_PAGING=instantiate, the default");
	if (o->trace && !o->enabled)
		fail(l, "FT_TRACE=%s needs FT_ENABLED=1 (with FT_ENABLED=0 the "
		     "library observes nothing, so there would be nothing to trace): set "
		     "FT_ENABLED=1 or unset FT_TRACE", o->trace);
}

int ft_options_load(struct ft_options *o, char *const *envp,
		    ft_opt_report_fn report, void *ud)
{
	struct loader l = { .o = o, .report = report, .ud = ud };
	ft_options_defaults(o);

	static const char cf[] = "FT_CONFIG_FILE=";
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, cf, sizeof(cf) - 1) && !is_none(*e + sizeof(cf) - 1) &&
		    strlen(*e + sizeof(cf) - 1) <= FT_INPUT_PATH_MAX) /* else refused below */
			load_file(&l, *e + sizeof(cf) - 1);

	for (char *const *e = envp; e && *e; e++) {
		if (strncmp(*e, "FT_", 3))
			continue;
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		char shown[96], lower[96];
		size_t n = (size_t)(eq - *e);
		if (n >= sizeof(shown))
			n = sizeof(shown) - 1;
		memcpy(shown, *e, n);
		shown[n] = 0;
		/* Environment names are case-sensitive: FT_enabled is not
		 * FT_ENABLED, and a program reading one would not see the
		 * other, so it is refused as unknown, not taken. */
		if (strspn(shown, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != n) {
			unknown(&l, shown, shown, 1);
			continue;
		}
		for (size_t i = 3; i <= n; i++)
			lower[i - 3] = (char)tolower((unsigned char)shown[i]);
		apply(&l, lower, eq + 1, FT_SRC_ENV, shown);
	}
	cross_check(&l);
	o->rank = dist_rank(envp);
	return l.errors;
}

void ft_options_free(struct ft_options *o)
{
	for (size_t i = 0; i < FT_OPT_COUNT; i++)
		if (TEXT(descs[i].type)) {
			char **p = (char **)((char *)o + descs[i].off);
			free(*p);
			*p = NULL;
		}
}

static const char *format_value(const struct desc *d, const struct ft_options *o,
				char *out, size_t n)
{
	const char *field = (const char *)o + d->off;
	switch (d->type) {
	case T_BOOL:
		return *(const bool *)field ? "1" : "0";
	case T_INT:
		if (nullable(d) && *(const long *)field < 0)
			return "none";
		snprintf(out, n, "%ld", *(const long *)field);
		return out;
	case T_FLOAT:
		if (isnan(*(const double *)field))
			return "none";
		snprintf(out, n, "%g", *(const double *)field);
		return out;
	case T_ENUM:
		return enum_choice(d->choices, *(const int *)field, out, n);
	case T_PATH:
	case T_NAME:
		return *(char *const *)field ? *(char *const *)field : "none";
	}
	return "?";
}

void ft_options_note_planned(const struct ft_options *o, ft_opt_report_fn report,
			     void *ud)
{
	for (size_t i = 0; i < FT_OPT_COUNT; i++) {
		if (descs[i].state != S_PLANNED || o->source[i] == FT_SRC_DEFAULT)
			continue;
		char env[64], val[64], msg[512];
		env_name(descs[i].name, env, sizeof(env));
		snprintf(msg, sizeof(msg),
			 "%s=%s accepted; offloading is not implemented yet, so it does "
			 "not change execution (the planner's options shape the plan in "
			 "profile.json)",
			 env, format_value(&descs[i], o, val, sizeof(val)));
		report(ud, msg);
	}
}

void ft_options_dump(const struct ft_options *o, int fd, int markdown)
{
	static const char *const src_names[] = { "default", "file", "env", "api" };
	FILE *f = fdopen(dup(fd), "w");
	if (!f)
		return;
	if (markdown)
		fprintf(f, "| Variable | Default | Values | Meaning |\n|---|---|---|---|\n");
	for (size_t i = 0; i < FT_OPT_COUNT; i++) {
		const struct desc *d = &descs[i];
		char env[64], val[256], accepted[256];
		env_name(d->name, env, sizeof(env));
		switch (d->type) {
		case T_BOOL: snprintf(accepted, sizeof(accepted), "0/1"); break;
		case T_INT:
			snprintf(accepted, sizeof(accepted), "%ld..%ld%s", (long)d->min,
				 (long)d->max, nullable(d) ? " or none" : "");
			break;
		case T_FLOAT:
			snprintf(accepted, sizeof(accepted), "%s%g, %g]%s", min_inclusive(d) ? "[" : "(",
				 d->min, d->max, nullable(d) ? " or none" : "");
			break;
		case T_ENUM: list_choices(d->choices, accepted, sizeof(accepted)); break;
		case T_PATH: snprintf(accepted, sizeof(accepted), "path or none"); break;
		case T_NAME: snprintf(accepted, sizeof(accepted), "name or none"); break;
		}
		const char *planned = d->state == S_PLANNED ? " (not implemented yet)" : "";
		if (markdown) {
			fprintf(f, "| `%s` | `%s` | %s | %s%s |\n", env, d->def, accepted,
				d->help, planned);
		} else {
			fprintf(f, "%-26s %-28s (%s)\n    default %s; %s\n    %s%s\n", env,
				format_value(d, o, val, sizeof(val)),
				src_names[o->source[i]], d->def, accepted, d->help, planned);
		}
	}
	fclose(f);
}

int ft_options_copy(struct ft_options *dst, const struct ft_options *o)
{
	*dst = *o;
	int bad = 0;
	for (size_t i = 0; i < FT_OPT_COUNT; i++)
		if (TEXT(descs[i].type)) {
			char **p = (char **)((char *)dst + descs[i].off);
			if (*p && !(*p = strdup(*p)))
				bad = 1;
		}
	if (bad)
		ft_options_free(dst);
	return bad ? -1 : 0;
}

/* name in lower case and its FT_ form; -1 when too long to be one. */
static int both_names(const char *name, char *lower, char *shown, size_t n)
{
	size_t len = strlen(name);
	if (len >= n - 4)
		return -1;
	for (size_t i = 0; i <= len; i++)
		lower[i] = (char)tolower((unsigned char)name[i]);
	env_name(lower, shown, n);
	return 0;
}

int ft_options_try(struct ft_options *o, const char *const *names, const char *const *values,
		   int n, int set, ft_opt_report_fn report, void *ud)
{
	struct ft_options tmp;
	if (ft_options_copy(&tmp, o)) {
		if (report)
			report(ud, "out of memory");
		return 1;
	}
	struct loader l = { .o = &tmp, .report = report, .ud = ud };
	char lower[96], shown[96];
	for (int k = 0; k < n; k++) {
		if (both_names(names[k], lower, shown, sizeof(lower)))
			fail(&l, "%.40s... is too long to be an option name", names[k]);
		else
			apply(&l, lower, values[k], FT_SRC_API, shown);
	}
	if (!l.errors)
		cross_check(&l);
	for (int k = 0; !l.errors && set && k < n; k++) {
		int i = both_names(names[k], lower, shown, sizeof(lower)) ? -1 : option_index(lower);
		char why[320];
		if (i >= 0 && !parse(&descs[i], values[k], o, why, sizeof(why)))
			o->source[i] = FT_SRC_API;
	}
	ft_options_free(&tmp);
	return l.errors;
}

void ft_options_env_name(const char *name, char *out, size_t n)
{
	char lower[96];
	if (both_names(name, lower, out, n < sizeof(lower) ? n : sizeof(lower)))
		snprintf(out, n, "FT_?");
}

int ft_options_format(const struct ft_options *o, const char *name, char *out, size_t n)
{
	char lower[96], shown[96];
	int i = both_names(name, lower, shown, sizeof(lower)) ? -1 : option_index(lower);
	if (i < 0)
		return -1;
	char v[256];
	snprintf(out, n, "%s", format_value(&descs[i], o, v, sizeof(v)));
	return 0;
}

int ft_options_same(const struct ft_options *a, const struct ft_options *b, const char *name)
{
	char lower[96], shown[96];
	int i = both_names(name, lower, shown, sizeof(lower)) ? -1 : option_index(lower);
	if (i < 0)
		return -1;
	const char *x = (const char *)a + descs[i].off, *y = (const char *)b + descs[i].off;
	switch (descs[i].type) {
	case T_BOOL: return *(const bool *)x == *(const bool *)y;
	case T_INT: return *(const long *)x == *(const long *)y;
	case T_FLOAT: {
		double u = *(const double *)x, v = *(const double *)y;
		return u == v || (isnan(u) && isnan(v));
	}
	case T_ENUM: return *(const int *)x == *(const int *)y;
	case T_PATH:
	case T_NAME: {
		const char *u = *(char *const *)x, *v = *(char *const *)y;
		return u == v || (u && v && !strcmp(u, v));
	}
	}
	return 0;
}
