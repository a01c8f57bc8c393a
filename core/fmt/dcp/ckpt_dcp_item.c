/*
 * ckpt_dcp_item.c - where a DCP chunk's bytes start.  Its item is a
 * complete torch.save archive of one tensor (multi-file-formats.md 2.3),
 * opened in place as a checkpoint of its own and checked to hold one
 * contiguous tensor of the chunk's dtype and sizes in a stored record.
 *
 * That open costs some 100 µs, nearly all of it the model's and the
 * pickle's arenas being mapped, populated and unmapped, and a
 * directory's items are nearly all alike: the same records of the same
 * sizes, the same data.pkl (a chunk of the same dtype and sizes), version
 * and byteorder; only the data bytes, their CRC-32 and where the records
 * lie differ.  So each item is read as a zip first, and what decides
 * what the open would make of it, its signature (each record's name,
 * method, flags and sizes in central directory order, and the bytes and
 * CRC-32 of data.pkl, version, .data/version and byteorder, whose local
 * headers are read as the open reads them), is looked up among
 * the items opened before: one with the same signature holds the same
 * tensor in the same record.  Only an item unlike every one before is
 * opened as a checkpoint (and any item the quick way cannot read, so its
 * failure is the open's own).  ptverify's pass over 2M chunks is then a
 * zip read a chunk, linear in their number.
 */
#include "ckpt_dcp.h"
#include "util/io.h"
#include "util/sbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_RECORD_MAX	(64u << 10)	/* larger: always opened */
#define TPL_MAX		4096u		/* signatures kept, at most */

/* What an item's archive, opened as a checkpoint, holds. */
struct held {
	bool tensor;		/* its root is a tensor */
	bool contiguous, globals;
	uint8_t kind, ndim;
	const struct ckpt_dtype *dtype;
	int64_t shape[CKPT_MAX_DIMS];
	uint64_t offset, nbytes;
	uint32_t rec;		/* its storage's record, or UINT32_MAX */
};

/* A signature seen, and what its item held. */
struct tpl {
	unsigned char *sig;
	size_t len;
	uint32_t h;
	struct held held;
};

/* The signatures seen (open addressing on the hash). */
struct dcp_tpls {
	struct tpl **v;
	uint32_t cap, n;
	struct sbuf sig;	/* the one being made, reused */
};

