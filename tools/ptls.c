/*
 * ptls - list a PyTorch checkpoint without loading it, in the spirit of
 * h5ls: every tensor with its dtype, shape, stride, storage offset, storage
 * key, size, device and flags, every python value, and the globals the
 * pickle would import that torch's weights-only loader refuses.  Reads only
 * the zip index and data.pkl (never tensor data), runs nothing.
 *
 * Exit status: 0 listed, 1 listed but --check found unsafe globals,
 * 2 the file could not be read (one line on stderr says why).
 */
#include "ckpt/ckpt.h"
#include "diag/diag.h"
#include "json_out.h"
#include "pickle/pkl.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

struct opts {
	bool json;
	bool check;
	bool values;
};

static void usage(FILE *f)
{
	fputs("usage: ptls [OPTIONS] CHECKPOINT...\n"
	      "List the tensors and values of PyTorch checkpoints without "
	      "loading them.\n\n"
	      "  -j, --json       machine-readable output (see ptls(1))\n"
	      "  -t, --tensors    tensors only, no python values\n"
	      "  -c, --check      exit 1 if the pickle imports globals outside"
	      " torch's\n"
	      "                   weights-only allowlist\n"
	      "  -h, --help       this text\n"
	      "  -V, --version    print the version\n\n"
	      "Exit status: 0 ok, 1 --check found unsafe globals, 2 error.\n",
	      f);
}

static void dims(char *buf, size_t size, const int64_t *v, int n)
{
	size_t k = snprintf(buf, size, "(");

	for (int i = 0; i < n && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%" PRId64, i ? ", " : "",
			      v[i]);
	if (k < size)
		snprintf(buf + k, size - k, n == 1 ? ",)" : ")");
}

/* strlen of what dims() prints, without printing it */
static int dims_len(const int64_t *v, int n)
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

/* strlen of ckpt_node_path(@n), without building it */
static int path_len(const struct ckpt_node *n)
{
	int len = -1;

	for (; n && n->parent; n = n->parent)
		len += strlen(n->name) + 1;
	return len < 0 ? 1 : len;	/* the root prints as "." */
}

static const char *flags(const struct ckpt_tensor *t, char *buf, size_t n)
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

/* ---- text output ---- */

/* Column widths, measured in a first pass over the tree. */
struct widths {
	int path, type, shape, stride, key;
};

static int text_node(const struct ckpt_node *n, const struct opts *o,
		     struct widths *w, bool print);

/*
 * A value for one table cell: at most 72 characters, control characters
 * escaped, bytes as Python shows them (b'..\x00').
 */
static void printable(char *out, const struct ckpt_node *n)
{
	bool bytes = !strcmp(n->type, "bytes");
	size_t o = 0, i;

	if (bytes)
		o += sprintf(out, "b'");
	for (i = 0; i < n->textlen && o < 72; i++) {
		unsigned char c = n->text[i];

		if (c == '\\' && bytes)
			o += sprintf(out + o, "\\\\");
		else if (c == '\n')
			o += sprintf(out + o, "\\n");
		else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80))
			o += sprintf(out + o, "\\x%02x", c);
		else
			out[o++] = c;
	}
	sprintf(out + o, "%s%s", bytes ? "'" : "",
		i < n->textlen ? "..." : "");
}

/* First pass: widen the columns for leaf @n. */
static void measure_leaf(const struct ckpt_node *n, const struct opts *o,
			 struct widths *w)
{
	const struct ckpt_tensor *t = n->tensor;

	if (n->kind != CKPT_N_TENSOR && !o->values)
		return;
	w->path = MAX(w->path, path_len(n));
	if (n->kind != CKPT_N_TENSOR) {
		w->type = MAX(w->type, (int)strlen(n->type));
		return;
	}
	w->type = MAX(w->type, (int)strlen(t->dtype->name));
	w->shape = MAX(w->shape, dims_len(t->shape, t->ndim));
	w->stride = MAX(w->stride, dims_len(t->stride, t->ndim));
	w->key = MAX(w->key, t->storage ? (int)strlen(t->storage->key) : 1);
}

