/*
 * view.h - a tensor's values for tools that do not speak torch: the .npy
 * view (NumPy format 1.0 header + the raw bytes, docs/views.md), the text
 * view (one row per line, numbers that parse back to the same bits), and
 * element decoding for comparisons (ptdiff).  Pure functions over bytes:
 * no I/O, no FUSE, no ckpt model beyond struct ckpt_dtype.
 *
 *   view_num.c    element <-> number (float16/bfloat16 conversions too)
 *   view_dec.c    one element as text, and its length unprinted
 *   view_text.c   text rendering and a streaming parser for it
 *   view_npy.c    .npy headers: build one, parse one (restricted literal)
 */
#ifndef PT_VIEW_VIEW_H
#define PT_VIEW_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

struct diag;

/* ---- elements (view_num.c) ---- */

/* How a dtype's elements are shown and compared. */
enum view_kind {
	VIEW_FLOAT,	/* float16, bfloat16, float32, float64 */
	VIEW_INT,	/* int8..int64, qint8, qint32 */
	VIEW_UINT,	/* uint8..uint64, quint8 */
	VIEW_BOOL,	/* bool: 0 or 1 */
	VIEW_COMPLEX,	/* complex32 (2 x f16), complex64, complex128 */
	VIEW_RAW,	/* float8*, float4, bits*, quint4x2/2x4, sub-byte
			   ints: the element's bytes as an unsigned integer
			   (little-endian value of its bytes as stored) */
};

enum view_kind view_kind_of(const struct ckpt_dtype *dt);

/* One element, decoded.  FLOAT: re.  COMPLEX: re, im.  INT: i.
 * UINT, BOOL, RAW: u. */
struct view_num {
	double re, im;
	int64_t i;
	uint64_t u;
};

/* Decode the element at @p (dt->size bytes, big-endian if @big). */
void view_get(const struct ckpt_dtype *dt, bool big, const unsigned char *p,
	      struct view_num *out);

/* IEEE binary16 and bfloat16 <-> binary32, round to nearest even; NaN
 * payloads kept as far as the narrower format can hold them. */
float view_f16_to_f32(uint16_t h);
uint16_t view_f32_to_f16(float f);
float view_bf16_to_f32(uint16_t h);
uint16_t view_f32_to_bf16(float f);

/* Swap every element of @n elements in place from one byte order to the
 * other (complex: each component; 1-byte dtypes: nothing). */
void view_swap(const struct ckpt_dtype *dt, unsigned char *p, uint64_t n);

/* ---- the text view (view_text.c) ---- */

/*
 * Layout (docs/views.md):
 *
 *   # float32 (2, 3)          header: dtype and shape, a '#' comment line
 *   0.5 -1 3.14159274         one line per row along the last dimension
 *   nan inf -inf
 *
 * 0-d: one line with one value; numel 0: the header only.  Numbers:
 * float32 "%.9g", float64 "%.17g", float16 "%.5g", bfloat16 "%.4g" (each
 * parses back to the same bits), "nan"/"-nan" for the default quiet NaN
 * of either sign, "nan(0xBITS)" for any other NaN (BITS: the element's
 * raw bits in hex), "inf"/"-inf"; complex as RE+IMj / RE-IMj with the
 * part format of the component type; ints and RAW in decimal; bool 0/1.
 */

/* Longest text one element can take, separator included. */
#define VIEW_TEXT_ELEM_MAX	64

/* The header line, "\n" included, into @buf; its length, or the length
 * it needs when @size is too small (then @buf holds a truncated line). */
size_t view_text_header(const struct ckpt_dtype *dt, int ndim,
			const int64_t *shape, char *buf, size_t size);

/*
 * Render elements [@first, @first + @n) of a tensor of @dt / @ndim /
 * @shape whose row-major bytes for those elements are at @data, with the
 * separator each is followed by (' ' inside a row, '\n' after the last
 * element of a row).  @out must hold @n * VIEW_TEXT_ELEM_MAX bytes.
 * Returns the bytes written.
 */
size_t view_text_format(const struct ckpt_dtype *dt, bool big, int ndim,
			const int64_t *shape, uint64_t first,
			const unsigned char *data, uint64_t n, char *out);

/*
 * The bytes view_text_format() writes for those @n elements (whatever
 * their position in a row: every separator is one byte), counted without
 * printing them: ints by their digits, floats from one exact scaling
 * (printf only where that is too close to call), so a view's size and
 * the offsets of its chunks cost a fraction of rendering it.
 */
uint64_t view_text_measure(const struct ckpt_dtype *dt, bool big,
			   const unsigned char *data, uint64_t n);

