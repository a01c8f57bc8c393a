/*
 * gguf_parse.c - the header of a GGUF file (ggml docs/gguf.md; gguf-py
 * gguf_reader.py and llama.cpp's gguf.cpp are the readers it agrees with):
 *
 *   OFFSET  SIZE  FIELD
 *   0       4     magic "GGUF"
 *   4       4     u32 version: 2 or 3 (1 had u32 counts; nobody reads it)
 *   8       8     u64 tensor count
 *   16      8     u64 key/value count
 *   24      ...   key/values: string key, u32 value type, value
 *   ...     ...   tensor infos: string name, u32 n_dims, u64 ne[n_dims]
 *                 (ggml order: ne[0] varies fastest), u32 ggml type,
 *                 u64 offset in the data section
 *   align   ...   data: the first multiple of general.alignment (a u32
 *                 power of two, else 32) after the infos
 *
 *   string  u64 length, then that many bytes (UTF-8, no NUL)
 *   value   u8 i8 u16 i16 u32 i32 f32 bool(u8) string - u64 i64 f64:
 *           types 0..12 with 9 an array: u32 element type, u64 count,
 *           the elements
 *
 * Every number is in the file's byte order; version 3 allows big-endian
 * files, with no field saying so: a version whose low 16 bits read 0 is
 * byte-swapped (gguf-py's test).  The header is read through a 64 KiB
 * window, never as a whole: a hostile count costs a refusal, not memory.
 * What gguf-py or llama.cpp refuse is refused here, with the offset:
 * nested arrays (llama.cpp has none), duplicate keys or names, more than
 * 4 dimensions, unknown types, rows that are not whole blocks, offsets
 * that are not aligned, and tensors past the file or over each other.
 * What they accept but llama.cpp warns of (names over 63 bytes, a layout
 * that is not the packed one) is left to ptverify.
 */
#include "ckpt/ckpt_int.h"
#include "gguf.h"
#include "util/io.h"
#include "util/le.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN	65536u
#define NAME_MAX_LEN	65535u	/* a key or a tensor name, in bytes */

struct rd {
	struct ckpt *c;
	struct diag *d;
	int fd;
	uint64_t size, pos;
	bool big;
	unsigned char buf[WIN];
	uint64_t boff;		/* file offset of buf[0] */
	size_t blen;
};

/* @n (<= WIN) bytes at r->pos into @p, or a refusal naming @what. */
static int get(struct rd *r, void *p, size_t n, const char *what)
{
	if (n > r->size || r->pos > r->size - n)
		return diag_corrupt(r->d, r->pos, "%s runs past the end of "
				    "the file (%" PRIu64 " bytes)", what,
				    r->size);
	if (r->pos < r->boff || r->pos + n > r->boff + r->blen) {
		size_t want = r->size - r->pos < WIN ? r->size - r->pos : WIN;
		int rc = io_pread_diag(r->fd, r->buf, want, r->pos,
				       "the GGUF header", r->d);

		if (rc)
			return rc;
		r->boff = r->pos;
		r->blen = want;
	}
	memcpy(p, r->buf + (r->pos - r->boff), n);
	r->pos += n;
	return 0;
}

static int u32(struct rd *r, uint32_t *v, const char *what)
{
	unsigned char b[4];
	int rc = get(r, b, 4, what);

	*v = rc ? 0 : (uint32_t)ord_load(b, 4, r->big);
	return rc;
}

static int u64(struct rd *r, uint64_t *v, const char *what)
{
	unsigned char b[8];
	int rc = get(r, b, 8, what);

	*v = rc ? 0 : ord_load(b, 8, r->big);
	return rc;
}

/* Skip @n bytes (a value read later from the file itself). */
static int skip(struct rd *r, uint64_t n, const char *what)
{
	if (n > r->size - r->pos)
		return diag_corrupt(r->d, r->pos, "%s of %" PRIu64 " bytes "
				    "runs past the end of the file (%" PRIu64
				    " bytes)", what, n, r->size);
	r->pos += n;
	return 0;
}

