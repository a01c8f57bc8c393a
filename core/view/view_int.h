/*
 * view_int.h - what view_text.c (the text view and its parser) and
 * view_dec.c (printing one element, and the length it prints, without
 * printf where that can be decided) share: the IEEE-style formats of the
 * float dtypes and their bit masks.  Not for callers outside core/view.
 */
#ifndef PT_VIEW_VIEW_INT_H
#define PT_VIEW_VIEW_INT_H

#ifndef PT_INTERNAL
#error "view_int.h is internal to core/view"
#endif

#include "view/view.h"

/* An IEEE-style binary format and the printf precision that round-trips
 * it (Matula: the smallest n with 10^(n-1) > 2^(mbits+1)). */
struct ffmt {
	unsigned size;
	int mbits, ebits;
	int prec;
};

/* view_dec.c; compared by address */
extern const struct ffmt view_f16, view_bf16, view_f32, view_f64;

/* The format of a FLOAT element or of one COMPLEX component. */
const struct ffmt *view_ffmt_of(const struct ckpt_dtype *dt);

static inline uint64_t ffmt_sign(const struct ffmt *f)
{
	return UINT64_C(1) << (f->mbits + f->ebits);
}

static inline uint64_t ffmt_exp(const struct ffmt *f)
{
	return ((UINT64_C(1) << f->ebits) - 1) << f->mbits;
}

static inline uint64_t ffmt_frac(const struct ffmt *f)
{
	return (UINT64_C(1) << f->mbits) - 1;
}

/* The default quiet NaN, positive. */
static inline uint64_t ffmt_qnan(const struct ffmt *f)
{
	return ffmt_exp(f) | UINT64_C(1) << (f->mbits - 1);
}

/* A finite value's bits as a double (exact for every format here). */
double view_ffmt_value(const struct ffmt *f, uint64_t bits);

/* How one dtype's elements are printed, decided once per run of them. */
struct view_dec {
	const struct ckpt_dtype *dt;
	enum view_kind kind;
	const struct ffmt *f;	/* FLOAT, COMPLEX: the (component) format */
	bool big;
};

void view_dec_init(struct view_dec *c, const struct ckpt_dtype *dt,
		   bool big);

/*
 * The element at @p as the text view prints it, without its separator,
 * into @out (VIEW_TEXT_ELEM_MAX bytes); its length.  view_dec_len() is
 * that length without printing (the same bytes, counted).
 */
size_t view_dec_put(const struct view_dec *c, const unsigned char *p,
		    char *out);
size_t view_dec_len(const struct view_dec *c, const unsigned char *p);

/* The lengths of @n elements at @p, summed (the same as view_dec_len()
 * of each, with the common dtypes' loops unrolled). */
uint64_t view_dec_len_run(const struct view_dec *c, const unsigned char *p,
			  uint64_t n);

#endif
