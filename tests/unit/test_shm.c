/* The shared store's segments (src/engine/shm.c): election among
 * processes starting at once, waiting for the creator, a creator that dies
 * mid-fill, the last user removing the name, a crash's leftovers swept,
 * and segments that are not to be trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "ft/shm.h"

static char dir[64];
static const uint64_t key[2] = { 0x1234, 0x5678 };

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/ft-shm-test-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static int exists(const struct ft_shm *s)
{
	return access(s->path, F_OK) == 0;
}

/* The creator's part: one store of n bytes of v, published. */
static void fill(struct ft_shm *s, size_t n, int v)
{
	uint64_t off;
	unsigned char *p = ft_shm_add(s, n, &off);
	assert_non_null(p);
	memset(p, v, n);
	munmap(p, (n + 4095) & ~(size_t)4095);
	struct ft_shm_entry e = { .trap = 3, .nruns = 1, .raw_bytes = n, .off = off, .bytes = n };
	assert_int_equal(ft_shm_publish(s, &e, 1), 0);
}

/* A child creator's part: one page of 7s, published after ms; 0 or -1. */
static int publish_page(struct ft_shm *s, int ms)
{
	uint64_t off;
	unsigned char *p = ft_shm_add(s, 4096, &off);
	if (!p)
		return -1;
	memset(p, 7, 4096);
	munmap(p, 4096);
	struct ft_shm_entry e = { .trap = 3, .off = off, .bytes = 4096 };
	usleep((useconds_t)ms * 1000);
	return ft_shm_publish(s, &e, 1);
}

/* A child that creates namespace ns's segment, says so on ready (when >=
 * 0), then publishes it (publish) or not, and after ms exits without
 * closing it (a crash or an exit without the library's handler). */
static pid_t creator_child(const char *ns, int ready, int publish, int ms)
{
	pid_t k = fork();
	assert_true(k >= 0);
	if (k)
		return k;
	char why[512];
	struct ft_shm s;
	if (ft_shm_open(&s, dir, ns, key, 0, why, sizeof(why)) != FT_SHM_CREATOR ||
	    (ready >= 0 && write(ready, "x", 1) != 1) || (publish && publish_page(&s, 0)))
		_exit(1);
	usleep((useconds_t)ms * 1000);
	_exit(0);
}

static void reads(struct ft_shm *s, size_t n, int v)
{
	assert_int_equal(s->head->nent, 1);
	assert_int_equal(s->ent[0].trap, 3);
	unsigned char *p = ft_shm_map(s, s->ent[0].off, n, 0);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(p[i], v);
	munmap(p, n);
	/* outside the file: refused */
	assert_null(ft_shm_map(s, s->end, 4096, 0));
	unsigned char b;
	assert_int_not_equal(ft_shm_read(s, s->end, &b, 1), 0);
}

static void create_follow_last_removes(void **state)
{
	(void)state;
	char why[512];
	struct ft_shm a, b;
	assert_int_equal(ft_shm_open(&a, dir, "t1", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	struct stat st;
	assert_int_equal(stat(a.path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600); /* owner-only */
	fill(&a, 10000, 0x5a);
	assert_int_equal(ft_shm_open(&b, dir, "t1", key, 0, why, sizeof(why)), FT_SHM_FOLLOWER);
	reads(&b, 10000, 0x5a);
	/* another namespace, another key: other segments */
	struct ft_shm c, d;
	uint64_t other[2] = { 1, 2 };
	assert_int_equal(ft_shm_open(&c, dir, "t2", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	assert_int_equal(ft_shm_open(&d, dir, "t1", other, 0, why, sizeof(why)), FT_SHM_CREATOR);
	ft_shm_close(&c);
	ft_shm_close(&d);
	ft_shm_close(&a);
	assert_true(exists(&b)); /* b still uses it */
	char path[4096];
	snprintf(path, sizeof(path), "%s", b.path);
	ft_shm_close(&b);
	assert_int_not_equal(access(path, F_OK), 0); /* the last user removed it */
}

/* Waits for the n children, whose exit status is their role: one creator,
 * the others followers. */
static void one_creator(const pid_t *kids, int n)
{
	int creators = 0, followers = 0;
	for (int i = 0; i < n; i++) {
		int st;
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st));
		creators += WEXITSTATUS(st) == FT_SHM_CREATOR;
		followers += WEXITSTATUS(st) == FT_SHM_FOLLOWER;
	}
	assert_int_equal(creators, 1);
	assert_int_equal(followers, n - 1);
}

/* Processes starting at once: one creates, the others wait and follow. */
static void election_race(void **state)
{
	(void)state;
	enum { N = 8 };
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i])
			continue;
		close(go[1]);
		char c, why[512];
		if (read(go[0], &c, 1) < 0)
			_exit(9);
		struct ft_shm s;
		int role = ft_shm_open(&s, dir, "race", key, 0, why, sizeof(why));
		if (role == FT_SHM_CREATOR) {
			if (publish_page(&s, 100)) /* filling, while the others wait */
				_exit(8);
			usleep(300 * 1000); /* the followers map it meanwhile */
		} else if (role == FT_SHM_FOLLOWER) {
			unsigned char *p = ft_shm_map(&s, s.ent[0].off, 4096, 0);
			if (!p || p[0] != 7 || p[4095] != 7)
				_exit(7);
		} else {
			_exit(6);
		}
		ft_shm_close(&s);
		_exit(role);
	}
	close(go[0]);
	close(go[1]); /* all at once */
	one_creator(kids, N);
	assert_int_equal(ft_shm_sweep(dir, "race"), 0); /* the last one removed it */
}

