/*
 * units.h - sizes as people write them on a command line ("256M", "1GiB",
 * "65536"), read the same way by every tool and by ptfs's -o options.
 */
#ifndef PT_UTIL_UNITS_H
#define PT_UTIL_UNITS_H

#include <stdbool.h>
#include <stdint.h>

/* @s as bytes: digits, then K, M or G (powers of 1024), then an optional
 * "i" and "B".  False for anything else, a sign, or an overflow. */
bool util_parse_size(const char *s, uint64_t *out);

#endif
