/*
 * ptls_stats.c - ptls --stats: per tensor min, max, mean, std, L2 norm
 * and the counts of NaN, +Inf, -Inf and zeros, as a table or JSON.  Each
 * tensor's row-major bytes are streamed through core/stats (tstat.h) in
 * CHUNK pieces with ckpt_tensor_read(), so memory is one chunk whatever
 * the tensor's size.  Exit status 1 when any element is NaN or infinite:
 * a script's "are the weights sane" test.
 */
#include "ckpt/ckpt.h"
#include "cli.h"
#include "cli_io.h"
#include "diag/diag.h"
#include "json_out.h"
#include "ptls.h"
#include "stats/tstat.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK	(1u << 20)	/* whole elements of any size */
#define MAX(a, b) ((a) > (b) ? (a) : (b))

struct row {
	const struct ckpt_node *n;
	char *path;
	struct tstat *s;	/* NULL: not computed (dtype, meta) */
};

struct rows {
	struct row *v;
	size_t n, cap;
	uint64_t bytes;
};

static int collect(struct rows *r, const struct ckpt_node *n, int depth)
{
	if (!n || depth >= CKPT_MAX_DEPTH)
		return 0;
	if (n->kind == CKPT_N_TENSOR) {
		if (r->n == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 64;
			struct row *v = realloc(r->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			r->v = v;
			r->cap = cap;
		}
		r->v[r->n++] = (struct row){ .n = n };
		r->bytes += ckpt_tensor_size(n->tensor);
	}
	for (uint32_t i = 0; ckpt_node_is_dir(n) && i < n->dir->nkids; i++)
		if (collect(r, n->dir->kids[i], depth + 1))
			return -ENOMEM;
	return 0;
}

/*
 * @t with every broadcast dimension (stride 0, size > 1: an expand()
 * view) cut to size 1, in *@u (sharing @t's storage; @shape holds
 * 2 x CKPT_MAX_DIMS entries: @u's sizes, then its strides).  Each of its
 * elements stands for *@factor of @t's: min, max, mean and std are the
 * same, counts and the sums of squares scale.  A 4 TB expand of one row
 * is read as one row.
 */
static void unbroadcast(const struct ckpt_tensor *t, struct ckpt_tensor *u,
			int64_t *shape, uint64_t *factor)
{
	*u = *t;
	u->shape = shape;
	u->numel = 1;
	*factor = 1;
	for (int i = 0; i < t->ndim; i++) {
		shape[i] = t->shape[i];
		shape[t->ndim + i] = ckpt_tensor_stride(t)[i];
		if (ckpt_tensor_stride(t)[i] == 0 && shape[i] > 1) {
			*factor *= (uint64_t)shape[i];
			shape[i] = 1;
		}
		u->numel *= (uint64_t)shape[i];
	}
}

static void scale(struct tstat *s, uint64_t f)
{
	s->n *= f;
	s->nan *= f;
	s->pinf *= f;
	s->ninf *= f;
	s->zero *= f;
	s->finite *= f;
	s->m2 *= (double)f;
	s->sumsq *= (double)f;
}

/* Stream tensor @t through a new tstat in *@out.  0 or -errno. */
static int measure(struct ckpt *c, const struct ckpt_tensor *t0,
		   unsigned char *buf, struct tstat **out,
		   struct cli_progress *pr, uint64_t *done, struct diag *d)
{
	int64_t shape[2 * CKPT_MAX_DIMS];
	struct ckpt_tensor tb, *t = &tb;
	uint64_t size, pos = 0, factor;
	struct tstat *s;

	*out = NULL;
	if (t0->kind == CKPT_T_META || !tstat_supported(t0->dtype))
		return 0;
	if (t0->ndim > CKPT_MAX_DIMS || !t0->numel) {
		tb = *t0;
		factor = 1;
	} else {
		unbroadcast(t0, &tb, shape, &factor);
	}
	size = ckpt_tensor_size(t);
	s = malloc(sizeof(*s));
	if (!s)
		return diag_nomem(d);
	tstat_init(s, t->dtype, c->byteorder && !strcmp(c->byteorder, "big"));
	while (pos < size) {
		long long got = ckpt_tensor_read(c, t, buf, CHUNK, pos, d);

		if (got <= 0) {
			free(s);
			return got < 0 ? (int)got :
			       diag_set(d, -EIO, DIAG_NO_OFFSET, "tensor data "
					"ends early");
		}
		tstat_feed(s, buf, (size_t)got / t->dtype->size);
		pos += (uint64_t)got;
		*done += (uint64_t)got * factor;
		cli_progress(pr, *done);
	}
	scale(s, factor);
	*out = s;
	return 0;
}

static bool nonfinite(const struct tstat *s)
{
	return s && (s->nan || s->pinf || s->ninf);
}

/* min or max as text: exact for ints, "-" when nothing was finite. */
static const char *extreme(const struct tstat *s, bool max, char *buf,
			   size_t size)
{
	if (!s->finite)
		snprintf(buf, size, "-");
	else if (s->kind == TSTAT_INT)
		snprintf(buf, size, "%" PRId64, max ? s->imax : s->imin);
	else if (s->kind == TSTAT_UINT || s->kind == TSTAT_BOOL)
		snprintf(buf, size, "%" PRIu64, max ? s->umax : s->umin);
	else
		snprintf(buf, size, "%.6g", max ? s->max : s->min);
	return buf;
}

static void text_rows(const struct rows *r)
{
	int wp = 4, wt = 5;
	char a[32], b[32];

	for (size_t i = 0; i < r->n; i++) {
		wp = MAX(wp, (int)strlen(r->v[i].path));
		wt = MAX(wt, (int)strlen(r->v[i].n->tensor->dtype->name));
	}
	printf("%-*s  %-*s  %12s  %12s  %12s  %12s  %12s  %6s  %6s  %6s  "
	       "%8s\n", wp, "path", wt, "dtype", "min", "max", "mean", "std",
	       "l2", "nan", "+inf", "-inf", "zeros");
	for (size_t i = 0; i < r->n; i++) {
		const struct tstat *s = r->v[i].s;

		printf("%-*s  %-*s  ", wp, r->v[i].path, wt,
		       r->v[i].n->tensor->dtype->name);
		if (!s) {
			bool meta = r->v[i].n->tensor->kind == CKPT_T_META;

			printf("(%s)\n", meta ? "meta tensor: no data" :
			       "no statistics for this dtype");
			continue;
		}
		printf("%12s  %12s  ", extreme(s, false, a, sizeof(a)),
		       extreme(s, true, b, sizeof(b)));
		if (s->finite)
			printf("%12.6g  %12.6g  ", s->mean, tstat_std(s));
		else
			printf("%12s  %12s  ", "-", "-");
		printf("%12.6g  %6" PRIu64 "  %6" PRIu64 "  %6" PRIu64 "  %8"
		       PRIu64 "\n", tstat_l2(s), s->nan, s->pinf, s->ninf,
		       s->zero);
	}
}

/* A double as JSON: null when NaN or infinite. */
static void json_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.17g", v);
	else
		fputs("null", f);
}