static uint32_t hash(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static struct tpl **slot(const struct dcp_tpls *t, const unsigned char *sig,
			 size_t len, uint32_t h)
{
	for (uint32_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct tpl *x = t->v[i];

		if (!x || (x->h == h && x->len == len &&
			   !memcmp(x->sig, sig, len)))
			return &t->v[i];
	}
}

/* Keep @sig's @held (best effort: a full table or no memory keeps
 * nothing, and the next such item is opened again). */
static void remember(struct dcp_tpls *t, const unsigned char *sig,
		     size_t len, const struct held *held)
{
	uint32_t h = hash(sig, len);
	struct tpl *x, **at;

	if (t->n >= TPL_MAX)
		return;
	if (2 * (t->n + 1) > t->cap) {
		struct dcp_tpls b = { .cap = t->cap ? 2 * t->cap : 16 };

		b.v = calloc(b.cap, sizeof(*b.v));
		if (!b.v)
			return;
		for (uint32_t i = 0; i < t->cap; i++)
			if (t->v[i])
				*slot(&b, t->v[i]->sig, t->v[i]->len,
				      t->v[i]->h) = t->v[i];
		free(t->v);
		t->v = b.v;
		t->cap = b.cap;
	}
	at = slot(t, sig, len, h);
	if (*at)
		return;
	x = malloc(sizeof(*x) + len);
	if (!x)
		return;
	x->sig = (unsigned char *)(x + 1);
	memcpy(x->sig, sig, len);
	x->len = len;
	x->h = h;
	x->held = *held;
	*at = x;
	t->n++;
}

void ckpt_dcp_tpls_free(struct ckpt_dcp *p)
{
	struct dcp_tpls *t = p->tpls;

	if (!t)
		return;
	for (uint32_t i = 0; i < t->cap; i++)
		free(t->v[i]);
	free(t->v);
	free(t->sig.p);
	free(t);
	p->tpls = NULL;
}

/* Is @e one of the records whose bytes the open reads? */
static bool read_by_open(const struct ptz_reader *z, const struct ptz_entry *e)
{
	static const char *const names[] = {
		"data.pkl", "version", ".data/version", "byteorder", NULL,
	};
	const char *rel;

	if (!z->prefix || e->name_len <= z->prefix_len ||
	    e->name[z->prefix_len] != '/')
		return false;
	rel = e->name + z->prefix_len + 1;
	for (int i = 0; names[i]; i++)
		if (!strcmp(rel, names[i]))
			return true;
	return false;
}

/* The signature of archive @z into @b: 0, or -1 when the item must be
 * opened (a record the open reads that is large or cannot be read). */
static int signature(struct ptz_reader *z, struct sbuf *b)
{
	struct diag d;

	sb_cut(b, 0);
	sb_add(b, &z->nentries, sizeof(z->nentries));
	for (uint32_t i = 0; i < z->nentries; i++) {
		struct ptz_entry *e = &z->entries[i];
		uint64_t sz[2] = { e->csize, e->usize };
		uint16_t mf[2] = { e->method, e->flags };
		unsigned char *buf;
		size_t len;

		sb_add(b, e->name, (size_t)e->name_len + 1);
		sb_add(b, mf, sizeof(mf));
		sb_add(b, sz, sizeof(sz));
		if (!read_by_open(z, e))
			continue;
		sb_add(b, &e->crc32, sizeof(e->crc32));
		diag_init(&d, NULL);
		if (e->usize > SIG_RECORD_MAX ||
		    ptz_entry_read(z, e, SIG_RECORD_MAX, &buf, &len, &d))
			return -1;
		sb_add(b, buf, len);
		free(buf);
	}
	return b->oom ? -1 : 0;
}

/* What opened item @ic holds, its record in @ic's own zip. */
static void held_of(const struct ckpt *ic, struct held *h)
{
	const struct ckpt_tensor *t = ic->root &&
				      ic->root->kind == CKPT_N_TENSOR ?
				      ic->root->tensor : NULL;

	memset(h, 0, sizeof(*h));
	h->rec = UINT32_MAX;
	h->globals = ic->nglobals;
	if (!t)
		return;
	h->tensor = true;
	h->kind = t->kind;
	h->dtype = t->dtype;
	h->ndim = t->ndim;
	memcpy(h->shape, t->shape, t->ndim * sizeof(*t->shape));
	h->contiguous = t->contiguous;
	h->offset = t->offset;
	h->nbytes = ckpt_tensor_nbytes(t);
	if (t->storage && t->storage->rec)
		h->rec = ptz_cd_index(&ic->zip, t->storage->rec);
}

uint32_t dcp_chunk_storage(const struct ckpt *c, uint32_t k)
{
	uint32_t lo = 0, hi = c->nstorages;

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->dcp->first[mid] <= k)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Item @it's archive as a zip (*@z) whose signature is one seen before,
 * and what it holds (*@h): 1; 0 when it must be opened as a checkpoint
 * (its signature kept in p->tpls->sig when it has one, else emptied).
 */
static int seen_before(struct ckpt_dcp *p, const struct dcp_file *f,
		       const struct dcp_item *it, struct ptz_reader *z,
		       struct held *h)
{
	struct dcp_tpls *t = p->tpls;
	unsigned char sig[4];
	struct tpl **at;
	struct diag d;

	if (!t) {
		t = p->tpls = calloc(1, sizeof(*t));
		if (!t)
			return 0;
	}
	sb_cut(&t->sig, 0);
	diag_init(&d, NULL);
	/* what ckpt_open_embedded() looks at first */
	if (it->len < 4 || io_pread_full(f->fd, sig, 4, it->off) ||
	    memcmp(sig, "PK\3\4", 4) ||
	    ptz_reader_open_at(z, f->fd, f->path, it->off, it->len, &d))
		return 0;
	if (signature(z, &t->sig)) {
		sb_cut(&t->sig, 0);
		ptz_reader_release(z);
		return 0;
	}
	at = t->cap ? slot(t, (unsigned char *)t->sig.p, t->sig.n,
			   hash((unsigned char *)t->sig.p, t->sig.n)) : NULL;
	if (!at || !*at || ((*at)->held.rec != UINT32_MAX &&
			    (*at)->held.rec >= z->nentries)) {
		ptz_reader_release(z);
		return 0;
	}
	*h = (*at)->held;
	return 1;
}

/* Check a chunk's item archive and find its data (lock held). */
static int resolve_locked(struct ckpt *c, uint32_t k, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	struct dcp_chunk *ch = &p->chunks[k];
	const struct ckpt_storage *s = c->storages[dcp_chunk_storage(c, k)];
	const struct ckpt_tensor *want = p->tens[s->index];
	const char *path = d->path;
	struct ptz_reader quick = { 0 }, *z = &quick;
	struct ckpt *ic = NULL;
	struct dcp_item *it;
	struct dcp_file *f;
	struct ptz_entry *e;
	struct held h;
	int nd, rc;

	if (ch->item == DCP_NO_ITEM)
		return diag_corrupt(d, ch->meta_off, ".metadata: a chunk of "
				    "'%s' has no item", p->fqn[s->index]);
	it = &p->items[ch->item];
	f = &p->files[it->file];
	if (f->fd < 0)
		return diag_errno(d, f->err ? f->err : -EIO, "%s: %s",
				  f->name, strerror(f->err ? -f->err : EIO));
	/* a failure names the .distcp and offsets in it */
	d->path = f->path;
	if (!seen_before(p, f, it, &quick, &h)) {
		rc = ckpt_open_embedded(f->fd, f->path, it->off, it->len, &ic,
					d);
		if (rc) {
			if (d->off != DIAG_NO_OFFSET && d->off < it->off)
				d->off += it->off;
			return rc;
		}
		z = &ic->zip;
		held_of(ic, &h);
		if (p->tpls && p->tpls->sig.n)
			remember(p->tpls, (unsigned char *)p->tpls->sig.p,
				 p->tpls->sig.n, &h);
	}
	nd = want->ndim;
	if (!h.tensor || h.kind != CKPT_T_STRIDED || h.dtype != want->dtype ||
	    h.ndim != nd || memcmp(h.shape, ch->sizes, nd * sizeof(int64_t)) ||
	    !h.contiguous || h.globals) {
		char x[256], y[256];

		rc = diag_corrupt(d, it->off, "item of '%s' at %s is not one "
				  "contiguous %s tensor of size %s",
				  p->fqn[s->index],
				  dcp_tuple(x, sizeof(x), ch->offsets, nd),
				  want->dtype->name,
				  dcp_tuple(y, sizeof(y), ch->sizes, nd));
		goto out;
	}
	e = h.rec == UINT32_MAX ? NULL : &z->entries[h.rec];
	if (h.nbytes && (!e || e->method != PTZ_STORED)) {
		rc = diag_unsupported(d, it->off, "item of '%s': its data "
				      "record is compressed", p->fqn[s->index]);
		goto out;
	}
	rc = e ? ptz_entry_locate(z, e, d) : 0;
	if (rc) {
		d->off = d->off == DIAG_NO_OFFSET ? d->off : d->off + it->off;
		goto out;
	}
	ch->data = e ? it->off + e->data_off + h.offset * h.dtype->size : 0;
	ch->crc = e && !h.offset && e->usize == h.nbytes ? e->crc32 : 0;
	__atomic_store_n(&ch->done, true, __ATOMIC_RELEASE);
	d->path = path;
out:
	if (ic)
		ckpt_close(ic);
	else
		ptz_reader_release(&quick);
	return rc;
}

int ckpt_dcp_resolve(struct ckpt *c, uint32_t k, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	int rc = 0;

	if (__atomic_load_n(&p->chunks[k].done, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&p->lock);
	if (!p->chunks[k].done)
		rc = resolve_locked(c, k, d);
	pthread_mutex_unlock(&p->lock);
	return rc;
}
