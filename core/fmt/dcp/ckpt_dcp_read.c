/*
 * ckpt_dcp_read.c - a DCP tensor's bytes, gathered in place from its
 * chunks.  Each chunk is an N-d box (offsets, sizes) of the global tensor
 * whose elements lie row-major in the data/0 record of its item's
 * torch.save archive, inside a .distcp file; nothing is copied out.
 *
 * Global element e (row-major index, coordinates idx) lies in the chunk
 * whose box holds idx.  From there the elements that follow e in the
 * global order follow it in the chunk too, for as long as the run stays
 * in the box: let k be the last dimension the box does not span whole
 * (all dimensions after k it spans whole); then the run goes on to the
 * end of the box's extent in dimension k.  Row-wise (dim 0) sharding thus
 * gives one run per chunk, sharding an inner dimension one run per row
 * and chunk.  A read walks runs, one pread each, and touches only the
 * chunks it overlaps; a chunk's item is opened on first use
 * (ckpt_dcp_item.c).
 */
#include "ckpt_dcp.h"
#include "ckpt_dcpapi.h"
#include "util/io.h"
#include "util/sbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ckpt_dcp_chunk_add(struct ckpt *c, int nd, const int64_t *off,
		       const int64_t *size, uint32_t item, uint64_t meta_off,
		       struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	struct dcp_chunk *k;
	int64_t *v = arena_alloc(&c->arena, (2 * nd + 1) * sizeof(*v));

	if (!v)
		return diag_nomem(d);
	if (p->nchunks == p->chunks_cap) {
		uint32_t cap = p->chunks_cap ? 2 * p->chunks_cap : 64;

		k = realloc(p->chunks, cap * sizeof(*k));
		if (!k)
			return diag_nomem(d);
		p->chunks = k;
		p->chunks_cap = cap;
	}
	memcpy(v, off, nd * sizeof(*v));
	memcpy(v + nd, size, nd * sizeof(*v));
	k = &p->chunks[p->nchunks++];
	*k = (struct dcp_chunk){ .offsets = v, .sizes = v + nd, .item = item,
				 .meta_off = meta_off };
	return 0;
}

int ckpt_dcp_storage_done(struct ckpt *c, const char *fqn,
			  struct ckpt_tensor *t, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	uint32_t n = c->nstorages;
	uint32_t *f = realloc(p->first, (n + 1) * sizeof(*f));
	const char **q;
	struct ckpt_tensor **v;

	if (f)
		p->first = f;
	q = f ? realloc(p->fqn, n * sizeof(*q)) : NULL;
	if (q)
		p->fqn = q;
	v = q ? realloc(p->tens, n * sizeof(*v)) : NULL;
	if (!v)
		return diag_nomem(d);
	p->tens = v;
	p->ntables = n;
	f[0] = 0;
	f[n] = p->nchunks;
	q[n - 1] = fqn ? fqn : c->storages[n - 1]->key;
	v[n - 1] = t;
	return 0;
}

int ckpt_dcp_value_storage(struct ckpt *c, struct ptz_reader *z,
			   uint32_t item, struct ckpt_storage *s,
			   struct diag *d)
{
	const char *key = strchr(s->key, '/') + 1;	/* "v<item>/<key>" */
	struct dcp_item *it = &c->dcp->items[item];
	struct ptz_entry *e;
	char rel[64];
	int64_t zero = 0, n = (int64_t)s->numel;
	int rc;

	snprintf(rel, sizeof(rel), "data/%.40s", key);
	e = ptz_find_rel(z, rel);
	if (!e || e->method != PTZ_STORED || e->usize != s->nbytes)
		return diag_corrupt(d, it->off, "item of a value: storage "
				    "'%s' has no stored record %s of %llu "
				    "bytes", key, rel,
				    (unsigned long long)s->nbytes);
	rc = ptz_entry_locate(z, e, d);
	if (rc)
		return rc;
	rc = ckpt_dcp_chunk_add(c, 1, &zero, &n, item, s->pkl_off, d);
	if (rc)
		return rc;
	c->dcp->chunks[c->dcp->nchunks - 1].data = it->off + e->data_off;
	c->dcp->chunks[c->dcp->nchunks - 1].done = true;
	return ckpt_dcp_storage_done(c, NULL, NULL, d);
}

