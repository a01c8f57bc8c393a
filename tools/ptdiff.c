/*
 * ptdiff - compare two PyTorch checkpoints without loading or mounting
 * them, in the spirit of h5diff.  Objects are matched by their path in the
 * object tree (the paths ptls prints); keys on one side only, kind, dtype,
 * shape, layout and attribute differences are reported, python values by
 * their text, and tensors of one dtype and shape element by element
 * (ptdiff_cmp.c), streamed so that memory is bounded by the metadata.
 *
 * Exit status: 0 equal (within the tolerance), 1 different, 2 error.
 */
#include "ptdiff.h"

#include "ckpt_fmt.h"
#include "cli.h"
#include "pickle/pkl.h"
#include "cli_io.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: ptdiff [OPTIONS] A B [KEY-PATH...]\n"
	      "Compare two PyTorch checkpoints without loading them (with "
	      "KEY-PATHs, only\nthose subtrees).\n\n"
	      "      --atol X          absolute tolerance (default 0)\n"
	      "      --rtol X          relative tolerance (default 0):\n"
	      "                        equal when |a - b| <= atol + rtol * "
	      "|b|\n"
	      "      --rel-l2 X        a tensor's values are equal when "
	      "||a - b|| / ||b|| <= X\n"
	      "                        (instead of element by element)\n"
	      "      --nan-differ      a NaN never equals anything\n"
	      "      --ignore-layout   stride and storage offset differences"
	      " do not count\n"
	      "      --ignore-dtype    a dtype difference alone does not count"
	      " (values are\n"
	      "                        compared across dtypes either way)\n"
	      "      --count N         stop after N differences, as h5diff -n "
	      "(with --sort:\n"
	      "                        list the N largest)\n"
	      "      --sort[=KEY]      differences largest first, by KEY: abs "
	      "(max abs,\n"
	      "                        the default), rel, l2 (rel L2), count\n"
	      "  -v, --verbose         also list the items that are equal\n"
	      CLI_COMMON_HELP
	      "\nExit status: 0 equal, 1 different, 2 error.\n", f);
}

/* ---- the walk: pair up paths ---- */

static int push(struct pairs *p, const struct ckpt_node *a,
		const struct ckpt_node *b)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct pair *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (struct pair){ a, b, -1, -1 };
	if (a && b && a->kind == CKPT_N_TENSOR && b->kind == CKPT_N_TENSOR &&
	    a->tensor->kind != CKPT_T_META && b->tensor->kind != CKPT_T_META &&
	    ckpt_tensor_nbytes(a->tensor) == ckpt_tensor_nbytes(b->tensor))
		p->bytes += ckpt_tensor_nbytes(a->tensor);
	return 0;
}

/*
 * Pair @a (from A, or NULL) with @b (from B, or NULL): directories that
 * both sides have are entered, A's keys in A's order then the keys only
 * B has in B's; everything else (leaves, a directory on one side only,
 * a directory against a leaf) is one pair.
 */
static int collect(struct pairs *p, const struct ckpt_node *a,
		   const struct ckpt_node *b)
{
	int rc = 0;

	if (!a || !b || !ckpt_node_is_dir(a) || !ckpt_node_is_dir(b) ||
	    (!a->dir->nkids && !b->dir->nkids))
		return push(p, a, b);
	if (pd_dirs_differ(a, b))
		rc = push(p, a, b);
	for (uint32_t i = 0; i < a->dir->nkids && !rc; i++)
		if (a->dir->kids[i])
			rc = collect(p, a->dir->kids[i],
				     ckpt_node_child(b, a->dir->kids[i]->name));
	for (uint32_t i = 0; i < b->dir->nkids && !rc; i++)
		if (b->dir->kids[i] &&
		    !ckpt_node_child(a, b->dir->kids[i]->name))
			rc = push(p, NULL, b->dir->kids[i]);
	return rc;
}

/* ---- comparing one pair ---- */

