/*
 * Bounded, typed reads of what users hand the library and its tools: whole
 * files, which must be regular files under a size limit (never a device, a
 * FIFO or a directory, which could be read for ever or block), and numbers,
 * which must be plain decimal text, range-checked before any conversion.
 * The size limits are named here, once.
 */
#ifndef FT_INPUT_H
#define FT_INPUT_H

#include <stddef.h>

/* The INI file named by FT_CONFIG_FILE: a few dozen short lines. */
#define FT_INPUT_CONFIG_MAX ((size_t)1 << 20)
/* profile.json: a few hundred bytes a trap and a weight; a model with a
 * million weights stays far below it. */
#define FT_INPUT_PROFILE_MAX ((size_t)256 << 20)
/* A path in an FT_* option: PATH_MAX (4096, with its NUL) less room for
 * what the library appends (/profile.rank<N>.json, .tmp.<pid>.<n>) or
 * substitutes (%p in FT_TRACE). */
#define FT_INPUT_PATH_MAX 4000

/*
 * Reads the regular file path, at most limit bytes, into a NUL-terminated
 * malloc'd buffer: *text (free it), *len (the file may hold NUL bytes).
 * Opens without blocking (a FIFO is refused, not waited on) and reads no
 * more than limit + 1 bytes whatever the file says its size is (files of
 * /proc say 0).  Returns 0, or a negative errno with why (may be NULL) set
 * to what went wrong, a phrase that reads after "<path>: ":
 *   -ENOENT (and other open errors)  "cannot open the file: <strerror>"
 *   -EISDIR   "is a directory, not a regular file"
 *   -EINVAL   "is a character device, not a regular file" (block device,
 *             FIFO, socket alike)
 *   -EFBIG    "is 5242880 bytes, more than the 1 MiB accepted"
 *   -EIO etc. "cannot read the file: <strerror>"
 *   -ENOMEM   "out of memory reading the file"
 * Thread-safe; allocates, so not for use inside a hook's fast path.
 */
int ft_input_read_file(const char *path, size_t limit, char **text, size_t *len,
		       char *why, size_t why_len);

/*
 * Strict numbers.  Accepted: an optional '-', decimal digits and, for
 * doubles, an optional fraction and exponent ("0.5", "-3", "1e6", ".25").
 * Refused: leading or trailing spaces, '+', hexadecimal, nan, inf, any
 * trailing text, and (doubles) values that overflow or underflow.  The
 * decimal point is '.' whatever the process's locale.  Pure functions.
 */
/* 0, -EINVAL (not such a number) or -ERANGE (outside [lo, hi]). */
int ft_input_parse_long(const char *s, long lo, long hi, long *out);
/* 0, -EINVAL (not such a number) or -ERANGE (not a finite double, or a
 * non-zero value too small for one); the caller checks its own range. */
int ft_input_parse_double(const char *s, double *out);

#endif
