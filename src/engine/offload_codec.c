/*
 * Coded host stores (FT_TRANSFER_COMPRESSION; the format: include/ft/codec.h).
 * When the plan is applied, each offloaded trap's bytes are coded on the
 * GPU (where the module or the driver refuses, on the host's CPUs) and only
 * the image is kept (and pinned).  A load copies the image in pieces of at
 * most o->slot_bytes into FT_OFF_SLOTS staging slots on the copy stream
 * and decodes each piece into the block on the decode stream, so the copies
 * of the next pieces overlap the decode of one before;
 * the block is ready on the decode stream.  Bringing a trap back, or
 * checksumming part of it, decodes on the host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft/copy_curve.h"
#include "ft/gpu.h"
#include "ft/log.h"
#include "offload_int.h"

#ifndef FT_OFF_DECODE_HIGH /* (-D0 for a measurement's build) */
#define FT_OFF_DECODE_HIGH 1
#endif

static int ring_events(const struct ft_real *r, struct ft_off_ring *g)
{
	for (int s = 0; s < FT_OFF_SLOTS; s++)
		if (r->cuEventCreate(&g->full[s], CU_EVENT_DISABLE_TIMING) ||
		    r->cuEventCreate(&g->free[s], CU_EVENT_DISABLE_TIMING))
			return -1;
	return 0;
}

void ft_off_codec_init(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	if (o->codec && o->chunk % FT_Z_CHUNK) {
		ft_info("FT_TRANSFER_COMPRESSION: the VMM granularity (%zu KiB) is no multiple of "
			"the codec's 64 KiB chunks: the store stays raw", o->chunk >> 10);
		o->codec = NULL;
	}
	if (!o->codec)
		return;
	/* the decode stream at the highest priority: where the model's
	 * kernels keep the GPU busy, a decode gets SMs as soon as one of
	 * them ends rather than after the model's queued blocks (H100, a
	 * 4 x 4096 prefill against resident: 2 x 16 MiB slots 1.042 -> 1.027
	 * (run71), 8 x 16 MiB 1.034 -> 1.027 (run72); the shipped 4 x 64 MiB
	 * at the highest 1.019, raw 1.005; one run each) */
	int least = 0, greatest = 0;
	if (!r->cuCtxGetStreamPriorityRange || !r->cuStreamCreateWithPriority ||
	    r->cuCtxGetStreamPriorityRange(&least, &greatest) ||
	    r->cuStreamCreateWithPriority(&o->decode, CU_STREAM_NON_BLOCKING,
					  FT_OFF_DECODE_HIGH ? greatest : least))
		o->decode = NULL;
	int ok = !(!o->decode && r->cuStreamCreate(&o->decode, CU_STREAM_NON_BLOCKING)) &&
		 !r->cuEventCreate(&o->zfork, CU_EVENT_DISABLE_TIMING) &&
		 !r->cuEventCreate(&o->zjoin, CU_EVENT_DISABLE_TIMING) && !ring_events(r, &o->ring) &&
		 !ring_events(r, &o->ring_cap);
	/* a chunk's image is at most its raw 64 KiB, so no piece of a trap
	 * outgrows the trap's raw bytes, nor so its block (sized for the
	 * largest trap it holds): a model of small traps stages in small
	 * slots */
	size_t most = FT_Z_CHUNK;
	for (uint32_t k = 0; k < o->nblocks; k++)
		if ((size_t)o->b[k].nchunks * o->chunk > most)
			most = (size_t)o->b[k].nchunks * o->chunk;
	o->slot_bytes = most < FT_OFF_SLOT_BYTES ? most : FT_OFF_SLOT_BYTES;
	for (int s = 0; ok && s < FT_OFF_SLOTS; s++)
		ok = !r->cuMemAlloc_v2(&o->slot[s], o->slot_bytes);
	if (!ok) {
		/* raw stores offload as well, at the link's pace */
		ft_warn("FT_TRANSFER_COMPRESSION: cannot set up the decode stream or its %.1f MiB "
			"of staging (device memory?): the store stays raw",
			(double)(FT_OFF_SLOTS * o->slot_bytes) / (1 << 20));
		for (int s = 0; s < FT_OFF_SLOTS; s++)
			if (o->slot[s])
				r->cuMemFree_v2(o->slot[s]);
		memset(o->slot, 0, sizeof(o->slot));
		o->codec = NULL;
		return;
	}
	o->block_bytes += (uint64_t)FT_OFF_SLOTS * o->slot_bytes;
}

