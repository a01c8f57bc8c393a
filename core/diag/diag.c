/*
 * diag.c - record the first failure with its file and offset, and format it
 * as the one line the user sees.  See diag.h for the contract.
 */
#include "diag.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void diag_init(struct diag *d, const char *path)
{
	memset(d, 0, sizeof(*d));
	d->path = path;
	d->off = DIAG_NO_OFFSET;
}

static int vset(struct diag *d, const char *file, int line, int err,
		uint64_t off, const char *fmt, va_list ap)
{
	if (!d || d->err)
		return err;
	d->err = err;
	d->off = off;
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	/* one line, whatever a hostile file's names and records hold */
	for (char *p = d->msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
#ifndef NDEBUG
	d->src_file = file;
	d->src_line = line;
#else
	(void)file;
	(void)line;
#endif
	return err;
}

int diag_set_(struct diag *d, const char *file, int line, int err,
	      uint64_t off, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vset(d, file, line, err, off, fmt, ap);
	va_end(ap);
	return err;
}

int diag_unsafe_(struct diag *d, const char *file, int line, uint64_t off,
		 const char *fmt, ...)
{
	bool first = d && !d->err;
	va_list ap;

	va_start(ap, fmt);
	vset(d, file, line, -EILSEQ, off, fmt, ap);
	va_end(ap);
	if (first)
		d->unsafe = true;
	return -EILSEQ;
}

bool diag_failed(const struct diag *d)
{
	return d->err != 0;
}

const char *diag_line(const struct diag *d, char *buf, unsigned long size)
{
	char where[64] = "";
	const char *msg = d->msg[0] ? d->msg : strerror(d->err ? -d->err : EIO);

	if (d->off != DIAG_NO_OFFSET)
		snprintf(where, sizeof(where), "offset 0x%" PRIx64 ": ", d->off);
	snprintf(buf, size, "%s%s%s%s", d->path ? d->path : "",
		 d->path ? ": " : "", where, msg);
	return buf;
}
