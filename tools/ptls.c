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
#include "cli_io.h"
#include "diag/diag.h"
#include "globals.h"
#include "json_out.h"
#include "ptls.h"
#include "pickle/pkl.h"
#include "source/source.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))


static void usage(FILE *f)
{
	fputs("usage: ptls [OPTIONS] CHECKPOINT [KEY-PATH...]...\n"
	      "List the tensors and values of PyTorch checkpoints without "
	      "loading them;\nwith KEY-PATHs (\"optimizer/state\"), only "
	      "those subtrees.  CHECKPOINT - is\nstandard input.\n\n"
	      "  -t, --tensors         tensors only, no python values\n"
	      "  -T, --tree            the object tree, indented, containers "
	      "included\n"
	      "  -L, --depth N         show N levels; deeper containers as "
	      "one summary line\n"
	      "  -H, --human-readable  sizes as 2.6 MiB\n"
	      "  -s, --totals          tensors, storages and bytes per dtype "
	      "after the list\n"
	      "  -S, --stats           per-tensor statistics: min, max, mean, "
	      "std, L2 norm,\n"
	      "                        NaN/+Inf/-Inf/zero counts (reads the "
	      "data); exit 1\n"
	      "                        if a value is NaN or infinite\n"
	      "  -c, --check           exit 1 if the pickle imports globals "
	      "outside torch's\n"
	      "                        weights-only allowlist\n"
	      "  -v, --verbose         long lists of python scalars in full "
	      "(collapsed\n"
	      "                        to one line above 16 items)\n"
	      CLI_COMMON_HELP
	      "\nExit status: 0 ok, 1 --check or --stats found something, "
	      "2 error.\n", f);
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
		     struct widths *w, bool print, int depth);

/* A container shown as one line: a long scalar list, or the depth cut. */
static bool cut(const struct ckpt_node *n, const struct opts *o, int depth)
{
	return ckpt_node_is_dir(n) && n->dir->nkids &&
	       (ls_collapsed(n, o) || (o->depth >= 0 && depth >= o->depth));
}

/* Does @n print a line?  (--tensors hides python values.) */
static bool listed(const struct ckpt_node *n, const struct opts *o)
{
	return n->kind == CKPT_N_TENSOR || o->values ||
	       (ckpt_node_is_dir(n) && !ls_collapsed(n, o));
}

/* First pass: widen the columns for leaf @n. */
static void measure_leaf(const struct ckpt_node *n, const struct opts *o,
			 struct widths *w)
{
	const struct ckpt_tensor *t = n->tensor;
	const int64_t *shape;
	const char *type;
	struct ckpt_coded k;
	int nd;

	if (!listed(n, o))
		return;
	w->path = MAX(w->path, path_len(n));
	if (n->kind != CKPT_N_TENSOR) {
		w->type = MAX(w->type, (int)strlen(n->type));
		return;
	}
	fmt_shown(o->c, t, &type, &nd, &shape, &k);
	w->type = MAX(w->type, (int)strlen(type));
	w->shape = MAX(w->shape, fmt_dims_len(shape, nd));
	w->stride = MAX(w->stride,
			fmt_dims_len(ckpt_tensor_stride(t), t->ndim));
	w->key = MAX(w->key, t->storage ? (int)strlen(t->storage->key) : 1);
}

/* "   512 B" or "2.6 MiB", right-aligned in 10 columns plus the unit. */
static const char *size_cell(uint64_t v, const struct opts *o, char *buf,
			     size_t size)
{
	char h[16];

	if (o->human)
		snprintf(buf, size, "%10s", cli_size(v, h, sizeof(h)));
	else
		snprintf(buf, size, "%10" PRIu64 " B", v);
	return buf;
}

static int text_dir_line(const struct ckpt_node *n, const char *path,
			 const struct opts *o, struct widths *w)
{
	char text[192];
	struct ls_sum sum;

	if (ls_collapsed(n, o)) {
		ls_collapsed_text(n, text, sizeof(text));
		return printf("%-*s  %-*s  [%s]\n", w->path, path, w->type,
			      n->type, text);
	}
	ls_sum(o->c, n, &sum);
	return printf("%-*s  %-*s  (%u item%s, %u tensor%s, %s)\n", w->path,
		      path, w->type, n->type, n->dir->nkids,
		      n->dir->nkids == 1 ? "" : "s",
		      sum.tensors, sum.tensors == 1 ? "" : "s",
		      ls_sum_text(&sum, o->human, text, sizeof(text)));
}

