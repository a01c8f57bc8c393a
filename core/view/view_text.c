/*
 * view_text.c - the text view of a tensor (view.h has the layout): a
 * "# dtype (shape)" comment line, then one line per row along the last
 * dimension, every number printed so that it parses back to the same
 * bits, and the streaming parser that reads such text back when a view is
 * written.  Numbers use the C locale's "." (the core never calls
 * setlocale); NaN payloads travel as "nan(0xBITS)".  The numbers
 * themselves are view_dec.c's, which also counts their bytes unprinted:
 * a view's size, and where each chunk of it starts, without formatting.
 */
#include "view/view_int.h"
#include "util/le.h"

#include "diag/diag.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool dbl_finite(double x)
{
	return ((f64_bits(x) >> 52) & 0x7ff) != 0x7ff;
}

/* ---- rendering ---- */

/* snprintf onto the end of @buf, counting what did not fit too. */
__attribute__((format(printf, 4, 5)))
static void cat(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	size_t at = *len < size ? *len : size;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + at, size - at, fmt, ap);
	va_end(ap);
	*len += n > 0 ? (size_t)n : 0;
}

size_t view_text_header(const struct ckpt_dtype *dt, int ndim,
			const int64_t *shape, char *buf, size_t size)
{
	size_t len = 0;

	if (size)
		buf[0] = 0;
	cat(buf, size, &len, "# %s (", dt->name);
	for (int i = 0; i < ndim; i++)
		cat(buf, size, &len, i ? ", %" PRId64 : "%" PRId64, shape[i]);
	cat(buf, size, &len, "%s)\n", ndim == 1 ? "," : "");
	return len;
}

size_t view_text_format(const struct ckpt_dtype *dt, bool big, int ndim,
			const int64_t *shape, uint64_t first,
			const unsigned char *data, uint64_t n, char *out)
{
	uint64_t row = ndim > 0 ? (uint64_t)shape[ndim - 1] : 1;
	uint64_t col = row ? first % row : 0;
	struct view_dec c;
	char *o = out;

	view_dec_init(&c, dt, big);
	for (uint64_t i = 0; i < n; i++, data += dt->size) {
		o += view_dec_put(&c, data, o);
		if (++col >= row) {
			*o++ = '\n';
			col = 0;
		} else {
			*o++ = ' ';
		}
	}
	return (size_t)(o - out);
}

uint64_t view_text_measure(const struct ckpt_dtype *dt, bool big,
			   const unsigned char *data, uint64_t n)
{
	uint64_t len = n;	/* every element's separator: one byte */
	struct view_dec c;

	view_dec_init(&c, dt, big);
	return len + view_dec_len_run(&c, data, n);
}

/* ---- parsing one number ---- */

enum { NUM_OK = 0, NUM_BAD = -1, NUM_RANGE = -2 };

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* @s[0..@n) equals the lowercase @lit, ignoring ASCII case. */
static bool ieq(const char *s, size_t n, const char *lit)
{
	size_t i;

	for (i = 0; i < n && lit[i]; i++) {
		char c = s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i];

		if (c != lit[i])
			return false;
	}
	return i == n && !lit[i];
}

/* [+-] (D+ [. D*] | . D+) [(e|E) [+-] D+]: what strtod reads as decimal. */
static bool is_decimal(const char *s, size_t n)
{
	size_t i = 0, d = 0;

	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	for (; i < n && is_digit(s[i]); i++)
		d++;
	if (i < n && s[i] == '.')
		for (i++; i < n && is_digit(s[i]); i++)
			d++;
	if (!d)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i == n || !is_digit(s[i]))
			return false;
		while (i < n && is_digit(s[i]))
			i++;
	}
	return i == n;
}

/*
 * A decimal (checked by is_decimal) as significant digits @dig (no
 * leading or trailing zeros; "" for zero) and @e with value 0.dig * 10^e.
 */
static void decimal_norm(const char *s, char *dig, long *e)
{
	long point = -1, n = 0, lead = 0, x = 0;
	bool neg = false;

	if (*s == '+' || *s == '-')
		s++;
	for (; is_digit(*s) || *s == '.'; s++) {
		if (*s == '.') {
			point = n;
		} else if (*s == '0' && n == lead) {
			lead++;
			n++;
		} else {
			dig[n++ - lead] = *s;
		}
	}
	dig[n - lead] = 0;
	if (point < 0)
		point = n;
	if (*s == 'e' || *s == 'E') {
		s++;
		neg = *s == '-';
		if (*s == '+' || *s == '-')
			s++;
		/* clamped: tokens are short, 10^100000 is out of any range */
		for (; is_digit(*s); s++)
			if (x < 100000)
				x = x * 10 + (*s - '0');
	}
	*e = point - lead + (neg ? -x : x);
	for (n = (long)strlen(dig); n && dig[n - 1] == '0'; n--)
		dig[n - 1] = 0;
}

