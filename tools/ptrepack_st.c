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
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/units.h"
#include "json_out.h"
#include "ptrepack_in.h"

/* ", or gguf": the formats a writer of the table adds, for usage text */
static const char *writers(void)
{
	static char buf[128];
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; ckpt_formats[i]; i++)
		if (ckpt_formats[i]->write && n < sizeof(buf))
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", %s",
					      ckpt_formats[i]->name);
	return buf;
}

int st_opt_parse(struct st_opt *s, const char *arg)
{
	if (!strcmp(arg, "safetensors"))
		s->out = CKPT_OUT_ST;
	else if (!strcmp(arg, "pt"))
		s->out = CKPT_OUT_ZIP;
	else if (!strcmp(arg, "dcp"))
		s->out = CKPT_OUT_DCP;
	else if (!strcmp(arg, "hf"))
		s->out = CKPT_OUT_HF;
	else if ((s->fmt = ckpt_fmt_writer(arg, false)))
		s->out = CKPT_OUT_FMT;
	else
		return cli_usage("--format %s: not one of pt, safetensors, dcp, hf%s",
				 arg, writers());
	return 0;
}

/* --NAME-OPTION VALUE (or =VALUE) of format NAME's writer, taken out of
 * @argv as "OPTION=VALUE" for it. */
int st_opt_fmt_args(struct st_opt *s, int *argc, char **argv)
{
	int k = 1;

	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i], *dash, *eq;
		const struct ckpt_fmt *f = NULL;
		char name[32], *arg;

		if (!strcmp(a, "--")) {
			while (i < *argc)
				argv[k++] = argv[i++];
			break;
		}
		dash = !strncmp(a, "--", 2) ? strchr(a + 2, '-') : NULL;
		if (dash && (size_t)(dash - a - 2) < sizeof(name)) {
			memcpy(name, a + 2, (size_t)(dash - a - 2));
			name[dash - a - 2] = 0;
			f = ckpt_fmt_writer(name, false);
		}
		if (!f) {
			argv[k++] = argv[i];
			continue;
		}
		eq = strchr(dash, '=');
		if (!eq && i + 1 >= *argc)
			return cli_usage("%s: needs a value", a);
		arg = eq ? strdup(dash + 1) : malloc(strlen(dash) +
						     strlen(argv[i + 1]) + 1);
		if (arg && !eq)
			sprintf(arg, "%s=%s", dash + 1, argv[++i]);
		if (!arg || s->nargs == sizeof(s->args) / sizeof(*s->args))
			return cli_usage("%s: too many writer options", a);
		if (s->fmt_named && s->fmt_named != f)
			return cli_usage("%s: options of two formats' writers",
					 a);
		s->fmt_named = f;
		s->args[s->nargs++] = arg;
	}
	*argc = k;
	argv[k] = NULL;
	return 0;
}

int st_opt_shard_size(struct st_opt *s, const char *arg)
{
	if (util_parse_shard_size(arg, &s->max_shard))
		return 0;
	return cli_usage("--max-shard-size %s: not a size such as 5GB, 500MB "
			 "or 2GiB", arg);
}

bool st_opt_dcp(const struct st_opt *s, const char *out)
{
	size_t n = strlen(out);

	return s->out == CKPT_OUT_DCP ||
	       (s->out == CKPT_OUT_SAME && !s->max_shard && n > 1 &&
		out[n - 1] == '/');
}

