/*
 * ckpt_safetensors.c - safetensors files (the safetensors README, "Format",
 * and safetensors/src/tensor.rs), read in place (ckpt_stwrite.c writes
 * them):
 *
 *   OFFSET   SIZE  FIELD
 *   0        8     N, the header's length: u64 little-endian, <= 10^8
 *   8        N     header: UTF-8 JSON, '{' first, may end in blanks
 *   8 + N    ...   data: tensor bytes at [begin, end) from here
 *
 *   header   {"NAME": {"dtype": "F32", "shape": [2, 3],
 *                      "data_offsets": [begin, end]}, ...,
 *             "__metadata__": {"key": "value", ...}}    (optional;
 *                                                       or null)
 *
 * Each tensor becomes one storage on "cpu" and one contiguous tensor over
 * all of it; the root is a dict of the names in header order.  The header
 * is walked by a reader of exactly that shape, not parsed into a generic
 * JSON tree: 10^8 hostile bytes must not cost gigabytes, and every refusal
 * names the header byte where it went wrong.  The Rust reader's rules are
 * checked: no duplicate names, sizes that match dtype and shape, and
 * tensors that cover the data with no hole or overlap.  Bytes after the
 * last tensor are left to ptverify (c->data_end tells where it ends).
 */
#include "ckpt/ckpt_int.h"
#include "ckpt_st.h"
#include "pickle/pkl_int.h"
#include "util/io.h"
#include "util/jread.h"
#include "util/le.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_HEADER_MAX	100000000u	/* the Rust reader's limit */
#define ST_META_KEY	"__metadata__"

struct ent {
	const char *name;	/* decoded (arena) */
	size_t nlen;
	uint64_t at;		/* file offset of its name, for messages */
	uint64_t begin, end;	/* data_offsets */
	uint64_t offs_at;	/* file offset of its data_offsets */
};

struct st {
	struct ckpt *c;
	struct diag *d;
	const char *p, *start, *end;	/* the header */
	struct ent *e;
	uint32_t n, cap;
	struct ckpt_meta *meta;
	struct ent *mkey;	/* meta[i]'s key and its offset */
	uint32_t nmeta, metacap;
	uint64_t data_len;	/* bytes after the header */
};

/* File offset of the header byte at @q. */
static uint64_t off_of(const struct st *s, const char *q)
{
	return 8 + (uint64_t)(q - s->start);
}

static uint64_t here(const struct st *s)
{
	return off_of(s, s->p);
}

static void blanks(struct st *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
				 *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Blanks, then @ch (one of the JSON punctuation marks). */
static int expect(struct st *s, char ch, const char *what)
{
	blanks(s);
	if (s->p >= s->end)
		return diag_corrupt(s->d, here(s), "header ends where %s was "
				    "expected", what);
	if (*s->p != ch)
		return diag_corrupt(s->d, here(s), "%s expected", what);
	s->p++;
	return 0;
}

/* Blanks, then ',' (true: another member follows) or @close. */
static int more(struct st *s, char close, bool *again)
{
	blanks(s);
	if (s->p < s->end && (*s->p == ',' || *s->p == close)) {
		*again = *s->p++ == ',';
		return 0;
	}
	if (s->p >= s->end)
		return diag_corrupt(s->d, here(s), "header ends where ',' or "
				    "'%c' was expected", close);
	return diag_corrupt(s->d, here(s), "',' or '%c' expected", close);
}

/* A string (blanks first): decoded into the model's arena, UTF-8. */
static int string(struct st *s, const char **out, size_t *len)
{
	const char *q, *why;
	int rc;

	blanks(s);
	q = s->p;
	if (s->p >= s->end || *s->p != '"')
		return diag_corrupt(s->d, here(s), "string expected");
	rc = jread_string(&s->p, s->end, &s->c->arena, out, len, &why);
	if (rc == -ENOMEM)
		return diag_nomem(s->d);
	if (rc)
		return diag_corrupt(s->d, here(s), "%s", why);
	/* escapes make only valid UTF-8, so this checks the raw bytes */
	if (!pkl_utf8_valid((const unsigned char *)*out, *len))
		return diag_corrupt(s->d, off_of(s, q), "string is not UTF-8");
	return 0;
}

/* A non-negative integer (blanks first): digits only, no leading zero. */
static int number(struct st *s, uint64_t *out)
{
	const char *q;
	uint64_t v = 0;

	blanks(s);
	q = s->p;
	if (q < s->end && *q == '-')
		return diag_corrupt(s->d, here(s), "negative number");
	while (q < s->end && *q >= '0' && *q <= '9') {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*q - '0'), &v))
			return diag_corrupt(s->d, here(s), "number does not "
					    "fit in 64 bits");
		q++;
	}
	if (q == s->p)
		return diag_corrupt(s->d, here(s), "integer expected");
	if (*s->p == '0' && q - s->p > 1)
		return diag_corrupt(s->d, here(s), "number with a leading "
				    "zero");
	if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E'))
		return diag_corrupt(s->d, here(s), "number is not an integer");
	s->p = q;
	*out = v;
	return 0;
}

