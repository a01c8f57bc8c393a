/*
 * ckpt_open_util.h - opening checkpoints in the Criterion tests of the
 * model (test_ckpt.c, test_safetensors.c): a file that must open, and one
 * that must be refused with a given errno and words in its message.
 */
#ifndef PT_TESTS_CKPT_OPEN_UTIL_H
#define PT_TESTS_CKPT_OPEN_UTIL_H

#include "test_util.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"

/* Open @path, which must work; caller closes. */
static inline struct ckpt *open_ok(const char *path)
{
	struct ckpt *c;
	struct diag d;
	char line[512];

	diag_init(&d, path);
	cr_assert_eq(ckpt_open(path, &c, &d), 0, "%s",
		     diag_line(&d, line, sizeof(line)));
	return c;
}

/* Open @path expecting failure @err with @what in the message; the
 * diagnostic in *@d for more checks. */
static inline void open_refused(const char *path, int err, const char *what,
				struct diag *d)
{
	struct ckpt *c = (struct ckpt *)1;
	char line[512];

	diag_init(d, path);
	cr_assert_eq(ckpt_open(path, &c, d), err, "%s: got %d (%s)", what,
		     d->err, diag_line(d, line, sizeof(line)));
	cr_assert_null(c);
	cr_assert(strstr(d->msg, what), "message '%s' lacks '%s'", d->msg,
		  what);
}

#endif