static int text_leaf(const struct ckpt_node *n, const char *path,
		     const struct opts *o, struct widths *w)
{
	char shape[1024], stride[1024], fl[80], sz[32];
	const struct ckpt_tensor *t = n->tensor;
	const char *key, *dev, *type;
	const int64_t *dims;
	struct ckpt_coded k;
	int nd;

	if (!listed(n, o))
		return 0;
	if (ckpt_node_is_dir(n) && n->dir->nkids)
		return text_dir_line(n, path, o, w);
	if (n->kind == CKPT_N_TENSOR) {
		fmt_shown(o->c, t, &type, &nd, &dims, &k);
		fmt_dims(shape, sizeof(shape), dims, nd);
		fmt_dims(stride, sizeof(stride), ckpt_tensor_stride(t), t->ndim);
		key = t->storage ? t->storage->key : "-";
		dev = ckpt_tensor_device(t);
		return printf("%-*s  %-*s  %-*s  stride %-*s  offset %-4" PRIu64
			      "  storage %-*s  %s  %-5s  %s\n",
			      w->path, path, w->type, type, w->shape,
			      shape, w->stride, stride, t->offset, w->key, key,
			      size_cell(ckpt_tensor_nbytes(t), o, sz,
					sizeof(sz)),
			      dev ? dev : "-",
			      fmt_flags(t, fl, sizeof(fl)));
	}
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
		     struct widths *w, bool print, int depth)
{
	char *path;
	int rc = 0;

	if (ckpt_node_is_dir(n) && n->dir->nkids && !cut(n, o, depth)) {
		struct ckpt_rowview v;

		for (uint32_t i = 0; i < n->dir->nkids && rc >= 0; i++)
			rc = text_node(ckpt_kid(o->c, n, i, &v), o, w, print,
				       depth + 1);
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

/* The @k-th of @c's files with pickles (ckpt_part_at()): a shard of a
 * folder, else itself; NULL: an absent shard. */
static const struct ckpt *part(const struct ckpt *c, uint32_t k)
{
	struct ckpt_part p;

	ckpt_part_at(c, k, &p);
	return p.c;
}

static uint32_t nglobals(const struct ckpt *c)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < ckpt_nparts(c); k++)
		n += part(c, k) ? part(c, k)->nglobals : 0;
	return n;
}

/* A folder's index, its parts and its other files. */
static void text_shards(const struct ckpt *c)
{
	uint32_t n = ckpt_nparts(c), nf = ckpt_nfindings(c);
	struct ckpt_folder f;

	if (!ckpt_folder(c, &f)) {
		if (nf && ckpt_fmt(c)->findings_are)	/* a rank set's */
			printf("# %s %u time%s (ptverify lists them)\n",
			       ckpt_fmt(c)->findings_are, nf, nf == 1 ? "" :
			       "s");
		return;
	}
	printf("# index %s: %u keys in %u shard%s, %u other file%s in the "
	       "folder", f.index, f.nentries, n, n == 1 ? "" : "s", f.nfiles,
	       f.nfiles == 1 ? "" : "s");
	if (nf)
		printf("; %u disagreement%s with the shards (ptverify lists "
		       "them)", nf, nf == 1 ? "" : "s");
	putchar('\n');
	for (uint32_t i = 0; i < n; i++) {
		struct ckpt_part p;

		ckpt_part_at(c, i, &p);
		printf("# shard %s: %u keys, %s\n", p.name, p.nkeys,
		       p.c ? ckpt_fmt(p.c)->name : "absent");
	}
}