/*
 * A streaming parser for text written back into a view: numbers separated
 * by white space (commas are white space too); lines whose first non-blank
 * character is '#' are comments.  Each number is parsed as @dt and stored
 * in @dt's byte order (@big) into the caller's output.  Everything the
 * renderer prints parses back to the same bits; ints must be in range;
 * float32/16/bf16 round to nearest even from the decimal.
 */
struct view_parser {
	const struct ckpt_dtype *dt;
	bool big;
	uint64_t want;		/* numel the tensor has */
	uint64_t count;		/* numbers parsed so far */
	uint64_t pos;		/* bytes consumed: offsets in messages */
	uint64_t line;		/* 1-based line of pos */
	bool comment;		/* inside a comment line */
	bool bol;		/* at the start of a line (so far blanks) */
	char tok[VIEW_TEXT_ELEM_MAX];	/* a number cut by a chunk boundary */
	size_t toklen;
	uint64_t tokpos;	/* offset of tok's first byte */
};

void view_parser_init(struct view_parser *p, const struct ckpt_dtype *dt,
		      bool big, uint64_t numel);

/*
 * Feed @len bytes of text (@last: no more follows).  Numbers go to @out,
 * which must hold (@len / 2 + 2) * dt->size bytes; *@nout is set to the
 * bytes stored.  Errors (-EINVAL with @d set, the offset being the
 * number's in the text): a token that is not a @dt number ("line 3: 'x1'
 * is not a float32"), one out of range, more numbers than @want, and at
 * @last fewer ("12 values, the tensor has 15").
 */
int view_parse(struct view_parser *p, const char *buf, size_t len,
	       bool last, unsigned char *out, size_t *nout, struct diag *d);

/* ---- the .npy view (view_npy.c) ---- */

/*
 * NumPy format 1.0 (numpy/lib/format.py):
 *
 *   OFFSET  SIZE  FIELD
 *   0       6     magic "\x93NUMPY"
 *   6       1     major version (1; 2 and 3 read too)
 *   7       1     minor version (0)
 *   8       2     header length H, little-endian (4 bytes in 2.0/3.0)
 *   10      H     "{'descr': '<f4', 'fortran_order': False,
 *                  'shape': (2, 3), }" padded with spaces and a final
 *                 "\n" so that 10 + H is a multiple of 64
 *   10 + H        the data, C order
 *
 * Descriptors: '<f4' style with the byte order of the checkpoint ('|'
 * for 1-byte types).  numpy has no bfloat16, float8, complex32 or bits
 * types: bfloat16 is shown as '<u2' (its raw bits), complex32 as the
 * structured [('re', '<f2'), ('im', '<f2')], and every other dtype numpy
 * lacks as unsigned integers of its size ('|u1', '<u2').
 */

#define VIEW_NPY_HEADER_MAX	4096	/* 64 dims of 20 digits fit */

/* The descriptor literal as it appears in the header ("'<f4'" with the
 * quotes, or "[('re', '<f2'), ('im', '<f2')]"), into @buf (>= 64). */
const char *view_npy_descr(const struct ckpt_dtype *dt, bool big, char *buf,
			   size_t size);

/* The header for @dt / @ndim / @shape into @buf (VIEW_NPY_HEADER_MAX);
 * returns its length (a multiple of 64). */
size_t view_npy_header(const struct ckpt_dtype *dt, bool big, int ndim,
		       const int64_t *shape, unsigned char *buf);

/* What a parsed .npy header says. */
struct view_npy {
	size_t header_len;	/* where the data starts */
	char descr[64];		/* as view_npy_descr() would print it */
	const struct ckpt_dtype *dtype;	/* the dtype a new tensor gets */
	bool big;		/* data is big-endian */
	bool fortran_order;
	int ndim;
	int64_t shape[CKPT_MAX_DIMS];
	uint64_t numel;
	uint64_t nbytes;	/* numel * dtype->size, overflow-checked */
};

/*
 * Parse the header at the start of @buf (@len bytes available; the
 * header is at most VIEW_NPY_HEADER_MAX... or 1 MiB for format 2.0).
 * The dict is read as a restricted Python literal: keys 'descr',
 * 'fortran_order', 'shape' in any order, each once; descr a string or
 * the complex32 structure above.  -EINVAL with @d set (offsets in the
 * .npy) for anything else: bad magic, unknown version, a header longer
 * than @len, a descr torch has no dtype for ('O', 'U', 'M8', structured
 * types), negative or overflowing shapes.  fortran_order True parses (the
 * caller refuses it).
 */
int view_npy_parse(const unsigned char *buf, size_t len,
		   struct view_npy *out, struct diag *d);

#endif
