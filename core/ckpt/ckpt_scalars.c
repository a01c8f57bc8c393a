/*
 * ckpt_scalars.c - a long list of python scalars as one value file
 * (docs/editing.md, "Lists of scalars"): random.getstate()'s 625 ints are
 * one file holding the python literal, not 625 files.  The rule: a list or
 * tuple of more than CKPT_SCALARS_OVER items, every one an int (of 64
 * bits), float, bool or None, when the model is opened with
 * CKPT_OPEN_LISTS (the mount); ptls keeps its own one-line view.  Here:
 * the rule, the text (python's repr()), and the parse of a new text back
 * into items, which is strict: brackets of the value's kind, scalars
 * only, commas between, blanks and newlines anywhere between tokens.
 */
#include "ckpt_int.h"
#include "pickle/pkl.h"
#include "util/sbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ckpt_scalar_list(const struct pkl_value *v)
{
	if ((v->kind != PKL_LIST && v->kind != PKL_TUPLE) ||
	    v->u.items.n <= CKPT_SCALARS_OVER)
		return false;
	for (size_t i = 0; i < v->u.items.n; i++) {
		int k = v->u.items.v[i]->kind;

		if (k != PKL_INT && k != PKL_FLOAT && k != PKL_BOOL &&
		    k != PKL_NONE)
			return false;
	}
	return true;
}

static void item_text(struct sbuf *b, const struct ckpt_literal *it)
{
	char buf[40];

	if (!strcmp(it->type, "bool"))
		sb_puts(b, it->i ? "True" : "False");
	else if (!strcmp(it->type, "NoneType"))
		sb_puts(b, "None");
	else if (!strcmp(it->type, "int")) {
		snprintf(buf, sizeof(buf), "%lld", (long long)it->i);
		sb_puts(b, buf);
	} else {
		sb_puts(b, ckpt_float_repr(it->f, buf, sizeof(buf)));
	}
}

/* repr() of @n items, of a tuple when @tuple: "(1,)" for one. */
static char *items_text(const struct ckpt_literal *it, size_t n, bool tuple,
			size_t *len)
{
	struct sbuf b = { 0 };

	sb_puts(&b, tuple ? "(" : "[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			sb_puts(&b, ", ");
		item_text(&b, &it[i]);
	}
	sb_puts(&b, tuple && n == 1 ? ",)" : tuple ? ")" : "]");
	return sb_detach(&b, len);
}

char *ckpt_scalar_list_text(const struct pkl_value *v, size_t *len)
{
	bool tuple = v->kind == PKL_TUPLE;
	struct sbuf b = { 0 };

	sb_puts(&b, tuple ? "(" : "[");
	for (size_t i = 0; i < v->u.items.n; i++) {
		const struct pkl_value *x = v->u.items.v[i];
		struct ckpt_literal it = {
			.type = x->kind == PKL_INT ? "int" :
				x->kind == PKL_FLOAT ? "float" :
				x->kind == PKL_BOOL ? "bool" : "NoneType",
			.i = x->kind == PKL_INT || x->kind == PKL_BOOL ? x->u.i : 0,
			.f = x->kind == PKL_FLOAT ? x->u.f : 0,
		};

		if (i)
			sb_puts(&b, ", ");
		item_text(&b, &it);
	}
	sb_puts(&b, tuple && v->u.items.n == 1 ? ",)" : tuple ? ")" : "]");
	return sb_detach(&b, len);
}

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

bool ckpt_scalars_bracketed(const char *text, size_t len)
{
	size_t i = 0;

	while (i < len && blank(text[i]))
		i++;
	return i < len && (text[i] == '[' || text[i] == '(');
}

int ckpt_scalars_parse(const char *text, size_t len, struct ckpt_scalars *out)
{
	size_t i = 0, end = len, cap = 0;
	bool comma = true;	/* an item may come next */

	memset(out, 0, sizeof(*out));
	while (i < end && blank(text[i]))
		i++;
	while (end > i && blank(text[end - 1]))
		end--;
	if (end - i < 2 || memchr(text, 0, len) ||
	    (text[i] == '[' ? text[end - 1] != ']' :
	     text[i] != '(' || text[end - 1] != ')'))
		return -EINVAL;
	out->tuple = text[i] == '(';
	for (i++, end--; i < end;) {
		struct ckpt_literal lit;
		size_t j;
		int rc;

		if (blank(text[i])) {
			i++;
			continue;
		}
		if (text[i] == ',') {
			if (comma)	/* "[,", "[1,,": no item */
				goto bad;
			comma = true;
			i++;
			continue;
		}
		if (!comma)
			goto bad;
		for (j = i; j < end && text[j] != ',' && !blank(text[j]); j++)
			if (strchr("[](){}'\"", text[j]))
				goto bad;	/* not a scalar */
		rc = ckpt_literal_parse(text + i, j - i, &lit);
		if (rc) {
			free(out->v);
			out->v = NULL;
			out->bad = i;
			out->badlen = j - i;
			return rc;
		}
		if (out->n == cap) {
			struct ckpt_literal *v;

			cap = cap ? 2 * cap : 64;
			v = realloc(out->v, cap * sizeof(*v));
			if (!v) {
				free(out->v);
				out->v = NULL;
				return -ENOMEM;
			}
			out->v = v;
		}
		out->v[out->n++] = lit;
		comma = false;
		i = j;
	}
	/* (1) is an int in python, not a tuple: one item needs its comma */
	if (out->tuple && out->n == 1 && !comma)
		goto bad;
	return 0;
bad:
	out->bad = i;
	out->badlen = 1;
	free(out->v);
	out->v = NULL;
	return -EINVAL;
}

char *ckpt_scalars_text(const struct ckpt_scalars *s, size_t *len)
{
	return items_text(s->v, s->n, s->tuple, len);
}