static void json_shards(struct jw *w, const struct ckpt *c)
{
	struct ckpt_folder f;
	bool folder = ckpt_folder(c, &f);

	jw_lit(w, ",\"index\":");
	jw_cstr(w, folder ? f.index : NULL);
	jw_lit(w, ",\"shards\":[");
	for (uint32_t i = 0; folder && i < ckpt_nparts(c); i++) {
		struct ckpt_part p;

		ckpt_part_at(c, i, &p);
		jw_puts(w, i ? ",{\"name\":" : "{\"name\":");
		jw_cstr(w, p.name);
		jw_printf(w, ",\"format\":\"%s\",\"keys\":%u,\"tensors\":%u,"
			"\"storages\":%u}",
			p.c ? ckpt_fmt(p.c)->name : "absent", p.nkeys,
			p.c ? p.c->ntensors : 0, p.c ? p.c->nstorages : 0);
	}
	jw_lit(w, "],\"files\":[");
	for (uint32_t i = 0; folder && i < f.nfiles; i++) {
		const char *name;
		uint64_t size;

		ckpt_folder_entry(c, i, &name, &size);
		jw_puts(w, i ? ",{\"name\":" : "{\"name\":");
		jw_cstr(w, name);
		jw_printf(w, ",\"size\":%" PRIu64 "}", size);
	}
	jw_lit(w, "]");
}

/* Is @n @top or inside it? */
static bool under(const struct ckpt_node *n, const struct ckpt_node *top)
{
	for (; n; n = n->parent)
		if (n == top)
			return true;
	return false;
}

/* The unsafe globals, each with the key that holds it: of a key path's
 * listing those held inside it, and how many others the file has. */
static void text_globals(const struct ckpt *all, const struct ckpt_node *top)
{
	const struct ckpt *c;
	uint32_t others = 0;

	for (uint32_t k = 0; k < ckpt_nparts(all); k++)
	for (uint32_t i = 0; (c = part(all, k)) && i < c->nglobals; i++) {
		/* (the holder is looked for again in its text: a file has
		   few unsafe globals, and a key path's listing is one file) */
		const struct ckpt_node *h = top->parent ?
					    fmt_global_holder(c, i) : NULL;
		bool shard = c != all;	/* its offsets are the shard's */
		char where[4200], text[8192];

		if (top->parent && !under(h, top)) {
			others++;
			continue;
		}
		snprintf(where, sizeof(where), " (%.4096s%soffset 0x%" PRIx64
			 ")", shard ? c->path : "", shard ? " " : "",
			 c->globals[i].off);
		fmt_global_text(c, i, where, text, sizeof(text));
		printf("# %s\n", text);
	}
	if (others)
		printf("# %u more unsafe global%s elsewhere in %s (ptls %s "
		       "lists %s)\n", others, others == 1 ? "" : "s",
		       all->path, all->path, others == 1 ? "it" : "them");
}

/* The JSON of a file that could not be opened: the error, and with
 * --check what torch.load would run in it ("unsafe_globals"). */
static void json_unopened(const struct ckpt *c, const struct diag *d)
{
	char *tail = NULL;
	size_t len = 0;
	FILE *f = c && c->nglobals ? open_memstream(&tail, &len) : NULL;

	for (uint32_t i = 0; f && i < c->nglobals; i++) {
		char text[8192];

		fmt_global_text(c, i, "", text, sizeof(text));
		fputs(i ? ",{\"module\":" : ",\"unsafe_globals\":"
		      "[{\"module\":", f);
		json_cstr(f, c->globals[i].module);
		fputs(",\"name\":", f);
		json_cstr(f, c->globals[i].name);
		fputs(",\"pickle\":", f);
		json_cstr(f, c->globals[i].pickle);
		fputs(",\"offset\":", f);
		json_u64(f, c->globals[i].off);
		fputs(",\"message\":", f);
		json_cstr(f, text);
		fputs(i + 1 == c->nglobals ? "}]" : "}", f);
	}
	if (f)
		fclose(f);
	cli_json_error(stdout, d, NULL, tail);
	free(tail);
}

/* The findings of a checkpoint that could not be opened (its own,
 * its shards' named in theirs). */
static void text_unsafe(const struct ckpt *c)
{
	for (uint32_t i = 0; c && i < c->nglobals; i++) {
		char where[64], text[8192];

		snprintf(where, sizeof(where), " (offset 0x%" PRIx64 ")",
			 c->globals[i].off);
		fmt_global_text(c, i, c->globals[i].off == DIAG_NO_OFFSET ?
				"" : where, text, sizeof(text));
		printf("# %s\n", text);
	}
}