/* Chunks [*@b, *@e) of storage @s. */
static void chunks_of(const struct ckpt *c, const struct ckpt_storage *s,
		      uint32_t *b, uint32_t *e)
{
	const struct ckpt_dcp *p = c->dcp;

	*b = *e = 0;
	if (p && p->first && s->index < p->ntables) {
		*b = p->first[s->index];
		*e = p->first[s->index + 1];
	}
}

bool dcp_pieced(const struct ckpt *c, const struct ckpt_storage *s)
{
	uint32_t b, e;

	chunks_of(c, s, &b, &e);
	return e - b > 1 && s->fd == c->fd;	/* not staged in an overlay */
}

const struct ckpt_tensor *dcp_tensor(const struct ckpt *c,
				     const struct ckpt_storage *s)
{
	const struct ckpt_dcp *p = c->dcp;

	return p && s->index < p->ntables ? p->tens[s->index] : NULL;
}

int ckpt_dcp_storage_data(struct ckpt *c, struct ckpt_storage *s, int *fd,
			  uint64_t *off, struct diag *d)
{
	struct ckpt_dcp *p = c->dcp;
	uint32_t b, e;
	int rc;

	chunks_of(c, s, &b, &e);
	if (e - b != 1)
		return diag_unsupported(d, DIAG_NO_OFFSET, "storage %s is "
					"gathered from %u chunks: it has no "
					"one place", s->key, e - b);
	rc = ckpt_dcp_resolve(c, b, d);
	if (rc)
		return rc;
	*fd = p->files[p->items[p->chunks[b].item].file].fd;
	*off = p->chunks[b].data;
	return 0;
}

/* The chunk of [b, e) whose box holds @idx, trying @hint first. */
static uint32_t chunk_at(const struct ckpt_dcp *p, uint32_t b, uint32_t e,
			 uint32_t hint, const int64_t *idx, int nd)
{
	for (uint32_t n = 0; n < e - b; n++) {
		uint32_t i = b + (hint - b + n) % (e - b);
		const struct dcp_chunk *ch = &p->chunks[i];
		int j = 0;

		while (j < nd && idx[j] >= ch->offsets[j] &&
		       idx[j] < ch->offsets[j] + ch->sizes[j])
			j++;
		if (j == nd)
			return i;
	}
	return UINT32_MAX;
}

/*
 * The run at global element @el of @t: its chunk *@k, the element's index
 * inside the chunk *@local, and the elements that follow in the chunk in
 * order, *@n.  -EIO when no chunk holds it (a lenient open's hole).
 */
static int run_at(struct ckpt *c, const struct ckpt_tensor *t, uint64_t el,
		  uint32_t *k, uint64_t *local, uint64_t *n, struct diag *d)
{
	const struct ckpt_dcp *p = c->dcp;
	int64_t idx[CKPT_MAX_DIMS];
	const struct dcp_chunk *ch;
	uint32_t b, e;
	uint64_t rest = el, inner = 1, pos = 0, mul = 1;
	int nd = t->ndim, j;

	chunks_of(c, t->storage, &b, &e);
	for (j = nd - 1; j >= 0; j--) {
		idx[j] = t->shape[j] ? (int64_t)(rest % t->shape[j]) : 0;
		rest = t->shape[j] ? rest / t->shape[j] : 0;
	}
	*k = chunk_at(p, b, e, *k < b || *k >= e ? b : *k, idx, nd);
	if (*k == UINT32_MAX)
		return diag_set(d, -EIO, DIAG_NO_OFFSET, "tensor '%s': element "
				"%llu lies in none of its chunks",
				p->fqn[t->storage->index],
				(unsigned long long)el);
	ch = &p->chunks[*k];
	*local = 0;
	for (j = nd - 1; j >= 0; j--) {
		*local += (uint64_t)(idx[j] - ch->offsets[j]) * mul;
		mul *= (uint64_t)ch->sizes[j];
	}
	/* dims after k the box spans whole: one block of @inner elements */
	for (j = nd - 1; j >= 0 && ch->offsets[j] == 0 &&
	     ch->sizes[j] == t->shape[j]; j--) {
		pos += (uint64_t)idx[j] * inner;
		inner *= (uint64_t)t->shape[j];
	}
	if (j < 0)
		*n = t->numel - el;
	else
		*n = (uint64_t)(ch->offsets[j] + ch->sizes[j] - idx[j]) *
		     inner - pos;
	return 0;
}

