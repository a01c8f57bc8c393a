/*
 * rmt_cache.c - the block cache every remote object of the process reads
 * through, and rmt_pread() over it.
 *
 * Blocks are RMT_BLOCK (16 KiB) pieces of an object, in one hash table and
 * one LRU list, rmt_cf.cache bytes in all.  A fetch writes into blocks
 * taken from the cache's least recently used (its bytes are copied once,
 * out of curl's buffer), and hands them to the cache when it is done.  A read copies the blocks it
 * finds and fetches the run from its first missing block to its last in
 * one request; a read that starts where the previous one ended grows a
 * readahead window (128 KiB doubling to 16 MiB), so that FUSE's 128 KiB
 * reads become few large fetches, and a fetch over 1 MiB goes out as up
 * to rmt_cf.conns parallel ranges.  The lock is not held across a fetch:
 * the blocks being fetched are listed as in flight, and a read that needs
 * one of them waits for that fetch instead of asking again.
 */
#include "rmt_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"

#define NONE UINT64_MAX

struct blk {
	uint64_t oid, idx;
	struct blk *hnext;		/* hash chain */
	struct blk *prev, *next;	/* LRU list, most recent first */
	uint32_t len;
	unsigned char data[];
};

/* A fetch under way: blocks [start, end) of object oid. */
struct inflight {
	uint64_t oid, start, end;
	struct inflight *next;
};

struct rmt_conf rmt_cf = {
	.cache = 256u << 20, .conns = 8, .retries = 5,
};

static pthread_mutex_t c_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c_cond = PTHREAD_COND_INITIALIZER;
static struct blk **c_hash;
static uint64_t c_mask, c_nblk, c_max;
static struct blk c_lru = { .prev = &c_lru, .next = &c_lru };
static struct inflight *c_flying;
/* blocks not in the cache, kept for the next fetch (hnext links them),
 * and every block there is: freed and malloc'd again, blocks wander
 * between the FUSE threads' malloc arenas, each of which keeps what it
 * was given (VmHWM 460 MiB for a 256 MiB cache) */
static struct blk *c_spare;
static uint64_t c_total;
static uint64_t c_ramax;

int rmt_cache_start(void)
{
	uint64_t n = 64;
	int rc = 0;

	pthread_mutex_lock(&c_lock);
	if (!c_hash) {
		c_max = rmt_cf.cache / RMT_BLOCK;
		while (n < c_max && n < (1ull << 40))
			n <<= 1;
		c_hash = calloc(n, sizeof(*c_hash));
		c_mask = n - 1;
		/* readahead is no use if it pushes out what it read */
		c_ramax = rmt_cf.cache / 4 < RMT_RA_MAX ? rmt_cf.cache / 4 :
			  RMT_RA_MAX;
		rc = c_hash ? 0 : -ENOMEM;
	}
	pthread_mutex_unlock(&c_lock);
	return rc;
}

bool rmt_cache_started(void)
{
	bool s;

	pthread_mutex_lock(&c_lock);
	s = c_hash != NULL;
	pthread_mutex_unlock(&c_lock);
	return s;
}

static uint64_t slot(uint64_t oid, uint64_t idx)
{
	uint64_t h = oid * 0x9e3779b97f4a7c15ull ^ idx * 0xc2b2ae3d27d4eb4full;

	return (h ^ h >> 29) & c_mask;
}

static struct blk *lookup(uint64_t oid, uint64_t idx)
{
	for (struct blk *b = c_hash[slot(oid, idx)]; b; b = b->hnext)
		if (b->oid == oid && b->idx == idx)
			return b;
	return NULL;
}

static void lru_unlink(struct blk *b)
{
	b->prev->next = b->next;
	b->next->prev = b->prev;
}

static void lru_front(struct blk *b)
{
	b->next = c_lru.next;
	b->prev = &c_lru;
	c_lru.next->prev = b;
	c_lru.next = b;
}

/* Take @b out of the cache, its memory still the caller's. */
static void blk_unhook(struct blk *b)
{
	struct blk **pp = &c_hash[slot(b->oid, b->idx)];

	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	lru_unlink(b);
	c_nblk--;
}

/* Put @b (its oid and idx set) into the cache, most recently used. */
static void blk_hook(struct blk *b)
{
	b->hnext = c_hash[slot(b->oid, b->idx)];
	c_hash[slot(b->oid, b->idx)] = b;
	lru_front(b);
	c_nblk++;
}

static void spare(struct blk *b);
static int take(struct blk **v, uint64_t n);

static void blk_drop(struct blk *b)
{
	blk_unhook(b);
	spare(b);
}

/* Shed the least recently used blocks beyond the cache's size. */
static void shed(void)
{
	while (c_nblk > c_max)
		blk_drop(c_lru.prev);
}

