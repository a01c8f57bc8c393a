/*
 * ptdump - show everything in a PyTorch checkpoint, in the spirit of
 * h5dump: every node of the object tree with its path, type and python
 * value (tensors with all their metadata, and each storage with its
 * record); with --pickle the opcodes of data.pkl exactly as `python3 -m
 * pickletools` lists them; with --records the zip records with their
 * offsets, sizes, CRC-32 (stored and recomputed) and alignment.  Nothing
 * in the pickle is run.
 *
 * Exit status: 0 dumped, 2 the file could not be read (one line on stderr
 * says why; a listing stops at the opcode it could not decode).
 */
#include "ckpt/ckpt.h"
#include "source/source.h"
#include "ckpt_fmt.h"
#include "cli.h"
#include "globals.h"
#include "cli_io.h"
#include "diag/diag.h"
#include "json_out.h"
#include "pickle/pkl.h"
#include "ptdump.h"
#include "pyrepr.h"
#include "util/io.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define REPR_MAX	(1u << 20)	/* bytes of one object's repr */

static void usage(FILE *f)
{
	fputs("usage: ptdump [OPTIONS] CHECKPOINT...\n"
	      "Show everything in PyTorch checkpoints without loading them.\n"
	      "\n"
	      "  (default)         every node of the object tree: path, type, "
	      "python\n"
	      "                    value, tensor metadata; then the storages\n"
	      "  -p, --pickle      the opcodes of data.pkl, as `python3 -m "
	      "pickletools`\n"
	      "  -a, --annotate    with --pickle: describe each opcode "
	      "(pickletools -a)\n"
	      "  -r, --records     the zip records: offsets, sizes, method, "
	      "CRC-32\n"
	      "                    (stored and recomputed), alignment\n"
	      "  -n, --no-crc      with --records: do not read the data to "
	      "check CRCs\n"
	      "      --values KEY  the values of tensor KEY (a path as ptls "
	      "prints it),\n"
	      "                    in the text view's format\n"
	      "      --head N      with --values: the first N elements only\n"
	      "      --start I,J   with --values: a hyperslab from index I,J "
	      "(default 0)\n"
	      "      --count M,N   ... of M,N elements a dimension (default "
	      "all that fit)\n"
	      "      --stride S,T  ... every S-th, T-th (default 1), as "
	      "h5dump -s -c -S\n"
	      CLI_COMMON_HELP
	      "\nExit status: 0 ok, 2 error.\n", f);
}

void dump_error(const char *path, uint64_t off, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (off == DIAG_NO_OFFSET)
		cli_error("%s: %s", path, msg);
	else
		cli_error("%s: offset 0x%" PRIx64 ": %s", path, off, msg);
}

/* ---- the object tree ---- */

/*
 * Does @v have a place of its own in the pickle?  The parser shares one
 * node per document for None, True, False, () and the ints BININT1 makes
 * (docs/design.md), so their offset is only where the first one was.
 */
static bool own_offset(const struct pkl_value *v)
{
	if (!v)
		return false;
	switch (v->kind) {
	case PKL_NONE:
	case PKL_BOOL:
		return false;
	case PKL_INT:
		return v->u.i < 0 || v->u.i > 255;
	case PKL_TUPLE:
		return pkl_len(v) != 0;
	default:
		return true;
	}
}

/* Where a value is in the pickle, as pickletools numbers it. */
static uint64_t pkl_pos(const struct ckpt *c, uint64_t off)
{
	return c->zip.nentries ? off - c->pkl_off : off;
}

/* Python's repr() of a value node's value into @b. */
static void value_repr(struct sbuf *b, const struct ckpt_node *n)
{
	uint32_t *cp;
	long k;

	if (n->kind == CKPT_N_VALUE && !strcmp(n->type, "str")) {
		k = py_utf8_decode((const unsigned char *)n->text, n->textlen,
				   &cp);
		if (k >= 0) {
			py_repr_str(b, cp, (size_t)k);
			free(cp);
			return;
		}
	}
	if (n->kind == CKPT_N_VALUE && !strcmp(n->type, "bytes")) {
		py_repr_bytes(b, (const unsigned char *)n->text, n->textlen,
			      false);
		return;
	}
	sb_add(b, n->text, n->textlen);
}

