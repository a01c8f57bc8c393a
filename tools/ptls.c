/*
 * ptls - list a PyTorch checkpoint without loading it, in the spirit of
 * h5ls: every tensor with its dtype, shape, stride, storage offset, storage
 * key, size, device and flags, every python value, and the globals the
 * pickle would import that torch's weights-only loader refuses.  Reads only
 * the zip index and data.pkl (never tensor data), runs nothing.
 *
 * --tree shows the same as an indented tree with the containers, and
 * --totals adds tensors, storages and bytes per dtype.
 *
 * Exit status: 0 listed, 1 listed but --check found unsafe globals,
 * 2 the file could not be read (one line on stderr says why).
 */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "diag/diag.h"
#include "json_out.h"
#include "ptls.h"
#include "pickle/pkl.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))


static void usage(FILE *f)
{
	fputs("usage: ptls [OPTIONS] CHECKPOINT...\n"
	      "List the tensors and values of PyTorch checkpoints without "
	      "loading them.\n\n"
	      "  -j, --json       machine-readable output (see ptls(1))\n"
	      "  -t, --tensors    tensors only, no python values\n"
	      "  -r, --tree       the object tree, indented, containers "
	      "included\n"
	      "  -s, --totals     tensors, storages and bytes per dtype "
	      "after the list\n"
	      "  -c, --check      exit 1 if the pickle imports globals outside"
	      " torch's\n"
	      "                   weights-only allowlist\n"
	      "  -h, --help       this text\n"
	      "  -V, --version    print the version\n\n"
	      "Exit status: 0 ok, 1 --check found unsafe globals, 2 error.\n",
	      f);
}

/* strlen of ckpt_node_path(@n), without building it */
static int path_len(const struct ckpt_node *n)
{
	int len = -1;

	for (; n && n->parent; n = n->parent)
		len += strlen(n->name) + 1;
	return len < 0 ? 1 : len;	/* the root prints as "." */
}

/* ---- text output ---- */

/* Column widths, measured in a first pass over the tree. */
struct widths {
	int path, type, shape, stride, key;
};

static int text_node(const struct ckpt_node *n, const struct opts *o,
		     struct widths *w, bool print);

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
	w->shape = MAX(w->shape, fmt_dims_len(t->shape, t->ndim));
	w->stride = MAX(w->stride, fmt_dims_len(t->stride, t->ndim));
	w->key = MAX(w->key, t->storage ? (int)strlen(t->storage->key) : 1);
}

static int text_leaf(const struct ckpt_node *n, const char *path,
		     const struct opts *o, struct widths *w)
{
	char shape[1024], stride[1024], fl[80];
	const struct ckpt_tensor *t = n->tensor;
	const char *key;

	if (n->kind == CKPT_N_TENSOR) {
		fmt_dims(shape, sizeof(shape), t->shape, t->ndim);
		fmt_dims(stride, sizeof(stride), t->stride, t->ndim);
		key = t->storage ? t->storage->key : "-";
		return printf("%-*s  %-*s  %-*s  stride %-*s  offset %-4" PRIu64
			      "  storage %-*s  %10" PRIu64 " B  %-5s  %s\n",
			      w->path, path, w->type, t->dtype->name, w->shape,
			      shape, w->stride, stride, t->offset, w->key, key,
			      t->nbytes, t->device ? t->device : "-",
			      fmt_flags(t, fl, sizeof(fl)));
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

		fmt_printable(shown, n);
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

	if (o->tree) {
		ls_tree_text(c, o);
	} else {
		text_node(c->root, o, &w, false);
		text_node(c->root, o, &w, true);
	}
	for (uint32_t i = 0; i < c->nstorages; i++)
		bytes += c->storages[i]->nbytes;
	printf("# %u tensors, %u storages, %" PRIu64 " bytes of data; "
	       "%s format%s%s\n", c->nshown, c->nstorages, bytes,
	       ckpt_format_name(c->format),
	       c->byteorder ? ", byteorder " : "",
	       c->byteorder ? c->byteorder : "");
	if (o->totals)
		ls_totals_text(c);
	for (uint32_t i = 0; i < c->nglobals; i++)
		printf("# unsafe global %s.%s (offset 0x%" PRIx64
		       "): torch.load would import it\n", c->globals[i].module,
		       c->globals[i].name, c->globals[i].off);
}

/* ---- JSON output ---- */

static void json_keys(FILE *f, const struct ckpt_node *n)
{
	if (!n->parent)
		return;
	if (n->parent->parent) {
		json_keys(f, n->parent);
		fputs(",", f);
	}
	fmt_json_key(f, n);
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
		fmt_json_tensor(f, n->tensor);
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
		ckpt_format_name(c->format));
	json_cstr(f, c->zip.nentries ? c->zip.prefix : NULL);
	fprintf(f, ",\"version\":%d,\"byteorder\":", c->version);
	json_cstr(f, c->byteorder);
	fprintf(f, ",\"pickle_protocol\":%d,\"root_type\":", c->doc->proto);
	json_cstr(f, c->root->type);
	if (o->tree) {
		fputs(",\"tree\":", f);
		ls_tree_json(f, c, o);
	} else {
		fputs(",\"entries\":[", f);
		json_node(f, c->root, &first, o);
		fputs("\n ]", f);
	}
	fputs(",\"storages\":[", f);
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
	fprintf(f, "\n ],\"tensors\":%u,\"totals\":", c->nshown);
	ls_totals_json(f, c);
	fputs("}\n", f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "tensors", no_argument, NULL, 't' },
		{ "tree", no_argument, NULL, 'r' },
		{ "totals", no_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .values = true };
	static char outbuf[1 << 20];
	int opt, status = CLI_OK;

	cli_init(argv[0], "[OPTIONS] CHECKPOINT...");
	while ((opt = getopt_long(argc, argv, "jtrschV", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'j': o.json = true; break;
		case 't': o.values = false; break;
		case 'r': o.tree = true; break;
		case 's': o.totals = true; break;
		case 'c': o.check = true; break;
		case 'h': usage(stdout); return cli_finish(CLI_OK);
		case 'V': return cli_version();
		default: return cli_usage(NULL);
		}
	}
	if (optind >= argc)
		return cli_usage("no checkpoint given");
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	for (int i = optind; i < argc; i++) {
		struct ckpt *c;
		struct diag d;

		diag_init(&d, argv[i]);
		if (ckpt_open(argv[i], &c, &d)) {
			cli_diag(&d);
			status = CLI_ERROR;
			continue;
		}
		if (argc - optind > 1 && !o.json)
			printf("%s%s:\n", i > optind ? "\n" : "", argv[i]);
		if (o.json)
			json_list(c, &o);
		else
			text_list(c, &o);
		if (o.check && c->nglobals && !status)
			status = CLI_FOUND;
		ckpt_close(c);
	}
	return cli_finish(status);
}