bool st_opt_newdir(const struct st_opt *s, const char *out)
{
	return st_opt_dcp(s, out) || s->max_shard || s->out == CKPT_OUT_HF;
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
	if (o->to == CKPT_OUT_SAME && (s->fmt = ckpt_fmt_writer(out, true)))
		o->to = CKPT_OUT_FMT;
	if (s->fmt_named && (o->to != CKPT_OUT_FMT || s->fmt != s->fmt_named))
		return cli_usage("--%s-%.*s: only for a %s output", s->fmt_named->name,
				 (int)strcspn(s->args[0], "="), s->args[0],
				 s->fmt_named->name);
	if (o->to == CKPT_OUT_FMT) {
		if (o->repickle || o->drop_unused || o->clone_pct || o->align)
			return cli_usage("--repickle, --drop-unused, --clone "
					 "and --align are for a torch zip "
					 "output, not %s", s->fmt->name);
		o->fmt = s->fmt;
		o->fmt_args = (const char *const *)s->args;
		o->nfmt_args = s->nargs;
		o->st_drop = s->drop;
		o->note = note;
		o->note_arg = s;
		return 0;
	}
	if (s->max_shard && s->out != CKPT_OUT_SAME && s->out != CKPT_OUT_HF)
		return cli_usage("--max-shard-size: only for a Hugging Face "
				 "folder output (--format hf)");
	if (s->max_shard || s->out == CKPT_OUT_HF) {
		if (o->repickle || o->drop_unused || o->clone_pct || o->align)
			return cli_usage("--repickle, --drop-unused, --clone "
					 "and --align are not for a Hugging "
					 "Face folder output");
		o->to = CKPT_OUT_HF;
		/* save_pretrained's default (transformers 5) */
		o->max_shard = s->max_shard ? s->max_shard :
			       UINT64_C(50000000000);
		o->st_drop = s->drop;
		o->note = note;
		o->note_arg = s;
		return 0;
	}
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
	return o->to == CKPT_OUT_ST || o->to == CKPT_OUT_FMT ||
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

/* The notes on tensors written as copies of views and values left out. */
static void copies_notes(const struct st_opt *s, uint32_t views,
			 uint32_t dropped)
{
	if (views)
		fprintf(stderr, "%s: note: %u tensor%s written as contiguous "
			"copies of views (strided, or part of a larger "
			"storage)%s\n", cli_prog(), views, views == 1 ? "" : "s",
			s->verbose ? "" : "; -v names them");
	if (dropped)
		fprintf(stderr, "%s: note: %u non-tensor value%s left out "
			"(--drop-values)%s\n", cli_prog(), dropped,
			dropped == 1 ? "" : "s",
			s->verbose ? "" : "; -v names them");
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
	copies_notes(s, st->views, st->dropped_values);
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
		const struct ckpt *c, const struct ckpt_write_opts *o,
		bool json)
{
	const struct ckpt_write_stats *st = o->stats;
	const char *fmt = o->to == CKPT_OUT_FMT ? o->fmt->name :
			  o->to == CKPT_OUT_SAME && ckpt_fmt(c)->write ?
			  ckpt_fmt(c)->name : "safetensors";
	char a[16], b[16];

	if (json) {
		repack_json_head(f, in, out);
		fprintf(f, ",\"format\":\"%s\",\"tensors\":%u,"
			"\"aliases\":%u,\"views\":%u,\"dropped_values\":%u,"
			"\"size\":%" PRIu64 "}\n", fmt, st->tensors, st->aliases,
			st->views, st->dropped_values, st->size);
		return;
	}
	fprintf(f, "%s: %s, %u tensor%s", out, fmt, st->tensors,
		st->tensors == 1 ? "" : "s");
	if (st->aliases)
		fprintf(f, ", %u tied name%s in __metadata__", st->aliases,
			st->aliases == 1 ? "" : "s");
	fprintf(f, ", %s (was %s)\n", cli_size(st->size, a, sizeof(a)),
		cli_size(in_size(c), b, sizeof(b)));
}

void hf_report(const struct st_opt *s, const struct ckpt_hf_stats *st)
{
	if (st->ties)
		fprintf(stderr, "%s: note: %u tied name%s left out (the first "
			"name of a tensor is kept, as transformers keeps the "
			"tie's source)%s\n", cli_prog(), st->ties,
			st->ties == 1 ? "" : "s",
			s->verbose ? "" : "; -v names them");
	copies_notes(s, st->views, st->dropped_values);
}

void hf_summary(FILE *f, const char *in, const char *out,
		const struct ckpt *c, const struct ckpt_hf_stats *st,
		bool json)
{
	char a[16], b[16];

	if (json) {
		repack_json_head(f, in, out);
		fprintf(f, ",\"format\":\"hf\",\"shards\":%u,\"tensors\":%u,"
			"\"ties\":%u,\"copied\":%u,\"total_size\":%" PRIu64
			",\"size\":%" PRIu64 "}\n", st->shards, st->tensors,
			st->ties, st->copied, st->total_size, st->size);
		return;
	}
	fprintf(f, "%s: Hugging Face folder, %u shard%s, %u tensor%s",
		out, st->shards, st->shards == 1 ? "" : "s", st->tensors,
		st->tensors == 1 ? "" : "s");
	if (st->copied)
		fprintf(f, ", %u other file%s copied", st->copied,
			st->copied == 1 ? "" : "s");
	fprintf(f, ", %s (was %s)\n", cli_size(st->size, a, sizeof(a)),
		cli_size(in_size(c), b, sizeof(b)));
}
