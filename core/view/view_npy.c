/*
 * view_npy.c - .npy headers (NumPy format, numpy/lib/format.py; the
 * record is in view.h): build the header np.save writes for a tensor,
 * byte for byte as numpy 1.24 does (sorted keys, 21 - len(shape[0])
 * spaces of growth room, then spaces and "\n" up to a multiple of 64),
 * and parse one without eval: the dict is read as a restricted Python
 * literal with a fixed grammar, every length and product checked.
 */
#include "view/view.h"

#include "diag/diag.h"
#include "util/le.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define NPY_PREFIX_V1	10	/* magic, version, 2-byte length */
#define NPY_PREFIX_V2	12	/* 2.0 and 3.0: 4-byte length */
#define NPY_HEADER_MAX_V2	(1u << 20)
#define NPY_GROWTH_DIGITS	21	/* numpy's GROWTH_AXIS_MAX_DIGITS */
#define NPY_STR_MAX	63	/* longest string literal we keep */

static const char magic[6] = "\x93NUMPY";

/* numpy descr codes torch has a dtype for ('<' etc. stripped). */
static const struct {
	const char *code, *dtype;
} codes[] = {
	{ "f2", "float16" }, { "f4", "float32" }, { "f8", "float64" },
	{ "i1", "int8" }, { "i2", "int16" }, { "i4", "int32" },
	{ "i8", "int64" }, { "u1", "uint8" }, { "u2", "uint16" },
	{ "u4", "uint32" }, { "u8", "uint64" }, { "b1", "bool" },
	{ "c8", "complex64" }, { "c16", "complex128" },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- building ---- */

const char *view_npy_descr(const struct ckpt_dtype *dt, bool big, char *buf,
			   size_t size)
{
	char order = big ? '>' : '<', code[8];

	if (!strcmp(dt->name, "complex32")) {
		snprintf(buf, size, "[('re', '%cf2'), ('im', '%cf2')]", order,
			 order);
		return buf;
	}
	/* bfloat16 as its raw bits, like every type numpy lacks */
	if (dt->npy && strcmp(dt->name, "bfloat16"))
		snprintf(code, sizeof(code), "%s", dt->npy);
	else
		snprintf(code, sizeof(code), "u%u", (unsigned)dt->size);
	snprintf(buf, size, "'%c%s'", dt->size == 1 ? '|' : order, code);
	return buf;
}

size_t view_npy_header(const struct ckpt_dtype *dt, bool big, int ndim,
		       const int64_t *shape, unsigned char *buf)
{
	char *h = (char *)buf + NPY_PREFIX_V1, descr[64];
	size_t n, pad, total;

	n = (size_t)sprintf(h, "{'descr': %s, 'fortran_order': False, "
			    "'shape': (", view_npy_descr(dt, big, descr,
							 sizeof(descr)));
	for (int i = 0; i < ndim; i++)
		n += (size_t)sprintf(h + n, i ? ", %" PRId64 : "%" PRId64,
				     shape[i]);
	n += (size_t)sprintf(h + n, "%s), }", ndim == 1 ? "," : "");
	/* room for shape[0] to grow to 21 digits in place */
	if (ndim > 0) {
		int digits = snprintf(NULL, 0, "%" PRId64, shape[0]);

		for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
			h[n++] = ' ';
	}
	/* numpy pads 64, not 0, when the "\n" would end on the boundary */
	pad = 64 - (NPY_PREFIX_V1 + n + 1) % 64;
	memset(h + n, ' ', pad);
	n += pad;
	h[n++] = '\n';
	total = NPY_PREFIX_V1 + n;
	memcpy(buf, magic, sizeof(magic));
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (unsigned char)n;
	buf[9] = (unsigned char)(n >> 8);
	return total;
}

/* ---- parsing: a restricted Python literal ---- */

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_word(int c)
{
	return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z');
}

struct rd {
	const unsigned char *s;
	size_t pos, end;	/* offsets in the .npy */
	struct diag *d;
};

static int bad(struct rd *r, const char *what)
{
	return diag_set(r->d, -EINVAL, r->pos, ".npy header: %s", what);
}

static void skip_ws(struct rd *r)
{
	while (r->pos < r->end && (r->s[r->pos] == ' ' ||
				   (r->s[r->pos] >= '\t' &&
				    r->s[r->pos] <= '\r')))
		r->pos++;
}

/* The next non-blank byte, or -1 at the end. */
static int peek(struct rd *r)
{
	skip_ws(r);
	return r->pos < r->end ? r->s[r->pos] : -1;
}

static int expect(struct rd *r, char c)
{
	char what[24];

	if (peek(r) == c) {
		r->pos++;
		return 0;
	}
	snprintf(what, sizeof(what), "expected '%c'", c);
	return bad(r, what);
}

/* A '...' or "..." literal of printable ASCII without escapes. */
static int string(struct rd *r, char *out)
{
	size_t n = 0, start;
	int q = peek(r);

	if (q != '\'' && q != '"')
		return bad(r, "expected a string");
	start = r->pos++;
	for (; r->pos < r->end && r->s[r->pos] != q; r->pos++, n++) {
		unsigned char c = r->s[r->pos];

		if (c < 0x20 || c >= 0x7f || c == '\\')
			return bad(r, "unsupported character in a string");
		if (n == NPY_STR_MAX) {
			r->pos = start;
			return bad(r, "string too long");
		}
		out[n] = (char)c;
	}
	if (r->pos == r->end) {
		r->pos = start;
		return bad(r, "unterminated string");
	}
	r->pos++;
	out[n] = 0;
	return 0;
}

/* True or False, as a whole word. */
static int boolean(struct rd *r, bool *v)
{
	size_t left, n = 0;

	peek(r);
	left = r->end - r->pos;
	if (left >= 4 && !memcmp(r->s + r->pos, "True", 4))
		n = 4;
	else if (left >= 5 && !memcmp(r->s + r->pos, "False", 5))
		n = 5;
	/* "Truely" is a name, not True */
	if (!n || (n < left && is_word(r->s[r->pos + n])))
		return bad(r, "fortran_order is not True or False");
	*v = n == 4;
	r->pos += n;
	return 0;
}

/* A non-negative int64 in decimal, as Python writes it. */
static int dimension(struct rd *r, int64_t *v)
{
	size_t start;
	uint64_t x = 0;

	if (peek(r) == '-')
		return bad(r, "negative dimension in the shape");
	start = r->pos;
	while (r->pos < r->end && is_digit(r->s[r->pos])) {
		unsigned dig = (unsigned)(r->s[r->pos] - '0');

		if (x > ((uint64_t)INT64_MAX - dig) / 10) {
			r->pos = start;
			return bad(r, "dimension out of range");
		}
		x = x * 10 + dig;
		r->pos++;
	}
	if (r->pos == start)
		return bad(r, "expected a dimension");
	/* Python has no leading zeros: "007" is a syntax error */
	if (r->s[start] == '0' && r->pos - start > 1) {
		r->pos = start;
		return bad(r, "leading zero in a dimension");
	}
	*v = (int64_t)x;
	return 0;
}

/* (), (5,), (2, 3), (2, 3,): a tuple of ints. */
static int shape(struct rd *r, struct view_npy *out)
{
	int rc = expect(r, '(');
	bool comma = false;

	while (!rc && peek(r) != ')') {
		if (out->ndim == CKPT_MAX_DIMS)
			return bad(r, "shape has more than 64 dimensions");
		rc = dimension(r, &out->shape[out->ndim++]);
		if (rc)
			return rc;
		comma = peek(r) == ',';
		if (comma)
			r->pos++;
		else if (peek(r) != ')')
			return bad(r, "expected ',' or ')' in the shape");
	}
	if (rc)
		return rc;
	/* "(5)" is the int 5 in Python, not a tuple */
	if (out->ndim == 1 && !comma)
		return bad(r, "shape is not a tuple");
	r->pos++;
	return 0;
}

/* One ('name', 'descr') pair of a structured descr. */
static int field(struct rd *r, char *name, char *type)
{
	int rc = expect(r, '(');

	if (!rc)
		rc = string(r, name);
	if (!rc)
		rc = expect(r, ',');
	if (!rc)
		rc = string(r, type);
	if (!rc && peek(r) == ',')
		r->pos++;
	return rc ? rc : expect(r, ')');
}

/*
 * The descr: a string into @out, or the complex32 structure of two
 * float16s (*@structured, and @out its parts' type).
 */
static int descr(struct rd *r, char *out, bool *structured, size_t *at)
{
	char name[2][NPY_STR_MAX + 1], type[2][NPY_STR_MAX + 1];
	int rc;

	*structured = peek(r) == '[';
	*at = r->pos;
	if (!*structured)
		return string(r, out);
	r->pos++;
	rc = field(r, name[0], type[0]);
	if (!rc)
		rc = expect(r, ',');
	if (!rc)
		rc = field(r, name[1], type[1]);
	if (!rc && peek(r) == ',')
		r->pos++;
	if (!rc)
		rc = expect(r, ']');
	if (rc)
		return rc;
	if (strcmp(name[0], "re") || strcmp(name[1], "im") ||
	    strcmp(type[0], type[1]) || strlen(type[0]) != 3 ||
	    strcmp(type[0] + 1, "f2") || !strchr("<>=|", type[0][0])) {
		r->pos = *at;
		return bad(r, "structured descr other than complex32");
	}
	strcpy(out, type[0]);
	return 0;
}

/* Map the descr to a torch dtype and byte order. */
static int map_descr(struct rd *r, const char *s, bool structured,
		     size_t at, struct view_npy *out)
{
	const char *code = s;
	char order = '=';

	if (code[0] && strchr("<>=|", code[0])) {
		order = code[0];
		code++;
	}
	if (structured) {
		out->dtype = ckpt_dtype_by_name("complex32");
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
			if (!strcmp(code, codes[i].code))
				out->dtype = ckpt_dtype_by_name(codes[i].dtype);
	}
	if (!out->dtype)
		return diag_set(r->d, -EINVAL, at, ".npy descr '%s' has no "
				"torch dtype", s);
	/* '=' is native, which is little-endian here; '|' means "n/a" */
	out->big = order == '>' && out->dtype->size > 1;
	view_npy_descr(out->dtype, out->big, out->descr, sizeof(out->descr));
	return 0;
}

/* The element count and size, refusing anything past INT64_MAX. */
static int sizes(struct rd *r, size_t at, struct view_npy *out)
{
	uint64_t numel = 1;
	bool over = false;

	for (int i = 0; i < out->ndim; i++) {
		uint64_t dim = (uint64_t)out->shape[i];

		if (dim && numel > INT64_MAX / dim)
			over = true;
		else
			numel *= dim;
	}
	if (!numel)
		over = false;	/* any zero dimension makes it empty */
	if (over || numel > INT64_MAX / out->dtype->size)
		return diag_set(r->d, -EINVAL, at, ".npy shape has too many "
				"elements");
	out->numel = numel;
	out->nbytes = numel * out->dtype->size;
	return 0;
}

enum { K_DESCR, K_FORTRAN, K_SHAPE, K_N };

/* {'descr': ..., 'fortran_order': ..., 'shape': ...} in any order. */
static int dict(struct rd *r, struct view_npy *out)
{
	static const char *const keys[K_N] = { "descr", "fortran_order",
					       "shape" };
	char key[NPY_STR_MAX + 1], ds[NPY_STR_MAX + 1];
	size_t key_at, descr_at = 0, shape_at = 0;
	bool seen[K_N] = { false }, structured = false;
	int rc = expect(r, '{'), k;

	while (!rc && peek(r) != '}') {
		key_at = r->pos;	/* peek() skipped the blanks */
		rc = string(r, key);
		if (rc)
			return rc;
		for (k = 0; k < K_N && strcmp(key, keys[k]); k++)
			;
		if (k == K_N || seen[k]) {
			r->pos = key_at;
			return diag_set(r->d, -EINVAL, key_at, ".npy header: "
					"%s key '%s'", k == K_N ? "unknown"
					: "duplicate", key);
		}
		seen[k] = true;
		rc = expect(r, ':');
		if (rc)
			return rc;
		if (k == K_DESCR) {
			rc = descr(r, ds, &structured, &descr_at);
		} else if (k == K_FORTRAN) {
			rc = boolean(r, &out->fortran_order);
		} else {
			peek(r);
			shape_at = r->pos;
			rc = shape(r, out);
		}
		if (rc)
			return rc;
		if (peek(r) == ',')
			r->pos++;
		else if (peek(r) != '}')
			return bad(r, "expected ',' or '}'");
	}
	if (rc)
		return rc;
	for (k = 0; k < K_N; k++)
		if (!seen[k])
			return diag_set(r->d, -EINVAL, r->pos,
					".npy header: no '%s'", keys[k]);
	r->pos++;
	if (peek(r) != -1)
		return bad(r, "bytes after the dict");
	rc = map_descr(r, ds, structured, descr_at, out);
	return rc ? rc : sizes(r, shape_at, out);
}

int view_npy_parse(const unsigned char *buf, size_t len,
		   struct view_npy *out, struct diag *d)
{
	struct view_npy v;
	struct rd r = { buf, 0, 0, d };
	size_t prefix, hlen, limit;
	int rc;

	memset(&v, 0, sizeof(v));
	if (memcmp(buf, magic, len < sizeof(magic) ? len : sizeof(magic)))
		return diag_set(d, -EINVAL, 0, "not a .npy file (bad magic)");
	if (len < 8)
		return diag_set(d, -EINVAL, len, "truncated .npy header");
	if (buf[6] < 1 || buf[6] > 3 || buf[7] != 0)
		return diag_set(d, -EINVAL, 6, "unsupported .npy version %u.%u",
				buf[6], buf[7]);
	prefix = buf[6] == 1 ? NPY_PREFIX_V1 : NPY_PREFIX_V2;
	if (len < prefix)
		return diag_set(d, -EINVAL, len, "truncated .npy header");
	hlen = buf[6] == 1 ? le16(buf + 8) : le32(buf + 8);
	limit = buf[6] == 1 ? VIEW_NPY_HEADER_MAX - prefix : NPY_HEADER_MAX_V2;
	if (hlen > limit)
		return diag_set(d, -EINVAL, 8, ".npy header of %zu bytes is "
				"over the limit of %zu", hlen, limit);
	if (hlen > len - prefix)
		return diag_set(d, -EINVAL, 8, ".npy header of %zu bytes runs "
				"past the %zu available", hlen, len - prefix);
	r.pos = prefix;
	r.end = prefix + hlen;
	rc = dict(&r, &v);
	if (rc)
		return rc;
	v.header_len = prefix + hlen;
	*out = v;
	return 0;
}
