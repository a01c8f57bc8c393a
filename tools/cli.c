/*
 * cli.c - the shared command-line conventions of the tools (cli.h): one
 * line per error on stderr, a checked stdout, and the progress line that
 * appears on a terminal when something takes more than a second.
 */
#include "cli.h"

#include "diag/diag.h"
#include "util/heap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "pt";
static const char *synopsis = "";

void cli_init(const char *argv0, const char *syn)
{
	const char *slash = strrchr(argv0, '/');

	prog = slash ? slash + 1 : argv0;
	synopsis = syn;
	util_heap_setup();
}

void cli_stdout_fast(void)
{
	static char buf[1 << 20];

	setvbuf(stdout, buf, _IOFBF, sizeof(buf));
	/* one thread writes stdout: glibc's lock per call cost ptls --json
	   a quarter of its time on 100,000 tensors */
	__fsetlocking(stdout, FSETLOCKING_BYCALLER);
}

const char *cli_prog(void)
{
	return prog;
}

/*
 * Write @s with control characters escaped ("\n" as \n): a message may
 * quote bytes from the file (a version record "11\n"), and an error is
 * always one line.
 */
static void put_line(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

void cli_error(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, "%s: ", prog);
	put_line(stderr, msg);
	fputc('\n', stderr);
}

void cli_diag(const struct diag *d)
{
	char line[1024];

	cli_error("%s", diag_line(d, line, sizeof(line)));
}

int cli_version(void)
{
	printf("%s %s\n", prog, PT_VERSION);
	return cli_finish(CLI_OK);
}

int cli_usage(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (fmt) {
		fprintf(stderr, "%s: ", prog);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	fprintf(stderr, "usage: %s %s\nTry '%s --help' for more "
		"information.\n", prog, synopsis, prog);
	return CLI_ERROR;
}

int cli_finish(int status)
{
	if (fflush(stdout) || ferror(stdout)) {
		int err = errno;

		fprintf(stderr, "%s: cannot write the output: %s\n", prog,
			strerror(err ? err : EIO));
		return CLI_ERROR;
	}
	return status;
}

const char *cli_size(uint64_t bytes, char *buf, size_t size)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, size, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* ---- progress ---- */

static long ms_since(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 +
	       (b->tv_nsec - a->tv_nsec) / 1000000;
}

void cli_progress_start(struct cli_progress *p, const char *what,
			uint64_t total)
{
	const char *env = getenv("PT_PROGRESS_AFTER_MS");

	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->what = what;
	p->total = total;
	p->after_ms = env ? strtol(env, NULL, 10) : 1000;
	clock_gettime(CLOCK_MONOTONIC, &p->start);
}

void cli_progress(struct cli_progress *p, uint64_t done)
{
	char a[16], b[16];
	struct timespec now;

	if (!p->on)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (ms_since(&p->start, &now) < p->after_ms ||
	    (p->shown && ms_since(&p->last, &now) < 100))
		return;
	p->last = now;
	p->shown = true;
	fprintf(stderr, "\r%s: %s: %3u%% (%s of %s)\033[K", prog, p->what,
		p->total ? (unsigned)(done * 100 / p->total) : 100,
		cli_size(done, a, sizeof(a)), cli_size(p->total, b, sizeof(b)));
	fflush(stderr);
}

void cli_progress_step(void *arg, uint64_t n)
{
	struct cli_progress *p = arg;

	p->done += n;
	cli_progress(p, p->done);
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}