/* The BUILD state of a dict type (the _metadata of a state_dict). */
static const struct pkl_value *dict_state(const struct ckpt_node *n)
{
	const struct pkl_value *v = n->val;

	if (!ckpt_node_is_dir(n) || !v || v->kind != PKL_CALL ||
	    !ckpt_dict_type(n->type))
		return NULL;
	return pkl_call_x(v)->state;
}

static void tensor_text(struct sbuf *b, const struct ckpt_tensor *t)
{
	char shape[1024], stride[1024], sc[40];
	const char *dev;

	fmt_dims(shape, sizeof(shape), t->shape, t->ndim);
	fmt_dims(stride, sizeof(stride), ckpt_tensor_stride(t), t->ndim);
	sb_printf(b, "%s %s stride %s offset %" PRIu64, t->dtype->name, shape,
		  stride, t->offset);
	if (t->storage)
		sb_printf(b, " storage '%s'", t->storage->key);
	dev = ckpt_tensor_device(t);
	sb_printf(b, " %s %" PRIu64 " B", dev ? dev : "-",
		  ckpt_tensor_nbytes(t));
	if (t->parameter)
		sb_puts(b, " Parameter");
	if (t->requires_grad)
		sb_puts(b, " requires_grad");
	if (!t->contiguous)
		sb_puts(b, " non-contiguous");
	if (t->kind == CKPT_T_META)
		sb_puts(b, " meta");
	if (t->kind == CKPT_T_STORAGE)
		sb_puts(b, " (a storage)");
	if (t->kind == CKPT_T_INLINE)
		sb_puts(b, " (numpy data in the pickle)");
	if (t->conj)
		sb_puts(b, " conj");
	if (t->neg)
		sb_puts(b, " neg");
	if (t->x->cls)
		sb_printf(b, " class %s", t->x->cls);
	if (t->x->qscheme) {
		sb_printf(b, " quantized %s", t->x->qscheme);
		if (t->x->qscales)
			sb_printf(b, " axis %" PRId64, t->x->axis);
		else
			sb_printf(b, " scale %s zero_point %" PRId64,
				  ckpt_float_repr(t->x->scale, sc, sizeof(sc)),
				  t->x->zero_point);
	}
}

static int path_width(const struct ckpt_node *n, int depth)
{
	int w = 0;

	if (n->parent) {
		for (const struct ckpt_node *p = n; p->parent; p = p->parent)
			w += (int)strlen(p->name) + 1;
		w--;
	} else {
		w = 1;
	}
	for (uint32_t i = 0; ckpt_node_is_dir(n) && i < n->dir->nkids; i++) {
		int k;

		if (depth >= CKPT_MAX_DEPTH)
			break;
		/* not inside MAX(), which would walk the subtree twice:
		   2^40 walks for 40 levels of lists (tests/hostile) */
		k = path_width(n->dir->kids[i], depth + 1);
		w = MAX(w, k);
	}
	return w;
}

static void node_text(const struct ckpt *c, const struct ckpt_node *n,
		      int width, int depth)
{
	struct sbuf b = { 0 };
	const struct pkl_value *st = dict_state(n);
	char *path = ckpt_node_path(n);

	switch (n->kind) {
	case CKPT_N_DIR:
	case CKPT_N_SEQ:
		sb_printf(&b, "%s (%u item%s)", n->type, n->dir->nkids,
			  n->dir->nkids == 1 ? "" : "s");
		if (st) {
			size_t len;
			char *r = ckpt_repr(st, REPR_MAX, &len);

			sb_puts(&b, " state ");
			if (r)
				sb_add(&b, r, len);
			free(r);
		}
		break;
	case CKPT_N_TENSOR:
		sb_printf(&b, "%s ", n->type);
		tensor_text(&b, n->tensor);
		break;
	case CKPT_N_LINK: {
		char *to = ckpt_node_path(n->target);

		sb_printf(&b, "%s -> %s", n->type, to ? (to[0] ? to : ".") :
			  "?");
		free(to);
		break;
	}
	default:
		sb_printf(&b, "%s ", n->type);
		value_repr(&b, n);
	}
	if (own_offset(n->val))
		sb_printf(&b, "  @%" PRIu64, pkl_pos(c, n->val->off));
	printf("%-*s  %s\n", width, path && path[0] ? path : ".",
	       b.p ? b.p : "");
	free(path);
	free(b.p);
	for (uint32_t i = 0; ckpt_node_is_dir(n) && i < n->dir->nkids; i++)
		if (depth < CKPT_MAX_DEPTH)
			node_text(c, n->dir->kids[i], width, depth + 1);
}

