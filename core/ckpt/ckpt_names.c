/*
 * ckpt_names.c - file names for dict keys, and Python's repr() of scalars.
 *
 * A name must be reversible (a tool can find the key again) and never
 * collide.  str keys appear as themselves except for the few bytes a file
 * name cannot hold or that would hide or misplace it:
 *
 *	'%' -> %25   '/' -> %2F   NUL -> %00   leading '.' -> %2E   "" -> %
 *
 * Other keys: ints in decimal, True/False/None, floats as repr(), bytes as
 * "b'..'" (escaped as above), anything else "%?<type>".  When two keys of a
 * container still print alike (the int 0 and the str "0"), the later one
 * gets "%#<position>" appended; '%' never starts a valid escape with '#',
 * so that is unambiguous too.  A name longer than NAME_MAX (255 bytes)
 * is shown cut, with "%~<position>" (ckpt_name_short()); '~' starts no
 * escape either.  docs/names.md is the user-facing version.
 */
#include "ckpt_int.h"
#include "pickle/pkl.h"
#include "util/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void escape_bytes(struct sbuf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%')
			sb_puts(b, "%25");
		else if (c == '/')
			sb_puts(b, "%2F");
		else if (c == 0)
			sb_puts(b, "%00");
		else if (c == '.' && i == 0)
			sb_puts(b, "%2E");
		else
			sb_add(b, &c, 1);
	}
}

