/*
 * pickle_asm.h - a tiny pickle assembler for the model's Criterion tests
 * (test_ckpt.c, test_ckpt_formats.c): protocol 2 opcodes appended to a
 * zip_builder.h buffer, and torch.save's rebuild call of a tensor, so a
 * test can build the exact pickle a case needs, hostile ones included,
 * and the archive around it (write_ckpt()).
 */
#ifndef PT_TESTS_PICKLE_ASM_H
#define PT_TESTS_PICKLE_ASM_H

#include "test_util.h"
#include "zip_builder.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void op(struct buf *b, unsigned char c)
{
	zb_put_bytes(b, &c, 1);
}

/* PROTO 2 */
static inline void pk_start(struct buf *b)
{
	op(b, 0x80);
	op(b, 2);
}

/* BINUNICODE */
static inline void pk_str(struct buf *b, const char *s)
{
	op(b, 'X');
	put_le32(zb_put(b, 4), strlen(s));
	zb_put_bytes(b, s, strlen(s));
}

/* BININT */
static inline void pk_int(struct buf *b, int32_t v)
{
	op(b, 'J');
	put_le32(zb_put(b, 4), (uint32_t)v);
}

/* GLOBAL module\nname\n */
static inline void pk_global(struct buf *b, const char *mod, const char *name)
{
	op(b, 'c');
	zb_put_bytes(b, mod, strlen(mod));
	op(b, '\n');
	zb_put_bytes(b, name, strlen(name));
	op(b, '\n');
}

/* A tuple of @n ints. */
static inline void pk_ints(struct buf *b, const int32_t *v, int n)
{
	op(b, '(');
	for (int i = 0; i < n; i++)
		pk_int(b, v[i]);
	op(b, 't');
}

/*
 * _rebuild_tensor_v2(('storage', torch.@cls, @key, 'cpu', @numel), @off,
 * @size, @stride, @grad, OrderedDict()), as torch.save writes it but for
 * the memo.
 */
static inline void pk_tensor(struct buf *b, const char *cls, const char *key,
			     int32_t numel, int32_t off, const int32_t *size,
			     const int32_t *stride, int ndim, bool grad)
{
	pk_global(b, "torch._utils", "_rebuild_tensor_v2");
	op(b, '(');
	op(b, '(');
	pk_str(b, "storage");
	pk_global(b, "torch", cls);
	pk_str(b, key);
	pk_str(b, "cpu");
	pk_int(b, numel);
	op(b, 't');
	op(b, 'Q');
	pk_int(b, off);
	pk_ints(b, size, ndim);
	pk_ints(b, stride, ndim);
	op(b, grad ? 0x88 : 0x89);
	pk_global(b, "collections", "OrderedDict");
	op(b, ')');
	op(b, 'R');
	op(b, 't');
	op(b, 'R');
}

/* A torch-layout archive "m/..." of data.pkl, version and storages,
 * written to a temporary file (write_tmp()). */
static inline const char *write_ckpt(const struct buf *pkl,
				     const char *version,
				     const struct zent *extra, size_t nextra)
{
	struct zent ents[ZMAX];
	struct zopt o = { .torch = true };
	struct zinfo info;
	struct buf out;
	size_t n = 0;
	const char *path;

	ents[n++] = (struct zent){ "m/data.pkl", pkl->p, pkl->len, false };
	for (size_t i = 0; i < nextra; i++)
		ents[n++] = extra[i];
	if (version)
		ents[n++] = (struct zent){ "m/version", version,
					   strlen(version), false };
	zb_build(&out, ents, n, &o, &info);
	path = write_tmp(out.p, out.len);
	free(out.p);
	return path;
}

#endif
