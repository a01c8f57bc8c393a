/*
 * view_text.c - the text view of a tensor (view.h has the layout): a
 * "# dtype (shape)" comment line, then one line per row along the last
 * dimension, every number printed so that it parses back to the same
 * bits, and the streaming parser that reads such text back when a view is
 * written.  Numbers use the C locale's "." (the core never calls
 * setlocale); NaN payloads travel as "nan(0xBITS)".
 */
#include "view/view.h"
#include "util/le.h"

#include "diag/diag.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An IEEE-style binary format and the printf precision that round-trips
 * it (Matula: the smallest n with 10^(n-1) > 2^(mbits+1)). */
struct ffmt {
	unsigned size;
	int mbits, ebits;
	int prec;
};

static const struct ffmt f16 = { 2, 10, 5, 5 };
static const struct ffmt bf16 = { 2, 7, 8, 4 };
static const struct ffmt f32 = { 4, 23, 8, 9 };
static const struct ffmt f64 = { 8, 52, 11, 17 };

/* The format of a FLOAT element or of one COMPLEX component. */
static const struct ffmt *ffmt_of(const struct ckpt_dtype *dt)
{
	unsigned size = dt->size;

	if (view_kind_of(dt) == VIEW_COMPLEX)
		size /= 2;	/* complex32's parts are float16 */
	else if (!strcmp(dt->name, "bfloat16"))
		return &bf16;
	return size == 2 ? &f16 : size == 4 ? &f32 : &f64;
}

static uint64_t sign_bit(const struct ffmt *f)
{
	return UINT64_C(1) << (f->mbits + f->ebits);
}

static uint64_t exp_mask(const struct ffmt *f)
{
	return ((UINT64_C(1) << f->ebits) - 1) << f->mbits;
}

static uint64_t frac_mask(const struct ffmt *f)
{
	return (UINT64_C(1) << f->mbits) - 1;
}

/* The default quiet NaN, positive. */
static uint64_t quiet_nan(const struct ffmt *f)
{
	return exp_mask(f) | UINT64_C(1) << (f->mbits - 1);
}

static bool dbl_finite(double x)
{
	return ((f64_bits(x) >> 52) & 0x7ff) != 0x7ff;
}

/* ---- rendering ---- */

/* A finite value's bits as a double (exact for every format here). */
static double value_of(const struct ffmt *f, uint64_t bits)
{
	if (f == &f16)
		return view_f16_to_f32((uint16_t)bits);
	if (f == &bf16)
		return view_bf16_to_f32((uint16_t)bits);
	if (f == &f32)
		return f32_of((uint32_t)bits);
	return f64_of(bits);
}

/* One float into @buf (32 bytes); its length. */
static int format_float(const struct ffmt *f, uint64_t bits, char *buf)
{
	uint64_t neg = bits & sign_bit(f);

	if ((bits & exp_mask(f)) == exp_mask(f)) {
		if (!(bits & frac_mask(f)))
			return snprintf(buf, 32, "%s", neg ? "-inf" : "inf");
		if ((bits & ~neg) == quiet_nan(f))
			return snprintf(buf, 32, "%s", neg ? "-nan" : "nan");
		return snprintf(buf, 32, "nan(0x%" PRIx64 ")", bits);
	}
	return snprintf(buf, 32, "%.*g", f->prec, value_of(f, bits));
}

/* One element into @out, without its separator; its length (< 63). */
static size_t format_elem(const struct ckpt_dtype *dt, enum view_kind kind,
			  bool big, const unsigned char *p, char *out)
{
	const struct ffmt *f;
	struct view_num v;
	char im[32];
	int n;

	switch (kind) {
	case VIEW_FLOAT:
		return (size_t)format_float(ffmt_of(dt), ord_load(p, dt->size, big),
					    out);
	case VIEW_COMPLEX:
		f = ffmt_of(dt);
		n = format_float(f, ord_load(p, f->size, big), out);
		format_float(f, ord_load(p + f->size, f->size, big), im);
		n += sprintf(out + n, "%s%sj", im[0] == '-' ? "" : "+", im);
		return (size_t)n;
	case VIEW_INT:
		view_get(dt, big, p, &v);
		return (size_t)sprintf(out, "%" PRId64, v.i);
	default:
		view_get(dt, big, p, &v);
		return (size_t)sprintf(out, "%" PRIu64, v.u);
	}
}

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
	enum view_kind kind = view_kind_of(dt);
	uint64_t row = ndim > 0 ? (uint64_t)shape[ndim - 1] : 1;
	uint64_t col = row ? first % row : 0;
	char *o = out;

	for (uint64_t i = 0; i < n; i++, data += dt->size) {
		o += format_elem(dt, kind, big, data, o);
		if (++col >= row) {
			*o++ = '\n';
			col = 0;
		} else {
			*o++ = ' ';
		}
	}
	return (size_t)(o - out);
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
	uint64_t b = f64_bits(x), sign = (b >> 63) ? sign_bit(f) : 0;
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
	return sign | (q >= exp_mask(f) ? exp_mask(f) : q);
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
	if ((v & exp_mask(f)) != exp_mask(f) || !(v & frac_mask(f)))
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
	uint64_t sign = n && s[0] == '-' ? sign_bit(f) : 0, r;
	bool halfway;
	double x;

	if (ieq(s + i, n - i, "nan")) {
		*bits = sign | quiet_nan(f);
		return NUM_OK;
	}
	if (ieq(s + i, n - i, "inf") || ieq(s + i, n - i, "infinity")) {
		*bits = sign | exp_mask(f);
		return NUM_OK;
	}
	/* the bits carry the sign: "+" is harmless, "-" contradicts */
	if (!sign && n - i > 3 && ieq(s + i, 3, "nan"))
		return parse_nan_bits(f, s + i, n - i, bits);
	if (!is_decimal(s, n) || n >= sizeof(buf))
		return NUM_BAD;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (f == &f32) {
		uint32_t b = f32_bits(strtof(buf, NULL));

		*bits = b;
		return (b & 0x7f800000) == 0x7f800000 ? NUM_RANGE : NUM_OK;
	}
	x = strtod(buf, NULL);
	if (!dbl_finite(x))
		return NUM_RANGE;
	if (f == &f64) {
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
	return (r & exp_mask(f)) == exp_mask(f) ? NUM_RANGE : NUM_OK;
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
		rc = parse_float(ffmt_of(dt), s, n, &v);
		break;
	case VIEW_COMPLEX:
		f = ffmt_of(dt);
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
