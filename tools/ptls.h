/*
 * ptls.h - what ptls.c (the flat listing) and ptls_tree.c (--tree and
 * --totals) share: the options and the formatters of one entry.
 */
#ifndef PT_TOOLS_PTLS_H
#define PT_TOOLS_PTLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt_fmt.h"

struct ckpt;

struct opts {
	bool json;
	bool check;
	bool values;
	bool tree;
	bool totals;
};

/* ptls_tree.c: the indented tree, as text or as one nested JSON value. */
int ls_tree_text(const struct ckpt *c, const struct opts *o);
void ls_tree_json(FILE *f, const struct ckpt *c, const struct opts *o);

/* ptls_tree.c: tensors, storages and bytes per dtype. */
void ls_totals_text(const struct ckpt *c);
void ls_totals_json(FILE *f, const struct ckpt *c);

#endif
