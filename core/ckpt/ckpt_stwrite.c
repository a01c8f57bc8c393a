/*
 * ckpt_stwrite.c - write the model as a safetensors file, laid out the way
 * safetensors.torch.save_file lays one out (safetensors/src/tensor.rs,
 * prepare() and serialize_to_file(); checked against safetensors 0.8):
 *
 *   OFFSET   SIZE  FIELD
 *   0        8     N, the header's length: u64 little-endian, N % 8 == 0
 *   8        N     {"__metadata__":{"K":"V",...},"NAME":{"dtype":"F32",
 *                   "shape":[2,3],"data_offsets":[b,e]},...} and then
 *                   blanks (' ') up to N
 *   8 + N    ...   the tensors back to back in header order, C order,
 *                   little-endian: the first at 0, each where the one
 *                   before ends, the last ending at the end of the file
 *
 * Header order: by dtype from the widest down (tensor.rs's Dtype enum
 * reversed: U64 I64 F64 C64 F32 U32 I32 BF16 F16 U16 I16 F8_E5M2FNUZ
 * F8_E4M3FNUZ F8_E8M0 F8_E4M3 F8_E5M2 I8 U8 F6_E3M2 F6_E2M3 F4 BOOL),
 * then by name (bytes),
 * so that with the header padded to 8 every tensor is aligned to its
 * element size.  JSON as serde_json writes it: no blanks; '"', '\' and
 * control characters escaped (\b \f \n \r \t, else \u00xx); the rest as
 * UTF-8.  __metadata__ comes first when there is one, its entries in the
 * file's order (the library keeps them in a hash map, so any order is
 * its own), then the aliases of tied weights (ckpt_stflat.c).  A file in
 * this form written back unchanged comes out byte for byte the same.
 *
 * Bytes are copied in the kernel (io_copy_range(): copy_file_range) and a
 * strided view or a converted tensor is read straight into the output's
 * buffers, all in order through util/seqout.h: memory does not grow with
 * the data.  When a safetensors checkpoint's header comes out the
 * same, the write starts from a clone of the file where the file system
 * can make one (FICLONE), and only staged tensors are written, in the
 * chunks written since their copy-up (their dirty maps).
 */
#include "ckpt_stint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/io.h"
#include "util/seqout.h"
#include "util/le.h"
#include "util/sbuf.h"

#define ST_HEADER_MAX	100000000u	/* the Rust reader's limit */

/* tensor.rs's Dtype enum, in its order. */
static const char *const st_rank[] = {
	"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
	"F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
	"C64", "F64", "I64", "U64",
};

struct stw {
	struct ckpt *c;
	int fd;
	struct seqout *out;	/* fd, from write_all() on */
	const struct ckpt_write_opts *o;
	struct diag *d;
	struct st_flat f;
	const char *meta;	/* __metadata__'s members as given (a
				   folder's shard), or NULL */
	struct st_layout L;	/* the tensors in header order, the header */
	uint32_t nwritten;	/* tensors written (L.n, after release) */
	struct ckpt_write_stats st;
};

static unsigned rank_of(const struct ckpt_dtype *dt)
{
	for (unsigned i = 0; i < sizeof(st_rank) / sizeof(*st_rank); i++)
		if (!strcmp(dt->st, st_rank[i]))
			return i;
	return 0;
}

