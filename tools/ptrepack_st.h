/*
 * ptrepack_st.h - ptrepack between torch's format, safetensors and DCP:
 * the output format (--format, or OUT's name), --drop-values, the notes
 * on stderr about what safetensors or DCP could not take as it was, and
 * the summary of a safetensors file or DCP directory written.  Kept apart so that ptrepack.c
 * only calls it.
 */
#ifndef PT_TOOLS_PTREPACK_ST_H
#define PT_TOOLS_PTREPACK_ST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/ckpt.h"

struct st_opt {
	int out;		/* --format: enum ckpt_out, SAME if not given */
	uint64_t max_shard;	/* --max-shard-size (implies CKPT_OUT_HF) */
	bool drop;		/* --drop-values */
	bool verbose;		/* a note per tensor (-v) */
	bool quiet;		/* -q: not even DCP's notes */
	const char *in;		/* the input's name, for the notes */
	/* CKPT_OUT_FMT: the format whose writer writes OUT, and the
	   options given to it (--NAME-OPTION VALUE as "OPTION=VALUE") */
	const struct ckpt_fmt *fmt, *fmt_named;
	char *args[64];
	uint32_t nargs;
};

/* Take the options of a format's writer (--gguf-type q8_0: any format
 * of the table with a writer, by its name) out of @argv, before getopt;
 * 0 or CLI_ERROR (said why). */
int st_opt_fmt_args(struct st_opt *s, int *argc, char **argv);

/* --format @arg ("pt", "safetensors", "dcp" or "hf"); 0 or CLI_ERROR
 * (said why). */
int st_opt_parse(struct st_opt *s, const char *arg);

/*
 * --max-shard-size @arg as huggingface_hub reads it (parse_size_to_int):
 * a number, maybe with a fraction, then KB, MB, GB or TB (powers of
 * 1000); also KiB, MiB, GiB, TiB (powers of 1024), or bare bytes.  0 or
 * CLI_ERROR (said why).
 */
int st_opt_shard_size(struct st_opt *s, const char *arg);

/* Is OUT a DCP directory: --format dcp, or an OUT that ends in '/'
 * (without --format hf or --max-shard-size)? */
bool st_opt_dcp(const struct st_opt *s, const char *out);

/* Is OUT a new directory: a DCP one, or a Hugging Face folder
 * (--format hf, --max-shard-size)? */
bool st_opt_newdir(const struct st_opt *s, const char *out);

/*
 * The format of OUT: --format, else by OUT's name (".safetensors": a
 * safetensors file; ".pt", ".pth", ".bin", ".ckpt": a torch zip; a
 * trailing '/': a DCP directory; a format's out_ext: its writer's), else
 * the input's own.  Puts it and the safetensors options into @o; options
 * that only a torch zip has, given for a safetensors output, are a usage
 * error.  0 or CLI_ERROR (said why).
 */
int st_opt_apply(struct st_opt *s, const char *out, const struct ckpt *c,
		 struct ckpt_write_opts *o);

/* Is the output one flat file: safetensors, or a format's writer's (after
 * st_opt_apply())? */
bool st_opt_out_st(const struct ckpt_write_opts *o, const struct ckpt *c);

/*
 * After a write: on stderr, one line counting the tensors written as
 * contiguous copies of views and the values left out (-v named each as
 * it came), and for a torch zip made from a safetensors file the dtypes
 * torch 1.13 cannot load.
 */
void st_opt_report(const struct st_opt *s, const struct ckpt *c,
		   const struct ckpt_write_opts *o);

/* The start of every -j summary: {"in":IN,"out":OUT (no closing brace). */
void repack_json_head(FILE *f, const char *in, const char *out);

/* The summary line (-v) or JSON object (-j) of a DCP output. */
void dcp_summary(FILE *f, const char *in, const char *out,
		 const struct ckpt *c, const struct ckpt_dcp_stats *st,
		 bool json);

/* After a Hugging Face folder is written: on stderr, the tied names left
 * out (each with -v) and the values left out. */
void hf_report(const struct st_opt *s, const struct ckpt_hf_stats *st);

/* The summary line (-v) or JSON object (-j) of a Hugging Face folder. */
void hf_summary(FILE *f, const char *in, const char *out,
		const struct ckpt *c, const struct ckpt_hf_stats *st,
		bool json);

/* The summary line (-v) or JSON object (-j) of a safetensors output. */
void st_summary(FILE *f, const char *in, const char *out,
		const struct ckpt *c, const struct ckpt_write_opts *o,
		bool json);

#endif
