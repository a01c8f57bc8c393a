/*
 * ptrepack_quant.c - ptrepack --dequant TYPE and --quant fp8-block[:N]
 * (see ptrepack_quant.h and ptrepack(1)): scaled float8 weights made
 * bfloat16, float16 or float32 again, or block-quantized as DeepSeek-V3
 * ships them.  The scale tensors go or come; a Hugging Face folder
 * output's index follows the tensors written and its config.json loses
 * its quantization_config (core/cvt/cvt_hfcfg.c).
 */
#include "ptrepack_quant.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "diag/diag.h"
#include "ptrepack_cvt.h"

int qnt_opt_parse(struct qnt_opt *q, int ch, const char *arg)
{
	const char *n;
	char *end;
	unsigned long b = 128;

	q->tmpfd = -1;
	if (ch == 'q') {
		if (!(q->to = cvt_dequant_dtype(arg)))
			return cli_usage("--dequant %s: not bf16, float16 "
					 "(fp16) or float32", arg);
		return 0;
	}
	if (strncmp(arg, "fp8-block", 9) || (arg[9] && arg[9] != ':'))
		return cli_usage("--quant %s: not fp8-block or fp8-block:N",
				 arg);
	n = arg[9] ? arg + 10 : NULL;
	if (n) {
		errno = 0;
		b = strtoul(n, &end, 10);
		if (errno || *end || end == n || *n < '0' || *n > '9' || !b ||
		    b > 65536)
			return cli_usage("--quant %s: the block size is not a "
					 "number from 1 to 65536", arg);
	}
	q->block = (uint32_t)b;
	return 0;
}

int qnt_opt_check(struct qnt_opt *q, struct cvt_opt *cv, uint8_t clone_pct)
{
	q->tmpfd = -1;
	if (!qnt_opt_on(q))
		return 0;
	if (q->to && q->block)
		return cli_usage("--dequant and --quant: run ptrepack once for "
				 "each");
	if (cv->to)
		return cli_usage("--%s and --dtype: run ptrepack once for each",
				 q->to ? "dequant" : "quant");
	if (clone_pct)
		return cli_usage("--%s and --clone: run ptrepack once for each",
				 q->to ? "dequant" : "quant");
	q->only = cv->only;
	cv->only = NULL;
	return 0;
}

/* -v's line for one weight, kept until the output is written. */
static void say(void *arg, const char *path, const char *what)
{
	struct qnt_opt *q = arg;

	sb_printf(&q->said, "%s: %s\n", path, what);
}

int qnt_opt_run(struct qnt_opt *q, struct ckpt *c, const char *near,
		struct ckpt_write_opts *o, struct diag *d)
{
	struct cvt_scale_opt so = {
		.to = q->to, .block = q->block, .glob = q->only, .near = near,
		.say = q->verbose ? say : NULL, .say_arg = q,
	};
	int rc;

	rc = q->to ? cvt_dequant(c, &so, &q->made, &q->st, d) :
	     cvt_quant(c, &so, &q->tmpfd, &q->st, d);
	if (rc)
		return rc;
	if (!q->st.weights && q->only)
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "--only %s: no "
				"%s matches", q->only, q->to ? "scaled float8 "
				"weight" : "2-d floating tensor");
	if (!q->st.weights)
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s", q->to ?
				"no scaled float8 weight (X.weight beside "
				"X.weight_scale_inv or X.weight_scale): "
				"nothing to dequantize" : "no 2-d floating "
				"*.weight but embeddings, norms, lm_head and "
				"gates: nothing to quantize (--only picks "
				"tensors)");
	if (q->to && o->to == CKPT_OUT_HF) {
		o->rewrite = cvt_hfcfg_rewrite;
		o->rewrite_arg = &q->cfg_removed;
	}
	return 0;
}

void qnt_opt_report(const struct qnt_opt *q, FILE *f, const char *out,
		    uint32_t shards)
{
	const struct cvt_scale_stats *st = &q->st;
	char a[16], b[16];
	size_t n = strlen(out);

	while (n > 1 && out[n - 1] == '/')
		n--;
	if (q->said.p)
		fputs(q->said.p, f);
	if (q->to)
		fprintf(f, "%u weight%s dequantized to %s, %u scale tensor%s "
			"dropped", st->weights, st->weights == 1 ? "" : "s",
			q->to->name, st->scales, st->scales == 1 ? "" : "s");
	else
		fprintf(f, "%u weight%s quantized to float8_e4m3fn in %ux%u "
			"blocks, %u weight_scale_inv added", st->weights,
			st->weights == 1 ? "" : "s", q->block, q->block,
			st->scales);
	fprintf(f, " (%s of weights, was %s)\n",
		cli_size(st->bytes_out, a, sizeof(a)),
		cli_size(st->bytes_in, b, sizeof(b)));
	if (shards > 1)
		fprintf(stderr, "%s: note: %.*s/model.safetensors.index.json: "
			"%u scale name%s %s\n", cli_prog(), (int)n, out,
			st->scales, st->scales == 1 ? "" : "s",
			q->to ? "left out" : "added");
	if (shards && q->cfg_removed)
		fprintf(stderr, "%s: note: %.*s/config.json: "
			"quantization_config removed (the weights are %s "
			"now)\n", cli_prog(), (int)n, out, q->to->name);
}

void qnt_opt_release(struct qnt_opt *q)
{
	if (q->tmpfd >= 0)
		close(q->tmpfd);
	q->tmpfd = -1;
	cvt_made_free(q->made);
	q->made = NULL;
	free(q->said.p);
	q->said = (struct sbuf){ 0 };
}
