/*
 * ckpt_ranks_agree.c - what the ranks of a set must hold alike: every
 * key, value and plain tensor beside the DTensors (the epoch, a scalar
 * step, the optimizer's param_groups).  The set's tree shows rank 0's;
 * where another rank's differs the open keeps a finding, which ptverify
 * lists (and fails on) and the mount reports when it starts: shown, not
 * hidden.  The DTensors' own metadata (their placements, the mesh's
 * rank and coordinate) differ by design and are checked as pieces
 * (ckpt_ranks_dt.c).
 */
#include "ckpt_ranks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGREE_BYTES	4096	/* a plain tensor's bytes compared, at most */

int rk_note(struct ckpt *c, const char *fmt, ...)
{
	struct ckpt_ranks *rk = c->ranks;
	char buf[512];
	va_list ap;

	if (rk->nfindings == RANKS_FINDINGS) {
		rk->nmore++;
		return 0;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rk->findings[rk->nfindings] = arena_strndup(&c->arena, buf,
						    strlen(buf));
	if (!rk->findings[rk->nfindings])
		return -ENOMEM;
	rk->nfindings++;
	return 0;
}

/* A value's text for a message: its first 40 bytes. */
static int shown(const struct ckpt_node *n)
{
	return n->textlen > 40 ? 40 : (int)n->textlen;
}

/* "a" or "an" before @type */
static const char *article(const char *type)
{
	return type && type[0] && strchr("aeiouAEIOU", type[0]) ? "an" : "a";
}

/* Tensors @a (rank 0's) and @b (rank @r's) alike: dtype, shape, bytes. */
static int same_tensor(struct ckpt *c, uint32_t r, const struct ckpt_tensor *a,
		       const struct ckpt_tensor *b, const char *key)
{
	struct ckpt_ranks *rk = c->ranks;
	unsigned char x[AGREE_BYTES], y[AGREE_BYTES];
	uint64_t n = ckpt_tensor_nbytes(a);
	struct diag d;

	if (a->dtype != b->dtype || a->ndim != b->ndim ||
	    memcmp(a->shape, b->shape, a->ndim * sizeof(*a->shape)))
		return rk_note(c, "'%s': rank %u's tensor has another dtype or "
			       "shape than rank 0's", key, r);
	if (n > AGREE_BYTES || a->kind != CKPT_T_STRIDED)
		return 0;
	diag_init(&d, NULL);
	if (ckpt_tensor_read(rk->parts[0], a, x, n, 0, &d) != (long long)n ||
	    ckpt_tensor_read(rk->parts[r], b, y, n, 0, &d) != (long long)n)
		return rk_note(c, "'%s': rank %u's or rank 0's tensor cannot "
			       "be read", key, r);
	if (memcmp(x, y, n))
		return rk_note(c, "'%s': rank %u's tensor holds other values "
			       "than rank 0's", key, r);
	return 0;
}

static int walk(struct ckpt *c, uint32_t r, const struct ckpt_node *a,
		const struct ckpt_node *b, char *key, size_t klen)
{
	size_t k = strlen(key);
	int rc = 0;

	if (rk_is_sharded(a) || (a->kind == CKPT_N_LINK &&
				 b->kind == CKPT_N_LINK))
		return 0;	/* pieces (rk_piece_of), or shown elsewhere */
	if (a->kind != b->kind || (a->type && b->type &&
				   strcmp(a->type, b->type)))
		return rk_note(c, "'%s': rank %u holds %s %s, rank 0 %s %s",
			       k ? key : ".", r, article(b->type),
			       b->type ? b->type : "?", article(a->type),
			       a->type ? a->type : "?");
	switch (a->kind) {
	case CKPT_N_VALUE:
	case CKPT_N_OPAQUE:
		if (a->textlen != b->textlen ||
		    memcmp(a->text, b->text, a->textlen))
			return rk_note(c, "'%s': rank %u holds %.*s, rank 0 "
				       "%.*s", key, r, shown(b), b->text,
				       shown(a), a->text);
		return 0;
	case CKPT_N_TENSOR:
		return same_tensor(c, r, a->tensor, b->tensor, key);
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		break;
	default:
		return 0;
	}
	for (uint32_t i = 0; i < a->dir->nkids && !rc; i++) {
		const struct ckpt_node *x = a->dir->kids[i], *y;

		if (!x)
			continue;
		y = ckpt_node_child(b, x->name);
		snprintf(key + k, klen - k, "%s%s", k ? "/" : "", x->name);
		rc = y ? walk(c, r, x, y, key, klen) :
		     rk_note(c, "'%s': in rank 0's file, not in rank %u's",
			     key, r);
		key[k] = 0;
	}
	for (uint32_t i = 0; i < b->dir->nkids && !rc; i++) {
		const struct ckpt_node *y = b->dir->kids[i];

		if (y && !ckpt_node_child(a, y->name))
			rc = rk_note(c, "'%s%s%s': in rank %u's file, not in "
				     "rank 0's", key, k ? "/" : "", y->name, r);
	}
	return rc;
}

int rk_agree(struct ckpt *c, uint32_t r, struct diag *d)
{
	char key[4096] = "";

	if (walk(c, r, c->ranks->parts[0]->root, c->ranks->parts[r]->root,
		 key, sizeof(key)))
		return diag_nomem(d);
	return 0;
}
