/*
 * pkl_textnum.c - the numbers of the protocol 0 text opcodes, read as
 * CPython's C unpickler (Modules/_pickle.c, what torch.load runs) reads
 * them: INT as C strtol(s, &end, 0) and else PyLong_FromString(s, NULL,
 * 0), LONG as PyLong_FromString(s, NULL, 0) once a trailing 'L' is gone,
 * GET and PUT as PyLong_FromString(s, NULL, 10) (Objects/longobject.c),
 * FLOAT as PyOS_string_to_double() (Python/pystrtod.c, dtoa.c).  Each
 * works on a NUL-terminated copy of the line, so a NUL ends the text.
 * tests/unit/pkl_text_cases.py holds these to a CPython, case by case.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS	4300	/* sys.int_info.default_max_str_digits */
/* Each chunk of 9 digits adds less than one 32-bit limb. */
#define MAX_LIMBS	(MAX_DIGITS / 9 + 2)
/* dtoa.c's MAX_DIGITS: longer mantissas are a parse error there */
#define DTOA_MAX_DIGITS	1000000000u

static int bad(const char **why, const char *reason)
{
	*why = reason;
	return -EILSEQ;
}

/* Py_ISSPACE(), and isspace() in the C and UTF-8 locales: six bytes. */
static bool is_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* _PyLong_DigitValue[]: 0-9, then a-z (either case) as 10-35, else 37. */
static unsigned digit_value(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	return 37;
}

/* How much of @s[0..@n) a function reading a C string sees. */
static size_t c_len(const unsigned char *s, size_t n)
{
	const unsigned char *z = memchr(s, 0, n);

	return z ? (size_t)(z - s) : n;
}

/*
 * Magnitude bytes @b[0..@nb) (little-endian, the top one 0 and spare) as
 * minimal two's complement of the signed value, in *@out (takes @b).
 */
static void to_twos(unsigned char *b, size_t nb, bool neg,
		    struct pkl_text_int *out)
{
	if (neg) {
		unsigned carry = 1;

		for (size_t j = 0; j < nb; j++) {
			carry += (unsigned char)~b[j];
			b[j] = (unsigned char)carry;
			carry >>= 8;
		}
	}
	while (nb > 1 && ((b[nb - 1] == 0 && !(b[nb - 2] & 0x80)) ||
			  (b[nb - 1] == 0xff && (b[nb - 2] & 0x80))))
		nb--;
	b[nb] = 0;
	out->kind = PKL_BIGINT;
	out->big = b;
	out->nbig = nb;
}

/* The decimal digits of @s[0..@n) (underscores skipped), at most 4300. */
static int decimal_big(const unsigned char *s, size_t n, bool neg,
		       struct pkl_text_int *out)
{
	unsigned char dg[MAX_DIGITS];
	uint32_t limb[MAX_LIMBS];
	size_t nd = 0, nl = 0, nb, k = 0;
	unsigned char *b;

	for (size_t j = 0; j < n; j++)
		if (s[j] != '_')
			dg[nd++] = (unsigned char)(s[j] - '0');
	while (k < nd) {
		size_t chunk = (nd - k) % 9 ? (nd - k) % 9 : 9;
		uint64_t carry = 0, mul = 1;

		for (size_t j = 0; j < chunk; j++) {
			carry = carry * 10 + dg[k + j];
			mul *= 10;
		}
		k += chunk;
		for (size_t j = 0; j < nl; j++) {
			uint64_t t = (uint64_t)limb[j] * mul + carry;

			limb[j] = (uint32_t)t;
			carry = t >> 32;
		}
		if (carry)
			limb[nl++] = (uint32_t)carry;
	}
	nb = 4 * nl + 1;
	b = malloc(nb + 1);
	if (!b)
		return -ENOMEM;
	for (size_t j = 0; j < nb - 1; j++)
		b[j] = (unsigned char)(limb[j / 4] >> (8 * (j % 4)));
	b[nb - 1] = 0;
	to_twos(b, nb, neg, out);
	return 0;
}

/*
 * The digits of @s[0..@n) in base 2, 8 or 16 (@shift bits a digit), any
 * number of them, as CPython takes them: only PKL_MAX_LONG bytes of
 * result bound them, as LONG1/LONG4's are.
 */
