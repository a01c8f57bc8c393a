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

/* A shard size as huggingface_hub's parse_size_to_int() reads one (and
 * so ptrepack --max-shard-size and ptfs -o shards=): a number, then KB,
 * MB, GB, TB (powers of 1000) or KiB ... TiB (of 1024), any case, or
 * none (bytes); at least 1.  False for anything else. */
bool util_parse_shard_size(const char *s, uint64_t *out);

#endif
