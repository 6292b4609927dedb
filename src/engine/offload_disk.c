/*
 * The NVMe tier (FT_NVME_OFFLOAD_ENABLED): the offloaded traps beyond
 * FT_NVME_HOST_BYTES keep their store (raw, or the coded image) in a file
 * without a name in FT_NVME_OFFLOAD_PATH, at aligned offsets, written once
 * when the plan is applied; their host store is a ring of pinned buffers.
 * A reader thread keeps the file's next traps after the latest load (which
 * the executor tells it) read into the ring, cyclically, reusing a buffer
 * only once the copy that read it last is done; a load of such a trap takes
 * its buffer (reading it there and then when the reader is behind: a miss),
 * copies from it, and gives it back with an event after the copy.  A graph
 * cannot read a file: a trap loaded inside a capture (a substitute) moves
 * to host memory for good first (promoted).  Bringing a trap back, and
 * FT_VERIFY's sums of parts of it, read the file directly.
 *
 * With FT_NVME_TRANSFER_MODE=cufile and GPUDirect Storage present (gds.c)
 * the ring is in GPU memory: the reader reads with cuFile from the disk
 * into it, and a load copies from it to the block on the GPU (the host's
 * memory and its link carry none of those bytes).  The executor's own
 * reads (misses) go through the host instead: it holds the engine's lock,
 * and cuFile's driver calls must never wait for it; so do all reads once
 * a cuFile read failed (said).  Where GPUDirect Storage is not there, the
 * tier reads as with posix (said once).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ft/log.h"
#include "ft/passthrough.h"
#include "gds.h"
#include "offload_int.h"

#define SLOTS 3

enum { EMPTY, READING, FILLED };

struct slot {
	unsigned char *buf;                 /* pinned, cap bytes (cuFile: slot 0 only, for
					       staging) */
	CUdeviceptr dev;                    /* cuFile: the slot's GPU buffer, cap bytes */
	int trap;                           /* whose bytes it holds (or is reading), -1 */
	int state;
	int held;                           /* a load copies from it */
	int used;                           /* done was recorded after a copy from it */
	CUevent done;
};

struct ft_off_disk {
	int fd;
	int direct;                         /* O_DIRECT */
	struct ft_gds gds;                  /* FT_NVME_TRANSFER_MODE=cufile: gds.fh set */
	CUcontext ctx;                      /* the ring's (the reader reads in it) */
	int gds_bad;                        /* a cuFile read failed: reads go through
					       slot 0's pinned buffer from then on */
	pthread_mutex_t bounce;             /* slot 0's pinned buffer, for those */
	size_t align, cap;
	uint64_t end;                       /* of the file */
	struct slot slot[SLOTS];
	unsigned char *on;                  /* per trap: its store is in the file */
	uint64_t *bytes, *off;              /* per trap: its bytes there, where */
	uint32_t ntraps;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t reader;
	int started, stop;
	int front;                          /* the trap the executor loaded last: the
					       reader reads the file's next ones */
	const struct ft_real *real;
	struct ft_offload *o;
};

static size_t up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* A file system that took O_DIRECT at open but refuses its reads or
 * writes (or an alignment smaller than the disk's blocks): the file is
 * read and written through the page cache from here on.  0, or -1. */
static int buffered(struct ft_off_disk *d)
{
	int fl = fcntl(d->fd, F_GETFL);
	if (fl < 0 || fcntl(d->fd, F_SETFL, fl & ~O_DIRECT))
		return -1;
	__atomic_store_n(&d->direct, 0, __ATOMIC_RELAXED);
	ft_warn_once("the NVMe tier's file refuses O_DIRECT reads or writes (FT_NVME_ALIGNMENT_BYTES "
		     "below the disk's block size?): it is read through the page cache");
	return 0;
}

/* Trap t's store bytes [off, off + n) from the file into buf (aligned
 * where the file is read directly): 0, or -1. */
static int pread_all(struct ft_off_disk *d, uint64_t base, size_t off, size_t n,
		     unsigned char *buf)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = pread(d->fd, buf + done, n - done, (off_t)(base + off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EINVAL && d->direct && !buffered(d))
			continue; /* O_DIRECT refused after all: again, buffered */
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

/* n bytes of buf (aligned where the file is written directly) to the file
 * at off: 0, or -1 with errno (0: a short write). */
static int pwrite_all(struct ft_off_disk *d, uint64_t off, size_t n, const unsigned char *buf)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = pwrite(d->fd, buf + done, n - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EINVAL && d->direct && !buffered(d))
			continue; /* O_DIRECT refused after all: again, buffered */
		if (k <= 0) {
			if (!k)
				errno = 0;
			return -1;
		}
		done += (size_t)k;
	}
	return 0;
}

