/*
 * jread.c - see jread.h.  A recursive-descent reader over RFC 8259, bounded:
 * nesting (JREAD_MAX_DEPTH), every string and container inside the input,
 * \u escapes (surrogate pairs) decoded to UTF-8.  Numbers are kept as text
 * and converted on demand by jread_int().
 */
#include "jread.h"

#include "utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rd {
	const char *p, *start, *end;
	struct arena *a;
	const char *why;
};

static int fail(struct rd *r, const char *why)
{
	r->why = why;
	return -EILSEQ;
}

static void blanks(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
				 *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int hex4(struct rd *r, unsigned *out)
{
	unsigned v = 0;

	if (r->end - r->p < 4)
		return fail(r, "\\u escape cut short");
	for (int i = 0; i < 4; i++) {
		char c = r->p[i];

		v <<= 4;
		if (c >= '0' && c <= '9') {
			v |= (unsigned)(c - '0');
		} else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
			v |= (unsigned)((c | 0x20) - 'a' + 10);
		} else {
			r->p += i;	/* point at the bad digit */
			return fail(r, "bad \\u escape");
		}
	}
	r->p += 4;
	*out = v;
	return 0;
}

/* A string at r->p (the opening quote): decoded into the arena. */
static int string(struct rd *r, const char **out, size_t *len)
{
	const char *q = ++r->p;
	bool plain = true;	/* no escape, no control character */
	char *s, *o;
	int rc;

	/* the decoded string is never longer than its source; most have
	   no escape: the first '"' ends them (memchr) */
	q = memchr(q, '"', (size_t)(r->end - q));
	if (q && memchr(r->p, '\\', (size_t)(q - r->p))) {
		plain = false;
		for (q = r->p; q < r->end && *q != '"';)
			q += *q == '\\' ? 2 : 1;
	}
	if (!q || q >= r->end)
		return fail(r, "string without its closing quote");
	if (plain) {
		unsigned char low = 0xff;

		for (const char *c = r->p; c < q; c++)	/* vectorized */
			low = (unsigned char)*c < low ? (unsigned char)*c : low;
		plain = low >= 0x20;
	}
	s = o = arena_alloc(r->a, (size_t)(q - r->p) + 1);
	if (!s)
		return -ENOMEM;
	if (plain) {	/* most strings: one copy */
		memcpy(s, r->p, (size_t)(q - r->p));
		o += q - r->p;
		r->p = q;
	}
	while (*r->p != '"') {
		unsigned c = (unsigned char)*r->p++, lo;

		if (c < 0x20) {
			r->p--;
			return fail(r, "control character in a string");
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		switch (c = (unsigned char)*r->p++) {
		case '"': case '\\': case '/': *o++ = (char)c; continue;
		case 'b': *o++ = '\b'; continue;
		case 'f': *o++ = '\f'; continue;
		case 'n': *o++ = '\n'; continue;
		case 'r': *o++ = '\r'; continue;
		case 't': *o++ = '\t'; continue;
		case 'u': break;
		default:
			r->p -= 2;	/* point at the backslash */
			return fail(r, "bad escape in a string");
		}
		rc = hex4(r, &c);
		if (rc)
			return rc;
		/* a lone surrogate is no character: UTF-8 cannot hold it */
		if (c >= 0xdc00 && c < 0xe000) {
			r->p -= 6;
			return fail(r, "lone low surrogate in a \\u escape");
		}
		if (c >= 0xd800 && c < 0xdc00) {
			if (r->end - r->p < 6 || r->p[0] != '\\' ||
			    r->p[1] != 'u')
				return fail(r, "high surrogate without its "
					    "low half");
			r->p += 2;
			rc = hex4(r, &lo);
			if (rc)
				return rc;
			if (lo < 0xdc00 || lo >= 0xe000)
				return fail(r, "bad surrogate pair");
			c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
		}
		/* 6 source bytes (12 for a pair) make at most 4 here */
		o += utf8_put((unsigned char *)o, c);
	}
	r->p++;
	*o = 0;
	*out = s;
	*len = (size_t)(o - s);
	return 0;
}

int jread_string(const char **p, const char *end, struct arena *a,
		 const char **out, size_t *len, const char **why)
{
	struct rd r = { .p = *p, .start = *p, .end = end, .a = a };
	int rc = string(&r, out, len);

	*p = r.p;
	if (rc == -EILSEQ)
		*why = r.why;
	return rc;
}

static int value(struct rd *r, int depth, struct jread **out);

/* Items of an array or members of an object, after the bracket. */
static int items(struct rd *r, struct jread *j, int depth)
{
	char close = j->kind == JREAD_ARR ? ']' : '}';
	size_t cap = 0;
	int rc;

	blanks(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		const char *key = NULL;
		size_t klen;
		struct jread *v;

		blanks(r);
		if (j->kind == JREAD_OBJ) {
			if (r->p >= r->end || *r->p != '"')
				return fail(r, "object key expected");
			rc = string(r, &key, &klen);
			if (rc)
				return rc;
			blanks(r);
			if (r->p >= r->end || *r->p++ != ':')
				return fail(r, "':' expected");
		}
		rc = value(r, depth + 1, &v);
		if (rc)
			return rc;
		if (j->n == cap) {
			struct jread **nv;
			const char **nk;

			cap = cap ? 2 * cap : 8;
			nv = arena_alloc(r->a, cap * sizeof(*nv));
			nk = arena_alloc(r->a, cap * sizeof(*nk));
			if (!nv || !nk)
				return -ENOMEM;
			if (j->n) {
				memcpy(nv, j->v, j->n * sizeof(*nv));
				memcpy(nk, j->keys, j->n * sizeof(*nk));
			}
			j->v = nv;
			j->keys = nk;
		}
		j->keys[j->n] = key;
		j->v[j->n++] = v;
		blanks(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return 0;
		}
		return fail(r, j->kind == JREAD_ARR ? "',' or ']' expected" :
			    "',' or '}' expected");
	}
}

static bool word(struct rd *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n))
		return false;
	r->p += n;
	return true;
}

