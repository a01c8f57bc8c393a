/*
 * ptls.h - what ptls.c (the flat listing) and ptls_tree.c (--tree and
 * --totals) share: the options and the formatters of one entry.
 */
#ifndef PT_TOOLS_PTLS_H
#define PT_TOOLS_PTLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_fmt.h"

struct ckpt;
struct ckpt_node;

/* A container of more python scalars than this is shown on one line. */
#define LS_COLLAPSE_OVER	16

struct opts {
	bool json;
	bool check;
	bool values;
	bool tree;
	bool totals;
	bool human;		/* sizes as "2.6 MiB" */
	bool expand;		/* --verbose: no collapsed lists */
	bool quiet;		/* nothing on stdout: the status says it */
	bool stats;		/* per-tensor statistics (ptls_stats.c) */
	int depth;		/* levels below start shown; -1: all */
	const struct ckpt_node *start;	/* the subtree listed */
	const struct ckpt *c;		/* the checkpoint it is in */
};

/* Is @n a long container of python scalars, shown on one line? */
bool ls_collapsed(const struct ckpt_node *n, const struct opts *o);
/* "746 int: 1, 2, 3, ..." (at most about 80 bytes) into @buf. */
void ls_collapsed_text(const struct ckpt_node *n, char *buf, size_t size);
/* What the tensors under @n hold (links not followed). */
struct ls_sum {
	uint32_t tensors;
	uint32_t storages;	/* storages they view */
	uint64_t bytes;		/* their bytes, each storage byte once */
	uint64_t tied;		/* bytes a second tensor viewed too (ties),
				   counted once in bytes */
	uint64_t shared;	/* of bytes, those of storages that tensors
				   outside @n view too */
};
void ls_sum(const struct ckpt *c, const struct ckpt_node *n,
	    struct ls_sum *sum);
/* "864 B; 512 B tied, counted once" into @buf; returns @buf. */
const char *ls_sum_text(const struct ls_sum *s, bool human, char *buf,
			size_t size);

/* ptls_tree.c: the indented tree, as text or as one nested JSON value. */
int ls_tree_text(const struct ckpt *c, const struct opts *o);
void ls_tree_json(struct jw *w, const struct ckpt *c, const struct opts *o);

/* ptls_tree.c: tensors, storages and bytes per dtype. */
void ls_totals_text(const struct ckpt *c, const struct opts *o);
void ls_totals_json(struct jw *w, const struct ckpt *c);

/* ptls_stats.c: --stats of @c (or of the subtrees @paths name). */
int ls_stats(struct ckpt *c, struct opts *o, char **paths, int npaths,
	     bool many);

#endif
