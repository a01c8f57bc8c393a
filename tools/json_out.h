/*
 * json_out.h - the few JSON writers the tools need: strings escaped so the
 * output is always valid UTF-8 JSON, whatever bytes a key holds.
 */
#ifndef PT_TOOLS_JSON_OUT_H
#define PT_TOOLS_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Write @s[0..@n) as a JSON string; invalid UTF-8 bytes become \u00XX. */
void json_str(FILE *f, const char *s, size_t n);

/* Write @v in decimal (no printf: it is the hot path of --json). */
void json_u64(FILE *f, uint64_t v);
void json_i64(FILE *f, int64_t v);

/* Same for a NUL-terminated string; NULL prints null. */
void json_cstr(FILE *f, const char *s);

#endif
