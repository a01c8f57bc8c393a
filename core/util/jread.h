/*
 * jread.h - a small, bounded JSON reader (RFC 8259) for the few JSON
 * records checkpoints hold (torch 1.0's model.json).  Values live in an
 * arena the caller owns; nothing is evaluated.
 */
#ifndef PT_UTIL_JREAD_H
#define PT_UTIL_JREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"

#define JREAD_MAX_DEPTH	64

enum jread_kind {
	JREAD_NULL, JREAD_BOOL, JREAD_NUM, JREAD_STR, JREAD_ARR, JREAD_OBJ,
};

struct jread {
	uint8_t kind;		/* enum jread_kind */
	bool b;			/* JREAD_BOOL */
	const char *s;		/* JREAD_STR: decoded, NUL-terminated (may hold
				   NULs); JREAD_NUM: its text */
	size_t n;		/* bytes of s, or items of v */
	struct jread **v;	/* JREAD_ARR items, JREAD_OBJ values */
	const char **keys;	/* JREAD_OBJ keys (decoded) */
};

/*
 * Parse @len bytes of @text (one value, blanks around it) into *@out, all
 * of it in @a.  Returns 0, -ENOMEM, or -EILSEQ with *@err_off and *@why
 * (a static string) saying where and what.
 */
int jread_parse(const char *text, size_t len, struct arena *a,
	       struct jread **out, size_t *err_off, const char **why);

/*
 * Decode the string whose opening quote is at *@p (before @end) into @a
 * (NUL-terminated; *@len bytes, which may hold NULs), for readers that walk
 * JSON of a known shape themselves.  *@p moves past the closing quote, or
 * on -EILSEQ to the fault, with *@why (static) saying what it is; -ENOMEM.
 */
int jread_string(const char **p, const char *end, struct arena *a,
		 const char **out, size_t *len, const char **why);

/* Member @key of object @o (the last one of that name), or NULL. */
const struct jread *jread_get(const struct jread *o, const char *key);

/* @v as an integer: a number, or a string of one (proto3 writes int64 as
 * "12"); false if it is neither or does not fit. */
bool jread_int(const struct jread *v, int64_t *out);

/* @v's string, or NULL when it is not one. */
const char *jread_str(const struct jread *v);

#endif
