/*
 * gguf_kvset.c - a key/value's value from its text: the inverse of
 * gguf_kv.c, for an edit through the mount (setfattr -n
 * user.meta.general.name), ptrepack's --gguf-kv KEY:TYPE=VALUE, and the
 * writer of an edited or a new key (gguf_wopt.c): one encoder.
 *
 *   type          text                    bytes (the file's byte order)
 *   u8 .. i64     a decimal integer in    1, 2, 4 or 8
 *                 the type's range
 *   f32, f64      a number, nan, inf      4 or 8 (f32: the double
 *                                         rounded once, refused past
 *                                         float's range, as gguf-py's
 *                                         struct.pack('f') refuses it)
 *   bool          true, false, 1 or 0     1: 1 or 0
 *   string        UTF-8 text              u64 length, the bytes
 *   array[T]      a JSON array of T's     u32 T, u64 count, the elements
 *                 (strings as JSON
 *                 strings)
 *
 * What the text cannot be (an integer out of range, "yes" for a bool, an
 * array of another type) is refused with one line naming the key.
 */
#include "ckpt/ckpt_int.h"
#include "gguf.h"
#include "pickle/pkl_int.h"	/* pkl_utf8_valid() */
#include "util/jread.h"
#include "util/le.h"
#include "util/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void put(struct sbuf *b, uint64_t v, unsigned size, bool big)
{
	unsigned char x[8];

	ord_store(x, size, big, v);
	sb_add(b, x, size);
}

/* One scalar of type @t from the NUL-terminated @s. */
static bool scalar(unsigned t, const char *s, bool big, struct sbuf *b)
{
	static const int64_t lo[] = { [GGUF_I8] = INT8_MIN,
		[GGUF_I16] = INT16_MIN, [GGUF_I32] = INT32_MIN,
		[GGUF_I64] = INT64_MIN };
	static const int64_t hi[] = { [GGUF_I8] = INT8_MAX,
		[GGUF_I16] = INT16_MAX, [GGUF_I32] = INT32_MAX,
		[GGUF_I64] = INT64_MAX };
	unsigned size = gguf_value_size(t);
	char *end;

	errno = 0;
	switch (t) {
	case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: {
		unsigned long long u = strtoull(s, &end, 10);

		if (errno || end == s || *end || *s == '-' ||
		    (size < 8 && u >> (8 * size)))
			return false;
		put(b, u, size, big);
		return true;
	}
	case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: {
		long long i = strtoll(s, &end, 10);

		if (errno || end == s || *end || i < lo[t] || i > hi[t])
			return false;
		put(b, (uint64_t)i, size, big);
		return true;
	}
	case GGUF_BOOL:
		if (strcasecmp(s, "true") && strcasecmp(s, "false") &&
		    strcmp(s, "1") && strcmp(s, "0"))
			return false;
		put(b, s[0] == 't' || s[0] == 'T' || s[0] == '1', 1, big);
		return true;
	default: {	/* f32, f64 */
		double v = strtod(s, &end);
		uint64_t u;

		if (end == s || *end || (errno == ERANGE && isinf(v)) ||
		    (t == GGUF_F32 && isfinite(v) && isinf((float)v)))
			return false;
		if (t == GGUF_F32) {
			float f = (float)v;
			uint32_t w;

			memcpy(&w, &f, 4);
			u = w;
		} else {
			memcpy(&u, &v, 8);
		}
		put(b, u, size, big);
		return true;
	}
	}
}

static int bad(struct diag *d, const char *key, const char *type,
	       const char *why)
{
	return diag_errno(d, -EINVAL, "%s: not a GGUF %s value: %s", key,
			  type, why);
}

/* An array's elements from JSON @text. */
static int array(const char *key, const char *type, unsigned et,
		 const char *text, size_t len, bool big, struct sbuf *b,
		 struct diag *d)
{
	struct arena a = { 0 };
	struct jread *v;
	const char *why;
	size_t off;
	int rc = jread_parse(text, len, &a, &v, &off, &why);

	if (rc == -ENOMEM)
		rc = diag_nomem(d);
	else if (rc)
		rc = bad(d, key, type, why);
	else if (v->kind != JREAD_ARR)
		rc = bad(d, key, type, "not a JSON array");
	if (!rc) {
		put(b, et, 4, big);
		put(b, v->n, 8, big);
	}
	for (size_t i = 0; !rc && i < v->n; i++) {
		const struct jread *e = v->v[i];
		char num[64];

		if (et == GGUF_STRING && e->kind == JREAD_STR) {
			if (!pkl_utf8_valid((const unsigned char *)e->s, e->n))
				rc = bad(d, key, type, "not UTF-8 text");
			put(b, e->n, 8, big);
			sb_add(b, e->s, e->n);
			continue;
		}
		/* numbers, true/false, and "nan"/"inf" as gguf_kv.c writes */
		snprintf(num, sizeof(num), "%s", e->kind == JREAD_BOOL ?
			 (e->b ? "true" : "false") : e->kind == JREAD_NUM ||
			 e->kind == JREAD_STR ? e->s : "");
		if (et == GGUF_STRING || !scalar(et, num, big, b))
			rc = bad(d, key, type, "an element of the wrong kind");
	}
	arena_release(&a);
	return rc;
}

int gguf_kv_encode(const char *key, const char *type, const char *text,
		   size_t len, bool big, struct sbuf *out, struct diag *d)
{
	char *s;
	int t;

	if (!strncmp(type, "array[", 6)) {
		char et[16];

		snprintf(et, sizeof(et), "%.*s", (int)strcspn(type + 6, "]"),
			 type + 6);
		t = gguf_vtype_by_name(et, strlen(et));
		if (t < 0)
			return bad(d, key, type, "unknown element type");
		return array(key, type, (unsigned)t, text, len, big, out, d);
	}
	t = gguf_vtype_by_name(type, strlen(type));
	if (t < 0)
		return bad(d, key, type, "unknown type");
	if (t == GGUF_STRING) {
		if (!pkl_utf8_valid((const unsigned char *)text, len))
			return bad(d, key, type, "not UTF-8 text");
		put(out, len, 8, big);
		sb_add(out, text, len);
		return 0;
	}
	if (!(s = strndup(text, len)))
		return diag_nomem(d);
	s[strcspn(s, "\n")] = 0;	/* echo's newline */
	t = scalar((unsigned)t, s, big, out) ? 0 :
	    bad(d, key, type, t == GGUF_BOOL ? "true, false, 1 or 0" :
		"a number in the type's range");
	free(s);
	return t;
}
