/*
 * gguf_kv.c - a GGUF key/value's value as text, read from the file where
 * gguf_parse.c found it (layout in gguf_parse.c):
 *
 *   u8 .. i64     decimal                     42, -1
 *   f32, f64      "%.9g", "%.17g": the same   0.5, 1e-05, nan, -inf
 *                 bits when parsed back
 *   bool          true, false (any byte but 0 is true, as numpy's bool_)
 *   string        its bytes as they are
 *   array         JSON: [1, 2], ["a", "b\n"]; non-finite floats as
 *                 the strings "nan", "inf", "-inf"
 *
 * The text of one value is capped at 16 MiB, and all of them at 64 MiB
 * (gguf.h: a tokenizer's vocabulary is a few MiB; a hostile array of 10^9
 * bools must not cost 7 GB): past it a string ends in "..." and an array
 * in "... (N more)" (a string of its own: the text stays JSON, and bytes
 * that are not UTF-8 are \u00xx in it, as ptls --json writes them).
 */
#include "ckpt/ckpt_int.h"
#include "gguf.h"
#include "util/io.h"
#include "util/le.h"
#include "util/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK		65536u

struct src {
	const struct gguf *g;
	int fd;
	uint64_t pos, end;
	unsigned char buf[CHUNK];
	uint64_t boff;
	size_t blen;
	struct diag *d;
};

/* @n (<= CHUNK) bytes at s->pos, inside the value. */
static int take(struct src *s, void *p, size_t n)
{
	if (n > s->end - s->pos)
		return diag_corrupt(s->d, s->pos, "a value runs past its end");
	if (s->pos < s->boff || s->pos + n > s->boff + s->blen) {
		size_t want = s->end - s->pos < CHUNK ? s->end - s->pos : CHUNK;
		int rc = io_pread_diag(s->fd, s->buf, want, s->pos, "a value",
				       s->d);

		if (rc)
			return rc;
		s->boff = s->pos;
		s->blen = want;
	}
	memcpy(p, s->buf + (s->pos - s->boff), n);
	s->pos += n;
	return 0;
}

static void number(struct sbuf *b, unsigned type, const unsigned char *p,
		   bool big, bool json)
{
	uint64_t u;
	double v;
	float f;

	switch (type) {
	case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
		sb_printf(b, "%" PRIu64, ord_load(p, gguf_value_size(type),
						  big));
		return;
	case GGUF_I8:
		sb_printf(b, "%d", (int8_t)p[0]);
		return;
	case GGUF_I16:
		sb_printf(b, "%d", (int16_t)ord_load(p, 2, big));
		return;
	case GGUF_I32:
		sb_printf(b, "%" PRId32, (int32_t)ord_load(p, 4, big));
		return;
	case GGUF_I64:
		sb_printf(b, "%" PRId64, (int64_t)ord_load(p, 8, big));
		return;
	case GGUF_BOOL:
		sb_puts(b, p[0] ? "true" : "false");
		return;
	case GGUF_F32:
		u = ord_load(p, 4, big);
		memcpy(&f, &(uint32_t){ (uint32_t)u }, 4);
		v = f;
		break;
	default:	/* GGUF_F64 */
		u = ord_load(p, 8, big);
		memcpy(&v, &u, 8);
		break;
	}
	if (isfinite(v))
		sb_printf(b, type == GGUF_F32 ? "%.9g" : "%.17g", v);
	else
		sb_printf(b, json ? "\"%s\"" : "%s", isnan(v) ? "nan" :
			    v > 0 ? "inf" : "-inf");
}

/*
 * A string of the value, its length first, into @b (as JSON when @json),
 * @b then under @max bytes: a string that would take it past is cut (in
 * JSON a kept byte may take 6, \u00xx), "..." says so, and *@cut is set.
 */
static int string(struct src *s, struct sbuf *b, bool json, size_t max,
		  bool *cut)
{
	unsigned char len[8];
	uint64_t n, keep;
	size_t room = (b->n < max ? max - b->n : 0) / (json ? 6 : 1);
	char *p;
	int rc = take(s, len, 8);

	if (rc)
		return rc;
	n = ord_load(len, 8, s->g->big);
	if (n > s->end - s->pos)
		return diag_corrupt(s->d, s->pos, "a string runs past its "
				    "value");
	keep = n < room ? n : room;
	if (!(p = malloc(keep + 1)))
		return diag_nomem(s->d);
	for (uint64_t k = 0; k < keep && !rc; k += CHUNK)
		rc = take(s, p + k, keep - k < CHUNK ? keep - k : CHUNK);
	s->pos += n - keep;
	*cut = keep < n;
	if (!rc && json)
		sb_json_utf8(b, p, keep);
	else if (!rc)
		sb_add(b, p, keep);
	if (!rc && *cut && json)
		sb_cut(b, b->n - 1);	/* "...": inside the quotes */
	if (!rc && *cut)
		sb_puts(b, json ? "...\"" : "...");
	free(p);
	return rc;
}

int gguf_kv_text(const struct gguf *g, int fd, const struct gguf_kv *kv,
		 size_t max, char **out, size_t *len, struct diag *d)
{
	struct src *s = malloc(sizeof(*s));
	struct sbuf b = { 0 };
	unsigned type = kv->type == GGUF_ARRAY ? kv->atype : kv->type;
	unsigned char e[8];
	uint64_t i = 0;
	bool cut = false;
	int rc = 0;

	if (!s)
		return diag_nomem(d);
	*s = (struct src){ .g = g, .fd = fd, .pos = kv->val,
			   .end = kv->val + kv->len, .d = d };
	max = max < GGUF_TEXT_MAX ? max : GGUF_TEXT_MAX;
	if (kv->type != GGUF_ARRAY) {
		if (type == GGUF_STRING)
			rc = string(s, &b, false, max, &cut);
		else if (!(rc = take(s, e, gguf_value_size(type))))
			number(&b, type, e, g->big, false);
		goto done;
	}
	sb_puts(&b, "[");
	for (; i < kv->count && !rc && !cut && b.n < max; i++) {
		if (i)
			sb_puts(&b, ", ");
		if (type == GGUF_STRING)
			rc = string(s, &b, true, max, &cut);
		else if (!(rc = take(s, e, gguf_value_size(type))))
			number(&b, type, e, g->big, true);
	}
	if (i < kv->count)
		sb_printf(&b, "%s\"... (%" PRIu64 " more)\"", i ? ", " : "",
			  kv->count - i);
	sb_puts(&b, "]");
done:
	free(s);
	*out = sb_detach(&b, len);
	if (!rc && !*out)
		rc = diag_nomem(d);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}
