/*
 * ckpt_open_util.h - opening checkpoints in the Criterion tests of the
 * model (test_ckpt.c, test_ckpt_formats.c, test_safetensors.c): any open
 * checked for the contract (0, or -errno with one line of message and no
 * model), a file that must open, and one that must be refused with a
 * given errno and words in its message.
 */
#ifndef PT_TESTS_CKPT_OPEN_UTIL_H
#define PT_TESTS_CKPT_OPEN_UTIL_H

#include "test_util.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"

/* Open @path: 0 and *@out, or -errno with *@d holding one line and
 * *@out NULL. */
static inline int open_try(const char *path, struct ckpt **out,
			   struct diag *d)
{
	int rc;

	*out = (struct ckpt *)1;
	diag_init(d, path);
	rc = ckpt_open(path, out, d);
	if (rc) {
		cr_assert_null(*out);
		cr_assert_lt(rc, 0);
		cr_assert_eq(rc, d->err);
		cr_assert(d->msg[0], "a failure without a message");
		cr_assert_null(strchr(d->msg, '\n'), "two lines: %s", d->msg);
	}
	return rc;
}

/* Open @path, which must work; caller closes. */
static inline struct ckpt *open_ok(const char *path)
{
	struct ckpt *c;
	struct diag d;
	char line[512];

	cr_assert_eq(open_try(path, &c, &d), 0, "%s",
		     diag_line(&d, line, sizeof(line)));
	return c;
}

/* Open @path expecting failure @err with @what in the message; the
 * diagnostic in *@d for more checks. */
static inline void open_refused(const char *path, int err, const char *what,
				struct diag *d)
{
	struct ckpt *c;
	char line[512];

	cr_assert_eq(open_try(path, &c, d), err, "%s: got %d (%s)", what,
		     d->err, diag_line(d, line, sizeof(line)));
	cr_assert(strstr(d->msg, what), "message '%s' lacks '%s'", d->msg,
		  what);
}

/* The same, when the diagnostic needs no more checks. */
static inline void open_fails(const char *path, int err, const char *what)
{
	struct diag d;

	open_refused(path, err, what, &d);
}

#endif
