/*
 * ptdump_val.c - ptdump --values KEY: the values of one tensor, as the
 * text view of a mount shows them (docs/views.md: a "# dtype (shape)"
 * header, one row per line, numbers that parse back to the same bits),
 * or with --json as an array (finite numbers as JSON numbers, the rest
 * as strings: "nan", "inf", complex "1+2j").  --head N stops after N
 * elements.  --start/--count/--stride select a hyperslab (ptdump_slab.c),
 * shown as a tensor of its own shape after a line saying where it is.
 * Streamed in CHUNK pieces: memory does not grow with the tensor.
 */
#include "ckpt/ckpt.h"
#include "ckpt_fmt.h"
#include "cli.h"
#include "cli_io.h"
#include "diag/diag.h"
#include "json_out.h"
#include "ptdump.h"
#include "view/view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_ELEMS	4096u

/* Is the token @s[0..@n) a JSON number as it stands? */
static bool json_number(const char *s, size_t n)
{
	size_t i = s[0] == '-';

	if (i >= n || s[i] < '0' || s[i] > '9')
		return false;
	for (; i < n; i++)
		if (!strchr("0123456789.eE+-", s[i]))
			return false;
	return true;
}

/* Print the tokens of text @t[0..@len) as JSON array items. */
static void json_tokens(const char *t, size_t len, bool *first)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;

		while (j < len && t[j] != ' ' && t[j] != '\n')
			j++;
		if (j > i) {
			fputs(*first ? "" : ",", stdout);
			*first = false;
			if (json_number(t + i, j - i))
				fwrite(t + i, 1, j - i, stdout);
			else
				json_str(stdout, t + i, j - i);
		}
		i = j + 1;
	}
}

static void json_list(const char *name, const uint64_t *v, int n)
{
	printf(",\"%s\":[", name);
	for (int i = 0; i < n; i++)
		printf("%s%" PRIu64, i ? "," : "", v[i]);
	putchar(']');
}

/* "(2, 3)" */
static void text_list(const uint64_t *v, int n)
{
	putchar('(');
	for (int i = 0; i < n; i++)
		printf("%s%" PRIu64, i ? ", " : "", v[i]);
	fputs(n == 1 ? ",)" : ")", stdout);
}

static int values(struct ckpt *c, const struct ckpt_node *n, const char *key,
		  const struct dump_opts *o)
{
	const struct ckpt_tensor *t = n->tensor;
	bool big = c->byteorder && !strcmp(c->byteorder, "big"), first = true;
	uint64_t count = t->numel, done = 0, total = t->numel;
	size_t isz = t->dtype->size;
	unsigned char *buf;
	char *text, err[256];
	struct slab s = { 0 };
	uint64_t whole[CKPT_MAX_DIMS];
	const int64_t *shape = t->shape;
	int ndim = t->ndim;
	struct diag d;
	int rc = 0;

	if (o->slab.on) {
		rc = slab_setup(t, &o->slab, &s, err, sizeof(err));
		if (rc) {
			cli_error("%s: %s: %s", c->path, key, err);
			return CLI_ERROR;
		}
		count = total = s.numel;
		shape = s.shape;
	}
	buf = malloc(CHUNK_ELEMS * isz);
	text = malloc(CHUNK_ELEMS * VIEW_TEXT_ELEM_MAX + 256);
	if (o->head >= 0 && (uint64_t)o->head < count)
		count = (uint64_t)o->head;
	if (!buf || !text) {
		free(buf);
		free(text);
		cli_error("out of memory");
		return CLI_ERROR;
	}
	diag_init(&d, c->path);
	if (o->json) {
		fputs("{\"file\":", stdout);
		json_cstr(stdout, c->path);
		fputs(",\"path\":", stdout);
		json_cstr(stdout, key);
		fputs(",\"dtype\":", stdout);
		json_cstr(stdout, t->dtype->name);
		fputs(",\"shape\":[", stdout);
		for (int i = 0; i < t->ndim; i++)
			printf("%s%" PRId64, i ? "," : "", t->shape[i]);
		printf("],\"numel\":%" PRIu64, t->numel);
		if (o->slab.on) {
			json_list("start", s.start, ndim);
			json_list("count", s.count, ndim);
			json_list("stride", s.stride, ndim);
		}
		printf(",\"shown\":%" PRIu64 ",\"values\":[", count);
	} else {
		fwrite(text, 1, view_text_header(t->dtype, ndim, shape, text,
						 256), stdout);
		if (o->slab.on) {
			fputs("# slab start ", stdout);
			text_list(s.start, ndim);
			fputs(" count ", stdout);
			text_list(s.count, ndim);
			fputs(" stride ", stdout);
			text_list(s.stride, ndim);
			fputs(" of ", stdout);
			for (int i = 0; i < ndim; i++)
				whole[i] = (uint64_t)t->shape[i];
			text_list(whole, ndim);
			putchar('\n');
		}
	}
	while (done < count) {
		uint64_t k = count - done < CHUNK_ELEMS ? count - done :
			     CHUNK_ELEMS;
		long long got;
		size_t len;

		if (o->slab.on) {
			got = slab_read(c, t, &s, done, k, buf, &d);
			if (!got)
				got = (long long)(k * isz);
		} else {
			got = ckpt_tensor_read(c, t, buf, k * isz, done * isz,
					       &d);
		}
		if (got != (long long)(k * isz)) {
			if (got >= 0)
				diag_set(&d, -EIO, DIAG_NO_OFFSET,
					 "%s: tensor data ends early", key);
			rc = -1;
			break;
		}
		len = view_text_format(t->dtype, big, ndim, shape, done, buf, k,
				       text);
		if (o->json)
			json_tokens(text, len, &first);
		else
			fwrite(text, 1, len, stdout);
		done += k;
	}
	if (!rc && o->json)
		fputs("]}\n", stdout);
	else if (!rc && done < total)
		printf("\n# ... %" PRIu64 " more\n", total - done);
	free(buf);
	free(text);
	if (rc) {
		cli_diag(&d);
		return CLI_ERROR;
	}
	return CLI_OK;
}

int dump_values(const char *path, const struct dump_opts *o)
{
	const struct ckpt_node *n;
	struct ckpt *c;
	struct diag d;
	int rc;

	if (cli_open(path, &c, &d)) {
		if (o->json)
			cli_json_error(stdout, &d, NULL, NULL);
		cli_diag(&d);
		return CLI_ERROR;
	}
	n = ckpt_node_by_path(c, o->values);
	if (!n || n->kind != CKPT_N_TENSOR) {
		cli_error("%s: %s: %s", c->path, o->values,
			  n ? "not a tensor" :
			  "no such key path (ptls lists them)");
		ckpt_close(c);
		return CLI_ERROR;
	}
	if (n->tensor->kind == CKPT_T_META) {
		cli_error("%s: %s: a meta tensor: it has no values", c->path,
			  o->values);
		ckpt_close(c);
		return CLI_ERROR;
	}
	rc = values(c, n, o->values, o);
	ckpt_close(c);
	return rc;
}