/* A follower waits at most FT_SHM_WAIT_TIMEOUT for a creator still filling. */
static void wait_timeout(void **state)
{
	(void)state;
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t k = creator_child("slow", ready[1], 0, 2000); /* dies without publishing */
	char c, why[512];
	assert_int_equal(read(ready[0], &c, 1), 1);
	struct ft_shm s;
	assert_int_equal(ft_shm_open(&s, dir, "slow", key, 0.2, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "FT_SHM_WAIT_TIMEOUT"));
	/* without a limit it waits for the creator, which dies: the stale
	 * segment is removed and this process creates it anew */
	assert_int_equal(ft_shm_open(&s, dir, "slow", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	int st;
	waitpid(k, &st, 0);
	ft_shm_close(&s);
	assert_false(exists(&s));
}

/* A creator dies while many wait: one of them fills the segment anew,
 * the others follow it (none removes the new one). */
static void creator_dies_many_wait(void **state)
{
	(void)state;
	enum { N = 8 };
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t c = creator_child("dies", ready[1], 0, 300); /* dies without publishing */
	char ch;
	assert_int_equal(read(ready[0], &ch, 1), 1);
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i])
			continue;
		char why[512];
		struct ft_shm s;
		int role = ft_shm_open(&s, dir, "dies", key, 0, why, sizeof(why));
		if (role == FT_SHM_CREATOR && publish_page(&s, 50))
			_exit(8);
		usleep(400 * 1000); /* all alive until every one has its role */
		ft_shm_close(&s);
		_exit(role < 0 ? 7 : role);
	}
	int st;
	waitpid(c, &st, 0);
	one_creator(kids, N);
	assert_int_equal(ft_shm_sweep(dir, "dies"), 0);
}

/* A process that crashed after publishing leaves its segment; the next
 * one to open a segment of the namespace removes it. */
static void crash_swept(void **state)
{
	(void)state;
	pid_t k = creator_child("crash", -1, 1, 0); /* no close: a crash */
	int st;
	waitpid(k, &st, 0);
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(ft_shm_sweep(dir, "crash"), 1);
	assert_int_equal(ft_shm_sweep(dir, "crash"), 0);
}

/* Segments not to be trusted: permissions for others, a link, another
 * format: refused by name alone (the caller keeps a private store). */
