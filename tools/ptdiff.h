/*
 * ptdiff.h - what ptdiff.c (options, the walk, the report) and
 * ptdiff_cmp.c (element comparison of two tensors) share.  Internal to
 * the ptdiff tool; the rules are in docs/ptdiff.1.
 */
#ifndef PT_TOOLS_PTDIFF_H
#define PT_TOOLS_PTDIFF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/ckpt.h"

struct diag;

#define PD_CHUNK	(1u << 20)	/* bytes read per tensor per step */

struct pd_opts {
	double atol, rtol;	/* |a - b| <= atol + rtol * |b| is equal */
	double rel_l2;		/* >= 0: a tensor is equal when ||a - b|| /
				   ||b|| <= rel_l2 (--rel-l2); < 0: off */
	bool nan_differ;	/* every NaN differs, even from a NaN */
	bool ignore_layout;	/* stride/offset differences do not count */
	bool ignore_dtype;	/* a dtype change alone does not count */
	bool quiet;		/* status only: stop at the first difference */
	bool verbose;		/* list equal items too */
	bool json;
	uint64_t limit;		/* --count: differences reported; 0: all */
	int sort;		/* enum pd_sort: the report's order */
};

/* --sort KEY: differences largest first by one figure of their values. */
enum pd_sort { PD_SORT_NONE, PD_SORT_ABS, PD_SORT_REL, PD_SORT_L2,
	       PD_SORT_COUNT };

/* The outcome of comparing two tensors of one dtype and shape. */
struct pd_elems {
	uint64_t numel;
	uint64_t differ;	/* elements that are not equal */
	uint64_t nan;		/* of those, the ones where a NaN decided it */
	uint64_t first;		/* flat index of the first that differs */
	double max_abs;		/* over the elements without NaN */
	double max_rel;		/* |a - b| / |b|; inf where b == 0 != a */
	bool raw;		/* compared byte-wise: no abs/rel figures */
	bool partial;		/* quiet: stopped at the first difference */
	bool has_rel_l2;	/* rel_l2 was computed (across dtypes) */
	double rel_l2;		/* ||a - b|| / ||b|| over the finite pairs */
};

/* Reading state shared by all comparisons of one run. */
struct pd_ctx {
	const struct pd_opts *o;
	struct ckpt *a, *b;
	bool big_a, big_b;	/* the checkpoints' byte orders */
	unsigned char *buf_a, *buf_b;	/* PD_CHUNK bytes each */
	struct diag *da, *db;	/* errors name the file that failed */
	uint64_t done, total;	/* bytes of A compared, and to compare */
	void (*tick)(struct pd_ctx *x);	/* after each chunk, or NULL */
	const char *path;	/* what is being compared (for tick) */
};

/*
 * Compare the elements of @ta (in x->a) and @tb (in x->b), which have one
 * dtype and the same shape, streaming both through x's buffers.  Fills
 * @out.  Returns 0, or -errno with x->da or x->db set.
 */
int pd_compare_elems(struct pd_ctx *x, const struct ckpt_tensor *ta,
		     const struct ckpt_tensor *tb, struct pd_elems *out);

/*
 * ptdiff_xdt.c: the same for two tensors of one shape and different real
 * dtypes (float, float8, int, bool), with the relative L2 error.
 */
bool pd_cross_comparable(const struct ckpt_tensor *a,
			 const struct ckpt_tensor *b);
/* The shape @t's values have: a coded tensor's (ckpt_coded(), then true
 * and *@k filled), else its own. */
bool pd_coded_shape(struct ckpt *c, const struct ckpt_tensor *t, int *ndim,
		    const int64_t **shape, struct ckpt_coded *k);
int pd_compare_cross(struct pd_ctx *x, const struct ckpt_tensor *ta,
		     const struct ckpt_tensor *tb, struct pd_elems *out);

enum pd_kind { K_TENSOR, K_VALUE, K_DIR, K_LINK };
enum pd_status { ST_EQUAL, ST_CHANGED, ST_ONLY_A, ST_ONLY_B };