static int text_leaf(const struct ckpt_node *n, const char *path,
		     const struct opts *o, struct widths *w)
{
	char shape[1024], stride[1024], fl[80];
	const struct ckpt_tensor *t = n->tensor;
	const char *key;

	if (n->kind == CKPT_N_TENSOR) {
		dims(shape, sizeof(shape), t->shape, t->ndim);
		dims(stride, sizeof(stride), t->stride, t->ndim);
		key = t->storage ? t->storage->key : "-";
		return printf("%-*s  %-*s  %-*s  stride %-*s  offset %-4" PRIu64
			      "  storage %-*s  %10" PRIu64 " B  %-5s  %s\n",
			      w->path, path, w->type, t->dtype->name, w->shape,
			      shape, w->stride, stride, t->offset, w->key, key,
			      t->nbytes, t->device ? t->device : "-",
			      flags(t, fl, sizeof(fl)));
	}
	if (!o->values)
		return 0;
	if (n->kind == CKPT_N_LINK) {
		char *to = ckpt_node_path(n->target);
		int r = printf("%-*s  %-*s  -> %s\n", w->path, path, w->type,
			       n->type, to ? (to[0] ? to : ".") : "?");

		free(to);
		return r;
	}
	if (n->kind == CKPT_N_VALUE || n->kind == CKPT_N_OPAQUE) {
		char shown[80 * 4 + 8];

		printable(shown, n);
		return printf("%-*s  %-*s  = %s\n", w->path, path, w->type,
			      n->type, shown);
	}
	return printf("%-*s  %-*s  (empty)\n", w->path, path, w->type, n->type);
}

static int text_node(const struct ckpt_node *n, const struct opts *o,
		     struct widths *w, bool print)
{
	char *path;
	int rc = 0;

	if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) && n->nkids) {
		for (uint32_t i = 0; i < n->nkids && rc >= 0; i++)
			rc = text_node(n->kids[i], o, w, print);
		return rc;
	}
	if (!print) {
		measure_leaf(n, o, w);
		return 0;
	}
	path = ckpt_node_path(n);
	if (!path)
		return -1;
	rc = text_leaf(n, path[0] ? path : ".", o, w);
	free(path);
	return rc;
}

static void text_list(const struct ckpt *c, const struct opts *o)
{
	struct widths w = { 0 };
	uint64_t bytes = 0;

	text_node(c->root, o, &w, false);
	text_node(c->root, o, &w, true);
	for (uint32_t i = 0; i < c->nstorages; i++)
		bytes += c->storages[i]->nbytes;
	printf("# %u tensors, %u storages, %" PRIu64 " bytes of data; "
	       "%s format%s%s\n", c->nshown, c->nstorages, bytes,
	       c->format == CKPT_ZIP ? "zip" : "legacy",
	       c->byteorder ? ", byteorder " : "",
	       c->byteorder ? c->byteorder : "");
	for (uint32_t i = 0; i < c->nglobals; i++)
		printf("# unsafe global %s.%s (offset 0x%" PRIx64
		       "): torch.load would import it\n", c->globals[i].module,
		       c->globals[i].name, c->globals[i].off);
}

/* ---- JSON output ---- */

static void json_key(FILE *f, const struct ckpt_node *n)
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

static void json_keys(FILE *f, const struct ckpt_node *n)
{
	if (!n->parent)
		return;
	if (n->parent->parent) {
		json_keys(f, n->parent);
		fputs(",", f);
	}
	json_key(f, n);
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

static void json_value(FILE *f, const struct ckpt_node *n)
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
	if (t->cls) {
		fputs(",\"class\":", f);
		json_cstr(f, t->cls);
	}
	if (t->qscheme) {
		char sc[40];

		fputs(",\"qscheme\":", f);
		json_cstr(f, t->qscheme);
		if (t->qscales) {
			fputs(",\"q_scales\":{", f);
			json_view(f, t->qscales);
			fputs("},\"q_zero_points\":{", f);
			json_view(f, t->qzeros);
			fprintf(f, "},\"q_axis\":%" PRId64, t->axis);
		} else
			fprintf(f, ",\"q_scale\":%s,\"q_zero_point\":%" PRId64,
				ckpt_float_repr(t->scale, sc, sizeof(sc)),
				t->zero_point);
	}
}

static void json_tensor(FILE *f, const struct ckpt_tensor *t)
{
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
	json_tensor_extra(f, t);
}


