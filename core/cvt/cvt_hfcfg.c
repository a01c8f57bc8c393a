/*
 * cvt_hfcfg.c - a Hugging Face folder's config.json without its
 * "quantization_config", for ptrepack --dequant into a folder: left in,
 * transformers would take the bfloat16 weights for float8 ones and look
 * for the scales it names.  Every other byte stays as it was (key order,
 * indentation, number spellings), so only the text of that member goes:
 *
 *   {<lead0>"a": 1,<lead1>"quantization_config": {...},<lead2>"b": 2<tail>
 *   {<lead0>"a": 1,<lead2>"b": 2<tail>
 *
 * each kept member with the blanks that led it (<leadN>: from after the
 * '{' or comma before it), joined by commas; the last value's trailing
 * blanks and the closing brace follow.  The file is checked as a whole by
 * jread_parse() first, so the walk below can trust its shape.
 */
#include "cvt/cvt_scale.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "util/arena.h"
#include "util/io.h"
#include "util/jread.h"
#include "util/sbuf.h"

#define CFG_MAX	(UINT64_C(16) << 20)	/* a config.json is a few KiB */
#define KEY	"quantization_config"

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static size_t skip_blanks(const char *t, size_t i, size_t n)
{
	while (i < n && blank(t[i]))
		i++;
	return i;
}

/* Past the string whose quote is at @i. */
static size_t skip_string(const char *t, size_t i, size_t n)
{
	for (i++; i < n && t[i] != '"'; i++)
		if (t[i] == '\\')
			i++;
	return i + 1;
}

/* Past the value at @i (a valid one: jread_parse() said so). */
static size_t skip_value(const char *t, size_t i, size_t n)
{
	int depth = 0;

	while (i < n) {
		char ch = t[i];

		if (ch == '"') {
			i = skip_string(t, i, n);
			if (!depth)
				return i;
			continue;
		}
		if (ch == '{' || ch == '[') {
			depth++;
		} else if (ch == '}' || ch == ']') {
			if (!depth)
				return i;
			if (!--depth)
				return i + 1;
		} else if (!depth && (ch == ',' || blank(ch))) {
			return i;
		}
		i++;
	}
	return i;
}

/* The object @t without its KEY members into @out; false: none. */
static bool strip(const char *t, size_t n, struct arena *a, struct sbuf *out)
{
	size_t i = skip_blanks(t, 0, n) + 1, head = i, lead, kstart;
	size_t first_key = skip_blanks(t, i, n), vend = head;
	bool any = false, first = true;

	while (i < n) {
		const char *p, *key, *why;
		size_t klen;

		lead = i;
		kstart = skip_blanks(t, i, n);
		p = t + kstart;
		if (t[kstart] != '"' ||
		    jread_string(&p, t + n, a, &key, &klen, &why))
			break;		/* "{}" or "{ }" */
		i = skip_blanks(t, (size_t)(p - t), n) + 1;	/* the ':' */
		i = skip_value(t, skip_blanks(t, i, n), n);
		if (klen == strlen(KEY) && !memcmp(key, KEY, klen)) {
			any = true;
		} else if (first) {	/* '{', the first member's blanks */
			sb_add(out, t, first_key);
			sb_add(out, t + kstart, i - kstart);
			first = false;
		} else {
			sb_add(out, ",", 1);
			sb_add(out, t + lead, i - lead);
		}
		vend = i;
		i = skip_blanks(t, i, n);
		if (i >= n || t[i] != ',')
			break;
		i++;
	}
	if (first)
		sb_add(out, t, head);
	sb_add(out, t + vend, n - vend);
	return any;
}

int cvt_hfcfg_rewrite(void *arg, const char *name, int fd, uint64_t size,
		      struct sbuf *out, struct diag *d)
{
	struct arena a = { 0 };
	struct jread *root;
	const char *why;
	size_t bad;
	char *t;
	int rc;

	if (strcmp(name, "config.json"))
		return 0;
	if (size > CFG_MAX)
		return diag_set(d, -EFBIG, DIAG_NO_OFFSET, "%s: %llu bytes: "
				"too large for a config.json", name,
				(unsigned long long)size);
	t = malloc(size + 1);
	if (!t)
		return diag_nomem(d);
	rc = io_pread_full(fd, t, size, 0);
	if (rc) {
		diag_errno(d, rc, "%s: %s", name, strerror(-rc));
		goto out;
	}
	rc = jread_parse(t, size, &a, &root, &bad, &why);
	if (rc == -EILSEQ)
		rc = diag_corrupt(d, bad, "%s: %s: its quantization_config "
				  "cannot be removed", name, why);
	else if (!rc && root->kind != JREAD_OBJ)
		rc = diag_corrupt(d, 0, "%s: not a JSON object: its "
				  "quantization_config cannot be removed",
				  name);
	else if (rc)
		rc = diag_nomem(d);
	if (!rc && jread_get(root, KEY)) {
		strip(t, size, &a, out);
		rc = out->oom ? diag_nomem(d) : 1;
		*(bool *)arg = true;
	}
out:
	arena_release(&a);
	free(t);
	return rc;
}
