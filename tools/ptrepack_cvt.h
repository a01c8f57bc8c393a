/*
 * ptrepack_cvt.h - ptrepack's --dtype, --only and --torch: the options,
 * their checks, and the conversion (core/cvt) run on the open checkpoint
 * before it is written.  Kept apart so that ptrepack.c only calls it.
 */
#ifndef PT_TOOLS_PTREPACK_CVT_H
#define PT_TOOLS_PTREPACK_CVT_H

#include <stdint.h>

#include "cvt/cvt.h"

struct cvt_opt {
	const struct ckpt_dtype *to;	/* --dtype, or NULL */
	const char *only;		/* --only GLOB, or NULL */
	enum cvt_flavour fl;		/* --torch */
	struct cvt_conv *conv;		/* the converted storages, or NULL */
	struct cvt_stats st;
	int dec_fd;			/* the decoded coded tensors, or -1 */
	struct cvt_stats dec;
};

/* Take option @ch ('t', 'o', 'T') with @arg; 0 or CLI_ERROR (said why). */
int cvt_opt_parse(struct cvt_opt *o, int ch, const char *arg);

/* Options that do not go together; 0 or CLI_ERROR (said why). */
int cvt_opt_check(struct cvt_opt *o, uint8_t clone_pct);

/* Convert @c's tensors as asked (as they are written).
   0 or -errno with @d set. */
int cvt_opt_run(struct cvt_opt *o, struct ckpt *c, struct diag *d);

/* One line on stdout: what was converted. */
/* Coded tensors (a GGUF file's Q8_0 tensors) written by a writer other
   than their format's own are decoded first: to --dtype's type, else
   bfloat16, with a note on stderr saying so.  0 or -errno with @d set. */
int cvt_opt_decode(struct cvt_opt *o, struct ckpt *c,
		   const struct ckpt_write_opts *w, const char *out,
		   struct diag *d);

void cvt_opt_report(const struct cvt_opt *o);

/* Free the conversion (before ckpt_close()) and close the decoded
   tensors' temporary file.  A zeroed struct is fine. */
void cvt_opt_release(struct cvt_opt *o);

#endif
