/*
 * le.h - decode little- and big-endian integers at named offsets of a byte
 * buffer (never by casting a struct over it: no alignment or padding traps),
 * elements of either byte order, and the IEEE 754 bits of float and double
 * (memcpy: the one way C allows, and free once compiled).
 */
#ifndef PT_UTIL_LE_H
#define PT_UTIL_LE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t le32(const unsigned char *p)
{
	return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

static inline uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline uint64_t be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* An integer of @size (1 to 8) bytes at @p, big- or little-endian: the
 * elements of a tensor in its checkpoint's byte order. */
static inline uint64_t ord_load(const unsigned char *p, unsigned size,
				bool big)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * (big ? size - 1 - i : i));
	return v;
}

/* The low @size bytes of @v at @p in that order. */
static inline void ord_store(unsigned char *p, unsigned size, bool big,
			     uint64_t v)
{
	for (unsigned i = 0; i < size; i++)
		p[big ? size - 1 - i : i] = (unsigned char)(v >> (8 * i));
}

/* The bits of a float or double, and the float or double of bits. */
static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float f32_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint64_t f64_bits(double f)
{
	uint64_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline double f64_of(uint64_t u)
{
	double f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

#endif