/* n bytes of the file at off into GPU ring buffer x through slot 0's
 * pinned buffer (the executor's own reads, which must not wait for
 * cuFile's driver calls under the engine's lock; and all of them once a
 * cuFile read failed). */
static int via_host(struct ft_off_disk *d, const struct slot *x, uint64_t off, size_t n)
{
	/* (a synchronous copy must neither fail nor invalidate a capture
	 * another thread makes in global mode) */
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	int swap = d->real->cuThreadExchangeStreamCaptureMode &&
		   !d->real->cuThreadExchangeStreamCaptureMode(&mode);
	pthread_mutex_lock(&d->bounce);
	int rc = pread_all(d, off, 0, up(n, d->align), d->slot[0].buf) ||
		 d->real->cuMemcpyHtoD_v2(x->dev, d->slot[0].buf, n) ? -1 : 0;
	pthread_mutex_unlock(&d->bounce);
	if (swap)
		d->real->cuThreadExchangeStreamCaptureMode(&mode);
	return rc;
}

/* Trap t into GPU ring buffer x: by cuFile on the reader thread (1), else
 * (executor, or cuFile failed once: said) through the host (0); -1. */
static int gds_read(struct ft_offload *o, int t, const struct slot *x, int executor)
{
	struct ft_off_disk *d = o->disk;
	size_t n = d->bytes[t];
	if (!executor && !__atomic_load_n(&d->gds_bad, __ATOMIC_RELAXED)) {
		if (!ft_gds_read(&d->gds, x->dev, up(n, d->align), d->off[t]))
			return 1;
		__atomic_store_n(&d->gds_bad, 1, __ATOMIC_RELAXED);
		ft_warn_once("FT_NVME_TRANSFER_MODE=cufile: cuFile could not read trap %d from the "
			     "file (%s): the NVMe tier reads with pread and copies to the GPU from "
			     "now on", t, strerror(errno));
	}
	return via_host(d, x, d->off[t], n);
}

/* A whole trap into ring buffer x (its aligned length: O_DIRECT reads
 * whole blocks); executor: the read is the executor's (a miss). */
static int read_trap(struct ft_offload *o, int t, const struct slot *x, int executor)
{
	struct ft_off_disk *d = o->disk;
	uint64_t t0 = ft_off_now_ns(), n = d->bytes[t]; /* (o->t[t] is the executor's) */
	int rc;
	if (d->gds.fh) {
		rc = gds_read(o, t, x, executor);
		if (rc > 0)
			FT_STAT_INC(o->stats, nvme_cufile_reads);
		rc = rc < 0 ? -1 : 0;
	} else
		rc = pread_all(d, d->off[t], 0, up(n, d->align), x->buf);
	FT_STAT_INC(o->stats, nvme_reads);
	FT_STAT_ADD(o->stats, nvme_read_bytes, n);
	FT_STAT_ADD(o->stats, nvme_read_ns, ft_off_now_ns() - t0);
	return rc;
}

static int find(const struct ft_off_disk *d, int t)
{
	for (int s = 0; s < SLOTS; s++)
		if (d->slot[s].trap == t && d->slot[s].state != EMPTY)
			return s;
	return -1;
}

/* The next traps of the file after the latest load, cyclically: as many
 * as the ring holds, less the one that load may still be copying from. */