static int value(struct rd *r, int depth, struct jread **out)
{
	struct jread *j;

	if (depth > JREAD_MAX_DEPTH)
		return fail(r, "nested too deeply");
	j = arena_alloc(r->a, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*out = j;
	blanks(r);
	if (r->p >= r->end)
		return fail(r, "value expected");
	switch (*r->p) {
	case '{':
	case '[':
		j->kind = *r->p++ == '{' ? JREAD_OBJ : JREAD_ARR;
		return items(r, j, depth);
	case '"':
		j->kind = JREAD_STR;
		return string(r, &j->s, &j->n);
	}
	if (word(r, "true") || word(r, "false")) {
		j->kind = JREAD_BOOL;
		j->b = r->p[-1] == 'e' && r->p[-2] == 'u';
		return 0;
	}
	if (word(r, "null"))
		return 0;	/* JREAD_NULL is 0 */
	if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) {
		const char *q = r->p;

		while (q < r->end && *q && strchr("+-.0123456789eE", *q))
			q++;
		j->kind = JREAD_NUM;
		j->s = arena_strndup(r->a, r->p, (size_t)(q - r->p));
		j->n = (size_t)(q - r->p);
		r->p = q;
		return j->s ? 0 : -ENOMEM;
	}
	return fail(r, "value expected");
}

int jread_parse(const char *text, size_t len, struct arena *a,
	       struct jread **out, size_t *err_off, const char **why)
{
	struct rd r = { .p = text, .start = text, .end = text + len, .a = a };
	struct jread *j = NULL;
	int rc = value(&r, 0, &j);

	if (!rc) {
		blanks(&r);
		if (r.p != r.end)
			rc = fail(&r, "text after the value");
	}
	if (rc == -EILSEQ) {
		*err_off = (size_t)(r.p - r.start);
		*why = r.why;
		return rc;
	}
	if (!rc)
		*out = j;
	return rc;
}

const struct jread *jread_get(const struct jread *o, const char *key)
{
	const struct jread *hit = NULL;

	if (!o || o->kind != JREAD_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			hit = o->v[i];
	return hit;
}

bool jread_int(const struct jread *v, int64_t *out)
{
	char *end;
	long long x;

	if (!v || (v->kind != JREAD_NUM && v->kind != JREAD_STR) || !v->n)
		return false;
	errno = 0;
	x = strtoll(v->s, &end, 10);
	if (errno || *end || end != v->s + v->n)
		return false;
	*out = x;
	return true;
}

const char *jread_str(const struct jread *v)
{
	return v && v->kind == JREAD_STR ? v->s : NULL;
}