static int binary_big(const unsigned char *s, size_t n, unsigned shift,
		      bool neg, struct pkl_text_int *out, const char **why)
{
	size_t k = 0, nd = 0, nb = 0, cap;
	unsigned acc = 0, have = 0;
	unsigned char *b;

	while (k < n && (s[k] == '0' || s[k] == '_'))
		k++;
	for (size_t j = k; j < n; j++)
		nd += s[j] != '_';
	/* before the allocation: a line may hold millions of digits */
	if (nd / 8 * shift > PKL_MAX_LONG)
		return bad(why, "integer of more than PKL_MAX_LONG bytes");
	cap = (nd * shift + 7) / 8 + 1;
	b = malloc(cap + 1);
	if (!b)
		return -ENOMEM;
	for (size_t j = n; j-- > k;) {
		if (s[j] == '_')
			continue;
		acc |= digit_value(s[j]) << have;
		have += shift;
		if (have >= 8) {
			b[nb++] = (unsigned char)acc;
			acc >>= 8;
			have -= 8;
		}
	}
	if (have)
		b[nb++] = (unsigned char)acc;
	memset(b + nb, 0, cap - nb);
	to_twos(b, cap, neg, out);
	if (out->nbig > PKL_MAX_LONG) {
		free(out->big);
		out->big = NULL;
		return bad(why, "integer of more than PKL_MAX_LONG bytes");
	}
	return 0;
}

/*
 * PyLong_FromString(s, NULL, @base) of the C string @s[0..@n), @base 0
 * (a 0x/0o/0b prefix, else decimal without leading zeros) or 10:
 * whitespace around it, a sign, single underscores between digits (and
 * one after a prefix), at most 4300 decimal digits.
 */
static int py_long(const unsigned char *s, size_t n, unsigned base,
		   struct pkl_text_int *out, const char **why)
{
	size_t k = 0, start, end, digits = 0;
	bool neg = false, zero_only = false, over = false;
	uint64_t mag = 0;
	unsigned char prev = 0;

	while (k < n && is_space(s[k]))
		k++;
	if (k < n && (s[k] == '+' || s[k] == '-'))
		neg = s[k++] == '-';
	if (base == 0) {
		unsigned char c = k + 1 < n ? s[k + 1] | 0x20 : 0;

		if (k >= n || s[k] != '0')
			base = 10;
		else if (c == 'x' || c == 'o' || c == 'b')
			base = c == 'x' ? 16 : c == 'o' ? 8 : 2;
		else	/* "old" C octal: only zero is fine */
			base = 10, zero_only = true;
		if (base != 10) {
			k += 2;
			if (k < n && s[k] == '_')
				k++;
		}
	}
	if (k < n && s[k] == '_')
		return bad(why, "underscore before the digits");
	for (start = k; k < n && (digit_value(s[k]) < base || s[k] == '_');
	     k++) {
		if (s[k] == '_' && prev == '_')
			return bad(why, "two underscores in an integer");
		if (s[k] != '_') {
			unsigned d = digit_value(s[k]);

			digits++;
			if (mag > (UINT64_MAX - d) / base)
				over = true;
			mag = mag * base + d;
		}
		prev = s[k];
	}
	end = k;
	if (prev == '_')
		return bad(why, "underscore after the digits");
	if (base == 10 && digits > MAX_DIGITS)
		return bad(why, "more than 4300 digits");
	if (!digits)
		return bad(why, "not an integer");
	if (zero_only && (over || mag))
		return bad(why, "nonzero decimal integer with a leading 0");
	while (k < n && is_space(s[k]))
		k++;
	if (k != n)
		return bad(why, "not an integer");
	if (!over && mag <= (neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX)) {
		/* Negate in unsigned arithmetic: -2^63 has no positive twin. */
		mag = neg ? 0 - mag : mag;
		out->kind = PKL_INT;
		memcpy(&out->i, &mag, sizeof(out->i));
		return 0;
	}
	if (base == 10)
		return decimal_big(s + start, end - start, neg, out);
	return binary_big(s + start, end - start,
			  base == 16 ? 4 : base == 8 ? 3 : 1, neg, out, why);
}

/*
 * C strtol(s, &end, 0) of the C string @s[0..@n) as glibc does it (a
 * 64-bit long): true when it takes all of it without overflow, *@v the
 * value.  No digits leave end at @s, so an empty string is 0.
 */