/* Widest dtype first, then by name. */
static int canonical(const void *a, const void *b)
{
	const struct st_ent *x = *(const struct st_ent *const *)a;
	const struct st_ent *y = *(const struct st_ent *const *)b;
	unsigned rx = rank_of(x->t->dtype), ry = rank_of(y->t->dtype);
	int r;

	if (rx != ry)
		return rx > ry ? -1 : 1;
	r = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void meta_entry(struct sbuf *b, bool *first, const char *k, size_t kn,
		       const char *v, size_t vn)
{
	if (!*first)
		sb_add(b, ",", 1);
	*first = false;
	sb_json_str(b, k, kn);
	sb_add(b, ":", 1);
	sb_json_str(b, v, vn);
}

static bool meta_has(const struct ckpt *c, const char *k, size_t n)
{
	for (uint32_t i = 0; i < c->nmeta; i++)
		if (c->meta[i].klen == n && !memcmp(c->meta[i].key, k, n))
			return true;
	return false;
}

/* Is @name one of the flat map's? */
static bool flat_has(const struct stw *w, const char *name, size_t n)
{
	for (uint32_t i = 0; i < w->f.n; i++)
		if (w->f.e[i].len == n && !memcmp(w->f.e[i].name, name, n))
			return true;
	return false;
}

/*
 * A subtree of a safetensors file (ptrepack KEYPATH...): an entry of its
 * __metadata__ that names one of its tensors (an alias "ALIAS": "KEPT")
 * the output no longer holds by that name would point at nothing.
 */
static bool meta_stale(const struct stw *w, const struct ckpt *c,
		       const struct ckpt_meta *m)
{
	if (!w->o->nroots || !c->root || !ckpt_node_is_dir(c->root))
		return false;
	return (ckpt_node_child(c->root, m->key) &&
		!flat_has(w, m->key, m->klen)) ||
	       (ckpt_node_child(c->root, m->val) &&
		!flat_has(w, m->val, m->vlen));
}

/*
 * __metadata__: the file's own entries (of a subtree, those that still
 * name what they named), {"format": "pt"} for a file
 * converted from torch's format (transformers refuses a __metadata__
 * without it), then "ALIAS": "KEPT" for each tie, as save_model records
 * them, unless the metadata has that key already.
 */
static void metadata(struct stw *w, struct sbuf *b)
{
	/* a folder's shard keeps its own __metadata__ */
	const struct ckpt *c = w->o->meta ? w->o->meta : w->c;
	bool conv = c->format != CKPT_SAFETENSORS, first = true;

	if (w->meta) {
		sb_printf(b, "\"" CKPT_ST_META "\":{%s},", w->meta);
		return;
	}
	if (!c->meta_given && !c->nmeta && !w->f.aliases && !conv)
		return;
	sb_puts(b, "\"" CKPT_ST_META "\":{");
	for (uint32_t i = 0; i < c->nmeta; i++)
		if (!meta_stale(w, c, &c->meta[i]))
			meta_entry(b, &first, c->meta[i].key, c->meta[i].klen,
				   c->meta[i].val, c->meta[i].vlen);
	if (conv && !meta_has(c, "format", 6))
		meta_entry(b, &first, "format", 6, "pt", 2);
	for (uint32_t i = 0; i < w->f.n; i++) {
		const struct st_ent *e = &w->f.e[i], *k = &w->f.e[e->kept];

		if (e->kept == i || meta_has(c, e->name, e->len) ||
		    (conv && e->len == 6 && !memcmp(e->name, "format", 6)))
			continue;
		meta_entry(b, &first, e->name, e->len, k->name, k->len);
	}
	sb_puts(b, "},");
}

/* @t's shape as the header has it: a sub-byte tensor's as it was read
 * (bytes only), or with its last size times the values per element (F4
 * of a float4_e2m1fn_x2 tensor). */
static void header_shape(struct sbuf *b, const struct ckpt_tensor *t)
{
	const int64_t *v = t->dtype->bits ? t->x->st_shape : t->shape;
	int n = t->dtype->bits ? t->x->st_ndim : t->ndim;

	for (int k = 0; k < n; k++)
		sb_printf(b, "%s%lld", k ? "," : "", (long long)v[k] *
			  (k == n - 1 && t->dtype->pack ? t->dtype->pack : 1));
}

/* The header, padded with blanks to a multiple of 8 (prepare()). */
static int header(struct stw *w, struct sbuf *b)
{
	uint64_t pos = 0;
	uint32_t n = w->L.n;

	sb_add(b, "{", 1);
	metadata(w, b);
	for (uint32_t i = 0; i < n; i++) {
		struct st_ent *e = w->L.order[i];
		const struct ckpt_tensor *t = e->t;

		e->begin = pos;
		e->end = pos += ckpt_tensor_nbytes(t);
		sb_json_str(b, e->name, e->len);
		sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype->st);
		header_shape(b, t);
		sb_printf(b, "],\"data_offsets\":[%llu,%llu]}%s",
			  (unsigned long long)e->begin,
			  (unsigned long long)e->end, i + 1 < n ? "," : "");
	}
	if (b->n > 1 && b->p[b->n - 1] == ',')
		b->n--;		/* metadata and no tensor */
	sb_add(b, "}", 1);
	while (b->n % 8)
		sb_add(b, " ", 1);
	if (b->oom)
		return diag_nomem(w->d);
	if (b->n > ST_HEADER_MAX)
		return diag_unsupported(w->d, DIAG_NO_OFFSET, "a header of "
					"%zu bytes, over safetensors' limit "
					"of %u", b->n, ST_HEADER_MAX);
	w->L.base = 8 + b->n;
	w->L.total = pos;
	return 0;
}

