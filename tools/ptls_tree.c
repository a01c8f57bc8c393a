/*
 * ptls_tree.c - ptls --tree and --totals: the object tree as an indented
 * listing (containers with their type and size, then their children, the
 * way tree(1) shows a directory), as nested JSON, and the count of
 * tensors, storages and bytes per dtype.  Only the model is read.
 */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "json_out.h"
#include "ptls.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- text ---- */

/* Is @n shown with these options?  (--tensors hides python values.) */
static bool shown(const struct ckpt_node *n, const struct opts *o)
{
	return o->values || (ckpt_node_is_dir(n) && !ls_collapsed(n, o)) ||
	       n->kind == CKPT_N_TENSOR;
}

/* Are @n's children listed below it (not collapsed, not cut by -L)? */
static bool opened(const struct ckpt_node *n, int depth, const struct opts *o)
{
	return ckpt_node_is_dir(n) && !ls_collapsed(n, o) &&
	       depth < CKPT_MAX_DEPTH && (o->depth < 0 || depth < o->depth);
}

/* Width of the name column: indentation plus name (plus "/"). */
static int measure(const struct ckpt_node *n, int depth, const struct opts *o)
{
	int w = 2 * depth + (n->parent ? (int)strlen(n->name) : 1) +
		ckpt_node_is_dir(n);

	for (uint32_t i = 0; opened(n, depth, o) && i < n->dir->nkids; i++) {
		int k;

		if (!shown(n->dir->kids[i], o))
			continue;
		/* not inside MAX(), which would measure the subtree twice:
		   2^40 walks for 40 levels of lists (tests/hostile) */
		k = measure(n->dir->kids[i], depth + 1, o);
		w = MAX(w, k);
	}
	return w;
}

static void tensor_text(const struct ckpt_tensor *t, const struct opts *o)
{
	char shape[1024], stride[1024], fl[80], h[16];
	const char *f = fmt_flags(t, fl, sizeof(fl));
	const char *dev = ckpt_tensor_device(t), *type;
	const int64_t *dims;
	struct ckpt_coded k;
	int nd;

	fmt_shown(o->c, t, &type, &nd, &dims, &k);
	fmt_dims(shape, sizeof(shape), dims, nd);
	printf("%s %s", type, shape);
	if (!t->contiguous) {
		fmt_dims(stride, sizeof(stride), ckpt_tensor_stride(t), t->ndim);
		printf(" stride %s", stride);
	}
	if (t->storage)
		printf("  storage %s", t->storage->key);
	if (t->offset)
		printf(" offset %" PRIu64, t->offset);
	if (o->human)
		printf("  %s", cli_size(ckpt_tensor_nbytes(t), h, sizeof(h)));
	else
		printf("  %" PRIu64 " B", ckpt_tensor_nbytes(t));
	if (dev && strcmp(dev, "cpu"))
		printf("  %s", dev);
	if (strcmp(f, "-"))
		printf("  %s", f);
}

static int node_text(const struct ckpt_node *n, int depth, int width,
		     const struct opts *o)
{
	char shown_val[80 * 4 + 8];
	struct ls_sum sum;
	int pad;

	if (n->parent)
		pad = printf("%*s%s%s", 2 * depth, "", n->name,
			     ckpt_node_is_dir(n) ? "/" : "");
	else
		pad = printf("%s", ckpt_node_is_dir(n) ? "./" : ".");
	printf("%*s  ", width - pad, "");
	switch (n->kind) {
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		if (!n->dir->nkids) {
			printf("%s (empty)\n", n->type);
		} else if (ls_collapsed(n, o)) {
			ls_collapsed_text(n, shown_val, sizeof(shown_val));
			printf("%s [%s]\n", n->type, shown_val);
		} else if (!opened(n, depth, o)) {
			ls_sum(o->c, n, &sum);
			printf("%s (%u) ... %u tensor%s, %s\n", n->type,
			       n->dir->nkids, sum.tensors,
			       sum.tensors == 1 ? "" : "s",
			       ls_sum_text(&sum, o->human, shown_val,
					   sizeof(shown_val)));
		} else {
			printf("%s (%u)\n", n->type, n->dir->nkids);
		}
		break;
	case CKPT_N_TENSOR:
		tensor_text(n->tensor, o);
		putchar('\n');
		break;
	case CKPT_N_LINK: {
		char *to = ckpt_node_path(n->target);

		printf("%s -> %s\n", n->type, to ? (to[0] ? to : ".") : "?");
		free(to);
		break;
	}
	default:
		fmt_printable(shown_val, n);
		printf("%s = %s\n", n->type, shown_val);
	}
	for (uint32_t i = 0; opened(n, depth, o) && i < n->dir->nkids; i++)
		if (shown(n->dir->kids[i], o))
			node_text(n->dir->kids[i], depth + 1, width, o);
	return 0;
}

int ls_tree_text(const struct ckpt *c, const struct opts *o)
{
	(void)c;
	return node_text(o->start, 0, measure(o->start, 0, o), o);
}

/* ---- JSON ---- */

