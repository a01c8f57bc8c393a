/*
 * ckpt_repickle_val.c - the values written back from their files (a
 * value edited through the mount: docs/editing.md): a python scalar, a
 * str or bytes, or a list of scalars (ckpt_scalars.c), from the text the
 * edit left, parsed again as the edit was; part of the repickler
 * (ckpt_repickle.h).
 */
#include "ckpt_repickle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A python scalar: an item of a list value or a value of its own. */
static int emit_scalar(struct wb *w, const struct ckpt_literal *lit)
{
	if (!strcmp(lit->type, "bool"))
		return rp_emit_bool(w->e, lit->i);
	if (!strcmp(lit->type, "NoneType"))
		return pkl_emit_op(w->e, PKL_OP_NONE);
	if (!strcmp(lit->type, "int"))
		return pkl_emit_int(w->e, lit->i);
	return pkl_emit_float(w->e, lit->f);
}

/* A list of scalars written into its value file (ckpt_scalars.c): a
 * list as pickle writes one (APPENDS in batches), or a tuple. */
static int emit_scalars(struct wb *w, const struct ckpt_literal *lit)
{
	struct ckpt_scalars s;
	int rc = ckpt_scalars_parse(lit->text, lit->len, &s);

	if (rc)
		return rc == -ENOMEM ? diag_nomem(w->d) : rc;
	if (!s.tuple) {
		rc = pkl_emit_op(w->e, PKL_OP_EMPTY_LIST);
		if (!rc)
			rc = rp_memo_fresh(w);
	}
	for (size_t i = 0; i < s.n && !rc; i++) {
		if ((s.tuple && !i) || (!s.tuple && !(i % BATCH)))
			rc = pkl_emit_mark(w->e);
		if (!rc)
			rc = emit_scalar(w, &s.v[i]);
		if (!rc && !s.tuple && (i % BATCH == BATCH - 1 || i + 1 == s.n))
			rc = pkl_emit_op(w->e, PKL_OP_APPENDS);
	}
	if (!rc && s.tuple)
		rc = s.n ? pkl_emit_op(w->e, PKL_OP_TUPLE) :
		     pkl_emit_op(w->e, PKL_OP_EMPTY_TUPLE);
	if (!rc && s.tuple)
		rc = rp_memo_fresh(w);
	free(s.v);
	return rc;
}

int rp_emit_value_file(struct wb *w, const struct ckpt_node *n)
{
	struct ckpt_literal lit;

	if (ckpt_value_parse(n, n->text, n->textlen, &lit))
		return diag_corrupt(w->d, DIAG_NO_OFFSET, "value %s no longer "
				    "parses", n->name);
	if (!strcmp(lit.type, "list") || !strcmp(lit.type, "tuple"))
		return emit_scalars(w, &lit);
	if (!strcmp(lit.type, "str")) {
		int rc = pkl_emit_str(w->e, lit.text, lit.len);

		return rc ? rc : rp_memo_fresh(w);
	}
	if (!strcmp(lit.type, "bytes")) {
		int rc = pkl_emit_bytes(w->e, lit.text, lit.len,
					DIAG_NO_OFFSET);

		return rc ? rc : rp_memo_fresh(w);	/* the bytes object */
	}
	return emit_scalar(w, &lit);
}
