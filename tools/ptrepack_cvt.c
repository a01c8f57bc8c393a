/*
 * ptrepack_cvt.c - ptrepack --dtype TYPE [--only GLOB] [--torch VER]:
 * every floating tensor (or those whose key path matches GLOB) converted
 * as torch's .to(TYPE) converts it, ties, views, Parameters and
 * _metadata kept (core/cvt does the work; docs/user-guide.md).
 */
#include "ptrepack_cvt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "diag/diag.h"

int cvt_opt_parse(struct cvt_opt *o, int ch, const char *arg)
{
	switch (ch) {
	case 't':
		o->to = ckpt_dtype_by_name(arg);
		if (!o->to || !cvt_supported(o->to))
			return cli_usage("--dtype %s: not one of float64, "
					 "float32, float16, bfloat16, "
					 "float8_e4m3fn, float8_e5m2, "
					 "float8_e4m3fnuz, float8_e5m2fnuz",
					 arg);
		return 0;
	case 'o':
		if (!*arg)
			return cli_usage("--only: an empty pattern matches "
					 "nothing");
		o->only = arg;
		return 0;
	default:
		if (!strcmp(arg, "2"))
			o->fl = CVT_TORCH2;
		else if (!strcmp(arg, "1.13"))
			o->fl = CVT_TORCH1;
		else
			return cli_usage("--torch %s: not 2 or 1.13", arg);
		return 0;
	}
}

int cvt_opt_check(struct cvt_opt *o, uint8_t clone_pct)
{
	o->conv = NULL;
	o->dec_fd = -1;
	if (!o->to && o->only)
		return cli_usage("--only needs --dtype");
	if (o->to && clone_pct)
		return cli_usage("--dtype and --clone: run ptrepack once for "
				 "each");
	return 0;
}

int cvt_opt_run(struct cvt_opt *o, struct ckpt *c, struct diag *d)
{
	const struct ckpt_dtype **plan;
	uint32_t n = 0;
	int rc;

	if (ckpt_can(c, CKPT_CAP_MANY))
		return diag_unsupported(d, DIAG_NO_OFFSET, "--dtype: not for "
					"%s; ptrepack it into one file, then "
					"convert that", ckpt_fmt(c)->files);
	if (!ckpt_can(c, CKPT_CAP_WRITE))
		return 0;	/* ckpt_save() says why it cannot */
	rc = cvt_select(c, o->to, o->only, &plan, d);
	if (rc)
		return rc;
	for (uint32_t k = 0; k < c->nstorages; k++)
		n += plan[k] != NULL;
	if (!n && o->only)
		rc = diag_set(d, -EINVAL, DIAG_NO_OFFSET, "--only %s: no "
			      "floating tensor to convert matches", o->only);
	if (!rc)
		rc = cvt_ckpt(c, o->to, plan, o->fl, &o->conv, &o->st, d);
	free(plan);
	return rc;
}

int cvt_opt_decode(struct cvt_opt *o, struct ckpt *c,
		   const struct ckpt_write_opts *w, const char *out,
		   struct diag *d)
{
	const struct ckpt_dtype *to = o->to ? o->to :
				      ckpt_dtype_by_name("bfloat16");
	int rc;

	/* its own format's writer keeps the codes */
	if ((w->to == CKPT_OUT_FMT && w->fmt == ckpt_fmt(c)) ||
	    (w->to == CKPT_OUT_SAME && ckpt_fmt(c)->out == CKPT_OUT_FMT))
		return 0;
	rc = cvt_decode(c, to, o->fl, out, &o->dec_fd, &o->dec, d);
	if (!rc && o->dec.tensors)
		fprintf(stderr, "%s: note: %u %s tensor%s decoded to %s (%s)\n",
			cli_prog(), o->dec.tensors, ckpt_fmt(c)->name,
			o->dec.tensors == 1 ? "" : "s", to->name,
			o->to ? "--dtype" : "the default; --dtype chooses");
	return rc;
}

void cvt_opt_report(const struct cvt_opt *o)
{
	char a[16], b[16];

	printf("%u tensor%s in %u storage%s converted to %s (%s of storage "
	       "data, was %s)\n", o->st.tensors, o->st.tensors == 1 ? "" : "s",
	       o->st.storages, o->st.storages == 1 ? "" : "s", o->to->name,
	       cli_size(o->st.bytes_out, a, sizeof(a)),
	       cli_size(o->st.bytes_in, b, sizeof(b)));
}

void cvt_opt_release(struct cvt_opt *o)
{
	cvt_conv_free(o->conv);
	if (o->dec_fd >= 0)
		close(o->dec_fd);
	o->conv = NULL;
	o->dec_fd = -1;
}
