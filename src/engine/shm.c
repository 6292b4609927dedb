/* Segments of a host store shared between processes (include/ft/shm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ft/shm.h"

static const char magic[8] = "FTSHM";

#define PAGE 4096u

static int prefix(char *out, size_t len, const char *ns)
{
	return snprintf(out, len, "ft-%s-u%u-", ns ? ns : "ft", (unsigned)geteuid());
}

/* Whether name is a segment's of the namespace whose prefix is pre (np
 * bytes): the prefix, then the key's 32 hex digits, then the end (or, with
 * tmp, a creator's file before its link: ".<pid>.<hex>.tmp").  Not a
 * longer namespace's whose name begins as this one's does. */
static int named(const char *name, const char *pre, size_t np, int tmp)
{
	if (strncmp(name, pre, np))
		return 0;
	name += np;
	for (int i = 0; i < 32; i++, name++)
		if (!((*name >= '0' && *name <= '9') || (*name >= 'a' && *name <= 'f')))
			return 0;
	if (!*name)
		return 1;
	size_t n = strlen(name);
	return tmp && *name == '.' && n > 4 && !strcmp(name + n - 4, ".tmp");
}

/* A regular file of this user that no one else may read or write. */
static int own(int fd, struct stat *st)
{
	return !fstat(fd, st) && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	       !(st->st_mode & 077);
}