static void json_rows(FILE *f, const struct ckpt *c, const struct rows *r,
		      uint64_t bad)
{
	fputs("{\"file\":", f);
	json_cstr(f, c->path);
	fputs(",\"stats\":[", f);
	for (size_t i = 0; i < r->n; i++) {
		const struct ckpt_tensor *t = r->v[i].n->tensor;
		const struct tstat *s = r->v[i].s;

		fputs(i ? ",\n  {\"path\":" : "\n  {\"path\":", f);
		json_cstr(f, r->v[i].path);
		fputs(",\"dtype\":", f);
		json_cstr(f, t->dtype->name);
		fprintf(f, ",\"numel\":%" PRIu64, t->numel);
		if (!s) {
			fputs(",\"computed\":false}", f);
			continue;
		}
		fprintf(f, ",\"computed\":true,\"finite\":%" PRIu64
			",\"nan\":%" PRIu64 ",\"posinf\":%" PRIu64
			",\"neginf\":%" PRIu64 ",\"zeros\":%" PRIu64
			",\"min\":", s->finite, s->nan, s->pinf, s->ninf,
			s->zero);
		if (!s->finite)
			fputs("null,\"max\":null", f);
		else if (s->kind == TSTAT_INT)
			fprintf(f, "%" PRId64 ",\"max\":%" PRId64, s->imin,
				s->imax);
		else if (s->kind == TSTAT_UINT || s->kind == TSTAT_BOOL)
			fprintf(f, "%" PRIu64 ",\"max\":%" PRIu64, s->umin,
				s->umax);
		else {
			json_num(f, s->min);
			fputs(",\"max\":", f);
			json_num(f, s->max);
		}
		fputs(",\"mean\":", f);
		json_num(f, s->finite ? s->mean : NAN);
		fputs(",\"std\":", f);
		json_num(f, tstat_std(s));
		fputs(",\"l2\":", f);
		json_num(f, tstat_l2(s));
		fputs("}", f);
	}
	fprintf(f, "\n ],\"tensors\":%zu,\"nonfinite_tensors\":%" PRIu64
		"}\n", r->n, bad);
}