/* A key or a tensor name: kept, NUL-terminated, in the arena. */
static int name(struct rd *r, const char **out, uint32_t *len,
		const char *what)
{
	uint64_t at = r->pos, n;
	char *s;
	int rc = u64(r, &n, what);

	if (rc)
		return rc;
	if (n > NAME_MAX_LEN)
		return diag_corrupt(r->d, at, "%s of %" PRIu64 " bytes, over "
				    "the limit of %u", what, n, NAME_MAX_LEN);
	if (n > r->size - r->pos)
		return diag_corrupt(r->d, at, "%s of %" PRIu64 " bytes runs "
				    "past the end of the file", what, n);
	s = arena_alloc(&r->c->arena, n + 1);
	if (!s)
		return diag_nomem(r->d);
	for (uint64_t k = 0; k < n && !rc; k += WIN)
		rc = get(r, s + k, n - k < WIN ? n - k : WIN, what);
	if (rc)
		return rc;
	s[n] = 0;
	if (memchr(s, 0, n))
		return diag_corrupt(r->d, at, "%s holds a NUL byte", what);
	*out = s;
	*len = (uint32_t)n;
	return 0;
}

static const uint8_t scalar_size[GGUF_NVTYPES] = {
	[GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2,
	[GGUF_U32] = 4, [GGUF_I32] = 4, [GGUF_F32] = 4, [GGUF_BOOL] = 1,
	[GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};

/* A string's bytes skipped (an array's element or a value). */
static int skip_string(struct rd *r)
{
	uint64_t n;
	int rc = u64(r, &n, "a string's length");

	return rc ? rc : skip(r, n, "a string");
}

/* One key/value: its key, type and where its value lies. */
static int kv(struct rd *r, struct gguf_kv *kv)
{
	uint32_t type;
	uint64_t at;
	int rc;

	kv->at = r->pos;
	rc = name(r, &kv->key, &kv->klen, "a key");
	at = r->pos;
	if (!rc)
		rc = u32(r, &type, "a value's type");
	if (rc)
		return rc;
	if (type >= GGUF_NVTYPES)
		return diag_corrupt(r->d, at, "key '%s': unknown value type "
				    "%u", kv->key, type);
	kv->type = (uint8_t)type;
	if (type == GGUF_ARRAY) {
		uint32_t et;

		at = r->pos;
		if ((rc = u32(r, &et, "an array's element type")) ||
		    (rc = u64(r, &kv->count, "an array's length")))
			return rc;
		if (et == GGUF_ARRAY)
			return diag_corrupt(r->d, at, "key '%s': an array of "
					    "arrays, which llama.cpp does not "
					    "read either", kv->key);
		if (et >= GGUF_NVTYPES)
			return diag_corrupt(r->d, at, "key '%s': array of "
					    "unknown type %u", kv->key, et);
		kv->atype = (uint8_t)et;
		type = et;
	}
	kv->val = r->pos;
	if (type == GGUF_STRING && kv->type == GGUF_ARRAY) {
		for (uint64_t i = 0; i < kv->count && !rc; i++)
			rc = skip_string(r);
	} else if (type == GGUF_STRING) {
		rc = skip_string(r);
	} else {
		uint64_t n = kv->type == GGUF_ARRAY ? kv->count : 1;

		if (n > (r->size - r->pos) / gguf_value_size(type))
			return diag_corrupt(r->d, at, "key '%s': %" PRIu64
					    " values of %s run past the end of "
					    "the file", kv->key, n,
					    gguf_type_name(type));
		rc = skip(r, n * gguf_value_size(type), "a value");
	}
	if (rc)
		return diag_corrupt(r->d, kv->at, "key '%s': its value runs "
				    "past the end of the file", kv->key);
	kv->len = r->pos - kv->val;
	return 0;
}

/* One tensor info, its size from its type and dimensions. */
static int tensor(struct rd *r, struct gguf_tensor *t)
{
	uint32_t type;
	uint64_t numel = 1, at;
	int rc;

	t->at = r->pos;
	rc = name(r, &t->name, &t->nlen, "a tensor name");
	at = r->pos;
	if (!rc)
		rc = u32(r, &t->ndim, "a tensor's n_dims");
	if (rc)
		return rc;
	if (t->ndim > GGUF_MAX_DIMS)
		return diag_corrupt(r->d, at, "tensor '%s': %u dimensions, "
				    "over ggml's %d", t->name, t->ndim,
				    GGUF_MAX_DIMS);
	for (uint32_t k = 0; k < t->ndim && !rc; k++)
		rc = u64(r, &t->ne[k], "a tensor's dimensions");
	at = r->pos;
	if (!rc)
		rc = u32(r, &type, "a tensor's type");
	if (!rc)
		rc = u64(r, &t->off, "a tensor's offset");
	if (rc)
		return rc;
	for (uint32_t k = 0; k < t->ndim; k++)
		if (t->ne[k] > INT64_MAX ||
		    __builtin_mul_overflow(numel, t->ne[k], &numel) ||
		    numel > INT64_MAX)
			return diag_corrupt(r->d, t->at, "tensor '%s': its "
					    "element count overflows",
					    t->name);
	if (!(t->type = gguf_type_by_id(type)))
		return diag_corrupt(r->d, at, "tensor '%s': unknown ggml type "
				    "%u", t->name, type);
	if (t->type->block > 1 && t->ndim && t->ne[0] % t->type->block)
		return diag_corrupt(r->d, t->at, "tensor '%s': rows of %" PRIu64
				    " elements are not whole %s blocks of %u",
				    t->name, t->ne[0], t->type->name,
				    t->type->block);
	if (t->type->block > 1 && !t->ndim)
		return diag_corrupt(r->d, t->at, "tensor '%s': a 0-d tensor "
				    "cannot be of block type %s", t->name,
				    t->type->name);
	if (__builtin_mul_overflow(numel / t->type->block,
				   (uint64_t)t->type->bytes, &t->nbytes))
		return diag_corrupt(r->d, t->at, "tensor '%s': its byte size "
				    "overflows", t->name);
	return 0;
}

static int by_off(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(struct gguf_tensor *const *)b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Every tensor aligned, inside the file, over no other. */
static int layout(struct rd *r, struct gguf *g)
{
	struct gguf_tensor **v = malloc((g->nt + 1) * sizeof(*v));
	uint64_t avail = r->size > g->data ? r->size - g->data : 0;
	int rc = 0;

	if (!v)
		return diag_nomem(r->d);
	for (uint64_t i = 0; i < g->nt; i++)
		v[i] = &g->t[i];
	qsort(v, g->nt, sizeof(*v), by_off);
	g->data_end = g->data;
	for (uint64_t i = 0; i < g->nt && !rc; i++) {
		const struct gguf_tensor *t = v[i];

		if (t->off % g->align)
			rc = diag_corrupt(r->d, t->at, "tensor '%s': data "
					  "offset %" PRIu64 " is not a "
					  "multiple of the alignment %u",
					  t->name, t->off, g->align);
		else if (t->off > avail || t->nbytes > avail - t->off)
			rc = diag_corrupt(r->d, t->at, "tensor '%s': %" PRIu64
					  " bytes at data offset %" PRIu64
					  " run past the end of the file (%"
					  PRIu64 " data bytes)", t->name,
					  t->nbytes, t->off, avail);
		else if (i && t->off < v[i - 1]->off + v[i - 1]->nbytes)
			rc = diag_corrupt(r->d, t->at, "tensor '%s' at data "
					  "offset %" PRIu64 " overlaps tensor "
					  "'%s'", t->name, t->off,
					  v[i - 1]->name);
		else if (g->data + t->off + t->nbytes > g->data_end)
			g->data_end = g->data + t->off + t->nbytes;
	}
	free(v);
	return rc;
}

/* Names (or keys) that repeat: sorted copies compared in neighbours. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *twice(const char **v, uint64_t n)
{
	qsort(v, n, sizeof(*v), cmp_str);
	for (uint64_t i = 1; i < n; i++)
		if (!strcmp(v[i - 1], v[i]))
			return v[i];
	return NULL;
}

static int unique(struct rd *r, struct gguf *g)
{
	uint64_t n = g->nkv > g->nt ? g->nkv : g->nt;
	const char **v = malloc((n + 1) * sizeof(*v)), *dup;
	int rc = 0;

	if (!v)
		return diag_nomem(r->d);
	for (uint64_t i = 0; i < g->nkv; i++)
		v[i] = g->kv[i].key;
	if ((dup = twice(v, g->nkv)))
		rc = diag_corrupt(r->d, gguf_find(g, dup)->at, "key '%s' is "
				  "there twice", dup);
	for (uint64_t i = 0; i < g->nt && !rc; i++)
		v[i] = g->t[i].name;
	if (!rc && (dup = twice(v, g->nt)))
		rc = diag_corrupt(r->d, DIAG_NO_OFFSET, "tensor '%s' is "
				  "there twice", dup);
	free(v);
	return rc;
}

/* general.alignment: a u32 power of two, as gguf-py insists. */
static int alignment(struct rd *r, struct gguf *g)
{
	const struct gguf_kv *a = gguf_find(g, "general.alignment");
	unsigned char b[4];
	int rc;

	g->align = GGUF_ALIGN_DEFAULT;
	if (!a)
		return 0;
	if (a->type != GGUF_U32)
		return diag_corrupt(r->d, a->at, "general.alignment is a %s, "
				    "not a u32", gguf_type_name(a->type));
	if ((rc = io_pread_diag(r->fd, b, 4, a->val, "general.alignment",
				r->d)))
		return rc;
	g->align = (uint32_t)ord_load(b, 4, r->big);
	if (!g->align || (g->align & (g->align - 1)))
		return diag_corrupt(r->d, a->val, "general.alignment %u is "
				    "not a power of two", g->align);
	return 0;
}

bool gguf_head(const unsigned char *h, size_t n)
{
	return n >= 4 && !memcmp(h, GGUF_MAGIC, 4);
}

int gguf_parse(struct ckpt *c, int fd, uint64_t size, struct gguf *g,
	       struct diag *d)
{
	struct rd *r = malloc(sizeof(*r));
	unsigned char h[24];
	int rc;

	memset(g, 0, sizeof(*g));
	if (!r)
		return diag_nomem(d);
	*r = (struct rd){ .c = c, .d = d, .fd = fd, .size = size };
	rc = get(r, h, 24, "the GGUF header");
	if (rc)
		goto out;
	g->version = le32(h + 4);
	g->big = r->big = !(g->version & 0xffff);
	if (g->big)
		g->version = (uint32_t)ord_load(h + 4, 4, true);
	if (g->version != 2 && g->version != 3) {
		rc = diag_unsupported(d, 4, "GGUF version %u: only 2 and 3 "
				      "are read (as by gguf-py)", g->version);
		goto out;
	}
	g->nt = ord_load(h + 8, 8, r->big);
	g->nkv = ord_load(h + 16, 8, r->big);
	/* a key/value takes at least 13 bytes, a tensor info 24 */
	if (g->nkv > (size - 24) / 13 || g->nt > (size - 24) / 24) {
		rc = diag_corrupt(d, g->nkv > (size - 24) / 13 ? 16 : 8,
				  "%" PRIu64 " key/values and %" PRIu64
				  " tensors cannot fit in %" PRIu64 " bytes",
				  g->nkv, g->nt, size);
		goto out;
	}
	g->kv = arena_alloc(&c->arena, (g->nkv + 1) * sizeof(*g->kv));
	g->t = arena_alloc(&c->arena, (g->nt + 1) * sizeof(*g->t));
	if (!g->kv || !g->t) {
		rc = diag_nomem(d);
		goto out;
	}
	memset(g->t, 0, (g->nt + 1) * sizeof(*g->t));
	for (uint64_t i = 0; i < g->nkv && !rc; i++)
		rc = kv(r, &g->kv[i]);
	for (uint64_t i = 0; i < g->nt && !rc; i++)
		rc = tensor(r, &g->t[i]);
	if (!rc)
		rc = unique(r, g);
	if (!rc)
		rc = alignment(r, g);
	if (rc)
		goto out;
	g->info_end = r->pos;
	g->data = (r->pos + g->align - 1) / g->align * g->align;
	rc = layout(r, g);
out:
	free(r);
	return rc;
}

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->nkv; i++)
		if (!strcmp(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

unsigned gguf_value_size(unsigned vtype)
{
	return vtype < GGUF_NVTYPES ? scalar_size[vtype] : 0;
}

int gguf_vtype_by_name(const char *s, size_t n)
{
	for (unsigned t = 0; t < GGUF_NVTYPES; t++)
		if (t != GGUF_ARRAY && strlen(gguf_type_name(t)) == n &&
		    !memcmp(gguf_type_name(t), s, n))
			return (int)t;
	return -1;
}

const char *gguf_type_name(unsigned vtype)
{
	static const char *const names[GGUF_NVTYPES] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
		"string", "array", "u64", "i64", "f64",
	};

	return vtype < GGUF_NVTYPES ? names[vtype] : "?";
}