void ft_off_codec_release(struct ft_offload *o)
{
	const struct ft_real *r = o->real;
	for (uint32_t t = 0; o->t && t < o->ntraps; t++) {
		struct ft_off_trap *x = &o->t[t];
		if (x->zdesc)
			r->cuMemFree_v2(x->zdesc);
		x->zdesc = 0;
		x->z.data = NULL; /* it is x->host, freed with it */
		ft_z_free(&x->z);
	}
	for (int s = 0; s < FT_OFF_SLOTS; s++)
		if (o->slot[s]) {
			r->cuMemFree_v2(o->slot[s]);
			o->block_bytes -= o->slot_bytes;
		}
	memset(o->slot, 0, sizeof(o->slot));
}

struct store_at {
	struct ft_offload *o;
	struct ft_off_trap *x;
};

/* The image's memory where the store goes (the shared segment its
 * creator fills; else private, in huge pages where the kernel gives
 * them). */
static void *store_alloc(void *ctx, size_t n)
{
	struct store_at *a = ctx;
	return ft_off_store_alloc(a->o, a->x, n);
}

/* An image that is not kept. */
static void drop(struct ft_offload *o, struct ft_off_trap *x, struct ft_z_image *z)
{
	if (z->data) {
		ft_off_store_free(o, x, z->data);
		z->data = NULL;
	}
	ft_z_free(z);
}

/* Trap x's load time from image z and raw, by the copy and decode
 * curves: a coded span's pieces are copied while the one before is
 * decoded; a raw trap is one copy (raw block mode) or one per run (ms,
 * into *coded and *raw). */
static void load_ms(const struct ft_offload *o, const struct ft_off_trap *x,
		    const struct ft_z_image *z, double *coded, double *raw)
{
	uint32_t runs = o->mode == FT_TM_RAW_BLOCK ? 1 : x->nruns;
	*coded = *raw = 0;
	for (uint32_t i = 0, c = 0; i < runs; i++) {
		uint64_t n = runs == 1 ? z->raw_bytes : x->runs[i].hi - x->runs[i].lo;
		uint32_t c1 = c + (uint32_t)((n + FT_Z_CHUNK - 1) / FT_Z_CHUNK);
		if (c1 > z->nchunks)
			c1 = z->nchunks;
		*coded += ft_curve_coded_ms(o->zcopy, o->nzcopy, o->zdec, o->nzdec,
					    ft_z_span(z, c, c1), n, o->slot_bytes);
		*raw += ft_curve_ms(o->zcopy, o->nzcopy, n);
		c = c1;
	}
}

/* Whether trap x keeps its coded form z of bytes: it saves bytes and, by
 * the measured curves, its loads are faster coded (counted for the
 * staging's info line). */
static int worth(struct ft_offload *o, const struct ft_off_trap *x, const struct ft_z_image *z,
		 size_t bytes)
{
	int keep = z->coded && z->bytes * 100 <= bytes * 97; /* else nothing to gain */
	if (o->nzdec) {
		double coded, raw;
		load_ms(o, x, z, &coded, &raw);
		int slow = keep && !(coded < 0.97 * raw); /* its decode would not hide */
		o->zslow += (uint32_t)slow;
		keep &= !slow;
		o->zpred_raw_ms += raw;
		o->zpred_ms += keep ? coded : raw;
	}
	return keep;
}

/* auto: stacked experts paged per expert move a decode step's routed
 * experts alone (a quarter of them in a Mixtral), which coding (about
 * three quarters of all) cannot beat; a coded trap loads whole */