static int compare_pair(struct pd_ctx *x, struct pd_item *it)
{
	const struct ckpt_node *a = it->a, *b = it->b;
	char *ta, *tb;
	int rc = 0;

	if (!b || !a) {
		it->status = a ? ST_ONLY_A : ST_ONLY_B;
		return 0;
	}
	if (pd_kind_of(a) != pd_kind_of(b)) {
		it->kind = true;
	} else if (ckpt_node_is_dir(a)) {
		if (strcmp(a->type, b->type))
			pd_add_attr(it, "type", a->type, b->type);
		if (pd_states_differ(a, b))
			pd_add_attr(it, "state", pd_describe_state(a),
				 pd_describe_state(b));
	} else if (a->kind == CKPT_N_TENSOR) {
		rc = pd_compare_tensors(x, it);
	} else if (a->kind == CKPT_N_LINK) {
		ta = ckpt_node_path(a->target);
		tb = ckpt_node_path(b->target);
		if (!ta || !tb)
			rc = diag_nomem(x->da);
		else
			it->target = strcmp(ta, tb) != 0;
		free(ta);
		free(tb);
	} else if (!ckpt_node_is_dir(a)) {
		it->value = strcmp(a->type, b->type) ||
			    a->textlen != b->textlen ||
			    memcmp(a->text, b->text, a->textlen);
	}
	it->status = it->kind || it->dtype || it->shape || it->layout ||
		     it->value || it->target || it->values || it->nattrs ?
		     ST_CHANGED : ST_EQUAL;
	return rc;
}

/* ---- progress: on a terminal, after a second ---- */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double t_start, t_last;
static bool progress_shown;
static bool stdout_tty;		/* then lines and progress share a screen */

static void progress_clear(void)
{
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		progress_shown = false;
	}
}

static void tick(struct pd_ctx *x)
{
	double t = now();

	if (t - t_start < 1.0 || t - t_last < 0.2)
		return;
	t_last = t;
	fprintf(stderr, "\r\033[Kptdiff: %3d%% of %" PRIu64 " MB  %.48s",
		x->done < x->total ? (int)(100.0 * x->done / x->total) : 100,
		x->total / 1000000, x->path ? x->path : "");
	progress_shown = true;
}

/* ---- main ---- */

static bool parse_tol(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < 0)
		return false;
	*out = v;
	return true;
}

/*
 * Open one side; on failure one line on stderr and, with --json, the
 * error object (naming the side) on stdout.
 */
static int open_one(const char *path, struct ckpt **c, struct diag *d,
		    const struct pd_opts *o, const char *side)
{
	char line[512];

	if (!cli_open(path, c, d))
		return 0;
	if (o->json)
		cli_json_error(stdout, d, side, NULL);
	fprintf(stderr, "ptdiff: %s\n", diag_line(d, line, sizeof(line)));
	return -1;
}

static bool big_endian(const struct ckpt *c)
{
	return c->byteorder && !strcmp(c->byteorder, "big");
}

static void count(struct pd_totals *t, const struct pd_item *it)
{
	if (it->status == ST_ONLY_A) {
		t->only_a++;
		return;
	}
	if (it->status == ST_ONLY_B) {
		t->only_b++;
		return;
	}
	if (it->status == ST_EQUAL)
		t->equal++;
	else
		t->changed++;
	if (!it->kind && it->a->kind == CKPT_N_TENSOR)
		t->tensors++;
	else if (!it->kind && pd_kind_of(it->a) == K_VALUE)
		t->values++;
	else
		t->other++;
}

/* One item of the report, as text or as JSON (@printed: items so far). */
static void emit(const struct pd_opts *o, const struct pd_item *it,
		 size_t *printed)
{
	if (o->json) {
		pd_json_item(stdout, it, *printed == 0);
	} else if (!o->quiet) {
		if (stdout_tty && (it->status != ST_EQUAL || o->verbose))
			progress_clear();
		pd_text_item(it, o);
	}
	(*printed)++;
}