static void text_list(const struct ckpt *c, const struct opts *o)
{
	struct widths w = { 0 };
	uint64_t bytes = 0;
	char hb[192];

	if (o->tree) {
		ls_tree_text(c, o);
	} else {
		text_node(o->start, o, &w, false, 0);
		text_node(o->start, o, &w, true, 0);
	}
	if (o->start->parent) {
		/* a key path's listing: about what was listed */
		struct ls_sum sum;
		char *p = ckpt_node_path(o->start);

		ls_sum(c, o->start, &sum);
		printf("# %s: %u tensor%s, %u storage%s, %s\n", p ? p : "?",
		       sum.tensors, sum.tensors == 1 ? "" : "s", sum.storages,
		       sum.storages == 1 ? "" : "s",
		       ls_sum_text(&sum, o->human, hb, sizeof(hb)));
		free(p);
		if (o->totals)
			ls_totals_text(c, o);
		text_globals(c, o->start);
		return;
	}
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_rowview v;

		bytes += ckpt_storage_at(c, i, &v)->nbytes;
	}
	printf("# %u tensors, %u storages, %" PRIu64 " bytes of data%s%s%s; "
	       "%s format%s%s\n", c->nshown, c->nstorages, bytes,
	       o->human ? " (" : "",
	       o->human ? cli_size(bytes, hb, sizeof(hb)) : "",
	       o->human ? ")" : "", ckpt_fmt(c)->name,
	       c->byteorder ? ", byteorder " : "",
	       c->byteorder ? c->byteorder : "");
	fmt_meta_text(c);
	text_shards(c);
	if (o->totals)
		ls_totals_text(c, o);
	text_globals(c, o->start);
}

/* ---- JSON output ---- */

/* @n's steps from the root, each written by @put, @sep between them: its
 * path and its keys, written straight into the output (100,000 entries
 * made no copy of their path). */
static void json_steps(struct jw *w, const struct ckpt_node *n, char sep,
		       void (*put)(struct jw *, const struct ckpt_node *))
{
	if (!n->parent)
		return;
	if (n->parent->parent) {
		json_steps(w, n->parent, sep, put);
		jw_putc(w, sep);
	}
	put(w, n);
}

/* A step of ckpt_node_path(). */
static void json_name(struct jw *w, const struct ckpt_node *n)
{
	jw_str_part(w, n->name, strlen(n->name));
}

static void json_node(struct jw *w, const struct ckpt_node *n, bool *first,
		      const struct opts *o)
{
	if ((n->kind == CKPT_N_DIR || n->kind == CKPT_N_SEQ) && n->dir->nkids) {
		struct ckpt_rowview v;

		for (uint32_t i = 0; i < n->dir->nkids; i++)
			json_node(w, ckpt_kid(o->c, n, i, &v), first, o);
		return;
	}
	if (n->kind != CKPT_N_TENSOR && !o->values)
		return;
	jw_puts(w, *first ? "\n  {\"path\":\"" : ",\n  {\"path\":\"");
	*first = false;
	json_steps(w, n, '/', json_name);
	jw_lit(w, "\",\"keys\":[");
	json_steps(w, n, ',', fmt_json_key);
	jw_lit(w, "],\"kind\":");
	/* containers are listed only when empty */
	jw_cstr(w, ckpt_node_is_dir(n) ? "empty" : fmt_json_kind(n));
	fmt_json_content(w, o->c, n);
	jw_lit(w, "}");
}

