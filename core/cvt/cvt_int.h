/*
 * cvt_int.h - what cvt_scale.c and cvt_dequant.c share and nothing else
 * sees: a scaled weight's pair as the checks found it.  Internal to
 * core/cvt.
 */
#ifndef PT_CVT_CVT_INT_H
#define PT_CVT_CVT_INT_H

#ifndef PT_INTERNAL
#error "cvt_int.h is internal to core/cvt"
#endif

#include "cvt/cvt_scale.h"

/* One weight and its scale, as dequantization sees them. */
struct cvt_pair {
	struct ckpt_node *w;	/* first: cvt_scale_collect() */
	struct ckpt_node *s, *in;	/* scale, input_scale (or NULL) */
	const struct ckpt_dtype *from;	/* the weight's float8 */
	uint64_t rows, cols;	/* the weight as rows x cols */
	uint64_t bm, bn;	/* one scale per bm x bn block */
	uint64_t sr, sc;	/* the scales as sr x sc */
};

/*
 * Scale node @s (a tensor named BASE_scale_inv or BASE_scale, BASE being
 * "weight" or "X.weight") as a pair into @item (a struct cvt_pair; @arg
 * the struct cvt_scale_opt): 0; 1 when @s is no scale name or --only does
 * not match its weight; -EINVAL when it is one but something does not
 * fit.  A cvt_scale_pick_fn.
 */
int cvt_scale_pair(const struct ckpt *c, struct ckpt_node *s,
		   const void *arg, void *item, struct diag *d);

#endif
