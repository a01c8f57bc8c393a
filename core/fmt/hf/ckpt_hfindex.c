/*
 * ckpt_hfindex.c - read a Hugging Face index (multi-file-formats.md 1.1;
 * transformers utils/hub.py, huggingface_hub serialization/_base.py):
 *
 *   {
 *     "metadata": {"total_size": 123456, ...},      optional; any members
 *     "weight_map": {"KEY": "SHARD", ...}            required; str -> str
 *   }                                                other members skipped
 *
 *   total_size  bytes of the state dict, each storage counted once
 *   SHARD       a file name relative to the folder ("model-00001-of-00002
 *               .safetensors"); readers load sorted(set(weight_map values))
 *
 * The index is hostile input: it is walked by a reader of exactly this
 * shape with jread's string decoder (as ckpt_safetensors.c walks its
 * header), never built into a generic tree, so memory stays a small
 * multiple of the entries; every refusal names the byte where it is.
 */
#include "ckpt_hfindex.h"

#include "diag/diag.h"
#include "pickle/pkl_int.h"
#include "util/jread.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ix {
	const char *p, *start, *end;
	struct arena *a;
	struct diag *d;
	const char *where;	/* "" or "NAME: ", before every message */
	struct hfix *out;
	uint32_t cap;
	/* shard names as met, before sorting */
	const char **names;
	uint64_t *name_off;
	uint32_t nnames, ncap;
};

static uint64_t here(const struct ix *x)
{
	return (uint64_t)(x->p - x->start);
}

static void blanks(struct ix *x)
{
	while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' ||
				 *x->p == '\n' || *x->p == '\r'))
		x->p++;
}

static int expect(struct ix *x, char ch, const char *what)
{
	blanks(x);
	if (x->p >= x->end)
		return diag_corrupt(x->d, here(x), "%sindex ends where %s was "
				    "expected", x->where, what);
	if (*x->p != ch)
		return diag_corrupt(x->d, here(x), "%s%s expected", x->where,
				    what);
	x->p++;
	return 0;
}

/* Blanks, then ',' (*@again: another member follows) or @close. */
static int more(struct ix *x, char close, bool *again)
{
	blanks(x);
	if (x->p < x->end && (*x->p == ',' || *x->p == close)) {
		*again = *x->p++ == ',';
		return 0;
	}
	return diag_corrupt(x->d, here(x), "%s',' or '%c' expected",
			    x->where, close);
}

/* Blanks, then '{' or '[' opening a container: true if it is empty. */
static int open_container(struct ix *x, char open, const char *what,
			  bool *empty)
{
	int rc = expect(x, open, what);

	blanks(x);
	*empty = !rc && x->p < x->end && *x->p == (open == '{' ? '}' : ']');
	if (*empty)
		x->p++;
	return rc;
}

static int string(struct ix *x, const char **out, size_t *len)
{
	const char *q, *why;
	int rc;

	blanks(x);
	q = x->p;
	if (x->p >= x->end || *x->p != '"')
		return diag_corrupt(x->d, here(x), "%sstring expected",
				    x->where);
	rc = jread_string(&x->p, x->end, x->a, out, len, &why);
	if (rc == -ENOMEM)
		return diag_nomem(x->d);
	if (rc)
		return diag_corrupt(x->d, here(x), "%s%s", x->where, why);
	if (!pkl_utf8_valid((const unsigned char *)*out, *len))
		return diag_corrupt(x->d, (uint64_t)(q - x->start), "%sstring "
				    "is not UTF-8", x->where);
	return 0;
}