static void storages_text(struct ckpt *c)
{
	struct diag quiet;

	diag_init(&quiet, c->path);
	printf("# %u storage%s\n", c->nstorages, c->nstorages == 1 ? "" : "s");
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_storage *s = c->storages[i];
		bool located = !s->rec || !ckpt_storage_locate(c, s, &quiet);

		printf("storage '%s'  %s%s x %" PRIu64 " = %" PRIu64 " B  %s  "
		       "%u tensor%s", s->key, s->untyped ? "untyped " : "",
		       s->dtype->name, s->numel, s->nbytes, s->location,
		       s->ntensors, s->ntensors == 1 ? "" : "s");
		if (s->rec)
			printf("  record %s", s->rec->name);
		if (located && (s->rec || ckpt_can(c, CKPT_CAP_OFFSETS)))
			printf("  data at 0x%" PRIx64, s->data_off);
		putchar('\n');
	}
	for (uint32_t i = 0; i < c->nglobals; i++) {
		char where[64], text[8192];

		/* data.pkl's at their place in it, as the dump shows them */
		if (!strcmp(c->globals[i].pickle, c->pkl_label ?
			    c->pkl_label : "data.pkl"))
			snprintf(where, sizeof(where), " (at @%" PRIu64 ")",
				 pkl_pos(c, c->globals[i].off));
		else
			snprintf(where, sizeof(where), " (offset 0x%" PRIx64
				 ")", c->globals[i].off);
		fmt_global_text(c, i, where, text, sizeof(text));
		printf("# %s\n", text);
	}
}

static void header_text(const struct ckpt *c)
{
	struct ckpt_folder f;

	if (ckpt_folder(c, &f)) {
		printf("# %s: Hugging Face sharded folder, index %s, %u shards "
		       "(storage keys are SHARD:KEY, pickle offsets the "
		       "shard's)\n", c->path, f.index, ckpt_nparts(c));
		return;
	}
	if (ckpt_can(c, CKPT_CAP_FLAT)) {
		char what[200];

		ckpt_fmt(c)->describe(c, what, sizeof(what));
		printf("# %s: %s\n", c->path, what);
		fmt_meta_text(c);
		return;
	}
	/* a folder of many files without an index: a DCP directory, a rank
	   set, and what commits it (.metadata, the journal) */
	printf("# %s: %s %s%s", c->path, ckpt_fmt(c)->name,
	       c->zip.nentries ? "archive" : ckpt_can(c, CKPT_CAP_MANY) ?
	       "directory, " : "stream",
	       !c->zip.nentries && ckpt_can(c, CKPT_CAP_MANY) ?
	       ckpt_fmt(c)->commit : "");
	if (c->zip.nentries)
		printf(", prefix '%s', version %d, %u records", c->zip.prefix,
		       c->version, c->zip.nentries);
	if (c->byteorder)
		printf(", byteorder %s", c->byteorder);
	printf(", pickle protocol %d at 0x%" PRIx64 "\n", c->doc->proto,
	       c->pkl_off);
}

/* ---- the object tree as JSON ---- */