static void json_node(FILE *f, const struct ckpt_node *n, bool *first,
		      const struct opts *o)
{
	char *path;

	if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) && n->nkids) {
		for (uint32_t i = 0; i < n->nkids; i++)
			json_node(f, n->kids[i], first, o);
		return;
	}
	if (n->kind != CKPT_N_TENSOR && !o->values)
		return;
	path = ckpt_node_path(n);
	fputs(*first ? "\n  {\"path\":" : ",\n  {\"path\":", f);
	*first = false;
	json_cstr(f, path ? path : "?");
	fputs(",\"keys\":[", f);
	json_keys(f, n);
	fputs("],\"kind\":", f);
	json_cstr(f, n->kind == CKPT_N_TENSOR ? "tensor" :
		  n->kind == CKPT_N_VALUE ? "value" :
		  n->kind == CKPT_N_OPAQUE ? "object" :
		  n->kind == CKPT_N_LINK ? "link" : "empty");
	fputs(",\"type\":", f);
	json_cstr(f, n->type);
	if (n->kind == CKPT_N_TENSOR) {
		json_tensor(f, n->tensor);
	} else if (n->kind == CKPT_N_VALUE) {
		fputs(",\"value\":", f);
		json_value(f, n);
	} else if (n->kind == CKPT_N_OPAQUE) {
		fputs(",\"repr\":", f);
		json_str(f, n->text, n->textlen);
	} else if (n->kind == CKPT_N_LINK) {
		char *to = ckpt_node_path(n->target);

		fputs(",\"target\":", f);
		json_cstr(f, to ? to : "?");
		free(to);
	}
	fputs("}", f);
	free(path);
}

static void json_list(const struct ckpt *c, const struct opts *o)
{
	FILE *f = stdout;
	bool first = true;

	fputs("{\"file\":", f);
	json_cstr(f, c->path);
	fprintf(f, ",\"format\":\"%s\",\"prefix\":",
		c->format == CKPT_ZIP ? "zip" : "legacy");
	json_cstr(f, c->format == CKPT_ZIP ? c->zip.prefix : NULL);
	fprintf(f, ",\"version\":%d,\"byteorder\":", c->version);
	json_cstr(f, c->byteorder);
	fprintf(f, ",\"pickle_protocol\":%d,\"root_type\":", c->doc->proto);
	json_cstr(f, c->root->type);
	fputs(",\"entries\":[", f);
	json_node(f, c->root, &first, o);
	fputs("\n ],\"storages\":[", f);
	for (uint32_t i = 0; i < c->nstorages; i++) {
		const struct ckpt_storage *s = c->storages[i];

		fputs(i ? ",\n  {\"key\":" : "\n  {\"key\":", f);
		json_cstr(f, s->key);
		fprintf(f, ",\"dtype\":\"%s\",\"untyped\":%s,\"numel\":%" PRIu64
			",\"nbytes\":%" PRIu64 ",\"device\":", s->dtype->name,
			s->untyped ? "true" : "false", s->numel, s->nbytes);
		json_cstr(f, s->location);
		fputs(",\"record\":", f);
		json_cstr(f, s->rec ? s->rec->name : NULL);
		fputs("}", f);
	}
	fputs("\n ],\"unsafe_globals\":[", f);
	for (uint32_t i = 0; i < c->nglobals; i++) {
		fputs(i ? ",\n  {\"module\":" : "\n  {\"module\":", f);
		json_cstr(f, c->globals[i].module);
		fputs(",\"name\":", f);
		json_cstr(f, c->globals[i].name);
		fprintf(f, ",\"offset\":%" PRIu64 "}", c->globals[i].off);
	}
	fprintf(f, "\n ],\"tensors\":%u}\n", c->nshown);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "tensors", no_argument, NULL, 't' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .values = true };
	static char outbuf[1 << 20];
	int opt, status = 0;

	while ((opt = getopt_long(argc, argv, "jtchV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j': o.json = true; break;
		case 't': o.values = false; break;
		case 'c': o.check = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': puts("ptls " PT_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	for (int i = optind; i < argc; i++) {
		struct ckpt *c;
		struct diag d;
		char line[512];

		diag_init(&d, argv[i]);
		if (ckpt_open(argv[i], &c, &d)) {
			fflush(stdout);
			fprintf(stderr, "ptls: %s\n",
				diag_line(&d, line, sizeof(line)));
			status = 2;
			continue;
		}
		if (argc - optind > 1 && !o.json)
			printf("%s%s:\n", i > optind ? "\n" : "", argv[i]);
		if (o.json)
			json_list(c, &o);
		else
			text_list(c, &o);
		if (o.check && c->nglobals && !status)
			status = 1;
		ckpt_close(c);
	}
	if (fflush(stdout) || ferror(stdout)) {
		perror("ptls: write");
		return 2;
	}
	return status;
}