/*
 * The sign of |decimal @s| - @m for a positive double @m.  Asked only
 * when strtod landed exactly halfway between two float16 or bfloat16
 * values, where digits beyond double precision decide the rounding.
 * glibc's printf gives a double's exact expansion (bfloat16 midpoints have
 * at most 97 significant digits, float16 ones far fewer).
 */
static int decimal_cmp(const char *s, double m)
{
	char a[VIEW_TEXT_ELEM_MAX], b[200], md[200];
	long ea, eb;
	int c;

	snprintf(md, sizeof(md), "%.150e", m);
	decimal_norm(s, a, &ea);
	decimal_norm(md, b, &eb);
	if (!a[0] || !b[0])
		return !a[0] ? (b[0] ? -1 : 0) : 1;
	if (ea != eb)
		return ea > eb ? 1 : -1;
	c = strcmp(a, b);
	return c > 0 ? 1 : c < 0 ? -1 : 0;
}

/*
 * A finite double to float16 or bfloat16, rounding once, to nearest, ties
 * to even, unless @tie says on which side of a halfway @x the true value
 * lies (> 0: further from zero).  *@halfway tells whether it was a tie.
 * Going through float instead would round twice.
 */
static uint64_t narrow(const struct ffmt *f, double x, int tie,
		       bool *halfway)
{
	uint64_t b = f64_bits(x), sign = (b >> 63) ? ffmt_sign(f) : 0;
	uint64_t sig = (b & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
	int e = (int)((b >> 52) & 0x7ff), bias = (1 << (f->ebits - 1)) - 1;
	int ne = e - 1023 + bias, shift;
	uint64_t q, rem, half;

	*halfway = false;
	/* double subnormals are far below half of any subnormal here */
	if (e == 0)
		return sign;
	shift = 52 - f->mbits + (ne >= 1 ? 0 : 1 - ne);
	if (shift > 53)		/* below half the smallest subnormal */
		return sign;
	q = sig >> shift;
	rem = sig & ((UINT64_C(1) << shift) - 1);
	half = UINT64_C(1) << (shift - 1);
	if (rem == half) {
		*halfway = true;
		if (tie > 0 || (tie == 0 && (q & 1)))
			q++;
	} else if (rem > half) {
		q++;
	}
	/* a subnormal may round up to the smallest normal: right as is */
	if (ne < 1)
		return sign | q;
	/* q has the implicit bit: a carry moves into the exponent */
	q += (uint64_t)(ne - 1) << f->mbits;
	return sign | (q >= ffmt_exp(f) ? ffmt_exp(f) : q);
}

/* "nan(0xBITS)": the bits, sign included, of a NaN of format @f. */
static int parse_nan_bits(const struct ffmt *f, const char *s, size_t n,
			  uint64_t *bits)
{
	uint64_t v = 0;
	size_t i;

	if (n < 8 || !ieq(s, 6, "nan(0x") || s[n - 1] != ')')
		return NUM_BAD;
	for (i = 6; i < n - 1; i++) {
		char c = s[i];
		int d = is_digit(c) ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0 || v >> (8 * f->size - 4))
			return NUM_BAD;
		v = v << 4 | (uint64_t)d;
	}
	if ((v & ffmt_exp(f)) != ffmt_exp(f) || !(v & ffmt_frac(f)))
		return NUM_BAD;
	*bits = v;
	return NUM_OK;
}