static void put_locked(const struct rmt_obj *o, uint64_t off,
		       const unsigned char *buf, uint64_t len)
{
	uint64_t idx = (off + RMT_BLOCK - 1) / RMT_BLOCK;
	struct blk *b;

	for (; idx * RMT_BLOCK < off + len; idx++) {
		uint64_t start = idx * RMT_BLOCK;
		uint64_t n = o->size - start < RMT_BLOCK ? o->size - start :
			     RMT_BLOCK;

		if (start + n > off + len)
			break;
		b = lookup(o->id, idx);
		if (b) {
			lru_unlink(b);
			lru_front(b);
			continue;
		}
		if (take(&b, 1))
			return;		/* a cache is an optimisation */
		b->oid = o->id;
		b->idx = idx;
		b->len = (uint32_t)n;
		memcpy(b->data, buf + (start - off), n);
		blk_hook(b);
	}
	shed();
}

void rmt_cache_put(const struct rmt_obj *o, uint64_t off,
		   const unsigned char *buf, uint64_t len)
{
	pthread_mutex_lock(&c_lock);
	if (c_hash)
		put_locked(o, off, buf, len);
	pthread_mutex_unlock(&c_lock);
}

void rmt_cache_drop(const struct rmt_obj *o)
{
	pthread_mutex_lock(&c_lock);
	if (c_hash)
		for (struct blk *b = c_lru.next, *n; b != &c_lru; b = n) {
			n = b->next;
			if (b->oid == o->id)
				blk_drop(b);
		}
	pthread_mutex_unlock(&c_lock);
}

static bool flying(uint64_t oid, uint64_t first, uint64_t last)
{
	for (struct inflight *f = c_flying; f; f = f->next)
		if (f->oid == oid && f->start <= last && first < f->end)
			return true;
	return false;
}

/* Copy what block @b holds of [@off, @off + @len) into @buf. */
static void copy_out(const unsigned char *src, uint64_t soff, uint64_t slen,
		     unsigned char *buf, uint64_t off, uint64_t len)
{
	uint64_t a = soff > off ? soff : off;
	uint64_t e = soff + slen < off + len ? soff + slen : off + len;

	if (a < e)
		memcpy(buf + (a - off), src + (a - soff), e - a);
}

/* Bytes [@p, @p + @n) of @o (@p a block's) into the blocks @dst, as
 * one range or up to rmt_cf.conns parallel ones. */
static int fetch(struct rmt_obj *o, unsigned char *const *dst, uint64_t p,
		 uint64_t n, struct diag *d)
{
	uint64_t k = 1, part;
	struct rmt_range *r;
	int rc;

	if (n > RMT_SPLIT) {
		k = n / RMT_PART_MIN;
		if (k > rmt_cf.conns)
			k = rmt_cf.conns;
		if (k < 2)
			k = 2;
	}
	part = (n + k - 1) / k;
	part = (part + RMT_BLOCK - 1) / RMT_BLOCK * RMT_BLOCK;
	k = (n + part - 1) / part;
	r = calloc(k, sizeof(*r));
	if (!r)
		return diag_nomem(d);
	for (uint64_t i = 0; i < k; i++) {
		r[i].off = p + i * part;
		r[i].len = i + 1 < k ? part : n - i * part;
		r[i].blk = dst + i * part / RMT_BLOCK;
	}
	rc = rmt_http_ranges(&o->t, o, r, (unsigned)k, d);
	free(r);
	return rc;
}

/* Block @b (out of the cache) kept for a later fetch, or freed when
 * there are more blocks than the cache holds (a burst of fetches). */
static void spare(struct blk *b)
{
	if (c_total > c_max) {
		free(b);
		c_total--;
		return;
	}
	b->hnext = c_spare;
	c_spare = b;
}

/*
 * @n blocks for a fetch, out of the cache's budget: the least recently
 * used ones when it is full (reused as they are: no malloc, no fresh
 * pages to fault in and clear), else new ones.  Under c_lock.  0, or
 * -ENOMEM with none taken.
 */
static int take(struct blk **v, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct blk *b = c_spare;

		if (b) {
			c_spare = b->hnext;
		} else if (c_total >= c_max && c_lru.prev != &c_lru) {
			b = c_lru.prev;
			blk_unhook(b);
		} else if ((b = malloc(sizeof(*b) + RMT_BLOCK))) {
			c_total++;	/* past c_max only while all fly */
		} else {
			while (i)
				spare(v[--i]);
			return -ENOMEM;
		}
		v[i] = b;
	}
	return 0;
}

/* The fetched blocks @v (@n of them, from byte @p of @o) into the cache,
 * which then sheds its least recently used beyond its size.  Under
 * c_lock. */
static void keep(const struct rmt_obj *o, uint64_t p, struct blk **v,
		 uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct blk *b = v[i];
		uint64_t start = p + i * RMT_BLOCK;

		b->oid = o->id;
		b->idx = start / RMT_BLOCK;
		b->len = (uint32_t)(o->size - start < RMT_BLOCK ?
				    o->size - start : RMT_BLOCK);
		if (lookup(b->oid, b->idx))	/* another read's, as good */
			spare(b);
		else
			blk_hook(b);
	}
	shed();
}

/*
 * Fetch bytes [@fs, @fe) of @o (@fs a block's), RMT_PIECE at a time (the
 * memory one read holds), straight into cache blocks, and copy what
 * [@off, @off + @len) wants of them into @buf.
 */
