/*
 * ckpt_fmt.c - how the tools show parts of the model, in text and in
 * JSON (ptls, ptdump): shapes as Python tuples, tensor flags, values as
 * table cells, and the JSON of a key, a python value and a tensor.
 */
#include "ckpt_fmt.h"

#include "ckpt/ckpt.h"
#include "json_out.h"
#include "pickle/pkl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void fmt_dims(char *buf, size_t size, const int64_t *v, int n)
{
	size_t k = snprintf(buf, size, "(");

	for (int i = 0; i < n && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%" PRId64, i ? ", " : "",
			      v[i]);
	if (k < size)
		snprintf(buf + k, size - k, n == 1 ? ",)" : ")");
}

/* strlen of what fmt_dims() prints, without printing it */
int fmt_dims_len(const int64_t *v, int n)
{
	int len = n == 1 ? 3 : 2;	/* "(" ")" and the 1-tuple's "," */

	for (int i = 0; i < n; i++) {
		uint64_t u = v[i] < 0 ? -(uint64_t)v[i] : (uint64_t)v[i];

		len += (i ? 2 : 0) + (v[i] < 0);
		do
			len++;
		while (u /= 10);
	}
	return len;
}

const char *fmt_flags(const struct ckpt_tensor *t, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s%s%s%s%s", t->parameter ? " param" : "",
		 t->requires_grad ? " grad" : "",
		 t->contiguous ? "" : " strided",
		 t->kind == CKPT_T_QUANTIZED ? " quantized" :
		 t->kind == CKPT_T_META ? " meta" :
		 t->kind == CKPT_T_STORAGE ? " storage" :
		 t->kind == CKPT_T_INLINE ? " numpy" : "",
		 t->conj ? " conj" : "", t->neg ? " neg" : "");
	return buf[0] ? buf + 1 : "-";
}

/*
 * A value for one table cell: at most 72 characters, control characters
 * escaped, bytes as Python shows them (b'..\x00').
 */
/* @len bytes of @text as one cell (a python bytes value as b'...'). */
static void printable(char *out, const char *text, size_t len, bool bytes)
{
	size_t o = 0, i;

	if (bytes)
		o += sprintf(out, "b'");
	for (i = 0; i < len && o < 72; i++) {
		unsigned char c = text[i];

		if (c == '\\' && bytes)
			o += sprintf(out + o, "\\\\");
		else if (c == '\n')
			o += sprintf(out + o, "\\n");
		else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80))
			o += sprintf(out + o, "\\x%02x", c);
		else
			out[o++] = c;
	}
	sprintf(out + o, "%s%s", bytes ? "'" : "", i < len ? "..." : "");
}

void fmt_printable(char *out, const struct ckpt_node *n)
{
	printable(out, n->text, n->textlen, !strcmp(n->type, "bytes"));
}

void fmt_meta_text(const struct ckpt *c)
{
	char k[330], v[330];

	for (uint32_t i = 0; i < c->nmeta; i++) {
		printable(k, c->meta[i].key, c->meta[i].klen, false);
		printable(v, c->meta[i].val, c->meta[i].vlen, false);
		if (c->meta[i].type)
			printf("# metadata %s (%s): %s\n", k, c->meta[i].type,
			       v);
		else
			printf("# metadata %s: %s\n", k, v);
	}
}

void fmt_json_meta(struct jw *w, const struct ckpt *c)
{
	jw_lit(w, ",\"metadata\":");
	if (!ckpt_can(c, CKPT_CAP_FLAT)) {
		jw_lit(w, "null");
		return;
	}
	jw_putc(w, '{');
	for (uint32_t i = 0; i < c->nmeta; i++) {
		const struct ckpt_meta *m = &c->meta[i];

		if (i)
			jw_putc(w, ',');
		jw_str(w, m->key, m->klen);
		jw_putc(w, ':');
		if (!m->type) {
			jw_str(w, m->val, m->vlen);
			continue;
		}
		/* typed: a string as one, else its text is JSON (a scalar
		   nan or inf as a string) */
		jw_lit(w, "{\"type\":");
		jw_cstr(w, m->type);
		jw_lit(w, ",\"value\":");
		if (!strcmp(m->type, "string") || !strcmp(m->val, "nan") ||
		    !strcmp(m->val, "inf") || !strcmp(m->val, "-inf"))
			jw_str(w, m->val, m->vlen);
		else
			jw_add(w, m->val, m->vlen);
		jw_putc(w, '}');
	}
	jw_putc(w, '}');
}