int dcp_where(struct ckpt *c, const struct ckpt_tensor *t, uint64_t pos,
	      int *fd, uint64_t *off, uint64_t *len, struct diag *d)
{
	const struct ckpt_dcp *p = c->dcp;
	uint64_t isz = t->dtype->size, local, n;
	uint32_t k = 0;
	int rc;

	if (pos >= ckpt_tensor_nbytes(t))
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "past the end");
	rc = run_at(c, t, pos / isz, &k, &local, &n, d);
	if (!rc)
		rc = ckpt_dcp_resolve(c, k, d);
	if (rc)
		return rc;
	*fd = p->files[p->items[p->chunks[k].item].file].fd;
	*off = p->chunks[k].data + local * isz + pos % isz;
	*len = n * isz - pos % isz;
	return 0;
}

long long ckpt_dcp_read(struct ckpt *c, const struct ckpt_tensor *t,
			void *buf, uint64_t len, uint64_t pos, struct diag *d)
{
	unsigned char *out = buf;
	uint64_t done = 0;

	if (pos >= ckpt_tensor_nbytes(t))
		return 0;
	if (len > ckpt_tensor_nbytes(t) - pos)
		len = ckpt_tensor_nbytes(t) - pos;
	while (done < len) {
		uint64_t off, n;
		int fd, rc = dcp_where(c, t, pos + done, &fd, &off, &n, d);

		if (rc)
			return rc;
		n = n < len - done ? n : len - done;
		rc = io_pread_diag(fd, out + done, n, off, "the chunk", d);
		if (rc)
			return rc;
		done += n;
	}
	return (long long)len;
}

static char *chunks_text(const struct ckpt *c, const struct ckpt_tensor *t,
			 size_t *len)
{
	const struct ckpt_dcp *p = c->dcp;
	struct sbuf b = { 0 };
	uint32_t lo, hi;

	if (!p || !t->storage || !p->tens[t->storage->index])
		return NULL;
	chunks_of(c, t->storage, &lo, &hi);
	for (uint32_t i = lo; i < hi; i++) {
		const struct dcp_chunk *ch = &p->chunks[i];
		const struct dcp_item *it = ch->item == DCP_NO_ITEM ? NULL :
					    &p->items[ch->item];

		sb_puts(&b, "offsets=");
		for (int j = 0; j < t->ndim; j++)
			sb_printf(&b, "%s%lld", j ? "," : "",
				  (long long)ch->offsets[j]);
		sb_puts(&b, " sizes=");
		for (int j = 0; j < t->ndim; j++)
			sb_printf(&b, "%s%lld", j ? "," : "",
				  (long long)ch->sizes[j]);
		if (it)
			sb_printf(&b, " file=%s offset=%llu length=%llu",
				  p->files[it->file].name,
				  (unsigned long long)it->off,
				  (unsigned long long)it->len);
		sb_puts(&b, "\n");
	}
	return sb_detach(&b, len);
}

void ckpt_dcp_chunks_attr(const struct ckpt *c, const struct ckpt_tensor *t,
			  const char *name, ckpt_attr_fn fn, void *arg)
{
	size_t len;
	char *text = chunks_text(c, t, &len);

	if (text && len < 65536)	/* an xattr value's limit */
		fn(arg, name, text);
	free(text);
}

void ckpt_dcp_release(struct ckpt *c)
{
	struct ckpt_dcp *p = c->dcp;

	if (!p)
		return;
	/* the files and the directory are c->src's */
	ckpt_dcp_tpls_free(p);
	for (uint32_t i = 0; i < p->ndocs; i++)
		pkl_doc_free(p->docs[i]);
	free(p->files);
	free(p->items);
	free(p->chunks);
	free(p->first);
	free(p->fqn);
	free(p->tens);
	free(p->docs);
	free(p->findings);
	free(p->others);
	pthread_mutex_destroy(&p->lock);
	c->dcp = NULL;
}
