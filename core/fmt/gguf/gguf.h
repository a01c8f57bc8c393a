/*
 * gguf.h - a GGUF file as ptfs holds it: the header, the typed key/values
 * and the tensor infos (gguf_parse.c), made into the model by ckpt_gguf.c
 * and written by gguf_write.c.  Internal to core/fmt/gguf.
 *
 * A value's bytes stay in the file: each key/value keeps where its value
 * lies, so a write copies what it did not change and the tools render it
 * (gguf_kv_text()) from there.
 */
#ifndef PT_FMT_GGUF_GGUF_H
#define PT_FMT_GGUF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf_types.h"

struct ckpt;
struct ckpt_write_opts;
struct diag;

#define GGUF_MAGIC		"GGUF"
#define GGUF_ALIGN_DEFAULT	32u
#define GGUF_MAX_DIMS		4	/* GGML_MAX_DIMS */
#define GGUF_MAX_NAME		64	/* GGML_MAX_NAME, with its NUL */

/* The value types (gguf.h enum gguf_type). */
enum gguf_vtype {
	GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32,
	GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64,
	GGUF_NVTYPES
};

/* One key/value. */
struct gguf_kv {
	const char *key;	/* NUL-terminated (arena) */
	uint32_t klen;
	uint8_t type;		/* enum gguf_vtype */
	uint8_t atype;		/* GGUF_ARRAY: its elements' type */
	uint64_t count;		/* GGUF_ARRAY: its elements */
	uint64_t at;		/* file offset of the key's length */
	uint64_t val;		/* file offset of the value (after its type;
				   an array's after its element type and
				   count) */
	uint64_t len;		/* the value's bytes from there */
};

/* One tensor info. */
struct gguf_tensor {
	const char *name;	/* NUL-terminated (arena) */
	uint32_t nlen;
	uint32_t ndim;
	uint64_t ne[GGUF_MAX_DIMS];	/* ggml order: ne[0] varies fastest */
	const struct gguf_type *type;
	uint64_t off;		/* in the data section */
	uint64_t nbytes;
	uint64_t at;		/* file offset of its info */
};

struct gguf {
	uint32_t version;	/* 2 or 3 */
	bool big;		/* big-endian (the version reads byte-swapped) */
	uint32_t align;		/* general.alignment, or 32 */
	struct gguf_kv *kv;
	uint64_t nkv;
	struct gguf_tensor *t;
	uint64_t nt;
	uint64_t info_end;	/* where the tensor infos end */
	uint64_t data;		/* file offset of the data section */
	uint64_t data_end;	/* where the last tensor's bytes end */
};

/* Do the first @n bytes of a file look like a GGUF file's? */
bool gguf_head(const unsigned char *h, size_t n);

/*
 * Read the header, key/values and tensor infos of the GGUF file @fd
 * (@size bytes) into @g, names and keys in c->arena.  Everything is
 * checked against the file and against what gguf-py and llama.cpp's
 * reader refuse: known types, at most 4 dimensions, element counts and
 * sizes that do not overflow, rows of whole blocks, unique names and
 * keys, aligned offsets, tensors inside the file that do not overlap.
 * 0 or -errno with @d set (one line, the offset where it went wrong).
 */
int gguf_parse(struct ckpt *c, int fd, uint64_t size, struct gguf *g,
	       struct diag *d);

/* The key/value @key of @g, or NULL. */
const struct gguf_kv *gguf_find(const struct gguf *g, const char *key);

/* Bytes of one value of scalar type @vtype; 0 for a string or an array. */
unsigned gguf_value_size(unsigned vtype);

/* The scalar or string value type named @s (@n bytes: "u32"), or -1
 * (also for "array"). */
int gguf_vtype_by_name(const char *s, size_t n);

/* "u32", "string", "array[string]" ...: @kv's type as the tools show it. */
const char *gguf_type_name(unsigned vtype);

/* The text of one value, and of all of them (c->meta): past these,
 * values are cut ("...", gguf_kv.c). */
#define GGUF_TEXT_MAX		(16u << 20)
#define GGUF_META_MAX		(64u << 20)

/*
 * @kv's value as text, read from @fd: numbers as C prints them back to the
 * same value ("%.9g" for f32), true/false, a string as it is, an array as
 * JSON ([1, 2], ["a", "b"]), cut past @max bytes (at most GGUF_TEXT_MAX;
 * the words that say so take a few dozen more).
 * malloc'd into *@out (*@len bytes, NUL after them).  0 or -errno with @d
 * set.
 */
int gguf_kv_text(const struct gguf *g, int fd, const struct gguf_kv *kv,
		 size_t max, char **out, size_t *len, struct diag *d);

/*
 * gguf_kvset.c: the bytes of a value of type @type ("u32", "string",
 * "array[i32]") written as @text (as gguf_kv_text() writes it: an array
 * as JSON) in byte order @big, appended to @out: what follows the u32
 * value type in the file (an array's element type and count included).
 * 0, or -EINVAL with @d set naming @key.
 */
struct sbuf;
int gguf_kv_encode(const char *key, const char *type, const char *text,
		   size_t len, bool big, struct sbuf *out, struct diag *d);

/* ckpt_gguf.c: does tensor @t's data read as its torch dtype in @g (a
 * plain type, and not BF16 in a big-endian file)?  Else it is bytes. */
bool gguf_plain(const struct gguf *g, const struct gguf_tensor *t);

/* ckpt_gguf.c: the model of the GGUF file c->fd. */
int ckpt_gguf_open(struct ckpt *c, struct diag *d);

/* gguf_write.c: @c (any checkpoint, with its edits) as one GGUF file
 * into @fd, with o->fmt_args (type=, kv=); the descriptor's write. */
int gguf_write(struct ckpt *c, int fd, const struct ckpt_write_opts *o,
	       struct diag *d);

#endif
