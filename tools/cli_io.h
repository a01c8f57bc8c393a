/*
 * cli_io.h - "-" for standard input and standard output in every tool,
 * and the one place that decides how a tool may write an output path.
 *
 * A checkpoint is read by offset (its zip index is at the end), so a
 * "-" that is a pipe is spooled to a deleted temporary file in $TMPDIR
 * first; a regular file on standard input is read in place.  Messages
 * name it "(stdin)".
 */
#ifndef PT_TOOLS_CLI_IO_H
#define PT_TOOLS_CLI_IO_H

#include <stdbool.h>
#include <stdio.h>

struct ckpt;
struct diag;

#define CLI_STDIN_NAME	"(stdin)"

/* The name messages use for the argument @arg ("-" is "(stdin)"). */
const char *cli_name(const char *arg);

/*
 * A path that open() can read for the argument @arg: @arg itself, or for
 * "-" standard input (spooled once, when it is not a regular file).
 * NULL after printing one line when that cannot be done.
 */
const char *cli_input(const char *arg);

/*
 * ckpt_open() of argument @arg with "-" handled; @d is initialised with
 * the name messages use.  0, or -errno with @d set (nothing printed).
 */
int cli_open(const char *arg, struct ckpt **out, struct diag *d);
/* cli_open() with ckpt_open_with()'s @flags (CKPT_OPEN_LENIENT). */
int cli_open_with(const char *arg, unsigned flags, struct ckpt **out,
		  struct diag *d);

/*
 * Write @d's failure as one JSON object and a newline, for --json:
 * {HEAD"file":..,"status":"unreadable","error":"the one-line message",
 *  "offset":N|null,"errno":N,"kind":..TAIL} where kind is "corrupt",
 * "unsupported" or "system"; @head and @tail (or NULL) add fields.
 */
void cli_json_error(FILE *f, const struct diag *d, const char *head,
		    const char *tail);

/*
 * What an output argument is: CLI_OUT_FILE (a regular file, or nothing
 * yet: written beside and renamed over), CLI_OUT_STDOUT ("-", or a path
 * that is this process's standard output such as /dev/stdout),
 * CLI_OUT_STREAM (a named pipe or a character device such as /dev/null
 * or bash's >(...): opened and written in order, never replaced).  For a
 * symlink to a regular file, *@target is set to the file it names (malloc'd,
 * caller frees) so the link stays and its target is replaced.  Anything
 * else (a directory, a device, a dangling link) is refused with one
 * line: CLI_OUT_REFUSED.
 */
/* A deleted temporary file in $TMPDIR, open read-write: fd or -errno. */
int cli_spool_fd(void);

/* Copy what is left of @in to @out, sequentially.  0 or -errno. */
int cli_copy_fd(int in, int out);

enum cli_out { CLI_OUT_FILE, CLI_OUT_STDOUT, CLI_OUT_STREAM,
	       CLI_OUT_REFUSED };
enum cli_out cli_output(const char *arg, char **target);

#endif