/* One real number of format @f into *@bits. */
static int parse_float(const struct ffmt *f, const char *s, size_t n,
		       uint64_t *bits)
{
	char buf[VIEW_TEXT_ELEM_MAX];
	size_t i = n && (s[0] == '+' || s[0] == '-');
	uint64_t sign = n && s[0] == '-' ? ffmt_sign(f) : 0, r;
	bool halfway;
	double x;

	if (ieq(s + i, n - i, "nan")) {
		*bits = sign | ffmt_qnan(f);
		return NUM_OK;
	}
	if (ieq(s + i, n - i, "inf") || ieq(s + i, n - i, "infinity")) {
		*bits = sign | ffmt_exp(f);
		return NUM_OK;
	}
	/* the bits carry the sign: "+" is harmless, "-" contradicts */
	if (!sign && n - i > 3 && ieq(s + i, 3, "nan"))
		return parse_nan_bits(f, s + i, n - i, bits);
	if (!is_decimal(s, n) || n >= sizeof(buf))
		return NUM_BAD;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (f == &view_f32) {
		uint32_t b = f32_bits(strtof(buf, NULL));

		*bits = b;
		return (b & 0x7f800000) == 0x7f800000 ? NUM_RANGE : NUM_OK;
	}
	x = strtod(buf, NULL);
	if (!dbl_finite(x))
		return NUM_RANGE;
	if (f == &view_f64) {
		*bits = f64_bits(x);
		return NUM_OK;
	}
	r = narrow(f, x, 0, &halfway);
	if (halfway) {
		int c = decimal_cmp(buf, x < 0 ? -x : x);

		if (c)
			r = narrow(f, x, c, &halfway);
	}
	*bits = r;
	return (r & ffmt_exp(f)) == ffmt_exp(f) ? NUM_RANGE : NUM_OK;
}

/*
 * RE+IMj, RE-IMj, IMj or RE, optionally in parentheses (numpy and Python
 * print them so).  The parts split at the last sign that does not follow
 * an exponent's 'e' (hex NaN bits never contain a sign).
 */
static int parse_complex(const struct ffmt *f, const char *s, size_t n,
			 uint64_t *re, uint64_t *im)
{
	size_t split = 0;
	bool imag;
	int rc, rc2;

	if (n >= 2 && s[0] == '(' && s[n - 1] == ')') {
		s++;
		n -= 2;
	}
	imag = n && (s[n - 1] == 'j' || s[n - 1] == 'J');
	for (size_t i = n; i-- > 1;)
		if ((s[i] == '+' || s[i] == '-') &&
		    s[i - 1] != 'e' && s[i - 1] != 'E') {
			split = i;
			break;
		}
	if (split && !imag)
		return NUM_BAD;
	if (!imag) {
		*im = 0;
		return parse_float(f, s, n, re);
	}
	if (!split) {
		*re = 0;
		return parse_float(f, s, n - 1, im);
	}
	rc = parse_float(f, s, split, re);
	rc2 = parse_float(f, s + split, n - 1 - split, im);
	/* garbage in either part first: "1+xj" is not a number at all */
	if (rc == NUM_BAD || rc2 == NUM_BAD)
		return NUM_BAD;
	return rc ? rc : rc2;
}

/* An int of @size bytes, two's complement if @is_signed, into *@bits. */
static int parse_int(const char *s, size_t n, unsigned size, bool is_signed,
		     uint64_t *bits)
{
	uint64_t mag = 0, max;
	bool neg = n && s[0] == '-', over = false;
	size_t i = n && (s[0] == '-' || s[0] == '+');

	if (i == n)
		return NUM_BAD;
	for (; i < n; i++) {
		unsigned dig = (unsigned)(s[i] - '0');

		if (!is_digit(s[i]))
			return NUM_BAD;
		/* past UINT64_MAX: remember, but keep checking the syntax */
		if (mag > UINT64_MAX / 10 ||
		    (mag == UINT64_MAX / 10 && dig > UINT64_MAX % 10))
			over = true;
		else
			mag = mag * 10 + dig;
	}
	max = size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
	if (is_signed)
		max >>= 1;
	if (over || (neg && mag && !is_signed) ||
	    mag > max + (neg && is_signed))
		return NUM_RANGE;
	*bits = neg ? (uint64_t)0 - mag : mag;
	return NUM_OK;
}