static void untrusted(void **state)
{
	(void)state;
	char why[512];
	struct ft_shm s;
	assert_int_equal(ft_shm_open(&s, dir, "bad", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	char path[4096];
	snprintf(path, sizeof(path), "%s", s.path);
	ft_shm_close(&s); /* never published: removed */
	assert_int_not_equal(access(path, F_OK), 0);

	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	char junk[8192] = { 0 };
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	assert_int_equal(ft_shm_open(&s, dir, "bad", key, 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "owner-only"));

	/* owner-only but not a segment, in use (unused, it would be swept) */
	assert_int_equal(chmod(path, 0600), 0);
	fd = open(path, O_RDONLY);
	assert_int_equal(flock(fd, LOCK_SH), 0);
	assert_int_equal(ft_shm_open(&s, dir, "bad", key, 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "another format"));
	close(fd);
	unlink(path);

	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(ft_shm_open(&s, dir, "bad", key, 0, why, sizeof(why)), -1);
	unlink(path);
}

struct each_ctx {
	struct ft_shm kept;
	unsigned passed;
};

/* ft_shm_each's callback: keeps the first segment it is handed, counts
 * the others and passes them over. */
static int keep_first(struct ft_shm *s, void *ctx)
{
	struct each_ctx *c = ctx;
	assert_int_equal(s->role, FT_SHM_FOLLOWER);
	assert_non_null(s->ent);
	if (c->kept.fd >= 0) {
		c->passed++;
		return 0;
	}
	c->kept = *s;
	return 1;
}

/* The other published segments of a namespace, whatever their keys: the
 * one skipped by name is not handed, one being filled is passed over
 * without a wait (and left to its creator), another user's or planted one
 * is refused with why, another namespace's is not seen (nor one whose name
 * begins as this one's does); a namespace with a dot in its name sees its
 * own. */
static void each_other_keys(void **state)
{
	(void)state;
	char why[512];
	struct ft_shm a, b, c, d;
	struct each_ctx got = { .kept.fd = -1 };
	const uint64_t k2[2] = { 1, 2 }, k3[2] = { 3, 4 };
	assert_int_equal(ft_shm_open(&a, dir, "each", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	fill(&a, 4096, 1);
	assert_int_equal(ft_shm_open(&b, dir, "each", k2, 0, why, sizeof(why)), FT_SHM_CREATOR);
	fill(&b, 8192, 2);
	assert_int_equal(ft_shm_open(&c, dir, "each", k3, 0, why, sizeof(why)), FT_SHM_CREATOR);
	assert_int_equal(ft_shm_open(&d, dir, "other", k3, 0, why, sizeof(why)), FT_SHM_CREATOR);
	fill(&d, 4096, 3);
	char planted[4200];
	snprintf(planted, sizeof(planted), "%.*s%032x", (int)(strrchr(a.path, '-') - a.path + 1),
		 a.path, 7);
	int fd = open(planted, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	close(fd);

	assert_int_equal(ft_shm_each(dir, "each", a.path, keep_first, &got, why, sizeof(why)), 1);
	assert_int_equal(got.kept.head->key[0], k2[0]);
	assert_int_equal(got.kept.head->key[1], k2[1]);
	assert_int_equal(got.passed, 0);
	assert_non_null(strstr(why, "owner-only"));
	assert_true(exists(&c));
	assert_int_equal(c.role, FT_SHM_CREATOR);
	fill(&c, 4096, 4); /* published now: handed too */
	ft_shm_close(&got.kept);
	char longer[64];
	struct ft_shm e, f;
	snprintf(longer, sizeof(longer), "each-u%u-x", (unsigned)geteuid());
	assert_int_equal(ft_shm_open(&e, dir, longer, k2, 0, why, sizeof(why)), FT_SHM_CREATOR);
	fill(&e, 4096, 5);
	assert_int_equal(ft_shm_each(dir, "each", NULL, keep_first, &got, why, sizeof(why)), 1);
	assert_int_equal(got.passed, 2); /* a, b, c: not longer's */
	ft_shm_close(&got.kept);
	assert_int_equal(ft_shm_open(&f, dir, "each.v2", k2, 0, why, sizeof(why)), FT_SHM_CREATOR);
	fill(&f, 4096, 6);
	got.passed = 0;
	assert_int_equal(ft_shm_each(dir, "each.v2", NULL, keep_first, &got, why, sizeof(why)), 1);
	assert_int_equal(got.passed, 0);
	ft_shm_close(&got.kept);
	ft_shm_close(&e);
	ft_shm_close(&f);
	unlink(planted);
	ft_shm_close(&a);
	ft_shm_close(&b);
	ft_shm_close(&c);
	ft_shm_close(&d);
	assert_false(exists(&a) || exists(&b) || exists(&c) || exists(&d));
}

/* A store not kept gives its space back when it was the last one added. */
static void trim(void **state)
{
	(void)state;
	char why[512];
	struct ft_shm s;
	assert_int_equal(ft_shm_open(&s, dir, "trim", key, 0, why, sizeof(why)), FT_SHM_CREATOR);
	uint64_t a, b;
	void *p = ft_shm_add(&s, 5000, &a), *q = ft_shm_add(&s, 4096, &b);
	assert_non_null(p);
	assert_non_null(q);
	assert_int_equal(a, 4096);
	assert_int_equal(b, 4096 + 8192);
	ft_shm_trim(&s, a, 8192); /* not the last: kept */
	assert_int_equal(s.end, 4096 + 8192 + 4096);
	ft_shm_trim(&s, b, 4096);
	assert_int_equal(s.end, 4096 + 8192);
	struct stat st;
	assert_int_equal(fstat(s.fd, &st), 0);
	assert_int_equal(st.st_size, 4096 + 8192);
	ft_shm_close(&s);
}

static void keys(void **state)
{
	(void)state;
	uint64_t w[3] = { 1, 2, 3 }, x[3] = { 1, 3, 2 }, k1[2], k2[2], k3[2];
	ft_shm_key(w, 3, k1);
	ft_shm_key(x, 3, k2);
	ft_shm_key(w, 2, k3);
	assert_true(k1[0] != k2[0] && k1[1] != k2[1]); /* order counts */
	assert_true(k1[0] != k3[0] && k1[1] != k3[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(create_follow_last_removes),
		cmocka_unit_test(election_race),
		cmocka_unit_test(wait_timeout),
		cmocka_unit_test(creator_dies_many_wait),
		cmocka_unit_test(crash_swept),
		cmocka_unit_test(untrusted),
		cmocka_unit_test(each_other_keys),
		cmocka_unit_test(trim),
		cmocka_unit_test(keys),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