/* Step over one value of any kind, @depth containers deep. */
static int skip(struct ix *x, int depth)
{
	bool again, empty;
	const char *s;
	size_t n;
	int rc;

	if (depth > JREAD_MAX_DEPTH)
		return diag_corrupt(x->d, here(x), "%snested too deeply",
				    x->where);
	blanks(x);
	if (x->p >= x->end)
		return diag_corrupt(x->d, here(x), "%svalue expected",
				    x->where);
	if (*x->p == '"')
		return string(x, &s, &n);
	if (*x->p == '{' || *x->p == '[') {
		char open = *x->p, close = open == '{' ? '}' : ']';

		rc = open_container(x, open, "'{' or '['", &empty);
		for (again = !empty; !rc && again;) {
			if (open == '{') {
				rc = string(x, &s, &n);
				if (!rc)
					rc = expect(x, ':', "':'");
			}
			if (!rc)
				rc = skip(x, depth + 1);
			if (!rc)
				rc = more(x, close, &again);
		}
		return rc;
	}
	for (const char *w = "true\0false\0null\0"; *w; w += strlen(w) + 1)
		if ((size_t)(x->end - x->p) >= strlen(w) &&
		    !memcmp(x->p, w, strlen(w))) {
			x->p += strlen(w);
			return 0;
		}
	if (*x->p == '-' || (*x->p >= '0' && *x->p <= '9')) {
		while (x->p < x->end && strchr("+-.0123456789eE", *x->p) &&
		       *x->p)
			x->p++;
		return 0;
	}
	return diag_corrupt(x->d, here(x), "%svalue expected", x->where);
}

/* metadata.total_size: a non-negative integer, else marked bad. */
static int total_size(struct ix *x)
{
	struct hfix *o = x->out;
	const char *q;
	uint64_t v = 0;
	bool ok = true;
	int rc;

	blanks(x);
	o->has_total = true;
	o->total_off = here(x);
	for (q = x->p; q < x->end && *q >= '0' && *q <= '9'; q++)
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*q - '0'), &v))
			ok = false;
	if (q == x->p || (*x->p == '0' && q - x->p > 1) ||
	    (q < x->end && strchr(".eE", *q) && *q))
		ok = false;
	o->bad_total = !ok;
	o->total = ok ? v : 0;
	rc = skip(x, 1);
	o->total_len = here(x) - o->total_off;
	return rc;
}

static int metadata(struct ix *x)
{
	bool again, empty;
	int rc;

	blanks(x);
	if (x->p < x->end && *x->p != '{')
		return diag_corrupt(x->d, here(x), "%smetadata is not an "
				    "object", x->where);
	rc = open_container(x, '{', "'{'", &empty);
	for (again = !empty; !rc && again;) {
		const char *k;
		size_t n;

		rc = string(x, &k, &n);
		if (!rc)
			rc = expect(x, ':', "':'");
		if (!rc && n == 10 && !memcmp(k, "total_size", 10))
			rc = total_size(x);
		else if (!rc)
			rc = skip(x, 2);
		if (!rc)
			rc = more(x, '}', &again);
	}
	return rc;
}

/* A shard name stays inside the folder: relative, no '.' or '..' part. */
static int check_name(struct ix *x, const char *s, size_t n, uint64_t at)
{
	const char *p = s, *end = s + n;

	if (n == 0 || n > HFIX_MAX_NAME || strlen(s) != n)
		return diag_corrupt(x->d, at, "%sshard name is empty, over %u "
				    "bytes or holds a NUL", x->where,
				    HFIX_MAX_NAME);
	if (*s == '/')
		return diag_corrupt(x->d, at, "%sshard '%s' is an absolute "
				    "path: shards must be inside the folder",
				    x->where, s);
	while (p <= end) {
		const char *q = memchr(p, '/', (size_t)(end - p));
		size_t k = (size_t)((q ? q : end) - p);

		if (k == 0 || (k == 1 && *p == '.') ||
		    (k == 2 && p[0] == '.' && p[1] == '.'))
			return diag_corrupt(x->d, at, "%sshard '%s' has an "
					    "empty, '.' or '..' part: shards "
					    "must be inside the folder",
					    x->where, s);
		p += k + 1;
	}
	return 0;
}