/* Removes path if it still names fd's file (not one made since). */
static void remove_if(const char *path, int fd)
{
	struct stat a, b;
	if (!fstat(fd, &a) && !lstat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(path);
}

static void forget(struct ft_shm *s)
{
	if (s->head)
		munmap(s->head, PAGE);
	if (s->ent)
		munmap(s->ent, s->entlen);
	if (s->fd >= 0)
		close(s->fd);
	s->head = NULL;
	s->ent = NULL;
	s->fd = -1;
	s->role = 0;
}

/* A file whose creator died: removed by the one follower that holds it
 * alone (another may have removed it and made a new one under its name
 * already), forgotten by the others. */
static void stale(struct ft_shm *s)
{
	if (!flock(s->fd, LOCK_EX | LOCK_NB)) {
		remove_if(s->path, s->fd);
	} else {
		/* (the failed try dropped this one's shared lock): the others
		 * get their turn before this one looks again */
		struct timespec ts = { 0, (long)(1 + (unsigned)getpid() % 4) * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	forget(s);
}

#define WHY(...) snprintf(why, len, __VA_ARGS__)

/* The creator: 1, 0 when another process linked the name first (or the
 * file went away before its link), -1 with why. */
static int create(struct ft_shm *s, const uint64_t key[2], char *why, size_t len)
{
	/* a name no other process makes (pids repeat across namespaces) */
	char tmp[sizeof(s->path) + 64];
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(tmp, sizeof(tmp), "%s.%d.%llx.tmp", s->path, (int)getpid(),
		 (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 30) ^
			 (unsigned long long)(uintptr_t)&ts);
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		WHY("cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	int e = flock(fd, LOCK_EX) ? errno : posix_fallocate(fd, 0, PAGE);
	struct ft_shm_head *h = e ? MAP_FAILED
				  : mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		WHY("cannot set up %s: %s", tmp, strerror(e ? e : errno));
		unlink(tmp);
		close(fd);
		return -1;
	}
	memcpy(h->magic, magic, sizeof(magic));
	h->version = FT_SHM_VERSION;
	h->creator = (uint32_t)getpid();
	h->key[0] = key[0];
	h->key[1] = key[1];
	if (link(tmp, s->path)) {
		e = errno;
		unlink(tmp);
		munmap(h, PAGE);
		close(fd);
		if (e == EEXIST || e == ENOENT)
			return 0;
		WHY("cannot name %s: %s", s->path, strerror(e));
		return -1;
	}
	unlink(tmp);
	s->fd = fd;
	s->head = h;
	s->end = PAGE;
	s->role = FT_SHM_CREATOR;
	return 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A follower of the segment named s->path: 1, 0 when there is none (or a
 * stale one was removed), -1 with why.  key NULL: whatever its key; wait_s
 * below 0: not while its creator fills it (0 then). */
static int follow(struct ft_shm *s, const uint64_t key[2], double wait_s, char *why, size_t len)
{
	int fd = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		WHY("cannot open %s: %s", s->path, strerror(errno));
		return -1;
	}
	struct stat st;
	s->fd = fd;
	if (!own(fd, &st)) {
		WHY("%s is not a regular file of this user with owner-only permissions (another "
		    "user's, or planted): not used", s->path);
		forget(s);
		return -1;
	}
	/* the creator holds it exclusively until it published */
	double until = now_s() + wait_s;
	while (flock(fd, LOCK_SH | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			WHY("cannot lock %s: %s", s->path, strerror(errno));
			forget(s);
			return -1;
		}
		if (wait_s < 0) {
			forget(s);
			return 0;
		}
		if (wait_s > 0 && now_s() > until) {
			WHY("its creator did not fill %s within FT_SHM_WAIT_TIMEOUT=%g s", s->path,
			    wait_s);
			forget(s);
			return -1;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (fstat(fd, &st) || (uint64_t)st.st_size < PAGE) {
		stale(s); /* a creator died before its header */
		return 0;
	}
	s->head = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0);
	if (s->head == MAP_FAILED) {
		s->head = NULL;
		WHY("cannot map %s: %s", s->path, strerror(errno));
		forget(s);
		return -1;
	}
	const struct ft_shm_head *h = s->head;
	if (memcmp(h->magic, magic, sizeof(magic)) || h->version != FT_SHM_VERSION ||
	    (key && (h->key[0] != key[0] || h->key[1] != key[1]))) {
		WHY("%s holds another format or another key: not used", s->path);
		forget(s);
		return -1;
	}
	if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != FT_SHM_READY) {
		stale(s); /* unlocked and never published: its creator died or gave up */
		return 0;
	}
	uint64_t tab = (uint64_t)h->nent * sizeof(struct ft_shm_entry);
	if (h->table % PAGE || h->size > (uint64_t)st.st_size || h->table + tab > h->size || !tab) {
		WHY("%s has a table outside the file: not used", s->path);
		forget(s);
		return -1;
	}
	s->entlen = tab;
	s->ent = mmap(NULL, tab, PROT_READ, MAP_SHARED, fd, (off_t)h->table);
	if (s->ent == MAP_FAILED) {
		s->ent = NULL;
		WHY("cannot map %s: %s", s->path, strerror(errno));
		forget(s);
		return -1;
	}
	s->end = h->size;
	s->role = FT_SHM_FOLLOWER;
	return 1;
}

int ft_shm_open(struct ft_shm *s, const char *dir, const char *ns, const uint64_t key[2],
		double wait_s, char *why, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	char pre[128];
	prefix(pre, sizeof(pre), ns);
	if (snprintf(s->path, sizeof(s->path), "%s/%s%016llx%016llx", dir, pre,
		     (unsigned long long)key[0], (unsigned long long)key[1]) >=
	    (int)sizeof(s->path) - 32) {
		WHY("the directory's name is too long");
		return -1;
	}
	ft_shm_sweep(dir, ns);
	for (int round = 0; round < 64; round++) {
		int rc = follow(s, key, wait_s, why, len);
		if (rc)
			return rc < 0 ? -1 : FT_SHM_FOLLOWER;
		rc = create(s, key, why, len);
		if (rc)
			return rc < 0 ? -1 : FT_SHM_CREATOR;
	}
	WHY("%s kept changing hands", s->path);
	return -1;
}

void *ft_shm_add(struct ft_shm *s, size_t n, uint64_t *off)
{
	size_t m = n ? (n + PAGE - 1) & ~(size_t)(PAGE - 1) : PAGE;
	int e = posix_fallocate(s->fd, (off_t)s->end, (off_t)m);
	if (e) {
		errno = e;
		return NULL;
	}
	void *p = mmap(NULL, m, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, (off_t)s->end);
	if (p == MAP_FAILED)
		return NULL;
	if (m >= (8u << 20))
		madvise(p, m, MADV_HUGEPAGE); /* where the tmpfs gives them */
	*off = s->end;
	s->end += m;
	return p;
}

int ft_shm_write(struct ft_shm *s, const void *p, size_t n, uint64_t *off)
{
	void *t = ft_shm_add(s, n, off);
	if (!t)
		return -1;
	memcpy(t, p, n);
	munmap(t, n ? (n + PAGE - 1) & ~(size_t)(PAGE - 1) : PAGE);
	return 0;
}

int ft_shm_read(struct ft_shm *s, uint64_t off, void *out, size_t n)
{
	if (off + n > s->end || off + n < off)
		return -1;
	for (size_t done = 0; done < n;) {
		ssize_t k = pread(s->fd, (char *)out + done, n - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

int ft_shm_publish(struct ft_shm *s, const struct ft_shm_entry *e, uint32_t n)
{
	uint64_t off;
	if (!n || ft_shm_write(s, e, (size_t)n * sizeof(*e), &off))
		return -1;
	s->head->nent = n;
	s->head->table = off;
	s->head->size = s->end;
	__atomic_store_n(&s->head->state, FT_SHM_READY, __ATOMIC_RELEASE);
	/* followers waiting for it get it now */
	return flock(s->fd, LOCK_SH) ? -1 : 0;
}

void *ft_shm_map(struct ft_shm *s, uint64_t off, size_t n, int writable)
{
	if (off % PAGE || !n || off + n > s->end || off + n < off)
		return NULL;
	void *p = mmap(NULL, n, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, s->fd,
		       (off_t)off);
	return p == MAP_FAILED ? NULL : p;
}

void ft_shm_trim(struct ft_shm *s, uint64_t off, size_t n)
{
	if (s->role == FT_SHM_CREATOR && off >= PAGE && off + n == s->end &&
	    !ftruncate(s->fd, (off_t)off))
		s->end = off;
}

void ft_shm_drop(struct ft_shm *s)
{
	forget(s);
}

void ft_shm_close(struct ft_shm *s)
{
	if (s->fd < 0)
		return;
	int ready = s->head && __atomic_load_n(&s->head->state, __ATOMIC_ACQUIRE) == FT_SHM_READY;
	/* the last user: no one else holds a lock on it */
	if (!ready || !flock(s->fd, LOCK_EX | LOCK_NB))
		remove_if(s->path, s->fd);
	forget(s);
}

int ft_shm_profile_path(const char *dir, const char *ns, char *out, size_t outlen)
{
	char pre[128];
	size_t np = (size_t)prefix(pre, sizeof(pre), ns);
	pre[np - 1] = 0; /* (no dash: not a segment's name) */
	return snprintf(out, outlen, "%s/%s.profile", dir, pre) >= (int)outlen ? -1 : 0;
}

int ft_shm_profile_ok(const char *path, char *why, size_t len)
{
	/* its parent: others may not replace it there (/dev/shm is sticky) */
	char parent[4200];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (slash)
		*slash = 0;
	struct stat st;
	if (stat(slash && parent[0] ? parent : slash ? "/" : ".", &st) ||
	    ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))) {
		WHY("FT_SHM_DIR=%s may be written by other users and is not sticky (others could "
		    "replace what is in it): no profile kept there", slash ? parent : ".");
		return -1;
	}
	if (mkdir(path, 0700) && errno != EEXIST) {
		WHY("cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int ok = fd >= 0 && !fstat(fd, &st) && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		 !(st.st_mode & 022);
	/* readable by others but ours, and theirs to write into never: made
	 * owner-only (what is in it is this user's) */
	if (ok && (st.st_mode & 077))
		ok = !fchmod(fd, 0700);
	if (fd >= 0)
		close(fd);
	if (!ok)
		WHY("%s is not a directory of this user that only this user may write (another "
		    "user's, a link, or made so): not used", path);
	return ok ? 0 : -1;
}

unsigned ft_shm_each(const char *dir, const char *ns, const char *skip,
		     int (*use)(struct ft_shm *s, void *ctx), void *ctx, char *why, size_t len)
{
	char pre[128];
	size_t np = (size_t)prefix(pre, sizeof(pre), ns);
	struct ft_shm s;
	DIR *d = opendir(dir);
	unsigned kept = 0;
	if (len)
		why[0] = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		memset(&s, 0, sizeof(s));
		s.fd = -1;
		if (!named(e->d_name, pre, np, 0) ||
		    snprintf(s.path, sizeof(s.path), "%s/%s", dir, e->d_name) >= (int)sizeof(s.path) ||
		    (skip && !strcmp(s.path, skip)) || follow(&s, NULL, -1, why, len) != 1)
			continue;
		int r = use(&s, ctx);
		if (r > 0)
			kept++;
		else
			ft_shm_close(&s);
		if (r < 0)
			break;
	}
	if (d)
		closedir(d);
	return kept;
}

unsigned ft_shm_sweep(const char *dir, const char *ns)
{
	char pre[128], path[4096];
	size_t np = (size_t)prefix(pre, sizeof(pre), ns);
	DIR *d = opendir(dir);
	unsigned n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (!named(e->d_name, pre, np, 1) ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		struct stat st;
		if (fd < 0)
			continue;
		if (own(fd, &st) && !flock(fd, LOCK_EX | LOCK_NB)) {
			remove_if(path, fd);
			n++;
		}
		close(fd);
	}
	if (d)
		closedir(d);
	return n;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void ft_shm_key(const uint64_t *w, size_t n, uint64_t key[2])
{
	uint64_t a = 0xcbf29ce484222325ull ^ n, b = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		a = mix(a ^ w[i]);
		b = mix(b + w[i] + (uint64_t)i * 0x9e3779b97f4a7c15ull);
	}
	key[0] = a;
	key[1] = b;
}