const char *ckpt_float_repr(double f, char *buf, size_t size)
{
	char e[40], digits[20];
	int exp, nd = 0, p;

	if (isnan(f))
		return snprintf(buf, size, "nan"), buf;
	if (isinf(f))
		return snprintf(buf, size, f < 0 ? "-inf" : "inf"), buf;
	/* shortest %.Ne that reads back as the same double */
	for (p = 1; p <= 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	{
		const char *s = e + (e[0] == '-');

		for (; *s && *s != 'e'; s++)
			if (*s != '.')
				digits[nd++] = *s;
		digits[nd] = 0;
		exp = atoi(s + 1);
	}
	while (nd > 1 && digits[nd - 1] == '0')
		digits[--nd] = 0;
	{
		struct sbuf b = { 0 };
		char tmp[16];

		if (signbit(f))
			sb_puts(&b, "-");
		if (exp < -4 || exp >= 16) {
			sb_add(&b, digits, 1);
			if (nd > 1) {
				sb_puts(&b, ".");
				sb_add(&b, digits + 1, nd - 1);
			}
			snprintf(tmp, sizeof(tmp), "e%c%02d", exp < 0 ? '-' : '+',
				 abs(exp));
			sb_puts(&b, tmp);
		} else if (exp < 0) {
			sb_puts(&b, "0.");
			for (int i = 0; i < -exp - 1; i++)
				sb_puts(&b, "0");
			sb_add(&b, digits, nd);
		} else {
			for (int i = 0; i <= exp; i++)
				sb_add(&b, i < nd ? &digits[i] : "0", 1);
			sb_puts(&b, ".");
			if (nd > exp + 1)
				sb_add(&b, digits + exp + 1, nd - exp - 1);
			else
				sb_puts(&b, "0");
		}
		snprintf(buf, size, "%s", b.oom ? "?" : b.p);
		free(b.p);
	}
	return buf;
}

/* Decimal text of a little-endian two's complement integer. */
static void bigint_text(struct sbuf *b, const unsigned char *p, size_t n)
{
	unsigned char *mag;
	char *dig;
	size_t nd = 0;
	bool neg = n && (p[n - 1] & 0x80);

	if (!n) {
		sb_puts(b, "0");
		return;
	}
	mag = malloc(n);
	dig = malloc(n * 3 + 2);
	if (!mag || !dig) {
		b->oom = true;
		goto out;
	}
	memcpy(mag, p, n);
	if (neg) {		/* magnitude = ~x + 1 */
		unsigned carry = 1;

		for (size_t i = 0; i < n; i++) {
			unsigned v = (unsigned char)~mag[i] + carry;

			mag[i] = v;
			carry = v >> 8;
		}
	}
	for (;;) {		/* repeated division by 10, most significant first */
		unsigned rem = 0;
		bool zero = true;

		for (size_t i = n; i-- > 0;) {
			unsigned cur = rem << 8 | mag[i];

			mag[i] = cur / 10;
			rem = cur % 10;
			if (mag[i])
				zero = false;
		}
		dig[nd++] = '0' + rem;
		if (zero)
			break;
	}
	if (neg)
		sb_puts(b, "-");
	while (nd-- > 0)
		sb_add(b, &dig[nd], 1);
out:
	free(mag);
	free(dig);
}

static void value_text(struct sbuf *b, const struct pkl_value *v, bool quote)
{
	char tmp[40];

	switch (v->kind) {
	case PKL_NONE:
		sb_puts(b, "None");
		break;
	case PKL_BOOL:
		sb_puts(b, v->u.i ? "True" : "False");
		break;
	case PKL_INT:
		snprintf(tmp, sizeof(tmp), "%" PRId64, v->u.i);
		sb_puts(b, tmp);
		break;
	case PKL_BIGINT:
		bigint_text(b, (const unsigned char *)v->u.s.p, v->u.s.n);
		break;
	case PKL_FLOAT:
		sb_puts(b, ckpt_float_repr(v->u.f, tmp, sizeof(tmp)));
		break;
	case PKL_STR:
	case PKL_STRING:
	case PKL_BYTES:
		if (quote)
			sb_puts(b, v->kind == PKL_BYTES ? "b'" : "'");
		sb_add(b, v->u.s.p, v->u.s.n);
		if (quote)
			sb_puts(b, "'");
		break;
	default:
		sb_puts(b, "%?");
		sb_puts(b, pkl_kind_name(v->kind));
		break;
	}
}

char *ckpt_value_text(const struct pkl_value *v, size_t *len)
{
	struct sbuf b = { 0 };

	if (ckpt_scalar_list(v))
		return ckpt_scalar_list_text(v, len);
	value_text(&b, v, false);
	return sb_detach(&b, len);
}

/*
 * Calls nest without adding to @depth (a call's callable may be a call):
 * REDUCE applied a million times to its own result recursed a million
 * levels deep before printing anything, so every step counts in @level.
 */
#define REPR_MAX_LEVEL	64

/* repr() of containers, globals and calls, bounded in depth and length */
static void repr(struct sbuf *b, const struct pkl_value *v, int depth,
		 int level, size_t max, bool call_args)
{
	const struct pkl_value *const *it = NULL;
	size_t n = 0;
	const char *open = "(", *close = ")";

	if (b->n > max)
		return;
	if (level > REPR_MAX_LEVEL) {
		sb_puts(b, "...");
		return;
	}
	switch (v->kind) {
	case PKL_TUPLE: case PKL_LIST: case PKL_SET: case PKL_FROZENSET:
	case PKL_DICT:
		it = (const struct pkl_value *const *)v->u.items.v;
		n = v->u.items.n;
		if (v->kind == PKL_LIST)
			open = "[", close = "]";
		else if (v->kind != PKL_TUPLE)
			open = "{", close = "}";
		break;
	case PKL_GLOBAL:
		sb_puts(b, v->u.global.module);
		sb_puts(b, ".");
		sb_puts(b, v->u.global.name);
		return;
	case PKL_CALL:
		repr(b, v->u.call.func, depth, level + 1, max, false);
		if (pkl_call_args(v) && pkl_call_args(v)->kind == PKL_TUPLE) {
			repr(b, pkl_call_args(v), depth, level + 1, max, true);
			return;
		}
		sb_puts(b, "(");
		if (pkl_call_args(v))
			repr(b, pkl_call_args(v), depth + 1, level + 1, max,
			     false);
		sb_puts(b, ")");
		return;
	case PKL_FOLDED: {	/* shown as parsed (pkl_fold.c) */
		struct pkl_fold_view fv;

		repr(b, pkl_unfolded(v, &fv), depth, level, max, call_args);
		return;
	}
	case PKL_PERSID:
		sb_puts(b, "persistent_id(");
		repr(b, pkl_call_args(v), depth + 1, level + 1, max, false);
		sb_puts(b, ")");
		return;
	default:
		value_text(b, v, true);
		return;
	}
	sb_puts(b, open);
	if (depth >= 3 && n) {
		sb_puts(b, "...");
		n = 0;
	}
	for (size_t i = 0; i < n && b->n <= max; i++) {
		if (i)
			sb_puts(b, v->kind == PKL_DICT && i % 2 ? ": " : ", ");
		repr(b, it[i], depth + 1, level + 1, max, false);
	}
	if (v->kind == PKL_TUPLE && n == 1 && !call_args)
		sb_puts(b, ",");
	sb_puts(b, close);
}

char *ckpt_repr(const struct pkl_value *v, size_t max, size_t *len)
{
	struct sbuf b = { 0 };

	repr(&b, v, 0, 0, max, false);
	if (!b.oom && b.n > max) {
		b.n = max;
		sb_puts(&b, "...");
	}
	return sb_detach(&b, len);
}

bool ckpt_name_is_key(const struct pkl_value *key)
{
	const char *s = key->u.s.p;
	size_t n = key->u.s.n;

	return key->kind == PKL_STR && n && s[0] != '.' &&
	       !memchr(s, '/', n) && !memchr(s, '%', n) && strlen(s) == n;
}

char *ckpt_name_escape(const struct pkl_value *key)
{
	struct sbuf b = { 0 };

	switch (key->kind) {
	case PKL_STR:
	case PKL_STRING:
		if (!key->u.s.n)
			sb_puts(&b, "%");
		escape_bytes(&b, key->u.s.p, key->u.s.n);
		break;
	case PKL_BYTES: {
		struct sbuf raw = { 0 };

		value_text(&raw, key, true);
		if (raw.oom)
			b.oom = true;
		else
			escape_bytes(&b, raw.p, raw.n);
		free(raw.p);
		break;
	}
	case PKL_NONE: case PKL_BOOL: case PKL_INT: case PKL_BIGINT:
	case PKL_FLOAT: {
		size_t n;
		char *t = ckpt_value_text(key, &n);

		if (!t)
			return NULL;
		escape_bytes(&b, t, n);
		free(t);
		break;
	}
	default:
		sb_puts(&b, "%?");
		sb_puts(&b, pkl_kind_name(key->kind));
		break;
	}
	return sb_detach(&b, NULL);
}

const char *ckpt_name_short(const char *name, uint32_t pos, size_t max,
			    char *buf)
{
	size_t n = strlen(name), cut;
	char tail[16];
	int tl;

	if (n <= max)
		return name;
	tl = snprintf(tail, sizeof(tail), "%%~%" PRIu32, pos);
	cut = max - (size_t)tl;
	/* not inside a UTF-8 sequence: back to the byte that starts it */
	while (cut && ((unsigned char)name[cut] & 0xc0) == 0x80)
		cut--;
	/* not inside %XX: a '%' only ever starts an escape */
	if (cut >= 1 && name[cut - 1] == '%')
		cut -= 1;
	else if (cut >= 2 && name[cut - 2] == '%')
		cut -= 2;
	memcpy(buf, name, cut);
	memcpy(buf + cut, tail, (size_t)tl + 1);
	return buf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

long ckpt_name_unescape(const char *name, char *out)
{
	long n = 0;

	if (!strcmp(name, "%")) {
		out[0] = 0;
		return 0;
	}
	for (const char *s = name; *s; s++) {
		if (*s != '%') {
			out[n++] = *s;
			continue;
		}
		if (hexval(s[1]) < 0 || hexval(s[2]) < 0)
			return -EINVAL;
		out[n++] = (char)(hexval(s[1]) << 4 | hexval(s[2]));
		s += 2;
	}
	out[n] = 0;
	return n;
}

char *ckpt_node_path(const struct ckpt_node *n)
{
	size_t len = 0, pos;
	const struct ckpt_node *p;
	char *s;

	for (p = n; p && p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	pos = len ? len - 1 : 0;
	s[pos] = 0;
	for (p = n; p && p->parent; p = p->parent) {
		size_t k = strlen(p->name);

		pos -= k;
		memcpy(s + pos, p->name, k);
		if (pos)
			s[--pos] = '/';
	}
	if (!len)
		s[0] = 0;
	return s;
}

