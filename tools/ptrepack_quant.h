/*
 * ptrepack_quant.h - ptrepack's --dequant TYPE and --quant SPEC: scaled
 * float8 weights widened, or made (core/cvt/cvt_scale.h does the work),
 * on the open checkpoint before it is written, and what is said about
 * it.  Kept apart so that ptrepack.c only calls it.
 */
#ifndef PT_TOOLS_PTREPACK_QUANT_H
#define PT_TOOLS_PTREPACK_QUANT_H

#include <stdbool.h>
#include <stdio.h>

#include "cvt/cvt_scale.h"
#include "util/sbuf.h"

struct cvt_opt;

struct qnt_opt {
	const struct ckpt_dtype *to;	/* --dequant TYPE, or NULL */
	uint32_t block;			/* --quant fp8-block[:N]: N, or 0 */
	const char *only;		/* --only GLOB, taken from --dtype's */
	bool verbose;			/* say each weight */
	int tmpfd;			/* --quant's weights, scales, or -1 */
	struct cvt_made *made;		/* --dequant's weights, or NULL */
	bool cfg_removed;		/* config.json lost its quant. config */
	struct cvt_scale_stats st;
	struct sbuf said;		/* -v: a line per weight, kept until
					   the output is written */
};

/* Is either option given? */
static inline bool qnt_opt_on(const struct qnt_opt *q)
{
	return q->to || q->block;
}

/* Take --dequant (@ch 'q') or --quant ('Q') with @arg; 0 or CLI_ERROR
   (said why). */
int qnt_opt_parse(struct qnt_opt *q, int ch, const char *arg);

/* Options that do not go together; --only moves from @cv to @q.  0 or
   CLI_ERROR (said why). */
int qnt_opt_check(struct qnt_opt *q, struct cvt_opt *cv, uint8_t clone_pct);

/* Convert @c as asked, the temporary file beside @near; for a Hugging
   Face folder output, @o gets config.json's rewrite.  0 or -errno with
   @d set. */
int qnt_opt_run(struct qnt_opt *q, struct ckpt *c, const char *near,
		struct ckpt_write_opts *o, struct diag *d);

/* What was done, once OUT is written: -v's lines and a summary on @f;
   for a Hugging Face folder @out with @shards shards (0: another output)
   a line on stderr for each file that changed beyond its tensors. */
void qnt_opt_report(const struct qnt_opt *q, FILE *f, const char *out,
		    uint32_t shards);

/* Close the temporary file, free the weights made and the lines.  A
   zeroed struct is fine once tmpfd is -1; before ckpt_close(). */
void qnt_opt_release(struct qnt_opt *q);

#endif