/* Tell the caller about a tensor that is not all of its storage. */
static void note_view(struct stw *w, const struct st_ent *e)
{
	const struct ckpt_tensor *t = e->t;
	const struct ckpt_storage *s = t->storage;
	char what[160];

	if (t->contiguous && !t->offset && ckpt_tensor_nbytes(t) == s->nbytes)
		return;
	w->st.views++;
	if (!w->o->note)
		return;
	if (!t->contiguous)
		snprintf(what, sizeof(what), "a strided view of storage %s: "
			 "written as a contiguous copy", s->key);
	else
		snprintf(what, sizeof(what), "%llu of the %llu bytes of "
			 "storage %s: written alone, contiguous",
			 (unsigned long long)ckpt_tensor_nbytes(t),
			 (unsigned long long)s->nbytes, s->key);
	w->o->note(w->o->note_arg, e->name, what);
}

/* Tensor @e's bytes (t.contiguous()) to @at of the output. */
static int put_tensor(struct stw *w, const struct st_ent *e, uint64_t at)
{
	const struct ckpt_tensor *t = e->t;
	/* a DCP tensor cut in chunks has no one place: gathered below */
	bool pieced = ckpt_storage_pieced(w->c, t->storage);
	uint64_t off = 0;
	int fd = -1, rc = pieced ? 0 : ckpt_storage_data(w->c, t->storage,
							 &fd, &off, w->d);

	if (rc)
		return rc;
	if (t->contiguous && !pieced) {
		uint64_t n = ckpt_tensor_nbytes(t);

		rc = seqout_seek(w->out, at);
		if (!rc)
			rc = seqout_copy(w->out, fd,
					 off + t->offset * t->dtype->size, n);
		if (rc)
			return diag_errno(w->d, rc, "%s: cannot copy its %llu "
					  "bytes: %s", e->name,
					  (unsigned long long)n, strerror(-rc));
		w->st.copied += n;
		return 0;
	}
	if ((rc = seqout_seek(w->out, at)))
		return diag_errno(w->d, rc, "cannot write: %s", strerror(-rc));
	/* read straight into the output's buffer */
	for (uint64_t pos = 0, n = ckpt_tensor_nbytes(t); pos < n && !rc; ) {
		size_t room;
		void *to = seqout_room(w->out, &room);
		long long got = ckpt_tensor_read(w->c, t, to,
						 room < n - pos ? room : n - pos,
						 pos, w->d);

		if (got <= 0) {
			rc = got < 0 ? (int)got : diag_corrupt(w->d,
					DIAG_NO_OFFSET, "%s ends early",
					e->name);
			break;
		}
		rc = seqout_commit(w->out, (size_t)got);
		if (rc)
			rc = diag_errno(w->d, rc, "cannot write: %s",
					strerror(-rc));
		pos += (uint64_t)got;
		w->st.written += (uint64_t)got;
	}
	return rc;
}

/*
 * Is the file being replaced already this file but for its staged bytes:
 * a safetensors checkpoint whose header comes out byte for byte the same,
 * every tensor under its own name over its own storage?
 */