static void node_json(struct jw *w, const struct ckpt *c,
		      const struct ckpt_node *n, int depth)
{
	const struct pkl_value *st = dict_state(n);
	struct sbuf b = { 0 };
	char *path = ckpt_node_path(n);

	jw_lit(w, "{\"path\":");
	jw_cstr(w, path ? path : "?");
	free(path);
	jw_putc(w, ',');
	fmt_json_name(w, n);
	jw_lit(w, ",\"type\":");
	jw_cstr(w, n->type);
	jw_lit(w, ",\"pickle_offset\":");
	if (own_offset(n->val))
		jw_u64(w, pkl_pos(c, n->val->off));
	else
		jw_lit(w, "null");
	if (n->kind == CKPT_N_TENSOR) {
		fmt_json_tensor(w, c, n->tensor);
	} else if (n->kind == CKPT_N_VALUE || n->kind == CKPT_N_OPAQUE) {
		if (n->kind == CKPT_N_VALUE) {
			jw_lit(w, ",\"value\":");
			fmt_json_value(w, n);
		}
		value_repr(&b, n);
		jw_lit(w, ",\"repr\":");
		jw_str(w, b.p ? b.p : "", b.n);
	} else if (n->kind == CKPT_N_LINK) {
		char *to = ckpt_node_path(n->target);

		jw_lit(w, ",\"target\":");
		jw_cstr(w, to ? to : "?");
		free(to);
	}
	free(b.p);
	if (st) {
		size_t len;
		char *r = ckpt_repr(st, REPR_MAX, &len);

		jw_lit(w, ",\"state\":");
		jw_str(w, r ? r : "", r ? len : 0);
		free(r);
	}
	if (ckpt_node_is_dir(n)) {
		jw_lit(w, ",\"children\":[");
		for (uint32_t i = 0;
		     i < n->dir->nkids && depth < CKPT_MAX_DEPTH; i++) {
			if (i)
				jw_putc(w, ',');
			jw_indent(w, 2 * depth + 2);
			node_json(w, c, n->dir->kids[i], depth + 1);
		}
		jw_lit(w, "]");
	}
	jw_putc(w, '}');
}

static void dump_json(struct ckpt *c)
{
	char buf[1 << 16];
	struct jw jw, *w = &jw;
	struct diag quiet;

	diag_init(&quiet, c->path);
	jw_init(w, stdout, buf, sizeof(buf));
	jw_lit(w, "{\"file\":");
	jw_cstr(w, c->path);
	jw_printf(w, ",\"format\":\"%s\",\"prefix\":", ckpt_fmt(c)->name);
	jw_cstr(w, c->zip.nentries ? c->zip.prefix : NULL);
	jw_printf(w, ",\"version\":%d,\"byteorder\":", c->version);
	jw_cstr(w, c->byteorder);
	if (c->doc)
		jw_printf(w, ",\"pickle_protocol\":%d,\"pickle_offset\":%"
			PRIu64, c->doc->proto, c->pkl_off);
	else
		jw_lit(w, ",\"pickle_protocol\":null,\"pickle_offset\":null");
	fmt_json_meta(w, c);
	jw_lit(w, ",\n \"root\":");
	node_json(w, c, c->root, 0);
	jw_lit(w, ",\n \"storages\":[");
	for (uint32_t i = 0; i < c->nstorages; i++) {
		struct ckpt_storage *s = c->storages[i];
		bool located = !s->rec || !ckpt_storage_locate(c, s, &quiet);

		jw_puts(w, i ? ",\n  {\"key\":" : "\n  {\"key\":");
		fmt_json_storage(w, s);
		jw_printf(w, ",\"tensors\":%u,\"record\":", s->ntensors);
		jw_cstr(w, s->rec ? s->rec->name : NULL);
		jw_lit(w, ",\"data_offset\":");
		if (located && (s->rec || ckpt_can(c, CKPT_CAP_OFFSETS)))
			jw_u64(w, s->data_off);
		else
			jw_lit(w, "null");
		jw_lit(w, "}");
	}
	jw_lit(w, "\n ],\"unsafe_globals\":[");
	for (uint32_t i = 0; i < c->nglobals; i++) {
		jw_puts(w, i ? ",\n  {\"module\":" : "\n  {\"module\":");
		jw_cstr(w, c->globals[i].module);
		jw_lit(w, ",\"name\":");
		jw_cstr(w, c->globals[i].name);
		jw_lit(w, ",\"pickle\":");
		jw_cstr(w, c->globals[i].pickle);
		jw_lit(w, ",\"why\":");
		jw_cstr(w, c->globals[i].why);
		jw_printf(w, ",\"pickle_offset\":%" PRIu64 "}",
			pkl_pos(c, c->globals[i].off));
	}
	jw_lit(w, "\n ]}\n");
	jw_flush(w);
}