static int paged_per_expert(struct ft_offload *o, const struct ft_off_trap *x, int whole)
{
	if (!o->zauto || !x->nsl || whole)
		return 0;
	o->zsliced++;
	return 1;
}

/* The image's descriptors on the GPU, for the decoder: 0, or -1. */
static int put_desc(struct ft_offload *o, struct ft_off_trap *x, const struct ft_z_image *z)
{
	const struct ft_real *r = o->real;
	size_t db = (z->nchunks + 1) * sizeof(*z->desc);
	if (!r->cuMemAlloc_v2(&x->zdesc, db) && !r->cuMemcpyHtoD_v2(x->zdesc, z->desc, db))
		return 0;
	if (x->zdesc)
		r->cuMemFree_v2(x->zdesc);
	x->zdesc = 0;
	return -1;
}

int ft_off_code_trap(struct ft_offload *o, int t, const unsigned char *raw, size_t bytes,
		     int whole)
{
	struct ft_off_trap *x = &o->t[t];
	struct ft_z_image z;
	struct store_at at = { o, x };
	if (paged_per_expert(o, x, whole))
		return 0;
	uint64_t t0 = ft_off_now_ns();
	if (ft_z_encode_in(raw, bytes, 0, &z, store_alloc, &at))
		return -1;
	o->zenc_ns += ft_off_now_ns() - t0;
	o->zenc_bytes += bytes;
	if (!worth(o, x, &z, bytes) || put_desc(o, x, &z)) {
		drop(o, x, &z); /* (raw: said by the caller's count) */
		return 0;
	}
	x->z = z;
	x->host = z.data;
	return 1;
}

/* The GPU encoder's second pass over trap x's run i (chunks [c0, c1) of
 * the store), a staging slot at a time, into the pinned image z: 0, or
 * -1. */
static int code_run(struct ft_offload *o, struct ft_off_trap *x, uint32_t i, uint32_t c0,
		    uint32_t c1, CUdeviceptr meta, const struct ft_z_image *z)
{
	CUstream s = o->decode;
	uint64_t words = (x->runs[i].hi - x->runs[i].lo) / 2;
	for (uint32_t a = c0, b, k = 0; a < c1; a = b, k ^= 1) {
		b = ft_z_piece_end(z, a, c1, o->slot_bytes);
		if (ft_gpu_z_code(o->codec, x->runs[i].lo + (CUdeviceptr)(a - c0) * FT_Z_CHUNK,
				  meta + (CUdeviceptr)a * sizeof(struct ft_z_meta),
				  x->zdesc + (CUdeviceptr)a * sizeof(uint64_t), FT_Z_OFF(z->desc[a]),
				  o->slot[k], words - (uint64_t)(a - c0) * FT_Z_VALS, b - a, s) ||
		    o->real->cuMemcpyDtoHAsync_v2(z->data + FT_Z_OFF(z->desc[a]), o->slot[k],
						  ft_z_span(z, a, b), s))
			return -1;
	}
	return 0;
}

/* FT_VERIFY's sums of trap x's runs, from the GPU (the host's function of
 * the same bytes): 0, or -1. */
static int gpu_sums(struct ft_offload *o, struct ft_off_trap *x)
{
	if (!o->gpu)
		return 0;
	uint64_t *addr = malloc((x->nruns + 1) * sizeof(*addr));
	uint64_t *bytes = malloc((x->nruns + 1) * sizeof(*bytes));
	int rc = -1;
	if (addr && bytes && (x->sums || (x->sums = calloc(x->nruns + 1, sizeof(*x->sums)))))
		rc = ft_gpu_checksums(o->gpu, addr, bytes, ft_off_spans(x, addr, bytes), x->sums);
	free(addr);
	free(bytes);
	return rc;
}

