/*
 * A host store shared by the processes of one host (FT_SHM_ENABLED): one
 * file per model in FT_SHM_DIR (a tmpfs, /dev/shm by default), named by a
 * key of its contents (include/ft/offload.h says which), owner-only.
 *
 *   page 0          struct ft_shm_head
 *   then            what the creator added, each part 4096-aligned: the
 *                   traps' stores, their descriptors and run checksums,
 *                   and last the table of entries (head.table)
 *
 * Roles, without races: the creator makes the file under a name of its
 * own, takes it exclusively (flock), then links it under the key's name;
 * the link of a process that lost the race fails, and it follows.  A
 * follower waits for the shared lock, which it gets once the creator
 * published (state READY) and downgraded, or died: a file found unlocked
 * and not READY is stale and removed, and the election runs again.  Every
 * user holds the shared lock while it maps the file; the last one to leave
 * (its exclusive try succeeds) removes the name.  A crash leaves the name
 * behind with no lock on it: the next process of the namespace to open
 * one removes it (ft_shm_sweep).  Segments are opened without following
 * links and used only when they are regular files of this user with no
 * permissions for others; a follower then checks their contents against
 * its own weights (the engine does).
 */
#ifndef FT_SHM_H
#define FT_SHM_H

#include <stddef.h>
#include <stdint.h>

#define FT_SHM_VERSION 5u /* 5: the non-linear checksum (ft/checksum.h) */
#define FT_SHM_FILLING 0u
#define FT_SHM_READY 1u
#define FT_SHM_CREATOR 1
#define FT_SHM_FOLLOWER 2

struct ft_shm_head {
	char magic[8];                      /* "FTSHM\0\0\0" */
	uint32_t version;                   /* FT_SHM_VERSION */
	uint32_t state;                     /* FT_SHM_FILLING / READY (atomic) */
	uint32_t creator;                   /* its pid */
	uint32_t nent;                      /* entries in the table */
	uint64_t key[2];
	uint64_t table;                     /* offset of the entries */
	uint64_t size;                      /* of the file when published */
};

/* One offloaded trap's store. */
struct ft_shm_entry {
	uint32_t trap, nruns;
	uint64_t raw_bytes;                 /* the trap's offloaded bytes */
	uint64_t off, bytes;                /* its store: the coded image, or raw */
	uint64_t desc;                      /* coded: offset of znchunks + 1
					       descriptors; 0: raw */
	uint32_t znchunks, zcoded;
	uint64_t sums;                      /* offset of nruns run checksums (of
					       the weights the store holds) */
	uint64_t store_sum;                 /* checksum of the store's bytes */
	uint64_t desc_sum;                  /* of the descriptors (coded) */
	uint64_t shape;                     /* a hash of its runs' lengths (a run's
					       checksum does not see trailing zeros) */
};

struct ft_shm {
	int fd;                             /* -1: none */
	int role;                           /* FT_SHM_CREATOR / FOLLOWER, 0 */
	char path[4096];
	struct ft_shm_head *head;           /* page 0, mapped */
	uint64_t end;                       /* bytes of the file so far */
	struct ft_shm_entry *ent;           /* the table, mapped (follower) */
	size_t entlen;
};

/* Opens the segment of key in dir for namespace ns (NULL: "ft"), waiting
 * at most wait_s seconds (0: as long as its creator lives) for it to be
 * filled: FT_SHM_CREATOR (s is this process's to fill), FT_SHM_FOLLOWER
 * (published; s->ent the table), or -1 with why (no segment: the caller
 * keeps a private store). */
int ft_shm_open(struct ft_shm *s, const char *dir, const char *ns, const uint64_t key[2],
		double wait_s, char *why, size_t len);
/* Creator: n more bytes at the file's end (4096-aligned), space reserved
 * (fallocate: a full tmpfs fails here, not as SIGBUS later) and mapped
 * shared, at *off; NULL with errno. */
void *ft_shm_add(struct ft_shm *s, size_t n, uint64_t *off);
/* Creator: n bytes of p added (ft_shm_add), at *off: 0 or -1. */
int ft_shm_write(struct ft_shm *s, const void *p, size_t n, uint64_t *off);
/* Follower: n bytes at off (inside the file) into out: 0 or -1. */
int ft_shm_read(struct ft_shm *s, uint64_t off, void *out, size_t n);
/* Creator: the table written, the segment READY, the lock shared: 0 or -1. */
int ft_shm_publish(struct ft_shm *s, const struct ft_shm_entry *e, uint32_t n);
/* Follower: [off, off + n) of the file mapped shared, read-only unless
 * writable (a driver that cannot register read-only memory), or NULL
 * (outside the file). */
void *ft_shm_map(struct ft_shm *s, uint64_t off, size_t n, int writable);
/* Creator: gives back [off, off + n) when it is the last part added (a
 * store that was not kept); else nothing. */
void ft_shm_trim(struct ft_shm *s, uint64_t off, size_t n);
/* Leaves the segment: the last user removes its name, as does a creator
 * that never published. */
void ft_shm_close(struct ft_shm *s);
/* Forgets the segment without a word to others (a forked child: its lock
 * is its parent's). */
void ft_shm_drop(struct ft_shm *s);
/* Opens each published segment of namespace ns in dir but skip (a path;
 * NULL: none) as a follower, whatever its key, without waiting for one
 * being filled, and hands it to use: use returns 1 when it keeps s (a copy
 * of it, the caller's to close), 0 to go on, -1 to stop (s is closed here
 * then).  Returns how many were kept; why says the last one not opened for
 * another reason than being filled or gone (another user's, say). */
unsigned ft_shm_each(const char *dir, const char *ns, const char *skip,
		     int (*use)(struct ft_shm *s, void *ctx), void *ctx, char *why, size_t len);
/* The path of namespace ns's profile directory in dir, into out: 0, or -1
 * (too long).  ft_shm_profile_ok: it is made (owner-only) or found a
 * directory of this user that no one else may write into (made
 * owner-only then), in a directory others may not replace it in: 0, or -1
 * with why. */
int ft_shm_profile_path(const char *dir, const char *ns, char *out, size_t outlen);
int ft_shm_profile_ok(const char *path, char *why, size_t len);
/* Removes the segments of namespace ns in dir that no process uses (left
 * by a crash); returns how many. */
unsigned ft_shm_sweep(const char *dir, const char *ns);
/* The 128-bit key of n 64-bit words. */
void ft_shm_key(const uint64_t *w, size_t n, uint64_t key[2]);

#endif