static void json_list(const struct ckpt *c, const struct opts *o)
{
	const struct ckpt_node *holder;
	static char buf[1 << 18];
	struct jw jw, *w = &jw;
	bool first = true;
	char *hp;

	jw_init(w, stdout, buf, sizeof(buf));
	jw_lit(w, "{\"file\":");
	jw_cstr(w, c->path);
	jw_printf(w, ",\"format\":\"%s\",\"prefix\":", ckpt_fmt(c)->name);
	jw_cstr(w, c->zip.nentries ? c->zip.prefix : NULL);
	jw_printf(w, ",\"version\":%d,\"byteorder\":", c->version);
	jw_cstr(w, c->byteorder);
	jw_lit(w, ",\"pickle_protocol\":");
	if (c->doc)
		jw_printf(w, "%d", c->doc->proto);
	else
		jw_lit(w, "null");
	fmt_json_meta(w, c);
	json_shards(w, c);
	jw_lit(w, ",\"root_type\":");
	jw_cstr(w, c->root->type);
	if (o->tree) {
		jw_lit(w, ",\"tree\":");
		ls_tree_json(w, c, o);
	} else {
		jw_lit(w, ",\"entries\":[");
		json_node(w, o->start, &first, o);
		jw_lit(w, "\n ]");
	}
	jw_lit(w, ",\"storages\":[");
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_rowview v;
		const struct ckpt_storage *s = ckpt_storage_at(c, i, &v);

		jw_puts(w, i ? ",\n  {\"key\":" : "\n  {\"key\":");
		fmt_json_storage(w, s);
		jw_lit(w, ",\"record\":");
		jw_cstr(w, s->rec ? s->rec->name : NULL);
		jw_lit(w, "}");
	}
	jw_lit(w, "\n ],\"unsafe_globals\":[");
	for (uint32_t k = 0, n = 0; k < ckpt_nparts(o->c); k++)
	for (uint32_t i = 0; (c = part(o->c, k)) && i < c->nglobals; i++) {
		jw_puts(w, n++ ? ",\n  {\"module\":" : "\n  {\"module\":");
		jw_cstr(w, c->globals[i].module);
		jw_lit(w, ",\"name\":");
		jw_cstr(w, c->globals[i].name);
		jw_lit(w, ",\"pickle\":");
		jw_cstr(w, c->globals[i].pickle);
		jw_lit(w, ",\"why\":");
		jw_cstr(w, c->globals[i].why);
		jw_printf(w, ",\"offset\":%" PRIu64 ",\"path\":",
			c->globals[i].off);
		holder = fmt_global_holder(c, i);
		hp = holder ? ckpt_node_path(holder) : NULL;
		jw_cstr(w, hp);
		free(hp);
		if (c != o->c) {	/* offsets are in that shard's pickle */
			struct ckpt_part p;

			ckpt_part_at(o->c, k, &p);
			jw_lit(w, ",\"shard\":");
			jw_cstr(w, p.name);
		}
		jw_lit(w, "}");
	}
	c = o->c;
	jw_printf(w, "\n ],\"tensors\":%u,\"totals\":", c->nshown);
	ls_totals_json(w, c);
	jw_lit(w, ",\"listed\":");
	if (o->start->parent) {	/* a key path: what was listed */
		struct ls_sum sum;
		char *p = ckpt_node_path(o->start);

		ls_sum(c, o->start, &sum);
		jw_lit(w, "{\"path\":");
		jw_cstr(w, p);
		free(p);
		jw_printf(w, ",\"tensors\":%u,\"storages\":%u,\"bytes\":%"
			PRIu64 ",\"tied_bytes\":%" PRIu64 ",\"shared_bytes\":%"
			PRIu64 "}", sum.tensors, sum.storages, sum.bytes,
			sum.tied, sum.shared);
	} else {
		jw_lit(w, "null");
	}
	jw_lit(w, "}\n");
	jw_flush(w);
}

/* Does @arg name a file (so it is a checkpoint, not a key path)? */
static bool is_file(const char *arg)
{
	struct stat st;

	return !strcmp(arg, "-") || src_is_url(arg) || !stat(arg, &st);
}

/*
 * List @c, or the subtrees its path arguments @paths[0..@npaths) name.
 * Returns the exit status for this file.
 */