static int wanted(const struct ft_off_disk *d, int t)
{
	uint32_t n = d->ntraps, seen = 0, from = d->front < 0 ? n - 1 : (uint32_t)d->front;
	for (uint32_t step = 1; step <= n && seen < SLOTS - 1; step++) {
		uint32_t k = (from + step) % n;
		if (!d->on[k])
			continue;
		if ((int)k == t)
			return 1;
		seen++;
	}
	return 0;
}

/* A buffer that may be refilled with trap t: free, or holding a trap not
 * wanted soon, not being copied from, its last copy done; with force (a
 * load that needs t now) also one holding a wanted trap, or whose last
 * copy may still run (the caller waits for it); -1 none.  Under d->mu. */
static int victim(struct ft_off_disk *d, int t, int force)
{
	const struct ft_real *r = d->real;
	for (int pass = 0; pass < 1 + force; pass++)
		for (int s = 0; s < SLOTS; s++) {
			struct slot *x = &d->slot[s];
			if (x->held || x->state == READING)
				continue;
			if (pass == 0 && x->state == FILLED && x->trap != t && wanted(d, x->trap))
				continue;
			if (x->used && !force && r->cuEventQuery(x->done) != CUDA_SUCCESS)
				continue;
			return s;
		}
	return -1;
}

static void *reader(void *arg)
{
	struct ft_off_disk *d = arg;
	struct ft_offload *o = d->o;
	/* its event queries must not fail, nor invalidate, a capture another
	 * thread makes in global mode (PyTorch's default) */
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	if (d->real->cuThreadExchangeStreamCaptureMode)
		d->real->cuThreadExchangeStreamCaptureMode(&mode);
	if (d->gds.fh) {
		/* cuFile reads in the ring's context, and its driver calls on
		 * this thread pass the hooks untouched (they would wait for the
		 * engine's lock, whose holder may wait for this read) */
		ft_passthrough = 1;
		if (d->real->cuCtxSetCurrent)
			d->real->cuCtxSetCurrent(d->ctx);
	}
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		/* the first wanted trap not in the ring, and a buffer for it */
		int t = -1, s = -1, blocked = 0;
		uint32_t n = d->ntraps, from = d->front < 0 ? n - 1 : (uint32_t)d->front, seen = 0;
		for (uint32_t step = 1; step <= n && seen < SLOTS - 1 && t < 0; step++) {
			uint32_t k = (from + step) % n;
			if (!d->on[k])
				continue;
			seen++;
			if (find(d, (int)k) >= 0)
				continue;
			if ((s = victim(d, (int)k, 0)) >= 0)
				t = (int)k;
			else
				blocked = 1;
		}
		if (t < 0 && !blocked) {
			pthread_cond_wait(&d->cv, &d->mu); /* until a load moves on */
			continue;
		}
		if (t < 0) {
			/* a buffer's copy still runs: a look again soon */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&d->cv, &d->mu, &ts);
			continue;
		}
		struct slot *x = &d->slot[s];
		x->trap = t;
		x->state = READING;
		pthread_mutex_unlock(&d->mu);
		int rc = read_trap(o, t, x, 0);
		pthread_mutex_lock(&d->mu);
		x->state = rc ? EMPTY : FILLED;
		if (rc) {
			x->trap = -1;
			ft_error_once("FT_NVME_OFFLOAD_ENABLED: cannot read trap %d from the file: %s", t,
				      strerror(errno));
		}
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* Where ring buffer x's bytes are for a copy: its GPU buffer (cuFile) as
 * a pointer, or its pinned one. */
static unsigned char *bytes_of(const struct ft_off_disk *d, const struct slot *x)
{
	return d->gds.fh ? (unsigned char *)(uintptr_t)x->dev : x->buf;
}

/* The ring buffer holding trap t, read there and then when the reader is
 * behind; NULL when the file cannot be read. */
