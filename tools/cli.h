/*
 * cli.h - what every ptfs tool does the same way (ptls, ptdump, ptverify,
 * ptrepack): its name in front of each message, errors as one line on
 * stderr ("ptls: model.pt: offset 0x1f40: bad ..."), --version, the exit
 * codes, a checked flush of stdout, and a progress line on stderr for work
 * that takes more than a second, shown only when stderr is a terminal.
 */
#ifndef PT_TOOLS_CLI_H
#define PT_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "util/cliopt.h"

struct diag;

/*
 * The options every tool has, the same letters with the same meaning,
 * printed the same way at the end of each --help (docs/user-guide.md
 * has the whole table of short options; util/cliopt.h has the lines,
 * shared with the ptfs subcommands).
 */
#define CLI_COMMON_HELP \
	"\nCommon options:\n" \
	CLI_HELP_JSON CLI_HELP_QUIET CLI_HELP_HELP CLI_HELP_VERSION \
	"A file name - is standard input (or output, where one is written).\n" \
	CLI_HELP_REMOTE

/* Exit codes shared by the tools (each man page says what 1 means). */
#define CLI_OK		0	/* done, nothing to report */
#define CLI_FOUND	1	/* done, and found what the tool looks for */
#define CLI_ERROR	2	/* could not do it: bad usage, unreadable file */

/*
 * Set the program name used in messages from argv[0], and the synopsis
 * usage errors repeat ("[OPTIONS] CHECKPOINT..."); call first in main().
 */
void cli_init(const char *argv0, const char *synopsis);

/*
 * The remote options every tool takes, taken out of @argv (*@argc
 * updated) before the tool's getopt_long(), and the URLs among the
 * arguments hidden (src_hide_urls()); call after cli_init().  0, or
 * CLI_ERROR after a usage error.  CLI_HELP_REMOTE is their --help.
 */
int cli_remote_args(int *argc, char **argv);
#define CLI_HELP_REMOTE \
	"\nRemote checkpoints (a URL for a path: http://, https://, s3://):\n" \
	"      --insecure        https without checking the certificate\n" \
	"      --endpoint URL    an S3-compatible store (AWS_ENDPOINT_URL)\n" \
	"      --cache SIZE      the block cache (256M)\n" \
	"      --connections N   parallel range requests (8)\n"

/* Full buffering for stdout (1 MiB), unlocked: for tools that write much
 * of it from one thread.  Call before the first output. */
void cli_stdout_fast(void);

/* The program name given to cli_init(). */
const char *cli_prog(void);

/*
 * Print "PROG: MESSAGE" and a newline on stderr (stdout is flushed first,
 * so the two streams interleave in order on a terminal).
 */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print the failure recorded in @d as one line: "PROG: FILE: offset ...". */
void cli_diag(const struct diag *d);

/* Print "PROG VERSION" on stdout; returns CLI_OK for main() to return. */
int cli_version(void);

/*
 * A usage error on stderr: "PROG: MESSAGE" (when @fmt is not NULL), the
 * synopsis and "Try 'PROG --help' ...".  Returns CLI_ERROR.
 */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Flush stdout and check that everything written reached it (a full disk,
 * a closed pipe).  Returns @status, or CLI_ERROR after printing why.
 */
int cli_finish(int status);

/* Human-readable byte count ("2.6 MiB") into @buf (at least 16 bytes). */
const char *cli_size(uint64_t bytes, char *buf, size_t size);

/*
 * A progress line on stderr: "PROG: WHAT: 45% (1.2 GiB of 2.7 GiB)",
 * redrawn at most ten times a second, first after a second of work
 * (PT_PROGRESS_AFTER_MS overrides that, for tests), and only when stderr
 * is a terminal; cli_progress_end() erases it.  A zeroed struct is off.
 */
struct cli_progress {
	bool on;		/* stderr is a terminal */
	bool shown;		/* a line is on the screen */
	const char *what;
	uint64_t total;
	long after_ms;		/* first drawn after this much work */
	uint64_t done;		/* what cli_progress_step() counted */
	struct timespec start, last;
};

void cli_progress_start(struct cli_progress *p, const char *what,
			uint64_t total);
void cli_progress(struct cli_progress *p, uint64_t done);
/* @n more done: @p is a struct cli_progress (the step callback of
 * ptz_entry_crc32() and the other readers that count bytes). */
void cli_progress_step(void *p, uint64_t n);
void cli_progress_end(struct cli_progress *p);

#endif