/* An array of at most @max integers into @v; *@n gets their count. */
static int numbers(struct st *s, uint64_t *v, size_t max, size_t *n,
		   const char *what)
{
	bool again = true;
	int rc = expect(s, '[', what);

	*n = 0;
	blanks(s);
	if (!rc && s->p < s->end && *s->p == ']') {
		s->p++;
		return 0;
	}
	while (!rc && again) {
		if (*n == max)
			return diag_corrupt(s->d, here(s), "%s has more than "
					    "%zu entries", what, max);
		rc = number(s, &v[(*n)++]);
		if (!rc)
			rc = more(s, ']', &again);
	}
	return rc;
}

/*
 * __metadata__'s value: an object of strings, or null (MLX writes that;
 * tensor.rs reads it as None, no metadata, and so do we: c->meta_given
 * stays false, so write-back writes none, as safetensors' serializer
 * writes a None).
 */
static int meta_map(struct st *s)
{
	bool again = true;
	int rc;

	blanks(s);
	if (s->end - s->p >= 4 && !memcmp(s->p, "null", 4)) {
		s->p += 4;
		return 0;
	}
	rc = expect(s, '{', "__metadata__ object or null");
	if (!rc)
		s->c->meta_given = true;
	blanks(s);
	if (!rc && s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	while (!rc && again) {
		struct ckpt_meta m = { 0 };
		uint64_t at;

		blanks(s);
		at = here(s);
		rc = string(s, &m.key, &m.klen);
		if (!rc)
			rc = expect(s, ':', "':'");
		blanks(s);
		if (!rc && (s->p >= s->end || *s->p != '"'))
			rc = diag_corrupt(s->d, here(s), "__metadata__ value "
					  "of '%s' is not a string", m.key);
		if (!rc)
			rc = string(s, &m.val, &m.vlen);
		if (!rc && s->nmeta == s->metacap) {
			uint32_t cap = s->metacap ? 2 * s->metacap : 16;
			struct ckpt_meta *nm = realloc(s->meta,
						       cap * sizeof(*nm));
			struct ent *nk = nm ? realloc(s->mkey,
						      cap * sizeof(*nk)) : NULL;

			if (nm)
				s->meta = nm;
			if (!nk)
				return diag_nomem(s->d);
			s->mkey = nk;
			s->metacap = cap;
		}
		if (!rc) {
			s->mkey[s->nmeta] = (struct ent){ .name = m.key,
				.nlen = m.klen, .at = at };
			s->meta[s->nmeta++] = m;
		}
		if (!rc)
			rc = more(s, '}', &again);
	}
	return rc;
}

/* The dtype a header's name gives (the sub-byte ones: ckpt_types.h). */
static int dtype_of(struct st *s, const char *name, uint64_t at,
		    const struct ckpt_dtype **out)
{
	*out = ckpt_dtype_by_st(name);
	if (!*out)
		*out = ckpt_dtype_st_bytes(name);
	if (*out)
		return 0;
	return diag_unsupported(s->d, at, "unknown safetensors dtype '%.32s'",
				name);
}

/* Bits of one value of @dt in a safetensors header (F4: 4). */
static unsigned value_bits(const struct ckpt_dtype *dt)
{
	if (dt->bits)
		return dt->bits;
	return dt->pack ? 8u * dt->size / dt->pack : 8u * dt->size;
}

/*
 * A sub-byte tensor as torch holds it (F4 of an even last size: a
 * float4_e2m1fn_x2 tensor, that size halved, as safetensors' torch
 * binding loads it), or else as its bytes: 1-d, of the dtype that names
 * it, the header's shape kept for write-back.
 */
static int sub_byte(struct st *s, const struct ckpt_dtype **dt,
		    const char *dtname, uint64_t *dims, size_t *ndim,
		    uint64_t nbytes, struct ckpt_tensor_ext *x)
{
	int64_t *keep;

	if ((*dt)->pack && *ndim && dims[*ndim - 1] % (*dt)->pack == 0) {
		dims[*ndim - 1] /= (*dt)->pack;
		return 0;
	}
	if (!(*dt)->bits)
		*dt = ckpt_dtype_st_bytes(dtname);
	keep = arena_alloc(&s->c->arena, (*ndim + 1) * sizeof(*keep));
	if (!keep)
		return diag_nomem(s->d);
	for (size_t i = 0; i < *ndim; i++)
		keep[i] = (int64_t)dims[i];
	x->st_shape = keep;
	x->st_ndim = (int)*ndim;
	dims[0] = nbytes;
	*ndim = 1;
	return 0;
}

/* Check a tensor's fields against each other; make its storage. */
static int tensor_make(struct st *s, struct ent *e, const char *dtname,
		       const struct ckpt_dtype *dt, const uint64_t *dims,
		       size_t ndim, uint64_t shape_at)
{
	struct ckpt_tensor_ext x = { 0 };
	struct ckpt_storage *st;
	struct ckpt_tensor *t;
	uint64_t numel = 1, nbytes, v[CKPT_MAX_DIMS];
	char key[16];
	int rc;

	for (size_t i = 0; i < ndim; i++) {
		if (dims[i] > INT64_MAX)
			return diag_corrupt(s->d, shape_at, "tensor '%s': "
					    "dimension %zu is too large",
					    e->name, i);
		if (__builtin_mul_overflow(numel, dims[i], &numel))
			return diag_corrupt(s->d, shape_at, "tensor '%s': "
					    "element count overflows", e->name);
	}
	if (__builtin_mul_overflow(numel, (uint64_t)value_bits(dt), &nbytes))
		return diag_corrupt(s->d, shape_at, "tensor '%s': byte size "
				    "overflows", e->name);
	/* tensor.rs's MisalignedSlice: sub-byte values fill whole bytes */
	if (nbytes % 8)
		return diag_corrupt(s->d, shape_at, "tensor '%s': %llu x %s "
				    "is not a whole number of bytes", e->name,
				    (unsigned long long)numel, dtname);
	nbytes /= 8;
	if (e->begin > e->end)
		return diag_corrupt(s->d, e->offs_at, "tensor '%s': "
				    "data_offsets [%llu, %llu] run backwards",
				    e->name, (unsigned long long)e->begin,
				    (unsigned long long)e->end);
	if (e->end > s->data_len)
		return diag_corrupt(s->d, e->offs_at, "tensor '%s' ends at "
				    "data byte %llu, past the end of the file "
				    "(%llu data bytes)", e->name,
				    (unsigned long long)e->end,
				    (unsigned long long)s->data_len);
	if (e->end - e->begin != nbytes)
		return diag_corrupt(s->d, e->offs_at, "tensor '%s' is %llu x "
				    "%s = %llu bytes, but data_offsets give "
				    "%llu", e->name, (unsigned long long)numel,
				    dtname, (unsigned long long)nbytes,
				    (unsigned long long)(e->end - e->begin));
	memcpy(v, dims, ndim * sizeof(*v));
	if (value_bits(dt) < 8 &&
	    (rc = sub_byte(s, &dt, dtname, v, &ndim, nbytes, &x)))
		return rc;
	snprintf(key, sizeof(key), "%u", s->n);
	rc = ckpt_storage_add(s->c->b, key, dt, "cpu", nbytes / dt->size,
			      e->at, &st);
	if (rc)
		return rc;
	st->data_off = 8 + s->c->hdr_len + e->begin;
	t = ckpt_tensor_new(s->c->b, (int)ndim);
	if (!t)
		return diag_nomem(s->d);
	for (size_t i = 0; i < ndim; i++)
		t->shape[i] = (int64_t)v[i];
	if (x.st_shape) {
		struct ckpt_tensor_ext *own = ckpt_tensor_ext_own(s->c, t);

		if (!own)
			return diag_nomem(s->d);
		own->st_shape = x.st_shape;
		own->st_ndim = x.st_ndim;
	}
	if (!ckpt_tensor_c_strides(t))
		return diag_corrupt(s->d, shape_at, "tensor '%s': strides "
				    "overflow", e->name);
	t->kind = CKPT_T_STRIDED;
	t->storage = st;
	t->dtype = dt;
	t->pkl_off = e->at;
	rc = ckpt_tensor_check(s->c, t, s->d);
	if (rc)
		return rc;
	st->ntensors++;
	return 0;
}

/* One "NAME": {dtype, shape, data_offsets} member's value. */
static int tensor(struct st *s, struct ent *e)
{
	static const char *const fields[] = {
		"dtype", "shape", "data_offsets",
	};
	uint64_t dims[CKPT_MAX_DIMS], offs[2], at[3] = { 0 }, open_at;
	const struct ckpt_dtype *dt = NULL;
	const char *dtname = NULL;
	size_t ndim = 0, noffs = 0;
	bool again = true;
	int rc;

	blanks(s);
	open_at = here(s);
	rc = expect(s, '{', "tensor object");
	while (!rc && again) {
		const char *f;
		size_t flen, k;
		uint64_t f_at;

		blanks(s);
		f_at = here(s);
		rc = string(s, &f, &flen);
		/* by length too: "dtype\u0000x" is no field */
		for (k = 0; !rc && k < 3 && (flen != strlen(fields[k]) ||
					     strcmp(f, fields[k])); k++)
			;
		if (!rc && k == 3)
			return diag_corrupt(s->d, f_at, "tensor '%s': unknown "
					    "field '%.32s'", e->name, f);
		if (!rc && at[k])
			return diag_corrupt(s->d, f_at, "tensor '%s': field "
					    "'%s' given twice", e->name, f);
		if (!rc)
			rc = expect(s, ':', "':'");
		blanks(s);
		if (!rc)
			at[k] = here(s);
		if (!rc && k == 0) {
			rc = string(s, &dtname, &flen);
			if (!rc && flen != strlen(dtname))
				rc = diag_unsupported(s->d, at[k], "dtype "
						      "name holds a NUL");
			if (!rc)
				rc = dtype_of(s, dtname, at[k], &dt);
		} else if (!rc && k == 1) {
			rc = numbers(s, dims, CKPT_MAX_DIMS, &ndim, "shape");
		} else if (!rc) {
			rc = numbers(s, offs, 2, &noffs, "data_offsets");
			if (!rc && noffs != 2)
				rc = diag_corrupt(s->d, at[k], "tensor '%s': "
						  "data_offsets is not [begin, "
						  "end]", e->name);
		}
		if (!rc)
			rc = more(s, '}', &again);
	}
	for (int k = 0; !rc && k < 3; k++)
		if (!at[k])
			return diag_corrupt(s->d, open_at, "tensor '%s' has no "
					    "'%s'", e->name, fields[k]);
	if (rc)
		return rc;
	e->begin = offs[0];
	e->end = offs[1];
	e->offs_at = at[2];
	return tensor_make(s, e, dtname, dt, dims, ndim, at[1]);
}

/* The header's members, in order; each tensor gets its storage. */
static int members(struct st *s)
{
	bool again = true, meta = false;
	int rc = expect(s, '{', "'{'");

	blanks(s);
	if (!rc && s->p < s->end && *s->p == '}') {
		s->p++;
		again = false;
	}
	while (!rc && again) {
		struct ent e = { 0 };

		blanks(s);
		e.at = here(s);
		rc = string(s, &e.name, &e.nlen);
		if (!rc)
			rc = expect(s, ':', "':'");
		if (rc)
			return rc;
		if (e.nlen == strlen(ST_META_KEY) &&
		    !memcmp(e.name, ST_META_KEY, e.nlen)) {
			if (meta)
				return diag_corrupt(s->d, e.at, "__metadata__ "
						    "given twice");
			meta = true;
			rc = meta_map(s);
		} else {
			if (s->n == s->cap) {
				uint32_t cap = s->cap ? 2 * s->cap : 64;
				struct ent *ne = realloc(s->e, cap *
							 sizeof(*ne));

				if (!ne)
					return diag_nomem(s->d);
				s->e = ne;
				s->cap = cap;
			}
			rc = tensor(s, &e);
			if (!rc)
				s->e[s->n++] = e;
		}
		if (!rc)
			rc = more(s, '}', &again);
	}
	blanks(s);
	if (!rc && s->p != s->end)
		rc = diag_corrupt(s->d, here(s), "text after the header "
				  "object");
	return rc;
}

static int by_name(const void *a, const void *b)
{
	const struct ent *x = *(const struct ent *const *)a;
	const struct ent *y = *(const struct ent *const *)b;
	int r = memcmp(x->name, y->name, x->nlen < y->nlen ? x->nlen : y->nlen);

	return r ? r : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

static int by_begin(const void *a, const void *b)
{
	const struct ent *x = *(const struct ent *const *)a;
	const struct ent *y = *(const struct ent *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

/* @v (@n entries) sorted by name: the later of two equal names, or NULL. */
static const struct ent *twice(struct ent **v, uint32_t n)
{
	qsort(v, n, sizeof(*v), by_name);
	for (uint32_t i = 1; i < n; i++)
		if (!by_name(&v[i - 1], &v[i]))
			return v[i - 1]->at > v[i]->at ? v[i - 1] : v[i];
	return NULL;
}

/*
 * No name twice (tensors, metadata keys), and the tensors sorted by offset
 * tile the data from byte 0 (safetensors' validate()); where they end is
 * c->data_end.
 */
static int layout(struct st *s)
{
	uint32_t most = s->n > s->nmeta ? s->n : s->nmeta;
	struct ent **v = calloc(most + 1u, sizeof(*v));
	const struct ent *dup;
	uint64_t pos = 0;
	int rc = 0;

	if (!v)
		return diag_nomem(s->d);
	for (uint32_t i = 0; i < s->nmeta; i++)
		v[i] = &s->mkey[i];
	dup = twice(v, s->nmeta);
	if (dup)
		rc = diag_corrupt(s->d, dup->at, "__metadata__ key '%s' given "
				  "twice", dup->name);
	for (uint32_t i = 0; i < s->n; i++)
		v[i] = &s->e[i];
	dup = rc ? NULL : twice(v, s->n);
	if (dup)
		rc = diag_corrupt(s->d, dup->at, "tensor '%s' given twice",
				  dup->name);
	qsort(v, s->n, sizeof(*v), by_begin);
	for (uint32_t i = 0; i < s->n && !rc; i++) {
		if (v[i]->begin > pos)
			rc = diag_corrupt(s->d, v[i]->offs_at, "data bytes "
					  "[%llu, %llu) before tensor '%s' "
					  "belong to no tensor",
					  (unsigned long long)pos,
					  (unsigned long long)v[i]->begin,
					  v[i]->name);
		else if (v[i]->begin < pos)
			rc = diag_corrupt(s->d, v[i]->offs_at, "tensor '%s' "
					  "at data bytes [%llu, %llu) overlaps "
					  "tensor '%s'", v[i]->name,
					  (unsigned long long)v[i]->begin,
					  (unsigned long long)v[i]->end,
					  v[i - 1]->name);
		pos = v[i]->end;
	}
	s->c->data_end = 8 + s->c->hdr_len + pos;
	free(v);
	return rc;
}

/* The root: a dict of the tensors in header order. */
static const char *ent_name(void *arg, uint32_t i, size_t *len)
{
	const struct st *s = arg;

	*len = s->e[i].nlen;
	return s->e[i].name;
}

bool ckpt_safetensors_head(const unsigned char *h, size_t n)
{
	/* a header length well below 2^40, then the JSON object's '{' */
	return n >= 9 && h[8] == '{' && !h[5] && !h[6] && !h[7];
}

int ckpt_safetensors_open(struct ckpt *c, struct diag *d)
{
	struct st s = { .c = c, .d = d };
	unsigned char len[8];
	char *hdr = NULL;
	int rc;

	rc = io_pread_diag(c->fd, len, 8, 0, "the safetensors header length",
			   d);
	if (rc)
		return rc;
	c->hdr_len = le64(len);
	if (c->hdr_len > ST_HEADER_MAX)
		return diag_corrupt(d, 0, "safetensors header of %llu bytes, "
				    "over the format's limit of %u",
				    (unsigned long long)c->hdr_len,
				    ST_HEADER_MAX);
	if (c->file_size < 8 || c->hdr_len > c->file_size - 8)
		return diag_corrupt(d, 0, "safetensors header of %llu bytes "
				    "runs past the end of the file (%llu "
				    "bytes)", (unsigned long long)c->hdr_len,
				    (unsigned long long)c->file_size);
	s.data_len = c->file_size - 8 - c->hdr_len;
	hdr = malloc(c->hdr_len + 1);
	if (!hdr)
		return diag_nomem(d);
	rc = io_pread_diag(c->fd, hdr, c->hdr_len, 8, "the header", d);
	if (rc)
		goto out;
	s.p = s.start = hdr;
	s.end = hdr + c->hdr_len;
	rc = ckpt_build_begin(c, d);
	if (!rc)
		rc = members(&s);
	if (!rc)
		rc = layout(&s);
	if (!rc)
		rc = ckpt_flat_root(c, ent_name, &s, s.n, d);
	if (!rc && s.nmeta) {
		c->meta = arena_alloc(&c->arena, s.nmeta * sizeof(*c->meta));
		if (!c->meta)
			rc = diag_nomem(d);
		else
			memcpy(c->meta, s.meta, s.nmeta * sizeof(*c->meta));
		c->nmeta = rc ? 0 : s.nmeta;
	}
out:
	free(hdr);
	free(s.e);
	free(s.meta);
	free(s.mkey);
	return rc;
}
