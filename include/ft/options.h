/*
 * Configuration: FT_* environment variables and an INI file, declared once in
 * include/ft/options.def.  Precedence: environment > file > default.
 * Loading never exits: it reports every problem through a callback and
 * returns how many there were; the caller decides (the library exits with
 * status 2, flextensor-config prints them).
 */
#ifndef FT_OPTIONS_H
#define FT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#define FT_CTYPE_BOOL  bool
#define FT_CTYPE_INT   long
#define FT_CTYPE_FLOAT double /* NAN = none */
#define FT_CTYPE_ENUM  int    /* index into choices; -1 = none */
#define FT_CTYPE_PATH  char * /* NULL = none; owned */
#define FT_CTYPE_NAME  char * /* NULL = none; owned; letters, digits, _ . - */

#define FT_NO_CHOICES(C)

enum ft_opt_id {
#define FT_OPT(name, ...) FT_OPT_##name,
#define FT_OPT_REFUSED(name, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
	FT_OPT_COUNT
};

/* FT_SRC_API: set at run time through ft_option_set (the Python package's
 * offload()) */
enum ft_opt_source { FT_SRC_DEFAULT, FT_SRC_FILE, FT_SRC_ENV, FT_SRC_API };

struct ft_options {
#define FT_OPT(name, type, ...) FT_CTYPE_##type name;
#define FT_OPT_REFUSED(name, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
	unsigned char source[FT_OPT_COUNT];
	/* not an option: the process's rank among several (RANK,
	 * OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID, when the matching
	 * size says more than one process, or the rank is above 0); -1 */
	int rank;
};

/* The values of ENUM options (transfer_mode: FT_TM_*, offload_timing:
 * FT_TIMING_*, vllm_timing_batch: FT_BATCH_*, ...), from their choices
 * lists in options.def: indices into the choices. */
#define FT_CHOICE_ENUM(prefix, id, text) FT_##prefix##_##id,
#define FT_OPT(name, type, def, min, max, choices, state, help) \
	enum { choices(FT_CHOICE_ENUM) FT_OPT_CHOICES_END_##name };
#define FT_OPT_REFUSED(name, why)
#include "ft/options.def"
#undef FT_OPT
#undef FT_OPT_REFUSED
#undef FT_CHOICE_ENUM

/* The text of value v of ENUM option id ("" for an empty choice), NULL when
 * out of range or not an ENUM. */
const char *ft_options_choice(enum ft_opt_id id, int v);

typedef void (*ft_opt_report_fn)(void *ud, const char *message);

/* Defaults only; never fails. */
void ft_options_defaults(struct ft_options *o);
/* Defaults, then the file named by FT_CONFIG_FILE, then every FT_* variable
 * of envp.  Returns the number of problems reported (0 = usable). */
int ft_options_load(struct ft_options *o, char *const *envp,
		    ft_opt_report_fn report, void *ud);
void ft_options_free(struct ft_options *o);

/* Calls report with one info line per PLANNED option set away from its
 * default (accepted, not acted on yet). */
void ft_options_note_planned(const struct ft_options *o,
			     ft_opt_report_fn report, void *ud);
/* Writes the option table (name, value, source, default, help) to fd;
 * markdown != 0 writes the README table instead. */
void ft_options_dump(const struct ft_options *o, int fd, int markdown);

/* dst = o, its paths copied: 0, or -1 out of memory (dst freed). */
int ft_options_copy(struct ft_options *dst, const struct ft_options *o);
/* Options names[k] (the INI key, any case) = values[k], k < n, validated
 * together as FT_<NAME>=value is (the same messages, reported) and with
 * o's other values (the cross checks).  Returns the number of problems;
 * with none and set, o takes the values (source FT_SRC_API). */
int ft_options_try(struct ft_options *o, const char *const *names, const char *const *values,
		   int n, int set, ft_opt_report_fn report, void *ud);
/* Option name (any case) as its variable, "FT_NUM_BLOCKS", into out. */
void ft_options_env_name(const char *name, char *out, size_t n);
/* 1 when option name has the same value in a and b, 0 when not, -1 for
 * an unknown name. */
int ft_options_same(const struct ft_options *a, const struct ft_options *b, const char *name);
/* Option name's value in o as text ("none" when unset) into out; 0, or -1
 * for an unknown name. */
int ft_options_format(const struct ft_options *o, const char *name, char *out, size_t n);

/* Levenshtein-based "did you mean": best candidate with similarity >= 0.6 or
 * NULL.  candidates is NULL-terminated. */
const char *ft_did_you_mean(const char *word, const char *const *candidates);

#endif