static int same_places(struct stw *w, bool *same)
{
	const struct sbuf *hdr = &w->L.hdr;
	struct ckpt *c = w->c;
	char *old;
	int rc;

	*same = false;
	if (c->format != CKPT_SAFETENSORS || hdr->n != c->hdr_len ||
	    w->f.aliases)
		return 0;
	for (uint32_t i = 0; i < w->L.n; i++) {
		const struct st_ent *e = w->L.order[i];
		const struct ckpt_storage *s = e->t->storage;

		if (ckpt_node_rekeyed(e->node) || e->t->fresh || s->fresh ||
		    s->retyped)
			return 0;
	}
	old = malloc(hdr->n + 1);
	if (!old)
		return diag_nomem(w->d);
	rc = io_pread_full(c->fd, old, hdr->n, 8);
	*same = !rc && !memcmp(old, hdr->p, hdr->n);
	free(old);
	return rc ? diag_errno(w->d, rc, "cannot read the header: %s",
			       strerror(-rc)) : 0;
}

/* Into a clone of the checkpoint: the staged tensors' written chunks. */
static int patch_staged(struct stw *w, const struct st_ent *e)
{
	const struct ckpt_storage *s = e->t->storage;
	const uint64_t *bits = ckpt_dirty_bits(s);
	uint64_t chunk = UINT64_C(1) << CKPT_DIRTY_SHIFT, at = w->L.base + e->begin;
	int rc = 0;

	if (s->fd == w->c->fd)
		return 0;	/* not staged: in the clone already */
	if (!bits)
		return put_tensor(w, e, at);
	for (uint64_t i = 0; i * chunk < s->nbytes && !rc; i++) {
		uint64_t from = i * chunk, n = s->nbytes - from;

		if (!(bits[i / 64] >> (i % 64) & 1))
			continue;
		n = n < chunk ? n : chunk;
		rc = seqout_seek(w->out, at + from);
		if (!rc)
			rc = seqout_copy(w->out, s->fd, s->data_off + from, n);
		if (rc)
			return diag_errno(w->d, rc, "%s: cannot copy: %s",
					  e->name, strerror(-rc));
		w->st.copied += n;
	}
	return 0;
}

static int write_all(struct stw *w, bool cloned)
{
	const struct sbuf *hdr = &w->L.hdr;
	unsigned char len[8];
	uint64_t done = 0;
	int rc2, rc = 0;

	ord_store(len, 8, false, hdr->n);
	if ((rc = seqout_open(&w->out, w->fd, 0)))
		return diag_nomem(w->d);
	if (!cloned) {
		rc = seqout_put(w->out, len, 8);
		if (!rc)
			rc = seqout_put(w->out, hdr->p, hdr->n);
		if (rc)
			rc = diag_errno(w->d, rc, "cannot write: %s",
					strerror(-rc));
		else
			w->st.written += 8 + hdr->n;
	}
	for (uint32_t i = 0; i < w->L.n && !rc; i++) {
		const struct st_ent *e = w->L.order[i];

		rc = cloned ? patch_staged(w, e) :
		     put_tensor(w, e, w->L.base + e->begin);
		done += ckpt_tensor_nbytes(e->t);
		if (!rc && w->o->progress)
			w->o->progress(w->o->progress_arg, done, w->L.total);
	}
	rc2 = seqout_close(w->out);
	w->out = NULL;
	if (!rc && rc2)
		rc = diag_errno(w->d, rc2, "cannot write: %s", strerror(-rc2));
	/* a clone may hold bytes after the data (ptverify names them) */
	if (!rc && ftruncate(w->fd, (off_t)(w->L.base + w->L.total)))
		rc = diag_errno(w->d, -errno, "cannot set the file's size: %s",
				strerror(errno));
	return rc;
}

/* The kept entries of w->f with @pick set (all: NULL) in header order,
 * and the header: w->L.  0 or -errno with w->d set. */