static int list_one(struct ckpt *c, struct opts *o, char **paths,
		    int npaths, bool many)
{
	static int headed;
	int status = CLI_OK;
	struct diag d;

	/* rows are seen by the listing; the rest wants nodes */
	if ((npaths || o->tree) && ckpt_materialize(c, &d)) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	for (int k = 0; k < (npaths ? npaths : 1); k++) {
		o->c = c;
		o->start = npaths ? ckpt_node_by_path(c, paths[k]) : c->root;
		if (!o->start) {
			cli_error("%s: %s: no such key path (ptls %s lists "
				  "the paths)", c->path, paths[k], c->path);
			if (o->json) {
				diag_init(&d, c->path);
				diag_set(&d, -ENOENT, DIAG_NO_OFFSET,
					 "%s: no such key path", paths[k]);
				cli_json_error(stdout, &d, NULL, NULL);
			}
			status = CLI_ERROR;
			continue;
		}
		if (!o->quiet && many && !o->json)
			printf("%s%s%s%s:\n", headed++ ? "\n" : "", c->path,
			       npaths ? " " : "", npaths ? paths[k] : "");
		if (o->quiet)
			;
		else if (o->json)
			json_list(c, o);
		else
			text_list(c, o);
	}
	if (o->check && nglobals(c) && !status)
		status = CLI_FOUND;
	return status;
}

static int parse_depth(const char *arg, int *depth)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < 0 || v > CKPT_MAX_DEPTH)
		return cli_usage("--depth %s: not a number from 0 to %d", arg,
				 CKPT_MAX_DEPTH);
	*depth = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_LOPT_JSON,
		{ "tensors", no_argument, NULL, 't' },
		{ "tree", no_argument, NULL, 'T' },
		{ "totals", no_argument, NULL, 's' },
		{ "check", no_argument, NULL, 'c' },
		{ "depth", required_argument, NULL, 'L' },
		{ "human-readable", no_argument, NULL, 'H' },
		{ "stats", no_argument, NULL, 'S' },
		CLI_LOPT_QUIET,
		CLI_LOPT_VERBOSE,
		CLI_LOPT_HELP,
		CLI_LOPT_VERSION,
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .values = true, .depth = -1 };
	int opt, status = CLI_OK, nfiles = 0;

	cli_init(argv[0], "[OPTIONS] CHECKPOINT [KEY-PATH...]...");
	if (cli_remote_args(&argc, argv))
		return CLI_ERROR;
	while ((opt = getopt_long(argc, argv, "jtTscL:HSqvhV", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'j': o.json = true; break;
		case 't': o.values = false; break;
		case 'T': o.tree = true; break;
		case 's': o.totals = true; break;
		case 'c': o.check = true; break;
		case 'L':
			if (parse_depth(optarg, &o.depth))
				return CLI_ERROR;
			break;
		case 'H': o.human = true; break;
		case 'S': o.stats = true; break;
		case 'q': o.quiet = true; break;
		case 'v': o.expand = true; break;
		case 'h': usage(stdout); return cli_finish(CLI_OK);
		case 'V': return cli_version();
		default: return cli_usage(NULL);
		}
	}
	if (optind >= argc)
		return cli_usage("no checkpoint given");
	/* the first argument is a checkpoint (a missing one is an error);
	   after it, one that names no file is a key path into it */
	for (int i = optind + 1; i < argc; i++)
		nfiles += is_file(argv[i]);
	nfiles++;
	cli_stdout_fast();
	for (int i = optind; i < argc;) {
		int np = 0, rc;
		struct ckpt *c;
		struct diag d;

		while (i + 1 + np < argc && !is_file(argv[i + 1 + np]))
			np++;
		/* --stats reads tensors: those want nodes */
		if (cli_open_with(argv[i], (o.stats ? 0 : CKPT_OPEN_ROWS) |
				  (o.check ? CKPT_OPEN_KEEP : 0), &c, &d)) {
			cli_diag(&d);
			if (o.json && !o.quiet)
				json_unopened(c, &d);
			/* unreadable, but what torch.load would run in it
			   before it failed is still named: unsafe */
			rc = c && c->nglobals ? CLI_FOUND : CLI_ERROR;
			if (!o.json && !o.quiet)
				text_unsafe(c);
			ckpt_close(c);
			if (rc == CLI_ERROR || status == CLI_OK)
				status = rc;
			i += 1 + np;
			continue;
		}
		rc = o.stats ? ls_stats(c, &o, argv + i + 1, np, nfiles > 1 ||
					np > 1) :
		     list_one(c, &o, argv + i + 1, np, nfiles > 1 || np > 1);
		if (rc == CLI_ERROR || (rc == CLI_FOUND && status == CLI_OK))
			status = rc;
		ckpt_close(c);
		i += 1 + np;
	}
	return cli_finish(status);
}