static int stats_one(struct ckpt *c, const struct opts *o,
		     const struct ckpt_node *start, bool many)
{
	static int headed;
	struct rows r = { 0 };
	struct cli_progress pr;
	unsigned char *buf = malloc(CHUNK);
	uint64_t done = 0, bad = 0;
	struct diag d;
	int rc;

	diag_init(&d, c->path);
	rc = buf ? collect(&r, start, 0) : -ENOMEM;
	if (rc)
		diag_nomem(&d);
	cli_progress_start(&pr, "statistics", r.bytes);
	for (size_t i = 0; !rc && i < r.n; i++) {
		r.v[i].path = ckpt_node_path(r.v[i].n);
		rc = r.v[i].path ? measure(c, r.v[i].n->tensor, buf,
					   &r.v[i].s, &pr, &done, &d) :
		     diag_nomem(&d);
		bad += nonfinite(r.v[i].s);
	}
	cli_progress_end(&pr);
	if (rc) {
		cli_diag(&d);
		if (o->json && !o->quiet)
			cli_json_error(stdout, &d, NULL, NULL);
	} else if (o->json && !o->quiet) {
		json_rows(stdout, c, &r, bad);
	} else if (!o->quiet) {
		if (many)
			printf("%s%s:\n", headed++ ? "\n" : "", c->path);
		text_rows(&r);
		printf("# %zu tensors, %" PRIu64 " with NaN or Inf\n", r.n,
		       bad);
	}
	for (size_t i = 0; i < r.n; i++) {
		free(r.v[i].path);
		free(r.v[i].s);
	}
	free(r.v);
	free(buf);
	return rc ? CLI_ERROR : bad ? CLI_FOUND : CLI_OK;
}

int ls_stats(struct ckpt *c, struct opts *o, char **paths, int npaths,
	     bool many)
{
	int status = CLI_OK;

	for (int k = 0; k < (npaths ? npaths : 1); k++) {
		const struct ckpt_node *n = npaths ? ckpt_node_by_path(c, paths[k]) :
					    c->root;
		int rc;

		if (!n) {
			cli_error("%s: %s: no such key path", c->path,
				  paths[k]);
			status = CLI_ERROR;
			continue;
		}
		rc = stats_one(c, o, n, many);
		if (rc == CLI_ERROR || (rc == CLI_FOUND && !status))
			status = rc;
	}
	return status;
}