void fmt_json_key(struct jw *w, const struct ckpt_node *n)
{
	const struct pkl_value *k = n->key;
	size_t len;
	char *text;

	if (n->step == CKPT_S_INDEX) {
		jw_u64(w, n->index);
		return;
	}
	if (n->step == CKPT_S_PART) {
		jw_lit(w, "{\"part\":");
		jw_cstr(w, n->name);
		jw_lit(w, "}");
		return;
	}
	if (n->step == CKPT_S_ATTR)
		jw_lit(w, "{\"attr\":");
	if (k->kind == PKL_STR || k->kind == PKL_STRING) {
		jw_str(w, k->u.s.p, k->u.s.n);
	} else if (k->kind == PKL_INT) {
		jw_i64(w, k->u.i);
	} else {
		text = ckpt_repr(k, 256, &len);
		jw_lit(w, "{\"repr\":");
		jw_str(w, text ? text : "?", text ? len : 1);
		jw_lit(w, "}");
		free(text);
	}
	if (n->step == CKPT_S_ATTR)
		jw_lit(w, "}");
}

static void json_dims(struct jw *w, const int64_t *v, int n)
{
	jw_putc(w, '[');
	for (int i = 0; i < n; i++) {
		if (i)
			jw_putc(w, ',');
		jw_i64(w, v[i]);
	}
	jw_putc(w, ']');
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

void fmt_json_value(struct jw *w, const struct ckpt_node *n)
{
	const struct pkl_value *v = n->val;

	if (v->kind == PKL_INT || v->kind == PKL_BIGINT) {
		jw_add(w, n->text, n->textlen);
	} else if (v->kind == PKL_FLOAT) {
		if (strchr(n->text, 'n'))	/* nan, inf */
			jw_cstr(w, n->text);
		else
			jw_puts(w, n->text);
	} else if (v->kind == PKL_BOOL) {
		jw_puts(w, v->u.i ? "true" : "false");
	} else if (v->kind == PKL_NONE) {
		jw_lit(w, "null");
	} else {
		jw_str(w, n->text, n->textlen);
	}
}

/* The view of @t: dtype, shape, stride, offset, storage, size. */
static void json_view(struct jw *w, const struct ckpt_tensor *t)
{
	jw_lit(w, "\"dtype\":\"");
	jw_puts(w, t->dtype->name);
	jw_lit(w, "\",\"shape\":");
	json_dims(w, t->shape, t->ndim);
	jw_lit(w, ",\"stride\":");
	json_dims(w, ckpt_tensor_stride(t), t->ndim);
	jw_lit(w, ",\"offset\":");
	jw_u64(w, t->offset);
	jw_lit(w, ",\"storage\":");
	jw_cstr(w, t->storage ? t->storage->key : NULL);
	jw_lit(w, ",\"nbytes\":");
	jw_u64(w, ckpt_tensor_nbytes(t));
}

static void json_tensor_extra(struct jw *w, const struct ckpt_tensor *t)
{
	if (t->conj || t->neg)
		jw_printf(w, ",\"conj\":%s,\"neg\":%s",
			  t->conj ? "true" : "false",
			  t->neg ? "true" : "false");
	if (t->x->cls) {
		jw_lit(w, ",\"class\":");
		jw_cstr(w, t->x->cls);
	}
	if (t->x->qscheme) {
		char sc[40];

		jw_lit(w, ",\"qscheme\":");
		jw_cstr(w, t->x->qscheme);
		if (t->x->qscales) {
			jw_lit(w, ",\"q_scales\":{");
			json_view(w, t->x->qscales);
			jw_lit(w, "},\"q_zero_points\":{");
			json_view(w, t->x->qzeros);
			jw_printf(w, "},\"q_axis\":%" PRId64, t->x->axis);
		} else
			jw_printf(w, ",\"q_scale\":%s,\"q_zero_point\":%"
				  PRId64, ckpt_float_repr(t->x->scale, sc,
							  sizeof(sc)),
				  t->x->zero_point);
	}
}

void fmt_json_storage(struct jw *w, const struct ckpt_storage *s)
{
	jw_cstr(w, s->key);
	jw_lit(w, ",\"dtype\":\"");
	jw_puts(w, s->dtype->name);
	jw_lit(w, "\",\"untyped\":");
	jw_puts(w, tf(s->untyped));
	jw_lit(w, ",\"numel\":");
	jw_u64(w, s->numel);
	jw_lit(w, ",\"nbytes\":");
	jw_u64(w, s->nbytes);
	jw_lit(w, ",\"device\":");
	jw_cstr(w, s->location);
}

bool fmt_shown(const struct ckpt *c, const struct ckpt_tensor *t,
	       const char **type, int *ndim, const int64_t **shape,
	       struct ckpt_coded *k)
{
	bool coded = ckpt_coded(c, t, k);

	*type = coded ? k->name : t->dtype->name;
	*ndim = coded ? k->ndim : t->ndim;
	*shape = coded ? k->shape : t->shape;
	return coded;
}

void fmt_json_tensor(struct jw *w, const struct ckpt *c,
		     const struct ckpt_tensor *t)
{
	const struct ckpt_shard *sh = ckpt_tensor_shard(c, t);
	struct ckpt_coded k;

	jw_lit(w, ",\"tensor\":");
	jw_u64(w, t->index);
	jw_putc(w, ',');
	json_view(w, t);
	if (ckpt_coded(c, t, &k)) {	/* its bytes above, its values here */
		jw_lit(w, ",\"coding\":");
		jw_cstr(w, k.name);
		jw_lit(w, ",\"values_shape\":");
		json_dims(w, k.shape, k.ndim);
	}
	jw_lit(w, ",\"device\":");
	jw_cstr(w, ckpt_tensor_device(t));
	jw_lit(w, ",\"requires_grad\":");
	jw_puts(w, tf(t->requires_grad));
	jw_lit(w, ",\"parameter\":");
	jw_puts(w, tf(t->parameter));
	jw_lit(w, ",\"contiguous\":");
	jw_puts(w, tf(t->contiguous));
	jw_lit(w, ",\"layout\":\"");
	jw_puts(w, t->kind == CKPT_T_QUANTIZED ? "quantized" :
		   t->kind == CKPT_T_META ? "meta" :
		   t->kind == CKPT_T_INLINE ? "numpy" :
		   t->kind == CKPT_T_STORAGE ? "storage" : "strided");
	jw_putc(w, '"');
	if (sh) {
		jw_lit(w, ",\"shard\":");
		jw_cstr(w, sh->name);
	}
	json_tensor_extra(w, t);
}

const char *fmt_json_kind(const struct ckpt_node *n)
{
	return ckpt_node_is_dir(n) ? "container" :
	       n->kind == CKPT_N_TENSOR ? "tensor" :
	       n->kind == CKPT_N_VALUE ? "value" :
	       n->kind == CKPT_N_OPAQUE ? "object" : "link";
}

void fmt_json_name(struct jw *w, const struct ckpt_node *n)
{
	jw_lit(w, "\"name\":");
	jw_cstr(w, n->parent ? n->name : "");
	jw_lit(w, ",\"key\":");
	if (n->parent)
		fmt_json_key(w, n);
	else
		jw_lit(w, "null");
	jw_lit(w, ",\"kind\":");
	jw_cstr(w, fmt_json_kind(n));
}

void fmt_json_content(struct jw *w, const struct ckpt *c,
		      const struct ckpt_node *n)
{
	jw_lit(w, ",\"type\":");
	jw_cstr(w, n->type);
	if (n->kind == CKPT_N_TENSOR) {
		fmt_json_tensor(w, c, n->tensor);
	} else if (n->kind == CKPT_N_VALUE) {
		jw_lit(w, ",\"value\":");
		fmt_json_value(w, n);
	} else if (n->kind == CKPT_N_OPAQUE) {
		jw_lit(w, ",\"repr\":");
		jw_str(w, n->text, n->textlen);
	} else if (n->kind == CKPT_N_LINK) {
		char *to = ckpt_node_path(n->target);

		jw_lit(w, ",\"target\":");
		jw_cstr(w, to ? to : "?");
		free(to);
	}
}