int ft_off_code_gpu(struct ft_offload *o, int t, unsigned flags)
{
	const struct ft_real *r = o->real;
	struct ft_off_trap *x = &o->t[t];
	if (!o->codec || !o->codec->zcode || !o->decode)
		return -1;
	if (paged_per_expert(o, x, 0))
		return 0;
	size_t bytes = (size_t)x->nchunks * o->chunk;
	uint32_t n = (uint32_t)(bytes / FT_Z_CHUNK);
	uint64_t t0 = ft_off_now_ns(), pin = 0;
	struct ft_z_meta *m = malloc((n + 1) * sizeof(*m));
	struct ft_z_image z = { 0 };
	CUdeviceptr dm = 0;
	int rc = -1, registered = 0;
	if (!m || gpu_sums(o, x) || r->cuMemAlloc_v2(&dm, (size_t)n * sizeof(*m)))
		goto out;
	/* the first pass: each chunk's table and coded size */
	for (uint32_t i = 0, c = 0; i < x->nruns; i++) {
		uint32_t k = (uint32_t)((x->runs[i].hi - x->runs[i].lo) / FT_Z_CHUNK);
		if (ft_gpu_z_analyse(o->codec, x->runs[i].lo, dm + (CUdeviceptr)c * sizeof(*m),
				     (x->runs[i].hi - x->runs[i].lo) / 2, k, o->decode))
			goto out;
		c += k;
	}
	if (r->cuMemcpyDtoHAsync_v2(m, dm, (size_t)n * sizeof(*m), o->decode) ||
	    r->cuStreamSynchronize(o->decode) || ft_z_layout(&z, bytes, m))
		goto out;
	if (!worth(o, x, &z, bytes)) {
		rc = 0;
		goto out;
	}
	/* the second pass, into the image pinned first (its copies from the
	 * slots at the link's rate) */
	size_t held = (z.bytes + 4095) & ~(size_t)4095;
	uint64_t p0 = ft_off_now_ns();
	if (!(z.data = ft_off_store_alloc(o, x, held)) || ft_off_register(o, x, z.data, held, flags))
		goto out;
	registered = 1;
	pin = ft_off_now_ns() - p0;
	if (put_desc(o, x, &z))
		goto out;
	for (uint32_t i = 0, c = 0; i < x->nruns; i++) {
		uint32_t k = (uint32_t)((x->runs[i].hi - x->runs[i].lo) / FT_Z_CHUNK);
		if (code_run(o, x, i, c, c + k, dm, &z))
			goto out;
		c += k;
	}
	if (r->cuStreamSynchronize(o->decode))
		goto out;
	x->z = z;
	x->host = z.data;
	z.data = NULL;
	z.desc = NULL;
	o->zgpu++;
	rc = 1;
out:
	if (rc >= 0) {
		o->zenc_ns += ft_off_now_ns() - t0 - pin; /* (the pinning: the store's, coded or not) */
		o->zenc_bytes += bytes;
	}
	if (rc < 0 && dm)
		r->cuStreamSynchronize(o->decode); /* no pass or copy still at the memory below */
	if (rc < 0 && x->zdesc) {
		r->cuMemFree_v2(x->zdesc);
		x->zdesc = 0;
	}
	if (z.data) {
		x->dhost = 0; /* (the image's device mapping, for the copy kernel) */
		if (registered && !o->pageable)
			r->cuMemHostUnregister(z.data);
		ft_off_store_free(o, x, z.data);
		z.data = NULL;
	}
	ft_z_free(&z);
	if (dm)
		r->cuMemFree_v2(dm);
	free(m);
	return rc;
}

/* Decodes chunks [a, b) of trap t, staged at slot, to dst (chunk a's raw
 * bytes) on the decode stream; where the driver refuses, on the host. */