static int lay_out(struct stw *w, const uint8_t *pick)
{
	struct st_layout *L = &w->L;

	L->order = malloc((w->f.n + 1) * sizeof(*L->order));
	if (!L->order)
		return diag_nomem(w->d);
	for (uint32_t i = 0; i < w->f.n; i++)
		if (w->f.e[i].kept == i && (!pick || pick[i]))
			L->order[L->n++] = &w->f.e[i];
	qsort(L->order, L->n, sizeof(*L->order), canonical);
	return header(w, &L->hdr);
}

void ckpt_st_layout_release(struct st_layout *L)
{
	free(L->hdr.p);
	free(L->order);
	*L = (struct st_layout){ 0 };
}

int ckpt_st_layout(struct ckpt *c, struct st_flat *f, const uint8_t *pick,
		   const char *meta, const struct ckpt_write_opts *o,
		   struct st_layout *L, struct diag *d)
{
	struct stw w = { .c = c, .o = o, .d = d, .f = *f, .meta = meta };
	int rc = lay_out(&w, pick);

	if (rc)
		ckpt_st_layout_release(&w.L);
	*L = w.L;
	return rc;
}

/* Room for the file where it is written?  A 16-byte storage seen as 2^40
 * elements is 4 TB of output: refused at once, not at the disk's end. */
static int room_for(struct stw *w)
{
	uint64_t need = w->L.base + w->L.total;
	struct statvfs sv;

	if (fstatvfs(w->fd, &sv) || !sv.f_frsize ||
	    need / sv.f_frsize < sv.f_bavail)
		return 0;
	return diag_errno(w->d, -ENOSPC, "the output needs %llu bytes, "
			  "its file system has %llu free",
			  (unsigned long long)need, (unsigned long long)
			  sv.f_bavail * sv.f_frsize);
}

/* Lay out, then write the file.  0 or -errno. */
static int write_flat(struct stw *w, const uint8_t *pick, bool clone)
{
	bool cloned = false;
	int rc = lay_out(w, pick);

	for (uint32_t i = 0; !rc && i < w->L.n; i++)
		note_view(w, w->L.order[i]);
	if (!rc && clone)
		rc = same_places(w, &clone);
	if (!rc && clone) {
		rc = ckpt_clone_file(w->fd, w->c->fd);
		cloned = !rc;
		rc = rc < 0 ? diag_errno(w->d, rc, "cannot clone the "
					 "checkpoint into the new file: %s",
					 strerror(-rc)) : 0;
	}
	if (!rc && !cloned)
		rc = room_for(w);
	if (!rc)
		rc = write_all(w, cloned);
	w->st.size = w->L.base + w->L.total;
	w->st.cloned = cloned;
	w->nwritten = w->L.n;
	ckpt_st_layout_release(&w->L);
	return rc;
}

int ckpt_st_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
		  bool clone, struct diag *d)
{
	struct stw w = { .c = c, .fd = fd, .o = o, .d = d };
	int rc;

	rc = ckpt_st_flatten(c, o, &w.f, d);
	if (!rc)
		rc = write_flat(&w, NULL, clone);
	if (!rc && o->stats) {
		w.st.records = w.st.storages = w.nwritten;
		w.st.tensors = w.nwritten;
		w.st.aliases = w.f.aliases;
		w.st.dropped_values = w.f.dropped;
		*o->stats = w.st;
	}
	ckpt_st_flat_release(&w.f);
	return rc;
}

int ckpt_st_write_part(struct ckpt *c, int fd, struct st_flat *f,
		       const uint8_t *pick, const char *meta,
		       const struct ckpt_write_opts *o,
		       struct ckpt_write_stats *st, struct diag *d)
{
	struct stw w = { .c = c, .fd = fd, .o = o, .d = d, .f = *f,
			 .meta = meta };
	int rc = write_flat(&w, pick, false);

	st->views += w.st.views;
	st->written += w.st.written;
	st->copied += w.st.copied;
	st->tensors += w.nwritten;
	st->size = w.st.size;
	return rc;
}