static void node_json(struct jw *w, const struct ckpt_node *n, int depth,
		      const struct opts *o)
{
	bool first = true;

	jw_putc(w, '{');
	fmt_json_name(w, n);
	fmt_json_content(w, o->c, n);
	if (ckpt_node_is_dir(n)) {
		jw_lit(w, ",\"children\":[");
		for (uint32_t i = 0; i < n->dir->nkids; i++) {
			if (!shown(n->dir->kids[i], o) ||
			    depth >= CKPT_MAX_DEPTH)
				continue;
			if (!first)
				jw_putc(w, ',');
			first = false;
			jw_indent(w, 2 * depth + 2);
			node_json(w, n->dir->kids[i], depth + 1, o);
		}
		jw_lit(w, "]");
	}
	jw_putc(w, '}');
}

void ls_tree_json(struct jw *w, const struct ckpt *c, const struct opts *o)
{
	(void)c;
	node_json(w, o->start, 0, o);
}

/* ---- totals ---- */

struct total {
	const char *dtype;
	uint32_t tensors, storages;
	uint64_t tensor_bytes, storage_bytes;
};

/*
 * Per dtype: the tensors the tree shows, and the storages with their
 * bytes.  An UntypedStorage (torch 2.x's new dtypes) counts under the
 * dtype of the first tensor that views it.  Returns the rows (caller
 * frees) and their number in *@n; the last row is "all".
 */
static struct total *totals(const struct ckpt *c, size_t *n)
{
	const char **sdt = calloc(c->nstorages + 1, sizeof(*sdt));
	struct total *t = calloc(c->ntensors + c->nstorages + 2, sizeof(*t));
	size_t k = 0;

	if (!sdt || !t) {
		free(sdt);
		free(t);
		return NULL;
	}
	/*
	 * Rows in the order dtypes first appear: tensors, then storages
	 * (which come after every tensor, so sdt[] is complete by then).
	 * A row (ckpt.h) is shown and views a typed storage of its dtype,
	 * which no other tensor views: its sizes are all there is to read.
	 */
	for (uint32_t i = 0; i < c->ntensors + c->nstorages; i++) {
		bool tensor = i < c->ntensors;
		uint32_t si = i - c->ntensors;	/* (when a storage) */
		uint64_t nbytes;
		const char *dt;
		size_t j;

		if (tensor) {
			const struct ckpt_tensor *x = c->tensors[i];

			if (!ckpt_is_row(x)) {
				if (x->storage && !sdt[x->storage->index])
					sdt[x->storage->index] =
						x->dtype->name;
				if (!x->shown)
					continue;
			}
			dt = ckpt_tensor_size_at(c, i, &nbytes)->name;
		} else {
			dt = ckpt_storage_size_at(c, si, &nbytes)->name;
			/* (a row's is its own: not even read, 100,000 rows
			   would fault in sdt[]'s zero pages) */
			if (!ckpt_is_row(c->storages[si]) && sdt[si])
				dt = sdt[si];
		}
		/* names come from the dtype table: mostly the same pointer */
		for (j = 0; j < k && t[j].dtype != dt &&
			    strcmp(t[j].dtype, dt); j++)
			;
		if (j == k)
			t[k++].dtype = dt;
		if (tensor) {
			t[j].tensors++;
			t[j].tensor_bytes += nbytes;
		} else {
			t[j].storages++;
			t[j].storage_bytes += nbytes;
		}
	}
	t[k].dtype = "all";
	for (size_t j = 0; j < k; j++) {
		t[k].tensors += t[j].tensors;
		t[k].storages += t[j].storages;
		t[k].tensor_bytes += t[j].tensor_bytes;
		t[k].storage_bytes += t[j].storage_bytes;
	}
	free(sdt);
	*n = k + 1;
	return t;
}

void ls_totals_text(const struct ckpt *c, const struct opts *o)
{
	char h1[16], h2[16];
	size_t n, w = 5;
	struct total *t = totals(c, &n);

	if (!t)
		return;
	for (size_t i = 0; i < n; i++)
		w = MAX(w, strlen(t[i].dtype));
	printf("# %-*s  %8s  %14s  %8s  %14s\n", (int)w, "dtype", "tensors",
	       "tensor bytes", "storages", "storage bytes");
	for (size_t i = 0; i < n && o->human; i++)
		printf("# %-*s  %8u  %14s  %8u  %14s\n", (int)w, t[i].dtype,
		       t[i].tensors, cli_size(t[i].tensor_bytes, h1,
					      sizeof(h1)), t[i].storages,
		       cli_size(t[i].storage_bytes, h2, sizeof(h2)));
	for (size_t i = 0; i < n && !o->human; i++)
		printf("# %-*s  %8u  %14" PRIu64 "  %8u  %14" PRIu64 "\n",
		       (int)w, t[i].dtype, t[i].tensors, t[i].tensor_bytes,
		       t[i].storages, t[i].storage_bytes);
	free(t);
}

void ls_totals_json(struct jw *w, const struct ckpt *c)
{
	size_t n;
	struct total *t = totals(c, &n);

	if (!t) {
		jw_lit(w, "null");
		return;
	}
	jw_lit(w, "{");
	for (size_t i = 0; i < n; i++) {
		jw_cstr(w, t[i].dtype);
		jw_printf(w, ":{\"tensors\":%u,\"tensor_bytes\":%" PRIu64
			",\"storages\":%u,\"storage_bytes\":%" PRIu64 "}%s",
			t[i].tensors, t[i].tensor_bytes, t[i].storages,
			t[i].storage_bytes, i + 1 < n ? "," : "");
	}
	jw_lit(w, "}");
	free(t);
}