static int dump_tree(const char *path, const struct dump_opts *o)
{
	struct ckpt *c;
	struct diag d;

	diag_init(&d, o->name);
	if (ckpt_open_with(path, CKPT_OPEN_WHOLE, &c, &d)) {
		if (o->json)
			cli_json_error(stdout, &d, NULL, NULL);
		cli_diag(&d);
		return CLI_ERROR;
	}
	c->path = o->name;
	if (o->json) {
		dump_json(c);
	} else {
		header_text(c);
		node_text(c, c->root, path_width(c->root, 0), 0);
		storages_text(c);
	}
	ckpt_close(c);
	return CLI_OK;
}

/* ---- --pickle ---- */

/*
 * The pickle of a zip archive (data.pkl) or the pickles of a legacy
 * stream (all five, mapped so that only what is read is paged in).
 */
static int dump_pickle_file(const char *path, const struct dump_opts *o)
{
	unsigned char head[9] = { 0 }, *buf = NULL;
	struct ptz_reader z = { 0 };
	struct ptz_entry *e;
	struct diag d;
	struct stat st;
	size_t len;
	int fd, rc = CLI_ERROR;

	diag_init(&d, o->name);
	fd = src_open_path(path, &st, &d);	/* never blocks on a fifo */
	if (fd < 0) {
		cli_diag(&d);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {	/* a DCP directory: its .metadata */
		struct src *s = NULL;
		int k = src_new(path, -1, &s, &d) ? -1 :
			src_add(s, ".metadata", 9, DIAG_NO_OFFSET, SRC_OPTIONAL,
				&d);

		if (k >= 0) {
			close(fd);
			fd = fcntl(src_at(s, (uint32_t)k)->fd, F_DUPFD_CLOEXEC,
				   0);
			if (fd < 0 || fstat(fd, &st))
				k = diag_errno(&d, -errno, "%s",
					       strerror(errno));
		}
		src_free(s);
		if (k < 0 && d.err) {
			cli_diag(&d);
			goto out;
		}
	}
	if (S_ISDIR(st.st_mode) || !st.st_size) {
		dump_error(o->name, DIAG_NO_OFFSET, "%s", S_ISDIR(st.st_mode) ?
			   "is a directory (of a sharded checkpoint? --pickle "
			   "takes one shard)" : "empty file, not a pickle");
		goto out;
	}
	if (ckpt_hf_index_name(path)) {
		dump_error(o->name, DIAG_NO_OFFSET, "a Hugging Face index "
			   "holds no pickle: --pickle takes one of its shards");
	} else if (io_pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
	    ckpt_safetensors_head(head, sizeof(head))) {
		dump_error(o->name, 0, "a safetensors file holds no pickle "
			   "(its header is JSON: see ptdump --records)");
	} else if (io_pread(fd, head, 4, 0) == 4 && !memcmp(head, "PK\3\4", 4)) {
		if (ptz_reader_open(&z, fd, o->name, &d)) {
			cli_diag(&d);
			goto out;
		}
		e = ptz_find_rel(&z, "data.pkl");
		if (!e) {
			dump_error(o->name, z.cdir_off, "no data.pkl record");
			goto out;
		}
		if (ptz_entry_read(&z, e, UINT32_MAX, &buf, &len, &d)) {
			cli_diag(&d);
			goto out;
		}
		rc = dump_pickles(stdout, o, o->name, buf, len, 0, 1, e->data_off)
		     ? CLI_ERROR : CLI_OK;
		free(buf);
	} else {
		/* legacy: magic number, protocol, sys_info, object, keys
		   (a remote object's bytes are read, not mapped) */
		bool backed = io_backed(fd);
		void *map = backed ? malloc((size_t)st.st_size) :
			    mmap(NULL, (size_t)st.st_size, PROT_READ,
				 MAP_PRIVATE, fd, 0);
		static const unsigned char magic[] = { 0x80, 0x02, 0x8a, 0x0a };

		if (map == MAP_FAILED || !map) {
			dump_error(o->name, DIAG_NO_OFFSET, "%s", strerror(errno));
			goto out;
		}
		if (backed && io_pread_diag(fd, map, (size_t)st.st_size, 0,
					    NULL, &d)) {
			free(map);
			cli_diag(&d);
			goto out;
		}
		rc = dump_pickles(stdout, o, o->name, map, (size_t)st.st_size, 0,
				  memcmp(map, magic, 4) ? 1 : 5, 0) ?
		     CLI_ERROR : CLI_OK;
		if (backed)
			free(map);
		else
			munmap(map, (size_t)st.st_size);
	}
out:
	ptz_reader_release(&z);
	if (fd >= 0)
		close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "pickle", no_argument, NULL, 'p' },
		{ "annotate", no_argument, NULL, 'a' },
		{ "records", no_argument, NULL, 'r' },
		{ "no-crc", no_argument, NULL, 'n' },
		{ "values", required_argument, NULL, 'e' },
		{ "head", required_argument, NULL, 'N' },
		{ "start", required_argument, NULL, 'I' },
		{ "count", required_argument, NULL, 'C' },
		{ "stride", required_argument, NULL, 'S' },
		CLI_LOPT_JSON,
		CLI_LOPT_QUIET,
		CLI_LOPT_HELP,
		CLI_LOPT_VERSION,
		{ NULL, 0, NULL, 0 },
	};
	struct dump_opts o = { .head = -1 };
	bool pickle = false, records = false, quiet = false;
	int ch, status = CLI_OK;
	char *end;

	cli_init(argv[0], "[OPTIONS] CHECKPOINT...");
	if (cli_remote_args(&argc, argv))
		return CLI_ERROR;
	while ((ch = getopt_long(argc, argv, "parnjqhV", lopts, NULL)) != -1) {
		switch (ch) {
		case 'e': o.values = optarg; break;
		case 'N':
			o.head = strtoll(optarg, &end, 10);
			if (*end || end == optarg || o.head < 0)
				return cli_usage("--head %s: not a count",
						 optarg);
			break;
		case 'I':
		case 'C':
		case 'S':
			if (!slab_parse_list(optarg, ch == 'I' ? &o.slab.start :
					ch == 'C' ? &o.slab.count :
					&o.slab.stride))
				return cli_usage("--%s %s: not a list of "
						 "counts (I,J,...)", ch == 'I' ?
						 "start" : ch == 'C' ? "count" :
						 "stride", optarg);
			o.slab.on = true;
			break;
		case 'q': quiet = true; break;
		case 'a': o.annotate = true; /* fall through */
		case 'p': pickle = true; break;
		case 'r': records = true; break;
		case 'n': o.no_crc = true; break;
		case 'j': o.json = true; break;
		case 'h': usage(stdout); return cli_finish(CLI_OK);
		case 'V': return cli_version();
		default: return cli_usage(NULL);
		}
	}
	if (optind >= argc)
		return cli_usage("no checkpoint given");
	if (pickle + records + !!o.values > 1)
		return cli_usage("--pickle, --records and --values: one at a "
				 "time");
	if (o.head >= 0 && !o.values)
		return cli_usage("--head goes with --values");
	if (o.slab.on && !o.values)
		return cli_usage("--start, --count and --stride go with "
				 "--values");
	/* --quiet: the whole dump is made (every byte parsed), then dropped */
	if (quiet && !freopen("/dev/null", "w", stdout)) {
		cli_error("/dev/null: %s", strerror(errno));
		return CLI_ERROR;
	}
	cli_stdout_fast();
	for (int i = optind; i < argc; i++) {
		const char *in = o.values ? argv[i] : cli_input(argv[i]);
		int rc;

		if (!in) {
			status = CLI_ERROR;
			continue;
		}
		o.name = cli_name(argv[i]);
		if (argc - optind > 1 && !o.json)
			printf("%s==> %s <==\n", i > optind ? "\n" : "",
			       o.name);
		rc = o.values ? dump_values(argv[i], &o) :
		     pickle ? dump_pickle_file(in, &o) :
		     records ? dump_records(in, &o) :
		     dump_tree(in, &o);
		if (rc > status)
			status = rc;
	}
	return cli_finish(status);
}