/* An attribute that differs, as text: "device", "cpu", "cuda:0". */
struct pd_attr {
	char name[40];		/* "device", "scales[3]" */
	char a[96], b[96];
	bool boolean;		/* a and b are "True"/"False" */
};

#define PD_MAX_ATTRS 16

/* What differs about one path. */
struct pd_item {
	const struct ckpt_node *a, *b;
	char *path;		/* owned */
	int status;
	bool kind, dtype, shape, layout, value, target, values;
	bool stride_diff, offset_diff;	/* layout, even when ignored */
	bool compared;		/* el holds an element comparison */
	struct pd_elems el;
	/* the first earlier path on each side whose tensor shares this
	   one's storage (ties), or NULL */
	const struct ckpt_node *tie_a, *tie_b;
	bool tie_diff;		/* they are not the same pair */
	size_t order;		/* its place in the walk */
	int nattrs;
	/* last: a held copy (ptdiff_sort.c) has room for nattrs only */
	struct pd_attr attrs[PD_MAX_ATTRS];
};

struct pd_totals {
	uint64_t changed, only_a, only_b, equal, tensors, values, other;
	bool stopped;		/* --count: the rest was not compared */
	uint64_t not_shown;	/* --count with --sort: not listed */
};

/* One path present in A, in B or in both. */
struct pair {
	const struct ckpt_node *a, *b;
	int64_t tie_a, tie_b;	/* see pd_ties(); -1: none */
};

struct pairs {
	struct pair *v;
	size_t n, cap;
	uint64_t bytes;		/* tensor bytes whose elements get compared */
};

/* ---- ptdiff_tensor.c: one pair of tensors ---- */

/* Fill @it's tensor differences (it->a, it->b are tensors).  0 or -errno
 * with x->da or x->db set. */
int pd_compare_tensors(struct pd_ctx *x, struct pd_item *it);
/* Add attribute @name that differs ("None" for NULL). */
void pd_add_attr(struct pd_item *it, const char *name, const char *a,
		 const char *b);
bool pd_str_differ(const char *a, const char *b);

/* ---- ptdiff_struct.c: containers and ties ---- */

/* Containers at one path whose own type or hidden state differ. */
bool pd_dirs_differ(const struct ckpt_node *a, const struct ckpt_node *b);
bool pd_states_differ(const struct ckpt_node *a, const struct ckpt_node *b);
/* The hidden state for a message: its keys ("_metadata"), or "None";
 * static storage, valid for two calls. */
const char *pd_describe_state(const struct ckpt_node *n);
/* Fill every pair's tie_a/tie_b.  0 or -ENOMEM. */
int pd_ties(struct pairs *p, const struct ckpt *a, const struct ckpt *b);

/* ---- ptdiff_sort.c: a report held back to be sorted ---- */

struct pd_held {
	struct pd_item **v;	/* owned, with their paths */
	size_t n, cap;
};

/* The --sort KEY named @s, or -1. */
int pd_sort_parse(const char *s);
const char *pd_sort_name(int sort);
/* Keep a copy of @it (its path copied too).  0 or -ENOMEM. */
int pd_hold(struct pd_held *h, const struct pd_item *it);
/* Differences first, largest @sort figure first, those without the
 * figure after them; then equal items; the walk's order within each. */
void pd_held_sort(struct pd_held *h, int sort);
void pd_held_release(struct pd_held *h);

/* ---- ptdiff_out.c: the report ---- */

enum pd_kind pd_kind_of(const struct ckpt_node *n);
const char *pd_kind_name(enum pd_kind k);

/* One item's lines (nothing for an equal one unless verbose). */
void pd_text_item(const struct pd_item *it, const struct pd_opts *o);
/* The last line: "# 3 differences: ...". */
void pd_text_totals(const struct pd_totals *t, const struct pd_opts *o);

/* --json: the head, one object per item, and the totals (with @error,
 * or null) that close it. */
void pd_json_head(FILE *f, const char *pa, const char *pb,
		  const struct pd_opts *o);
void pd_json_item(FILE *f, const struct pd_item *it, bool first);
void pd_json_tail(FILE *f, const struct pd_totals *t, uint64_t bytes,
		  const char *error);

#endif
