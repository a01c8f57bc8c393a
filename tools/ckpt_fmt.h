/*
 * ckpt_fmt.h - how the tools show parts of the model (ptls, ptdump):
 * shapes, flags and values as text, keys, values and tensors as JSON.
 */
#ifndef PT_TOOLS_FMTOUT_H
#define PT_TOOLS_FMTOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt;
struct ckpt_coded;
struct ckpt_node;
struct ckpt_storage;
struct ckpt_tensor;
struct jw;

/* "(16, 8)", "(3,)", "()" into @buf; fmt_dims_len() is its strlen. */
void fmt_dims(char *buf, size_t size, const int64_t *v, int n);
int fmt_dims_len(const int64_t *v, int n);

/* "param grad strided ..." or "-" (in @buf, at least 80 bytes). */
const char *fmt_flags(const struct ckpt_tensor *t, char *buf, size_t n);

/* A value for one cell: at most 72 characters, escaped (@out >= 330). */
void fmt_printable(char *out, const struct ckpt_node *n);

/*
 * JSON: how @n is reached from its parent (a str, an int, {"attr": ..},
 * {"part": ..}, {"repr": ..}); its python value; its tensor's fields
 * (",\"tensor\":N,\"dtype\":..." to append inside an object; the
 * "shard" it is read from in a sharded folder).
 */
void fmt_json_key(struct jw *w, const struct ckpt_node *n);
/* What the listings call @t's type and shape: a coded tensor's coding
 * and values' shape (ckpt_coded(): "Q8_0" (4096, 4096); then true, *@k
 * filled), else its dtype and shape. */
bool fmt_shown(const struct ckpt *c, const struct ckpt_tensor *t,
	       const char **type, int *ndim, const int64_t **shape,
	       struct ckpt_coded *k);
void fmt_json_value(struct jw *w, const struct ckpt_node *n);
void fmt_json_tensor(struct jw *w, const struct ckpt *c,
		     const struct ckpt_tensor *t);
/* A storage's key, then ",\"dtype\":..." up to its "device" (ptls and
 * ptdump add their own fields after it). */
void fmt_json_storage(struct jw *w, const struct ckpt_storage *s);

/* What a JSON node calls @n: "container", "tensor", "value", "object" or
 * "link". */
const char *fmt_json_kind(const struct ckpt_node *n);

/* "\"name\":...,\"key\":...,\"kind\":..." of @n (the root: "", null). */
void fmt_json_name(struct jw *w, const struct ckpt_node *n);

/*
 * ",\"type\":..." and what @n holds: a tensor's fields, a value, an
 * object's repr or a link's target (to append inside an object).
 */
void fmt_json_content(struct jw *w, const struct ckpt *c,
		      const struct ckpt_node *n);

/*
 * A safetensors file's __metadata__: as text, one "# metadata KEY: VALUE"
 * line each (escaped as fmt_printable() escapes); as JSON, ",\"metadata\":
 * {...}" to append inside an object, or null for formats without it.
 */
void fmt_meta_text(const struct ckpt *c);
void fmt_json_meta(struct jw *w, const struct ckpt *c);

#endif