static bool strtol_whole(const unsigned char *s, size_t n, int64_t *v)
{
	uint64_t mag = 0, lim;
	unsigned base = 10;
	size_t k = 0, start;
	bool neg = false;

	*v = 0;
	if (!n)
		return true;
	while (k < n && is_space(s[k]))
		k++;
	if (k < n && (s[k] == '+' || s[k] == '-'))
		neg = s[k++] == '-';
	if (k < n && s[k] == '0') {
		/* "0x" without a hex digit is the number 0, end at the x */
		base = 8;
		if (k + 2 < n && (s[k + 1] | 0x20) == 'x' &&
		    digit_value(s[k + 2]) < 16) {
			base = 16;
			k += 2;
		}
	}
	lim = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
	for (start = k; k < n && digit_value(s[k]) < base; k++) {
		unsigned d = digit_value(s[k]);

		if (mag > (lim - d) / base)
			return false;	/* ERANGE */
		mag = mag * base + d;
	}
	if (k == start || k != n)
		return false;
	mag = neg ? 0 - mag : mag;
	memcpy(v, &mag, sizeof(*v));
	return true;
}

int pkl_text_int(const unsigned char *s, size_t n, int how,
		 struct pkl_text_int *out, const char **why)
{
	size_t line = n;
	int64_t v;

	*out = (struct pkl_text_int){ 0 };
	/* _pickle.c: a line of just "\n" is truncated data */
	if (!n)
		return bad(why, "empty argument");
	if (how == PKL_TEXT_LONG && s[n - 1] == 'L')
		n--;
	n = c_len(s, n);
	if (how == PKL_TEXT_INT && strtol_whole(s, n, &v)) {
		/* protocol 0's False and True are "00" and "01" */
		out->kind = line == 2 && (v == 0 || v == 1) ? PKL_BOOL
							    : PKL_INT;
		out->i = v;
		return 0;
	}
	return py_long(s, n, how == PKL_TEXT_KEY ? 10 : 0, out, why);
}

/* "inf", "infinity" or "nan" (any case) after an optional sign. */
static int inf_or_nan(const unsigned char *s, size_t n, double *f,
		      const char **why)
{
	static const char inf[] = "infinity";
	uint64_t bits;
	size_t k = 0, m = 0;
	bool neg = false;

	if (k < n && (s[k] == '+' || s[k] == '-'))
		neg = s[k++] == '-';
	while (m < 8 && k + m < n && (s[k + m] | 0x20) == inf[m])
		m++;
	if (m == 3 || m == 8)
		bits = UINT64_C(0x7ff0000000000000);
	else if (n - k == 3 && (s[k] | 0x20) == 'n' &&
		 (s[k + 1] | 0x20) == 'a' && (s[k + 2] | 0x20) == 'n')
		bits = UINT64_C(0x7ff8000000000000), m = 3;
	else
		return bad(why, "not a float");
	if (k + m != n)
		return bad(why, "not a float");
	/* _Py_dg_infinity() and _Py_dg_stdnan() keep the sign */
	bits |= (uint64_t)neg << 63;
	memcpy(f, &bits, sizeof(*f));
	return 0;
}

int pkl_text_float(const unsigned char *s, size_t n, double *f,
		   const char **why)
{
	size_t k = 0, lead = 0, nd = 0, frac = 0, end;
	char *tmp, *stop;
	double x;

	if (!n)
		return bad(why, "empty argument");
	n = c_len(s, n);
	/* dtoa.c's syntax: no whitespace, no underscores, no hex */
	if (k < n && (s[k] == '+' || s[k] == '-'))
		k++;
	for (; k < n && s[k] == '0'; k++)
		lead++;
	for (; k < n && is_digit(s[k]); k++)
		nd++;
	if (k < n && s[k] == '.') {
		for (k++; !nd && k < n && s[k] == '0'; k++)
			lead++, frac++;
		for (; k < n && is_digit(s[k]); k++)
			nd++, frac++;
	}
	if (!nd && !lead)
		return inf_or_nan(s, n, f, why);
	if (nd > DTOA_MAX_DIGITS || frac > DTOA_MAX_DIGITS)
		return bad(why, "float of more than 10^9 digits");
	end = k;
	if (k < n && (s[k] | 0x20) == 'e') {
		k++;
		if (k < n && (s[k] == '+' || s[k] == '-'))
			k++;
		if (k < n && is_digit(s[k])) {
			while (k < n && is_digit(s[k]))
				k++;
			end = k;
		}
	}
	if (end != n)
		return bad(why, "not a float");
	/* What is left is decimal, which strtod rounds as dtoa.c does. */
	tmp = malloc(n + 1);
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	x = strtod(tmp, &stop);
	k = (size_t)(stop - tmp);
	free(tmp);
	if (k != n)	/* a decimal point other than '.' (LC_NUMERIC) */
		return bad(why, "float not read by strtod");
	/* PyOS_string_to_double(): OverflowError, where underflow is 0 */
	if (x > DBL_MAX || x < -DBL_MAX)
		return bad(why, "float out of range");
	*f = x;
	return 0;
}