static unsigned char *get(struct ft_offload *o, int t)
{
	struct ft_off_disk *d = o->disk;
	pthread_mutex_lock(&d->mu);
	for (int tries = 0;; tries++) {
		int s = find(d, t);
		if (s >= 0 && d->slot[s].state == FILLED) {
			d->slot[s].held = 1;
			pthread_mutex_unlock(&d->mu);
			return bytes_of(d, &d->slot[s]);
		}
		if (s >= 0) { /* being read */
			pthread_cond_wait(&d->cv, &d->mu);
			continue;
		}
		/* a miss: the reader is behind, or the load is out of turn */
		if (tries > 1000)
			break;
		if ((s = victim(d, t, 1)) < 0) {
			pthread_cond_wait(&d->cv, &d->mu);
			continue;
		}
		struct slot *x = &d->slot[s];
		x->trap = t;
		x->state = READING;
		pthread_mutex_unlock(&d->mu);
		if (x->used) { /* its last copy (another thread may be capturing) */
			CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
			int swap = d->real->cuThreadExchangeStreamCaptureMode &&
				   !d->real->cuThreadExchangeStreamCaptureMode(&mode);
			d->real->cuEventSynchronize(x->done);
			if (swap)
				d->real->cuThreadExchangeStreamCaptureMode(&mode);
		}
		FT_STAT_INC(o->stats, nvme_misses);
		int rc = read_trap(o, t, x, 1);
		pthread_mutex_lock(&d->mu);
		x->state = rc ? EMPTY : FILLED;
		if (rc)
			x->trap = -1;
		pthread_cond_broadcast(&d->cv);
		if (rc)
			break;
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* The executor loaded trap t (of the file or not): the reader reads the
 * file's traps after it.  Under d->mu. */
static void front(struct ft_off_disk *d, int t)
{
	if (d->front != t) {
		d->front = t;
		pthread_cond_broadcast(&d->cv);
	}
}

void ft_off_disk_loaded(struct ft_offload *o, int t)
{
	struct ft_off_disk *d = o->disk;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	front(d, t);
	pthread_mutex_unlock(&d->mu);
}

unsigned char *ft_off_disk_take(struct ft_offload *o, int t)
{
	struct ft_off_trap *x = &o->t[t];
	if (o->cap_id) {
		if (ft_off_disk_promote(o, t))
			ft_error_once("cannot move trap %d from the NVMe tier's file to host memory for "
				      "a CUDA graph: that graph reads whatever its block holds", t);
		return NULL;
	}
	unsigned char *ring = get(o, t);
	if (!ring) {
		ft_error_once("cannot read trap %d from the NVMe tier's file: launches that read it "
			      "read whatever its block holds; run with FT_NVME_OFFLOAD_ENABLED=0", t);
		return NULL;
	}
	x->host = ring;
	x->ring_gpu = o->disk->gds.fh != NULL; /* (copies from it are on the GPU) */
	if (x->z.desc && !x->ring_gpu)
		x->z.data = ring; /* a coded image, read whole */
	return ring;
}

void ft_off_disk_put(struct ft_offload *o, int t, CUstream cs)
{
	struct ft_off_disk *d = o->disk;
	o->t[t].host = NULL;
	o->t[t].z.data = NULL;
	o->t[t].ring_gpu = 0;
	pthread_mutex_lock(&d->mu);
	int s = find(d, t);
	if (s >= 0) {
		ft_off_order(o, d->slot[s].done, cs);
		d->slot[s].used = 1;
		d->slot[s].held = 0;
	}
	front(d, t);
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void ft_off_disk_forget(struct ft_offload *o, int t)
{
	struct ft_off_disk *d = o->disk;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->on[t] = 0;
	pthread_mutex_unlock(&d->mu);
}

void ft_off_disk_lock(struct ft_offload *o, int lock)
{
	if (o && o->disk)
		(lock ? pthread_mutex_lock : pthread_mutex_unlock)(&o->disk->mu);
}

int ft_off_disk_read(const struct ft_offload *o, int t, size_t off, size_t n, void *out)
{
	struct ft_off_disk *d = o->disk;
	const struct ft_off_trap *x = &o->t[t];
	if (!__atomic_load_n(&d->direct, __ATOMIC_RELAXED))
		return pread_all(d, x->disk_off, off, n, out);
	/* O_DIRECT: whole aligned blocks through an aligned buffer */
	size_t a = off / d->align * d->align, len = up(off + n, d->align) - a;
	unsigned char *buf;
	if (posix_memalign((void **)&buf, d->align, len))
		return -1;
	int rc = pread_all(d, x->disk_off, a, len, buf);
	if (!rc)
		memcpy(out, buf + (off - a), n);
	free(buf);
	return rc;
}

int ft_off_disk_promote(struct ft_offload *o, int t)
{
	struct ft_off_disk *d = o->disk;
	struct ft_off_trap *x = &o->t[t];
	size_t bytes = x->disk_bytes;
	unsigned char *p;
	if (posix_memalign((void **)&p, 4096, up(bytes, d->align)))
		return -1;
	if (ft_off_disk_read(o, t, 0, bytes, p) || ft_off_register(o, x, p, bytes, 0)) {
		free(p);
		return -1;
	}
	pthread_mutex_lock(&d->mu);
	d->on[t] = 0;
	pthread_mutex_unlock(&d->mu);
	x->host = p;
	if (x->z.desc)
		x->z.data = p; /* a coded image */
	x->disk_bytes = 0;
	FT_STAT_INC(o->stats, nvme_promoted);
	ft_info("trap %d moves from the NVMe tier's file to host memory (%zu MiB): a CUDA graph "
		"copies it inside itself, and a graph cannot read a file", t, bytes >> 20);
	return 0;
}

/* The file, without a name: it goes with the process, also after a crash. */
static int open_file(struct ft_off_disk *d, const char *dir)
{
	int flags = O_RDWR | O_CLOEXEC;
	d->direct = 1;
	d->fd = open(dir, flags | O_TMPFILE | O_DIRECT, 0600);
	if (d->fd < 0) {
		d->direct = 0;
		d->fd = open(dir, flags | O_TMPFILE, 0600);
	}
	if (d->fd < 0) { /* no O_TMPFILE there: a name, removed at once */
		char path[4200];
		snprintf(path, sizeof(path), "%s/flextensor-nvme-XXXXXX", dir);
		d->fd = mkostemp(path, O_CLOEXEC);
		if (d->fd >= 0)
			unlink(path);
	}
	return d->fd < 0 ? -1 : 0;
}

double ft_off_disk_probe(const char *dir, size_t align)
{
	enum { PIECE = 8 << 20, PIECES = 8 };
	struct ft_off_disk d;
	memset(&d, 0, sizeof(d));
	d.align = align ? align : 4096;
	unsigned char *buf = NULL;
	double rate = 0;
	if (open_file(&d, dir))
		return 0;
	if (posix_memalign((void **)&buf, d.align > 4096 ? d.align : 4096, PIECE))
		goto out;
	memset(buf, 0x5a, PIECE); /* (bytes a file system cannot leave sparse) */
	for (size_t i = 0; i < PIECES; i++)
		if (pwrite_all(&d, i * PIECE, PIECE, buf))
			goto out;
	/* from the disk, not the page cache (a tmpfs reads at memory speed:
	 * so it is) */
	if (fdatasync(d.fd) ||
	    (!d.direct && posix_fadvise(d.fd, 0, (off_t)PIECES * PIECE, POSIX_FADV_DONTNEED)))
		goto out;
	uint64_t t0 = ft_off_now_ns();
	for (size_t i = 0; i < PIECES; i++)
		if (pread_all(&d, 0, i * PIECE, PIECE, buf))
			goto out;
	uint64_t ns = ft_off_now_ns() - t0;
	rate = ns ? (double)PIECES * PIECE / ((double)ns * 1e-9) : 0;
out:
	free(buf);
	close(d.fd);
	return rate;
}

/* The ring's GPU buffers and cuFile given back. */
static void gds_end(struct ft_off_disk *d)
{
	for (int s = 0; s < SLOTS; s++) {
		if (!d->slot[s].dev)
			continue;
		if (d->gds.fh)
			ft_gds_unregister(&d->gds, d->slot[s].dev);
		d->real->cuMemFree_v2(d->slot[s].dev);
		d->slot[s].dev = 0;
	}
	ft_gds_close(&d->gds);
}

/* FT_NVME_TRANSFER_MODE=cufile: the ring in GPU memory, read by cuFile,
 * where GPUDirect Storage is there for the file; else the tier reads as
 * with posix (said). */
static void gds_ring(struct ft_off_disk *d)
{
	const struct ft_real *r = d->real;
	char why[200];
	if (!d->direct)
		snprintf(why, sizeof(why), "the file is not opened with O_DIRECT");
	else if (!r->cuCtxGetCurrent || r->cuCtxGetCurrent(&d->ctx) || !d->ctx)
		snprintf(why, sizeof(why), "no current CUDA context");
	else if (!ft_gds_open(&d->gds, d->fd, d->o->dlsym, why, sizeof(why))) {
		int s = 0;
		for (; s < SLOTS; s++) {
			if (r->cuMemAlloc_v2(&d->slot[s].dev, d->cap)) {
				d->slot[s].dev = 0;
				break;
			}
			if (ft_gds_register(&d->gds, d->slot[s].dev, d->cap)) {
				/* (cuFile would read through buffers of its own) */
				r->cuMemFree_v2(d->slot[s].dev);
				d->slot[s].dev = 0;
				break;
			}
		}
		if (s == SLOTS) {
			d->o->block_bytes += SLOTS * d->cap; /* (GPU memory beside the blocks) */
			ft_info("FT_NVME_TRANSFER_MODE=cufile: the NVMe tier reads with GPUDirect "
				"Storage into %d GPU buffers of %zu MiB (beside the blocks, counted "
				"with them)", SLOTS, d->cap >> 20);
			return;
		}
		snprintf(why, sizeof(why), "%d GPU buffers of %zu MiB cannot be allocated and "
			 "registered with cuFile", SLOTS, d->cap >> 20);
		gds_end(d);
	}
	ft_warn("FT_NVME_TRANSFER_MODE=cufile: %s; the NVMe tier reads with pread into pinned "
		"host buffers instead (posix)", why);
}

int ft_off_disk_init(struct ft_offload *o, size_t most, char *why, uint32_t len)
{
	struct ft_off_disk *d = calloc(1, sizeof(*d));
	if (!d || !(d->on = calloc(o->ntraps + 1, 1)) ||
	    !(d->bytes = calloc(o->ntraps + 1, sizeof(*d->bytes))) ||
	    !(d->off = calloc(o->ntraps + 1, sizeof(*d->off)))) {
		if (d) {
			free(d->on);
			free(d->bytes);
		}
		free(d);
		snprintf(why, len, "out of memory");
		return -1;
	}
	o->disk = d;
	d->fd = -1;
	d->o = o;
	d->real = o->real;
	d->ntraps = o->ntraps;
	d->front = -1;
	d->align = o->nvme_align;
	d->cap = up(most, d->align);
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->bounce, NULL);
	pthread_cond_init(&d->cv, NULL);
	if (open_file(d, o->nvme_dir)) {
		snprintf(why, len, "FT_NVME_OFFLOAD_PATH=%s: cannot create a file there: %s", o->nvme_dir,
			 strerror(errno));
		return -1;
	}
	if (!d->direct)
		ft_warn("FT_NVME_OFFLOAD_PATH=%s: the file system refuses O_DIRECT: the NVMe tier reads "
			"through the page cache (which then holds copies of what it read)", o->nvme_dir);
	if (o->nvme_cufile)
		gds_ring(d);
	/* aligned for O_DIRECT, pinned for the copies (with cuFile, the first
	 * for staging) */
	size_t a = d->align > 4096 ? d->align : 4096;
	for (int s = 0; s < SLOTS; s++) {
		struct slot *x = &d->slot[s];
		x->trap = -1;
		if (d->gds.fh && s) {
			x->buf = NULL;
		} else if (posix_memalign((void **)&x->buf, a, d->cap)) {
			x->buf = NULL;
		} else if (!o->pageable && o->real->cuMemHostRegister_v2(x->buf, d->cap, 0)) {
			free(x->buf);
			x->buf = NULL;
		}
		if ((!x->buf && !(d->gds.fh && s)) ||
		    o->real->cuEventCreate(&x->done, CU_EVENT_DISABLE_TIMING)) {
			snprintf(why, len, "cannot allocate the NVMe tier's %d pinned buffers of %zu MiB "
				 "(host memory, or the locked-memory limit, ulimit -l)", SLOTS,
				 d->cap >> 20);
			return -1;
		}
	}
	return 0;
}

int ft_off_disk_gds(const struct ft_offload *o)
{
	return o->disk && o->disk->gds.fh;
}

unsigned char *ft_off_disk_bounce(struct ft_offload *o)
{
	return o->disk->slot[0].buf;
}

int ft_off_disk_spill(struct ft_offload *o, int t, const unsigned char *buf, size_t bytes,
		      char *why, uint32_t len)
{
	struct ft_off_disk *d = o->disk;
	struct ft_off_trap *x = &o->t[t];
	size_t n = up(bytes, d->align);
	x->disk_off = d->end;
	if (pwrite_all(d, d->end, n, buf)) {
		snprintf(why, len, "cannot write trap %d to the NVMe tier's file in %s: %s", t,
			 o->nvme_dir, errno ? strerror(errno) : "short write");
		return -1;
	}
	d->end += n;
	x->disk_bytes = bytes;
	d->bytes[t] = bytes;
	d->off[t] = x->disk_off;
	d->on[t] = 1;
	return 0;
}

double ft_off_disk_rate(struct ft_offload *o, int t)
{
	struct ft_off_disk *d = o->disk;
	if (!d->direct)
		return 0;
	uint64_t t0 = ft_off_now_ns(), n = up(o->t[t].disk_bytes, d->align);
	if (d->gds.fh) {
		/* (the reader's path: cuFile, or after its failure the host) */
		if (gds_read(o, t, &d->slot[0], 0) < 0)
			return 0;
	} else if (pread_all(d, o->t[t].disk_off, 0, n, d->slot[0].buf)) {
		return 0;
	}
	if (!d->direct)
		return 0;
	uint64_t ns = ft_off_now_ns() - t0;
	return ns ? (double)o->t[t].disk_bytes / ((double)ns * 1e-9) : 0;
}

int ft_off_disk_start(struct ft_offload *o)
{
	struct ft_off_disk *d = o->disk;
	if (!d)
		return 0;
	if (pthread_create(&d->reader, NULL, reader, d))
		return -1;
	d->started = 1;
	return 0;
}

void ft_off_disk_stop(struct ft_offload *o)
{
	struct ft_off_disk *d = o->disk;
	if (!d || !d->started)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->reader, NULL);
	d->started = 0;
}

void ft_off_disk_after_fork(struct ft_offload *o)
{
	struct ft_off_disk *d = o->disk;
	if (!d)
		return;
	d->started = 0; /* its reader is the parent's */
	/* and so are cuFile's state and the ring's GPU buffers: never given
	 * back from here */
	memset(&d->gds, 0, sizeof(d->gds));
	for (int s = 0; s < SLOTS; s++)
		d->slot[s].dev = 0;
	pthread_mutex_init(&d->bounce, NULL);
}

void ft_off_disk_release(struct ft_offload *o)
{
	struct ft_off_disk *d = o->disk;
	if (!d)
		return;
	ft_off_disk_stop(o);
	gds_end(d);
	for (int s = 0; s < SLOTS; s++) {
		if (d->slot[s].buf && !o->pageable)
			o->real->cuMemHostUnregister(d->slot[s].buf);
		free(d->slot[s].buf);
		if (d->slot[s].done)
			o->real->cuEventDestroy_v2(d->slot[s].done);
	}
	if (d->fd >= 0)
		close(d->fd);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->bounce);
	pthread_cond_destroy(&d->cv);
	free(d->on);
	free(d->bytes);
	free(d->off);
	free(d);
	o->disk = NULL;
}
