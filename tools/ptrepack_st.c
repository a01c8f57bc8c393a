/*
 * ptrepack_st.c - ptrepack IN.pt OUT.safetensors and back, and IN OUT/
 * as a DCP directory (see ptrepack_st.h and ptrepack(1)): which format OUT
 * gets, and what is said about it.  The writing is the core's
 * (core/ckpt/ckpt_stwrite.c for safetensors, ckpt_write.c for a torch
 * zip, ckpt_dcp_save.c for DCP).
 */
#include "ptrepack_st.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json_out.h"
#include "ptrepack_in.h"

int st_opt_parse(struct st_opt *s, const char *arg)
{
	if (!strcmp(arg, "safetensors"))
		s->out = CKPT_OUT_ST;
	else if (!strcmp(arg, "pt"))
		s->out = CKPT_OUT_ZIP;
	else if (!strcmp(arg, "dcp"))
		s->out = CKPT_OUT_DCP;
	else
		return cli_usage("--format %s: not pt, safetensors or dcp", arg);
	return 0;
}

bool st_opt_dcp(const struct st_opt *s, const char *out)
{
	size_t n = strlen(out);

	return s->out == CKPT_OUT_DCP ||
	       (s->out == CKPT_OUT_SAME && n > 1 && out[n - 1] == '/');
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n > k && !strcmp(s + n - k, tail);
}

static void note(void *arg, const char *key, const char *what)
{
	const struct st_opt *s = arg;

	if (s->verbose)
		fprintf(stderr, "%s: %s: %s: %s\n", cli_prog(), s->in, key,
			what);
}

/* What DCP leaves out (an empty dict, a dict's attributes): always said. */
static void dcp_note(void *arg, const char *key, const char *what)
{
	const struct st_opt *s = arg;

	fprintf(stderr, "%s: note: %s: %s: %s\n", cli_prog(), s->in, key,
		what);
}

int st_opt_apply(struct st_opt *s, const char *out, const struct ckpt *c,
		 struct ckpt_write_opts *o)
{
	static const char *const pt[] = { ".pt", ".pth", ".bin", ".ckpt" };

	o->to = (uint8_t)s->out;
	if (st_opt_dcp(s, out)) {
		if (o->repickle || o->drop_unused || o->clone_pct ||
		    o->align || s->drop)
			return cli_usage("--repickle, --drop-unused, --clone, "
					 "--align and --drop-values are not "
					 "for a DCP output");
		o->to = CKPT_OUT_DCP;
		o->note = s->quiet ? NULL : dcp_note;
		o->note_arg = s;
		return 0;
	}
	if (o->to == CKPT_OUT_SAME && ends_with(out, ".safetensors"))
		o->to = CKPT_OUT_ST;
	for (size_t i = 0; o->to == CKPT_OUT_SAME && i < 4; i++)
		if (ends_with(out, pt[i]))
			o->to = CKPT_OUT_ZIP;
	if (!st_opt_out_st(o, c)) {
		if (s->drop)
			return cli_usage("--drop-values: only a safetensors "
					 "output leaves values out");
		return 0;
	}
	if (o->repickle || o->drop_unused || o->clone_pct || o->align)
		return cli_usage("--repickle, --drop-unused, --clone and "
				 "--align are for a torch zip output, not "
				 "safetensors");
	o->st_drop = s->drop;
	o->note = note;
	o->note_arg = s;
	return 0;
}

bool st_opt_out_st(const struct ckpt_write_opts *o, const struct ckpt *c)
{
	return o->to == CKPT_OUT_ST ||
	       (o->to == CKPT_OUT_SAME && (ckpt_fmt(c)->out == CKPT_OUT_ST));
}

/* Tensors of dtypes torch 1.13 has no storage class for, and which. */
static uint32_t torch2_only(const struct ckpt *c, char *names, size_t size)
{
	uint32_t n = 0;
	size_t len = 0;

	names[0] = 0;
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const char *dt = c->tensors[i]->dtype->name;

		if (c->tensors[i]->dtype->storage)
			continue;
		n++;
		if (strstr(names, dt))
			continue;
		len += (size_t)snprintf(names + len, len < size ? size - len : 0,
					"%s%s", len ? ", " : "", dt);
	}
	return n;
}

void st_opt_report(const struct st_opt *s, const struct ckpt *c,
		   const struct ckpt_write_opts *o)
{
	const struct ckpt_write_stats *st = o->stats;
	char names[160];
	uint32_t n;

	if (!st_opt_out_st(o, c)) {
		n = (ckpt_fmt(c)->out == CKPT_OUT_ST) ?
		    torch2_only(c, names, sizeof(names)) : 0;
		if (n)
			fprintf(stderr, "%s: note: %u tensor%s of %s, which "
				"torch 1.13 cannot load: the output needs "
				"torch 2.x\n", cli_prog(), n, n == 1 ? "" : "s",
				names);
		return;
	}
	if (st->views)
		fprintf(stderr, "%s: note: %u tensor%s written as contiguous "
			"copies of views (strided, or part of a larger "
			"storage)%s\n", cli_prog(), st->views,
			st->views == 1 ? "" : "s",
			s->verbose ? "" : "; -v names them");
	if (st->dropped_values)
		fprintf(stderr, "%s: note: %u non-tensor value%s left out "
			"(--drop-values)%s\n", cli_prog(), st->dropped_values,
			st->dropped_values == 1 ? "" : "s",
			s->verbose ? "" : "; -v names them");
}

void repack_json_head(FILE *f, const char *in, const char *out)
{
	fputs("{\"in\":", f);
	json_cstr(f, in);
	fputs(",\"out\":", f);
	json_cstr(f, out);
}

void dcp_summary(FILE *f, const char *in, const char *out,
		 const struct ckpt *c, const struct ckpt_dcp_stats *st,
		 bool json)
{
	char a[16], b[16];

	if (json) {
		repack_json_head(f, in, out);
		fprintf(f, ",\"format\":\"dcp\",\"keys\":%u,\"tensors\":%u,"
			"\"size\":%" PRIu64 "}\n", st->keys, st->tensors,
			st->size);
		return;
	}
	fprintf(f, "%s: DCP directory, %u key%s (%u tensor%s), %s (was %s)\n",
		out, st->keys, st->keys == 1 ? "" : "s", st->tensors,
		st->tensors == 1 ? "" : "s", cli_size(st->size, a, sizeof(a)),
		cli_size(in_size(c), b, sizeof(b)));
}

void st_summary(FILE *f, const char *in, const char *out,
		const struct ckpt *c, const struct ckpt_write_stats *st,
		bool json)
{
	char a[16], b[16];

	if (json) {
		repack_json_head(f, in, out);
		fprintf(f, ",\"format\":\"safetensors\",\"tensors\":%u,"
			"\"aliases\":%u,\"views\":%u,\"dropped_values\":%u,"
			"\"size\":%" PRIu64 "}\n", st->tensors, st->aliases,
			st->views, st->dropped_values, st->size);
		return;
	}
	fprintf(f, "%s: safetensors, %u tensor%s", out, st->tensors,
		st->tensors == 1 ? "" : "s");
	if (st->aliases)
		fprintf(f, ", %u tied name%s in __metadata__", st->aliases,
			st->aliases == 1 ? "" : "s");
	fprintf(f, ", %s (was %s)\n", cli_size(st->size, a, sizeof(a)),
		cli_size(in_size(c), b, sizeof(b)));
}
