/*
 * json_out.h - the few JSON writers the tools need: strings escaped so the
 * output is always valid UTF-8 JSON, whatever bytes a key holds.
 */
#ifndef PT_TOOLS_JSON_OUT_H
#define PT_TOOLS_JSON_OUT_H

#include <stddef.h>
#include <stdio.h>

/* Write @s[0..@n) as a JSON string; invalid UTF-8 bytes become \u00XX. */
void json_str(FILE *f, const char *s, size_t n);

/* Same for a NUL-terminated string; NULL prints null. */
void json_cstr(FILE *f, const char *s);

#endif
