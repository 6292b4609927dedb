/*
 * Bounded, typed reads of user input (include/ft/input.h): whole files that
 * must be regular and small enough, and numbers that must be plain decimal
 * text.  Both exist because the obvious calls are unsafe on what users
 * actually pass: fread until EOF never ends on /dev/zero and fills memory,
 * fopen of a FIFO blocks, and strtol/strtod accept leading spaces, '+',
 * hexadecimal floats, "nan" and trailing junk when checked carelessly.
 */
#include "ft/input.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(char *why, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *why, size_t n, const char *fmt, ...)
{
	if (!why || !n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
}

static const char *kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a file";
}

/* "1 MiB", "256 MiB", or exactly "1048577 bytes" where MiB would round */
static void size_text(size_t bytes, char *out, size_t n)
{
	if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
		snprintf(out, n, "%zu MiB", bytes >> 20);
	else
		snprintf(out, n, "%zu bytes", bytes);
}

/* have = 0: the file grew past the limit while it was read (or says it
 * is empty, as files of /proc do). */
static int too_big(size_t have, size_t limit, char *why, size_t n)
{
	char a[32], b[32];
	size_text(limit, b, sizeof(b));
	if (have) {
		size_text(have, a, sizeof(a));
		say(why, n, "is %s, more than the %s accepted", a, b);
	} else {
		say(why, n, "is larger than the %s accepted", b);
	}
	return -EFBIG;
}

/* Reads fd to EOF, at most limit + 1 bytes; 0 or a negative errno. */
static int read_bounded(int fd, size_t hint, size_t limit, char **text, size_t *len,
			char *why, size_t n)
{
	/* room for one byte past what fstat said, to see EOF, and the NUL */
	size_t cap = (hint < limit ? hint : limit) + 2, have = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (buf && have + 1 == cap) { /* full; cap < limit + 2 here */
			size_t want = cap > (limit + 2) / 2 ? limit + 2 : cap * 2;
			char *t = realloc(buf, want);
			if (!t)
				free(buf);
			buf = t;
			cap = want;
		}
		if (!buf) {
			say(why, n, "out of memory reading the file");
			return -ENOMEM;
		}
		ssize_t r = read(fd, buf + have, cap - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			say(why, n, "cannot read the file: %s", strerror(e));
			return -e;
		}
		if (r == 0)
			break;
		have += (size_t)r;
		if (have > limit) {
			free(buf);
			return too_big(0, limit, why, n);
		}
	}
	buf[have] = 0;
	*text = buf;
	*len = have;
	return 0;
}

int ft_input_read_file(const char *path, size_t limit, char **text, size_t *len,
		       char *why, size_t why_len)
{
	*text = NULL;
	*len = 0;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		say(why, why_len, "cannot open the file: %s", strerror(e));
		return -e;
	}
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
		say(why, why_len, "cannot read the file: %s", strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		say(why, why_len, "is %s, not a regular file", kind(st.st_mode));
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	} else if ((unsigned long long)st.st_size > limit) {
		rc = too_big((size_t)st.st_size, limit, why, why_len);
	} else {
		rc = read_bounded(fd, (size_t)st.st_size, limit, text, len, why, why_len);
	}
	close(fd);
	return rc;
}

int ft_input_parse_long(const char *s, long lo, long hi, long *out)
{
	const char *p = s + (*s == '-');
	if (!*p)
		return -EINVAL;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	/* Only digits after an optional '-' are left: strtol cannot skip
	 * spaces or read a sign or base prefix here, only overflow. */
	errno = 0;
	long x = strtol(s, NULL, 10);
	if (errno == ERANGE || x < lo || x > hi)
		return -ERANGE;
	*out = x;
	return 0;
}

/* Whether s is -?(digits[.digits*]|.digits)([eE][-+]?digits)? exactly. */
static int decimal_text(const char *s)
{
	const char *p = s + (*s == '-');
	size_t whole = strspn(p, "0123456789");
	p += whole;
	size_t frac = 0;
	if (*p == '.') {
		frac = strspn(p + 1, "0123456789");
		p += 1 + frac;
	}
	if (!whole && !frac)
		return 0;
	if (*p == 'e' || *p == 'E') {
		p++;
		p += (*p == '-' || *p == '+');
		size_t exp = strspn(p, "0123456789");
		if (!exp)
			return 0;
		p += exp;
	}
	return !*p;
}

int ft_input_parse_double(const char *s, double *out)
{
	if (!decimal_text(s))
		return -EINVAL;
	/* strtod follows LC_NUMERIC, which the host program may have set to a
	 * locale whose decimal point is ','; the text checked above is read in
	 * the C locale. */
	locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
	char *end = NULL;
	errno = 0;
	double x = c ? strtod_l(s, &end, c) : strtod(s, &end);
	int e = errno;
	if (c)
		freelocale(c);
	if (*end)
		return -EINVAL;
	if (e == ERANGE || !isfinite(x))
		return -ERANGE;
	*out = x;
	return 0;
}
