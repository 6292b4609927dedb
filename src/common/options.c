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
#include <unistd.h>

enum otype { T_BOOL, T_INT, T_FLOAT, T_ENUM, T_PATH };
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

struct loader {
	struct ft_options *o;
	ft_opt_report_fn report;
	void *ud;
	int errors;
	const char *file;
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
		if (ft_input_parse_double(v, &x) || !(x > d->min && x <= d->max)) {
			snprintf(why, n, "expected a number greater than %g and at most %g%s",
				 d->min, d->max, nullable(d) ? ", or none" : "");
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
	case T_PATH: {
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
			fail(l, "%s: a config file cannot name another config file",
			     shown);
			return;
		}
		char why[320];
		if (parse(&descs[i], value, l->o, why, sizeof(why)) < 0)
			fail(l, "%s=%s is not valid: %s", shown, value, why);
		else
			l->o->source[i] = (unsigned char)src;
		return;
	}
	char word[96];
	if (src == FT_SRC_ENV)
		env_name(name, word, sizeof(word));
	else
		snprintf(word, sizeof(word), "%s", name);
	unknown(l, shown, word, src == FT_SRC_ENV);
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

static int on_ini_line(void *ud, const char *section, const char *name,
		       const char *value)
{
	struct loader *l = ud;
	char shown[320];
	snprintf(shown, sizeof(shown), "%s: [%s] %s", l->file, section, name);
	if (strcasecmp(section, "flextensor")) {
		fail(l, "%s: unknown section [%s]; options go in [flextensor]",
		     l->file, section);
		return 1;
	}
	char lower[64];
	size_t i;
	for (i = 0; name[i] && i < sizeof(lower) - 1; i++)
		lower[i] = (char)tolower((unsigned char)name[i]);
	lower[i] = 0;
	apply(l, lower, value, FT_SRC_FILE, shown);
	return 1;
}

static void load_file(struct loader *l, const char *path)
{
	char what[256];
	char *text = NULL;
	size_t len = 0;
	l->file = path;
	/* Bounded: /dev/zero, a FIFO or a directory is refused here instead
	 * of being read for ever (or silently parsed as nothing). */
	if (ft_input_read_file(path, FT_INPUT_CONFIG_MAX, &text, &len, what, sizeof(what))) {
		fail(l, "FT_CONFIG_FILE=%s: %s; name an INI file with a [flextensor] section",
		     path, what);
		return;
	}
	int rc = ini_parse_string(text, on_ini_line, l);
	if (rc == -2)
		fail(l, "FT_CONFIG_FILE=%s: out of memory while reading it", path);
	else if (rc > 0)
		fail(l, "FT_CONFIG_FILE=%s: line %d is not `key = value` or `[section]`",
		     path, rc);
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
	if (o->trace && !o->enabled)
		fail(l, "FT_TRACE=%s needs FT_ENABLED=1 (with FT_ENABLED=0 the "
		     "library observes nothing)", o->trace);
}

int ft_options_load(struct ft_options *o, char *const *envp,
		    ft_opt_report_fn report, void *ud)
{
	struct loader l = { .o = o, .report = report, .ud = ud };
	ft_options_defaults(o);

	static const char cf[] = "FT_CONFIG_FILE=";
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, cf, sizeof(cf) - 1) && !is_none(*e + sizeof(cf) - 1))
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
		if (descs[i].type == T_PATH) {
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
	static const char *const src_names[] = { "default", "file", "env" };
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
			snprintf(accepted, sizeof(accepted), "(%g, %g]%s", d->min, d->max,
				 nullable(d) ? " or none" : "");
			break;
		case T_ENUM: list_choices(d->choices, accepted, sizeof(accepted)); break;
		case T_PATH: snprintf(accepted, sizeof(accepted), "path or none"); break;
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