/* The held report of --sort, in its order; --count lists the first. */
static void emit_held(const struct pd_opts *o, struct pd_held *h,
		      struct pd_totals *t, size_t *printed)
{
	uint64_t shown = 0;

	pd_held_sort(h, o->sort);
	for (size_t i = 0; i < h->n; i++) {
		if (h->v[i]->status != ST_EQUAL && o->limit &&
		    shown++ >= o->limit) {
			t->not_shown++;
			continue;
		}
		emit(o, h->v[i], printed);
	}
}

/*
 * Compare every pair and report, as we go or (--sort) at the end;
 * 0, 1 (a difference) or 2.
 */
static int run(struct pd_ctx *x, const struct pairs *p, const char *pa,
	       const char *pb)
{
	const struct pd_opts *o = x->o;
	struct pd_totals t = { 0 };
	struct pd_held held = { 0 };
	char line[512] = "";
	size_t printed = 0;
	uint64_t ndiff = 0;
	int rc = 0;

	if (o->json)
		pd_json_head(stdout, pa, pb, o);
	for (size_t i = 0; i < p->n && !rc; i++) {
		const struct pair *v = &p->v[i];
		struct pd_item it = {
			.a = v->a, .b = v->b, .tie_diff = v->tie_a != v->tie_b,
			.tie_a = v->tie_a >= 0 ? p->v[v->tie_a].a : NULL,
			.tie_b = v->tie_b >= 0 ? p->v[v->tie_b].b : NULL,
			.order = i,
		};
		const struct ckpt_node *n = it.a ? it.a : it.b;

		it.path = ckpt_node_path(n);
		if (!it.path) {
			rc = diag_nomem(x->da);
			break;
		}
		if (!it.path[0]) {	/* the root itself is a leaf */
			free(it.path);
			it.path = strdup(".");
			if (!it.path) {
				rc = diag_nomem(x->da);
				break;
			}
		}
		rc = compare_pair(x, &it);
		if (!rc) {
			count(&t, &it);
			ndiff += it.status != ST_EQUAL;
			if (!o->sort)
				emit(o, &it, &printed);
			else if ((it.status != ST_EQUAL || o->json ||
				  o->verbose) && pd_hold(&held, &it))
				rc = diag_nomem(x->da);
		}
		free(it.path);
		if (x->tick)
			x->tick(x);
		if (o->quiet && ndiff)
			break;	/* the status is known */
		if (!o->sort && o->limit && ndiff >= o->limit &&
		    i + 1 < p->n) {
			t.stopped = true;	/* h5diff -n */
			break;
		}
	}
	if (!rc && o->sort)
		emit_held(o, &held, &t, &printed);
	pd_held_release(&held);
	if (rc)
		diag_line(diag_failed(x->da) ? x->da : x->db, line,
			  sizeof(line));
	progress_clear();
	if (o->json)
		pd_json_tail(stdout, &t, x->done, rc ? line : NULL);
	else if (!o->quiet && !rc)
		pd_text_totals(&t, o);
	if (rc) {
		fflush(stdout);
		fprintf(stderr, "ptdiff: %s\n", line);
		return 2;
	}
	return t.changed + t.only_a + t.only_b ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_LOPT_QUIET,
		CLI_LOPT_VERBOSE,
		CLI_LOPT_JSON,
		{ "atol", required_argument, NULL, 'a' },
		{ "rtol", required_argument, NULL, 'r' },
		{ "rel-l2", required_argument, NULL, 'L' },
		{ "nan-differ", no_argument, NULL, 'N' },
		{ "ignore-layout", no_argument, NULL, 'l' },
		{ "ignore-dtype", no_argument, NULL, 'D' },
		{ "count", required_argument, NULL, 'c' },
		{ "sort", optional_argument, NULL, 'S' },
		CLI_LOPT_HELP,
		CLI_LOPT_VERSION,
		{ NULL, 0, NULL, 0 },
	};
	struct pd_opts o = { .rel_l2 = -1 };
	struct pairs p = { 0 };
	struct ckpt *a = NULL, *b = NULL;
	struct diag da, db;
	struct pd_ctx x = { .o = &o, .da = &da, .db = &db };
	int opt, status = 2;

	cli_init(argv[0], "[OPTIONS] A B [KEY-PATH...]");
	if (cli_remote_args(&argc, argv))
		return CLI_ERROR;
	while ((opt = getopt_long(argc, argv, "qvjhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'q': o.quiet = true; break;
		case 'v': o.verbose = true; break;
		case 'j': o.json = true; break;
		case 'N': o.nan_differ = true; break;
		case 'l': o.ignore_layout = true; break;
		case 'D': o.ignore_dtype = true; break;
		case 'c': {	/* not -n: that is --no-crc in ptdump, ptverify */
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (end == optarg || *end || errno || !v ||
			    optarg[0] == '-')
				return cli_usage("--count %s: not a count >= 1",
						 optarg);
			o.limit = v;
			break;
		}
		case 'S':
			o.sort = optarg ? pd_sort_parse(optarg) : PD_SORT_ABS;
			if (o.sort < 0)
				return cli_usage("--sort=%s: one of abs, rel, "
						 "l2, count", optarg);
			break;
		case 'a':
		case 'r':
		case 'L':
			if (parse_tol(optarg, opt == 'a' ? &o.atol : opt == 'r' ?
				      &o.rtol : &o.rel_l2))
				break;
			fprintf(stderr, "ptdiff: --%s: '%s' is not a number "
				">= 0\n", opt == 'a' ? "atol" : opt == 'r' ?
				"rtol" : "rel-l2", optarg);
			return 2;
		case 'h': usage(stdout); return cli_finish(CLI_OK);
		case 'V': return cli_version();
		default: return cli_usage(NULL);
		}
	}
	if (argc - optind < 2)
		return cli_usage("expected A and B, got %d file name%s",
				 argc - optind, argc - optind == 1 ? "" : "s");
	if (o.quiet)
		o.json = o.verbose = false;
	stdout_tty = isatty(STDOUT_FILENO);
	if (!stdout_tty)
		cli_stdout_fast();
	if (open_one(argv[optind], &a, &da, &o, "\"side\":\"a\",") ||
	    open_one(argv[optind + 1], &b, &db, &o, "\"side\":\"b\","))
		goto out;
	x.a = a;
	x.b = b;
	x.big_a = big_endian(a);
	x.big_b = big_endian(b);
	x.buf_a = malloc(PD_CHUNK);
	x.buf_b = malloc(PD_CHUNK);
	for (int i = optind + 2; i < argc; i++) {
		const struct ckpt_node *na = ckpt_node_by_path(a, argv[i]);
		const struct ckpt_node *nb = ckpt_node_by_path(b, argv[i]);

		if (!na && !nb) {
			fprintf(stderr, "ptdiff: %s: no such key path in %s or "
				"%s\n", argv[i], a->path, b->path);
			goto out;
		}
		if (collect(&p, na, nb)) {
			fprintf(stderr, "ptdiff: out of memory\n");
			goto out;
		}
	}
	if (!x.buf_a || !x.buf_b ||
	    (argc - optind == 2 && collect(&p, a->root, b->root)) ||
	    pd_ties(&p, a, b)) {
		fprintf(stderr, "ptdiff: out of memory\n");
		goto out;
	}
	x.total = p.bytes;
	if (!o.quiet && isatty(STDERR_FILENO)) {
		t_start = now();
		x.tick = tick;
	}
	status = run(&x, &p, a->path, b->path);
	if (fflush(stdout) || ferror(stdout)) {
		perror("ptdiff: write");
		status = 2;
	}
out:
	free(p.v);
	free(x.buf_a);
	free(x.buf_b);
	ckpt_close(a);
	ckpt_close(b);
	return status;
}