static void decode(struct ft_offload *o, int t, CUdeviceptr slot, uint32_t a, uint32_t b,
		   CUdeviceptr dst)
{
	struct ft_off_trap *x = &o->t[t];
	uint64_t nvals = x->z.raw_bytes / 2 - (uint64_t)a * FT_Z_VALS;
	if (!ft_gpu_decode(o->codec, slot, FT_Z_OFF(x->z.desc[a]), x->zdesc + a * sizeof(uint64_t),
			   dst, nvals, b - a, o->decode)) {
		FT_STAT_INC(o->stats, offload_decodes);
		return;
	}
	if (ft_off_refused(o, o->decode)) {
		ft_warn_once("the driver refused a decode in a CUDA graph capture: that graph "
			     "does not page (offload_faults)");
		return;
	}
	ft_warn_once("the driver refused a decode launch: pieces are decoded on the host "
		     "instead, which costs speed, not results (offload_faults)");
	/* the decode stream has waited for the piece's copy, which came after
	 * the block's readers, and holds the earlier decodes: once it is done,
	 * the block is the host's to write */
	if (o->real->cuStreamSynchronize(o->decode)) {
		FT_STAT_INC(o->stats, offload_stuck);
		ft_error_once("cannot decode trap %d into its block: launches that read it read "
			      "whatever the block holds; run with FT_ENABLED=0", t);
		return;
	}
	size_t n = (size_t)(b - a) * FT_Z_CHUNK;
	if (n > x->z.raw_bytes - (size_t)a * FT_Z_CHUNK)
		n = x->z.raw_bytes - (size_t)a * FT_Z_CHUNK;
	ft_off_store_put(o, t, (size_t)a * FT_Z_CHUNK, n, dst);
}

/* Chunks [c0, c1) of trap t to dst (chunk c0's raw bytes), in pieces. */
static void load_span(struct ft_offload *o, int t, uint32_t c0, uint32_t c1, CUdeviceptr dst,
		      CUstream cs)
{
	struct ft_off_trap *x = &o->t[t];
	struct ft_off_ring *g = &o->ring;
	for (uint32_t a = c0, b; a < c1; a = b) {
		b = ft_z_piece_end(&x->z, a, c1, o->slot_bytes);
		int s = g->next;
		g->next = (s + 1) % FT_OFF_SLOTS;
		if (g->used[s])
			ft_off_wait(o, cs, g->free[s]); /* its last decode is done */
		size_t n = ft_z_span(&x->z, a, b);
		ft_off_copy_in(o, o->slot[s], x->host + FT_Z_OFF(x->z.desc[a]), n, cs, t);
		ft_off_order(o, g->full[s], cs);
		ft_off_wait(o, o->decode, g->full[s]);
		decode(o, t, o->slot[s], a, b, dst + (CUdeviceptr)(a - c0) * FT_Z_CHUNK);
		ft_off_order(o, g->free[s], o->decode);
		g->used[s] = 1;
		FT_STAT_ADD(o->stats, offload_copy_bytes, n);
	}
}

CUstream ft_off_load_coded(struct ft_offload *o, int t, CUstream cs)
{
	struct ft_off_trap *x = &o->t[t];
	if (o->mode == FT_TM_RAW_BLOCK) {
		load_span(o, t, 0, x->z.nchunks, o->b[x->block].va, cs);
		return o->decode;
	}
	size_t off = 0;
	for (uint32_t i = 0; i < x->nruns; i++) {
		size_t n = x->runs[i].hi - x->runs[i].lo;
		if (!x->dead[i])
			load_span(o, t, (uint32_t)(off / FT_Z_CHUNK), (uint32_t)((off + n) / FT_Z_CHUNK),
				  x->runs[i].lo, cs);
		off += n;
	}
	return o->decode;
}

/* The store's bytes could not be put back on the GPU (counted, said). */
static void stuck(struct ft_offload *o, int t)
{
	FT_STAT_INC(o->stats, offload_stuck);
	ft_error_once("cannot copy trap %d's bytes from the host store back to the GPU: "
		      "launches that read them read whatever is there; run with "
		      "FT_ENABLED=0", t);
}

/* Trap t's coded image as z: its store's, or read whole from the NVMe
 * tier's file into *own (the caller frees it); z->data NULL when it cannot
 * be read. */
static void image_of(const struct ft_offload *o, int t, struct ft_z_image *z, unsigned char **own)
{
	const struct ft_off_trap *x = &o->t[t];
	*z = x->z;
	*own = NULL;
	if (z->data || !x->disk_bytes)
		return;
	if ((*own = malloc(z->bytes + 1)) && ft_off_disk_read(o, t, 0, z->bytes, *own)) {
		free(*own);
		*own = NULL;
	}
	z->data = *own;
}