static int add_name(struct ix *x, const char *s, uint64_t at)
{
	/* consecutive entries mostly name the same shard */
	if (x->nnames && !strcmp(x->names[x->nnames - 1], s))
		return 0;
	if (x->nnames == x->ncap) {
		uint32_t cap = x->ncap ? 2 * x->ncap : 64;
		const char **nn = realloc(x->names, cap * sizeof(*nn));
		uint64_t *no;

		if (nn)
			x->names = nn;
		no = nn ? realloc(x->name_off, cap * sizeof(*no)) : NULL;
		if (!no)
			return diag_nomem(x->d);
		x->name_off = no;
		x->ncap = cap;
	}
	x->names[x->nnames] = s;
	x->name_off[x->nnames++] = at;
	return 0;
}

static int weight_map(struct ix *x)
{
	struct hfix *o = x->out;
	bool again, empty;
	int rc;

	blanks(x);
	if (x->p < x->end && *x->p != '{')
		return diag_corrupt(x->d, here(x), "%sweight_map is not an "
				    "object", x->where);
	o->wm_open = here(x);
	rc = open_container(x, '{', "'{'", &empty);
	for (again = !empty; !rc && again;) {
		struct hfix_entry e = { 0 };
		const char *shard;
		size_t slen;
		uint64_t at;

		blanks(x);
		e.off = here(x);
		rc = string(x, &e.key, &e.klen);
		e.kend = here(x);
		if (!rc)
			rc = expect(x, ':', "':'");
		blanks(x);
		at = here(x);
		if (!rc && x->p >= x->end)
			return diag_corrupt(x->d, at, "%sindex ends where the "
					    "shard of '%s' was expected",
					    x->where, e.key);
		if (!rc && *x->p != '"')
			return diag_corrupt(x->d, at, "%sweight_map value of "
					    "'%s' is not a string", x->where,
					    e.key);
		if (!rc)
			rc = string(x, &shard, &slen);
		e.voff = at;
		e.vlen = here(x) - at;
		if (!rc)
			rc = check_name(x, shard, slen, at);
		if (!rc)
			rc = add_name(x, shard, at);
		if (!rc && o->n == x->cap) {
			uint32_t cap = x->cap ? 2 * x->cap : 256;
			struct hfix_entry *ne;

			if (cap > (1u << 25))
				return diag_unsupported(x->d, e.off, "%smore "
							"than 2^24 keys",
							x->where);
			ne = realloc(o->e, cap * sizeof(*ne));
			if (!ne)
				return diag_nomem(x->d);
			o->e = ne;
			x->cap = cap;
		}
		if (!rc) {
			/* the name's slot until the names are sorted */
			e.shard = x->nnames - 1;
			o->e[o->n++] = e;
		}
		if (!rc)
			rc = more(x, '}', &again);
	}
	if (!rc)
		o->wm_close = here(x) - 1;	/* its '}' */
	return rc;
}

static int top(struct ix *x)
{
	bool again, empty, seen_wm = false, seen_md = false;
	int rc;

	blanks(x);
	if (x->p < x->end && *x->p != '{')
		return diag_corrupt(x->d, here(x), "%snot a JSON object: not a "
				    "Hugging Face index", x->where);
	rc = open_container(x, '{', "'{'", &empty);
	for (again = !empty; !rc && again;) {
		const char *k;
		size_t n;
		uint64_t at;

		blanks(x);
		at = here(x);
		rc = string(x, &k, &n);
		if (!rc)
			rc = expect(x, ':', "':'");
		if (rc)
			return rc;
		if (n == 10 && !memcmp(k, "weight_map", 10)) {
			if (seen_wm)
				return diag_corrupt(x->d, at, "%sweight_map "
						    "given twice", x->where);
			seen_wm = true;
			rc = weight_map(x);
		} else if (n == 8 && !memcmp(k, "metadata", 8)) {
			if (seen_md)
				return diag_corrupt(x->d, at, "%smetadata "
						    "given twice", x->where);
			seen_md = true;
			rc = metadata(x);
		} else {
			rc = skip(x, 1);
		}
		if (!rc)
			rc = more(x, '}', &again);
	}
	blanks(x);
	if (!rc && x->p != x->end)
		return diag_corrupt(x->d, here(x), "%stext after the index "
				    "object", x->where);
	if (!rc && !seen_wm)
		return diag_corrupt(x->d, 0, "%sno weight_map: not a Hugging "
				    "Face index", x->where);
	return rc;
}