static int fetch_span(struct rmt_obj *o, unsigned char *buf, uint64_t off,
		      uint64_t len, uint64_t fs, uint64_t fe, struct diag *d)
{
	for (uint64_t p = fs; p < fe;) {
		uint64_t n = fe - p < RMT_PIECE ? fe - p : RMT_PIECE;
		uint64_t nb = (n + RMT_BLOCK - 1) / RMT_BLOCK;
		struct blk **v = malloc(nb * sizeof(*v));
		unsigned char **data = malloc(nb * sizeof(*data));
		int rc = v && data ? 0 : -ENOMEM;

		if (!rc) {
			pthread_mutex_lock(&c_lock);
			rc = take(v, nb);
			pthread_mutex_unlock(&c_lock);
		}
		if (rc) {
			free(v);
			free(data);
			return diag_nomem(d);
		}
		for (uint64_t i = 0; i < nb; i++)
			data[i] = v[i]->data;
		rc = fetch(o, data, p, n, d);
		for (uint64_t i = 0; !rc && i < nb; i++)
			copy_out(v[i]->data, p + i * RMT_BLOCK, i + 1 < nb ?
				 RMT_BLOCK : n - i * RMT_BLOCK, buf, off, len);
		pthread_mutex_lock(&c_lock);
		if (!rc)
			keep(o, p, v, nb);
		for (uint64_t i = 0; rc && i < nb; i++)
			spare(v[i]);
		pthread_mutex_unlock(&c_lock);
		free(v);
		free(data);
		if (rc)
			return rc;
		p += n;
	}
	return 0;
}

/*
 * The stream of @o a read at @off continues (*@seq), else the one least
 * recently used, restarted: readers of one object at once (FUSE threads,
 * a loader reading tensors in parallel) each keep their readahead.
 */
static struct rmt_stream *stream(struct rmt_obj *o, uint64_t off, bool *seq)
{
	static uint64_t tick;
	struct rmt_stream *old = &o->st[0];

	for (int i = 0; i < RMT_STREAMS; i++) {
		if (o->st[i].next_off == off) {
			*seq = true;
			o->st[i].used = ++tick;
			return &o->st[i];
		}
		if (o->st[i].used < old->used)
			old = &o->st[i];
	}
	*seq = false;
	old->used = ++tick;
	return old;
}

int rmt_pread(struct rmt_obj *o, void *buf, size_t len, uint64_t off,
	      struct diag *d)
{
	uint64_t b0, b1, ms, me, fe, lim;
	struct inflight fl, **pp;
	struct rmt_stream *st;
	bool seq;
	int rc;

	if (off > o->size || len > o->size - off)
		return -ENODATA;
	if (!len)
		return 0;
	if (atomic_load(&o->stale))	/* said once, when it was found */
		return -ESTALE;
	if (rmt_cache_start())
		return diag_nomem(d);
	b0 = off / RMT_BLOCK;
	b1 = (off + len - 1) / RMT_BLOCK;
	pthread_mutex_lock(&c_lock);
	for (;;) {
		ms = me = NONE;
		for (uint64_t i = b0; i <= b1; i++) {
			struct blk *b = lookup(o->id, i);

			if (!b) {
				if (ms == NONE)
					ms = i;
				me = i;
				continue;
			}
			copy_out(b->data, i * RMT_BLOCK, b->len, buf, off, len);
			lru_unlink(b);
			lru_front(b);
		}
		if (ms == NONE || !flying(o->id, ms, me))
			break;
		pthread_cond_wait(&c_cond, &c_lock);
	}
	st = stream(o, off, &seq);
	st->next_off = off + len;
	if (ms == NONE) {
		pthread_mutex_unlock(&c_lock);
		return 0;
	}
	if (!seq)
		st->ra = 0;
	else if (!st->ra)
		st->ra = RMT_RA_MIN < c_ramax ? RMT_RA_MIN : c_ramax;
	else
		st->ra = st->ra * 2 < c_ramax ? st->ra * 2 : c_ramax;
	fe = me + 1;
	lim = off + len + st->ra < o->size ? off + len + st->ra : o->size;
	lim = (lim + RMT_BLOCK - 1) / RMT_BLOCK;
	while (fe < lim && !lookup(o->id, fe) && !flying(o->id, fe, fe))
		fe++;
	fl = (struct inflight){ o->id, ms, fe, c_flying };
	c_flying = &fl;
	pthread_mutex_unlock(&c_lock);

	rc = fetch_span(o, buf, off, len, ms * RMT_BLOCK,
			fe * RMT_BLOCK < o->size ? fe * RMT_BLOCK : o->size, d);

	pthread_mutex_lock(&c_lock);
	for (pp = &c_flying; *pp != &fl; pp = &(*pp)->next)
		;
	*pp = fl.next;
	pthread_cond_broadcast(&c_cond);
	pthread_mutex_unlock(&c_lock);
	if (rc == -ESTALE)
		atomic_store(&o->stale, true);
	return rc;
}