/* The token in @p->tok as an element of @p->dt into @dst. */
static int parse_elem(const struct view_parser *p, unsigned char *dst)
{
	const struct ckpt_dtype *dt = p->dt;
	const char *s = p->tok;
	size_t n = p->toklen;
	uint64_t v = 0, im = 0;
	const struct ffmt *f;
	int rc;

	switch (view_kind_of(dt)) {
	case VIEW_FLOAT:
		rc = parse_float(view_ffmt_of(dt), s, n, &v);
		break;
	case VIEW_COMPLEX:
		f = view_ffmt_of(dt);
		rc = parse_complex(f, s, n, &v, &im);
		if (!rc) {
			ord_store(dst, f->size, p->big, v);
			ord_store(dst + f->size, f->size, p->big, im);
		}
		return rc;
	case VIEW_INT:
		rc = parse_int(s, n, dt->size, true, &v);
		break;
	case VIEW_UINT:
		rc = parse_int(s, n, dt->size, false, &v);
		break;
	case VIEW_BOOL:
		if (ieq(s, n, "1") || ieq(s, n, "true"))
			v = 1;
		else if (!ieq(s, n, "0") && !ieq(s, n, "false"))
			return NUM_BAD;
		rc = NUM_OK;
		break;
	default:
		/* RAW: the value of its bytes in storage order, always */
		rc = parse_int(s, n, dt->size, false, &v);
		if (!rc)
			ord_store(dst, dt->size, false, v);
		return rc;
	}
	if (!rc)
		ord_store(dst, dt->size, p->big, v);
	return rc;
}

/* ---- the streaming parser ---- */

void view_parser_init(struct view_parser *p, const struct ckpt_dtype *dt,
		      bool big, uint64_t numel)
{
	memset(p, 0, sizeof(*p));
	p->dt = dt;
	p->big = big;
	p->want = numel;
	p->line = 1;
	p->bol = true;
}

/* The token for a message: at most 32 bytes, unprintables escaped. */
static const char *shown(const struct view_parser *p, char *buf)
{
	size_t o = 0, n = p->toklen < 32 ? p->toklen : 32;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p->tok[i];

		if (c < 0x20 || c >= 0x7f || c == '\\')
			o += (size_t)sprintf(buf + o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	strcpy(buf + o, p->toklen > n ? "..." : "");
	return buf;
}

/* "an int8", "a uint8", "a float32" */
static const char *article(const struct ckpt_dtype *dt)
{
	return strchr("aeio", dt->name[0]) ? "an " : "a ";
}

/* "line 3: 'x1' is not a float32" and the like, at the token. */
static int bad_token(const struct view_parser *p, struct diag *d,
		     const char *what, const char *art)
{
	char buf[32 * 4 + 4];

	return diag_set(d, -EINVAL, p->tokpos, "line %" PRIu64 ": '%s' %s %s%s",
			p->line, shown(p, buf), what, art, p->dt->name);
}

/* The token is complete: one more number, stored at @dst. */
static int finish(struct view_parser *p, unsigned char *dst, struct diag *d)
{
	int rc;

	if (p->count >= p->want)
		return diag_set(d, -EINVAL, p->tokpos, "line %" PRIu64
				": too many values, the tensor has %" PRIu64,
				p->line, p->want);
	rc = parse_elem(p, dst);
	if (rc == NUM_BAD)
		return bad_token(p, d, "is not", article(p->dt));
	if (rc == NUM_RANGE)
		return bad_token(p, d, "is out of range for", "");
	p->count++;
	p->toklen = 0;
	return 0;
}

static bool is_sep(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ',' ||
	       c == '\v' || c == '\f';
}

int view_parse(struct view_parser *p, const char *buf, size_t len,
	       bool last, unsigned char *out, size_t *nout, struct diag *d)
{
	size_t stored = 0;
	int rc = 0;

	for (size_t i = 0; i < len; i++, p->pos++) {
		char c = buf[i];

		if (p->comment) {
			if (c == '\n') {
				p->comment = false;
				p->bol = true;
				p->line++;
			}
			continue;
		}
		if (is_sep(c)) {
			if (p->toklen) {
				rc = finish(p, out + stored, d);
				if (rc < 0)
					goto out;
				stored += p->dt->size;
			}
			if (c == '\n') {
				p->bol = true;
				p->line++;
			}
			continue;
		}
		if (c == '#' && p->bol) {
			p->comment = true;
			continue;
		}
		p->bol = false;
		if (!p->toklen)
			p->tokpos = p->pos;
		/* the longest number printed is far shorter */
		if (p->toklen == sizeof(p->tok) - 1) {
			rc = bad_token(p, d, "is too long for", article(p->dt));
			goto out;
		}
		p->tok[p->toklen++] = c;
	}
	if (!last)
		goto out;
	if (p->toklen) {
		rc = finish(p, out + stored, d);
		if (rc < 0)
			goto out;
		stored += p->dt->size;
	}
	if (p->count != p->want)
		rc = diag_set(d, -EINVAL, p->pos, "%" PRIu64 " values, the "
			      "tensor has %" PRIu64, p->count, p->want);
out:
	*nout = stored;
	return rc;
}