static int by_key(const void *a, const void *b)
{
	const struct hfix_entry *x = a, *y = b;
	int r = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);

	return r ? r : (x->klen > y->klen) - (x->klen < y->klen);
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort the distinct names; each entry's slot becomes a shard number. */
static int shards(struct ix *x)
{
	struct hfix *o = x->out;
	const char **v = malloc((x->nnames + 1u) * sizeof(*v));
	uint32_t n = 0;

	if (!v)
		return diag_nomem(x->d);
	if (x->nnames)
		memcpy(v, x->names, x->nnames * sizeof(*v));
	qsort(v, x->nnames, sizeof(*v), by_str);
	for (uint32_t i = 0; i < x->nnames; i++)
		if (!n || strcmp(v[n - 1], v[i]))
			v[n++] = v[i];
	o->shards = v;
	o->nshards = n;
	if (n > HFIX_MAX_SHARDS)
		return diag_unsupported(x->d, DIAG_NO_OFFSET, "%s%u shards, "
					"more than the %u this reader opens",
					x->where, n, HFIX_MAX_SHARDS);
	o->shard_off = calloc(n + 1u, sizeof(*o->shard_off));
	if (!o->shard_off)
		return diag_nomem(x->d);
	for (uint32_t i = 0; i < n; i++)
		o->shard_off[i] = UINT64_MAX;
	/* slot -> shard: a binary search per distinct run, not per key */
	for (uint32_t i = 0; i < x->nnames; i++) {
		const char **hit = bsearch(&x->names[i], v, n, sizeof(*v),
					   by_str);
		uint32_t k = (uint32_t)(hit - v);

		if (x->name_off[i] < o->shard_off[k])
			o->shard_off[k] = x->name_off[i];
		x->name_off[i] = k;	/* reused: slot i is shard k */
	}
	for (uint32_t i = 0; i < o->n; i++)
		o->e[i].shard = (uint32_t)x->name_off[o->e[i].shard];
	return 0;
}

int hfix_parse(const char *text, size_t len, struct arena *a,
	       const char *where, struct hfix *ix, struct diag *d)
{
	struct ix x = { .p = text, .start = text, .end = text + len, .a = a,
			.d = d, .where = where, .out = ix };
	int rc;

	memset(ix, 0, sizeof(*ix));
	rc = top(&x);
	if (!rc)
		rc = shards(&x);
	ix->sorted = true;	/* as met, before the sort */
	for (uint32_t i = 1; !rc && i < ix->n && ix->sorted; i++)
		ix->sorted = by_key(&ix->e[i - 1], &ix->e[i]) < 0;
	if (!rc && ix->n) {
		qsort(ix->e, ix->n, sizeof(*ix->e), by_key);
		for (uint32_t i = 1; i < ix->n && !rc; i++)
			if (!by_key(&ix->e[i - 1], &ix->e[i])) {
				const struct hfix_entry *l = &ix->e[i];

				if (ix->e[i - 1].off > l->off)
					l = &ix->e[i - 1];
				rc = diag_corrupt(d, l->off, "%sweight_map "
						  "lists key '%s' twice", where,
						  l->key);
			}
	}
	free(x.names);
	free(x.name_off);
	return rc;
}

struct hfix_entry *hfix_find(const struct hfix *ix, const char *key,
			     size_t klen)
{
	struct hfix_entry k = { .key = key, .klen = klen };

	return ix->n ? bsearch(&k, ix->e, ix->n, sizeof(*ix->e), by_key) :
	       NULL;
}

void hfix_release(struct hfix *ix)
{
	free(ix->e);
	free(ix->shards);
	free(ix->shard_off);
	memset(ix, 0, sizeof(*ix));
}
