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
		printf("# metadata %s: %s\n", k, v);
	}
}

void fmt_json_meta(FILE *f, const struct ckpt *c)
{
	fputs(",\"metadata\":", f);
	if (c->format != CKPT_SAFETENSORS) {
		fputs("null", f);
		return;
	}
	putc('{', f);
	for (uint32_t i = 0; i < c->nmeta; i++) {
		if (i)
			putc(',', f);
		json_str(f, c->meta[i].key, c->meta[i].klen);
		putc(':', f);
		json_str(f, c->meta[i].val, c->meta[i].vlen);
	}
	putc('}', f);
}

void fmt_json_key(FILE *f, const struct ckpt_node *n)
{
	const struct pkl_value *k = n->key;
	size_t len;
	char *text;

	if (n->step == CKPT_S_INDEX) {
		json_u64(f, n->index);
		return;
	}
	if (n->step == CKPT_S_PART) {
		fputs("{\"part\":", f);
		json_cstr(f, n->name);
		fputs("}", f);
		return;
	}
	if (n->step == CKPT_S_ATTR)
		fputs("{\"attr\":", f);
	if (k->kind == PKL_STR || k->kind == PKL_STRING) {
		json_str(f, k->u.s.p, k->u.s.n);
	} else if (k->kind == PKL_INT) {
		json_i64(f, k->u.i);
	} else {
		text = ckpt_repr(k, 256, &len);
		fputs("{\"repr\":", f);
		json_str(f, text ? text : "?", text ? len : 1);
		fputs("}", f);
		free(text);
	}
	if (n->step == CKPT_S_ATTR)
		fputs("}", f);
}

static void json_dims(FILE *f, const int64_t *v, int n)
{
	putc('[', f);
	for (int i = 0; i < n; i++) {
		if (i)
			putc(',', f);
		json_i64(f, v[i]);
	}
	putc(']', f);
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

void fmt_json_value(FILE *f, const struct ckpt_node *n)
{
	const struct pkl_value *v = n->val;

	if (v->kind == PKL_INT || v->kind == PKL_BIGINT) {
		fwrite(n->text, 1, n->textlen, f);
	} else if (v->kind == PKL_FLOAT) {
		if (strchr(n->text, 'n'))	/* nan, inf */
			json_cstr(f, n->text);
		else
			fputs(n->text, f);
	} else if (v->kind == PKL_BOOL) {
		fputs(v->u.i ? "true" : "false", f);
	} else if (v->kind == PKL_NONE) {
		fputs("null", f);
	} else {
		json_str(f, n->text, n->textlen);
	}
}

/* The view of @t: dtype, shape, stride, offset, storage, size. */
static void json_view(FILE *f, const struct ckpt_tensor *t)
{
	fputs("\"dtype\":\"", f);
	fputs(t->dtype->name, f);
	fputs("\",\"shape\":", f);
	json_dims(f, t->shape, t->ndim);
	fputs(",\"stride\":", f);
	json_dims(f, t->stride, t->ndim);
	fputs(",\"offset\":", f);
	json_u64(f, t->offset);
	fputs(",\"storage\":", f);
	json_cstr(f, t->storage ? t->storage->key : NULL);
	fputs(",\"nbytes\":", f);
	json_u64(f, t->nbytes);
}

static void json_tensor_extra(FILE *f, const struct ckpt_tensor *t)
{
	if (t->conj || t->neg)
		fprintf(f, ",\"conj\":%s,\"neg\":%s", t->conj ? "true" : "false",
			t->neg ? "true" : "false");
	if (t->x->cls) {
		fputs(",\"class\":", f);
		json_cstr(f, t->x->cls);
	}
	if (t->x->qscheme) {
		char sc[40];

		fputs(",\"qscheme\":", f);
		json_cstr(f, t->x->qscheme);
		if (t->x->qscales) {
			fputs(",\"q_scales\":{", f);
			json_view(f, t->x->qscales);
			fputs("},\"q_zero_points\":{", f);
			json_view(f, t->x->qzeros);
			fprintf(f, "},\"q_axis\":%" PRId64, t->x->axis);
		} else
			fprintf(f, ",\"q_scale\":%s,\"q_zero_point\":%" PRId64,
				ckpt_float_repr(t->x->scale, sc, sizeof(sc)),
				t->x->zero_point);
	}
}

void fmt_json_tensor(FILE *f, const struct ckpt *c,
		     const struct ckpt_tensor *t)
{
	const struct ckpt_shard *sh = ckpt_tensor_shard(c, t);

	fputs(",\"tensor\":", f);
	json_u64(f, t->index);
	putc(',', f);
	json_view(f, t);
	fputs(",\"device\":", f);
	json_cstr(f, t->device);
	fputs(",\"requires_grad\":", f);
	fputs(tf(t->requires_grad), f);
	fputs(",\"parameter\":", f);
	fputs(tf(t->parameter), f);
	fputs(",\"contiguous\":", f);
	fputs(tf(t->contiguous), f);
	fputs(",\"layout\":\"", f);
	fputs(t->kind == CKPT_T_QUANTIZED ? "quantized" :
	      t->kind == CKPT_T_META ? "meta" :
	      t->kind == CKPT_T_INLINE ? "numpy" :
	      t->kind == CKPT_T_STORAGE ? "storage" : "strided", f);
	putc('"', f);
	if (sh) {
		fputs(",\"shard\":", f);
		json_cstr(f, sh->name);
	}
	json_tensor_extra(f, t);
}

const struct ckpt_node *fmt_find(const struct ckpt *c, const char *path)
{
	const struct ckpt_node *n = c->root;
	char *copy = strdup(path), *save = NULL, *part;

	if (!copy)
		return NULL;
	for (part = strtok_r(copy, "/", &save); part && n;
	     part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, "."))
			continue;
		while (n->kind == CKPT_N_LINK && n->target)
			n = n->target;
		n = n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ ?
		    ckpt_node_child(n, part) : NULL;
	}
	free(copy);
	while (n && n->kind == CKPT_N_LINK && n->target)
		n = n->target;
	return n;
}

const char *fmt_json_kind(const struct ckpt_node *n)
{
	return ckpt_node_is_dir(n) ? "container" :
	       n->kind == CKPT_N_TENSOR ? "tensor" :
	       n->kind == CKPT_N_VALUE ? "value" :
	       n->kind == CKPT_N_OPAQUE ? "object" : "link";
}

void fmt_json_content(FILE *f, const struct ckpt *c,
		      const struct ckpt_node *n)
{
	fputs(",\"type\":", f);
	json_cstr(f, n->type);
	if (n->kind == CKPT_N_TENSOR) {
		fmt_json_tensor(f, c, n->tensor);
	} else if (n->kind == CKPT_N_VALUE) {
		fputs(",\"value\":", f);
		fmt_json_value(f, n);
	} else if (n->kind == CKPT_N_OPAQUE) {
		fputs(",\"repr\":", f);
		json_str(f, n->text, n->textlen);
	} else if (n->kind == CKPT_N_LINK) {
		char *to = ckpt_node_path(n->target);

		fputs(",\"target\":", f);
		json_cstr(f, to ? to : "?");
		free(to);
	}
}
