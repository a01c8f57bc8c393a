/*
 * diag.h - the one path a failure takes from the core to the user.
 *
 * The core never prints.  A failure site records what went wrong, where
 * (file and byte offset) and returns a negative errno in one statement:
 *
 *	return diag_corrupt(d, off, "bad central directory signature 0x%08x", sig);
 *
 * The caller prints diag_line() once: "model.pt: offset 0x1f40: bad ...".
 * Only the first failure is kept: later ones are consequences of it.
 */
#ifndef PT_DIAG_DIAG_H
#define PT_DIAG_DIAG_H

#include <stdbool.h>
#include <stdint.h>

#define DIAG_NO_OFFSET UINT64_MAX

struct diag {
	const char *path;	/* borrowed; file the offsets refer to */
	uint64_t off;		/* DIAG_NO_OFFSET when the message has none */
	int err;		/* negative errno, 0 while nothing failed */
	bool unsafe;		/* the failure is a danger, not only damage:
				   torch.load would read the file otherwise
				   than ptfs, or run what it holds
				   (diag_unsafe()); ptls --check and ptverify
				   count it as unsafe (exit 1) */
	char msg[256];
#ifndef NDEBUG
	const char *src_file;	/* where in our code it was raised */
	int src_line;
#endif
};

/* Start a diagnostic context for @path (borrowed, may be NULL). */
void diag_init(struct diag *d, const char *path);

/* Record a failure (the first one wins) and return @err (a -errno). */
int diag_set_(struct diag *d, const char *file, int line, int err,
	      uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

#define diag_set(d, err, off, ...) \
	diag_set_((d), __FILE__, __LINE__, (err), (off), __VA_ARGS__)
/* Corrupt input: -EILSEQ. */
#define diag_corrupt(d, off, ...) diag_set((d), -EILSEQ, (off), __VA_ARGS__)
/* A valid input that we do not handle: -ENOTSUP. */
#define diag_unsupported(d, off, ...) \
	diag_set((d), -ENOTSUP, (off), __VA_ARGS__)
/*
 * Input that torch.load would read otherwise than ptfs (an ambiguous
 * archive: two end records, a name listed twice, a pickle in front of a
 * zip): -EILSEQ, and d->unsafe set, so that the one line is counted as a
 * danger and not as mere damage.  The message says what torch would load
 * and why the file is ambiguous.
 */
int diag_unsafe_(struct diag *d, const char *file, int line, uint64_t off,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define diag_unsafe(d, off, ...) \
	diag_unsafe_((d), __FILE__, __LINE__, (off), __VA_ARGS__)

/* A system call failed with -@err. */
#define diag_errno(d, err, ...) \
	diag_set((d), (err), DIAG_NO_OFFSET, __VA_ARGS__)
/* Out of memory. */
#define diag_nomem(d) diag_set((d), -ENOMEM, DIAG_NO_OFFSET, "out of memory")

/* True once a failure was recorded. */
bool diag_failed(const struct diag *d);

/*
 * Format the failure as one line without a newline:
 * "PATH: offset 0xOFF: MESSAGE" (parts that are unknown are left out).
 * Returns @buf.
 */
const char *diag_line(const struct diag *d, char *buf, unsigned long size);

#endif