void ft_off_store_read(const struct ft_offload *o, int t, size_t off, size_t n, void *out)
{
	const struct ft_off_trap *x = &o->t[t];
	unsigned char *own;
	struct ft_z_image z;
	if (x->z.desc) {
		image_of(o, t, &z, &own);
		if (!z.data || ft_z_read(&z, off, n, out))
			memset(out, 0, n); /* (a false alarm of FT_VERIFY's, at worst) */
		free(own);
	} else if (x->disk_bytes && ft_off_disk_read(o, t, off, n, out)) {
		memset(out, 0, n);
	} else if (!x->disk_bytes) {
		memcpy(out, x->host + off, n);
	}
}

void ft_off_store_put(struct ft_offload *o, int t, size_t off, size_t n, CUdeviceptr dst)
{
	const struct ft_real *r = o->real;
	struct ft_off_trap *x = &o->t[t];
	if (!x->z.desc && !x->disk_bytes) {
		if (r->cuMemcpyHtoD_v2(dst, x->host + off, n))
			stuck(o, t);
		else if (o->pageable)
			r->cuCtxSynchronize(); /* (below) */
		return;
	}
	/* a chunk at a time (decoded, or read from the NVMe tier's file):
	 * no large host buffer needed but a coded image read from the file.
	 * Pieces end on the codec's chunk grid, so that a range off it (a
	 * raw-mode trap's run) decodes each chunk once */
	unsigned char *buf = malloc(FT_Z_CHUNK), *own = NULL;
	struct ft_z_image z = { 0 };
	if (x->z.desc)
		image_of(o, t, &z, &own);
	if (!buf || (x->z.desc && !z.data)) {
		stuck(o, t);
		free(buf);
		free(own);
		return;
	}
	for (size_t done = 0, m; done < n; done += m) {
		m = FT_Z_CHUNK - (off + done) % FT_Z_CHUNK;
		if (m > n - done)
			m = n - done;
		if (!x->z.desc && ft_off_disk_read(o, t, off + done, m, buf)) {
			stuck(o, t);
			break;
		}
		if ((x->z.desc && ft_z_read(&z, off + done, m, buf)) ||
		    r->cuMemcpyHtoD_v2(dst + done, buf, m)) {
			stuck(o, t);
			break;
		}
	}
	/* a copy from pageable memory may return before its bytes land:
	 * launches on other streams must find them there */
	r->cuCtxSynchronize();
	free(buf);
	free(own);
}

void ft_off_codec_capture(struct ft_offload *o, int begin, CUstream origin)
{
	const struct ft_real *r = o->real;
	if (!o->codec)
		return;
	if (begin) {
		/* the decode stream joins the capture after the copy stream
		 * (o->fork was recorded at the capture's start), and its slots
		 * start free there: a replay waits for eager decodes first.
		 * Where either stream stays out (the capture is broken: its
		 * graph does not page), coded loads run eagerly as copies do,
		 * with the eager slots and their events */
		o->zjoined = o->broken_cap != o->cap_id && !r->cuStreamWaitEvent(o->decode, o->fork, 0);
		if (!o->zjoined) {
			if (o->broken_cap != o->cap_id)
				FT_STAT_INC(o->stats, offload_faults);
			o->broken_cap = o->cap_id;
			return;
		}
	} else {
		if (!o->zjoined)
			return;
		o->zjoined = 0;
		if (r->cuEventRecord(o->zjoin, o->decode) || r->cuStreamWaitEvent(origin, o->zjoin, 0)) {
			FT_STAT_INC(o->stats, offload_faults);
			o->broken_cap = o->cap_id;
		}
	}
	struct ft_off_ring g = o->ring;
	o->ring = o->ring_cap;
	o->ring_cap = g;
	if (begin)
		memset(o->ring.used, 0, sizeof(o->ring.used));
}

void ft_off_codec_replay(struct ft_offload *o, CUstream s)
{
	if (!o->codec)
		return;
	ft_off_order(o, o->zfork, o->decode);
	ft_off_wait(o, s, o->zfork);
}
