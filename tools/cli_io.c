/*
 * cli_io.c - "-" as standard input or output for the tools (cli_io.h),
 * the JSON error object of --json, and the checks that keep an output
 * from being renamed over something that is not a regular file (issue
 * 15: `ptrepack IN /dev/stdout` once replaced the /dev/stdout symlink).
 */
/* realpath() is XSI */
#define _XOPEN_SOURCE 700

#include "cli_io.h"

#include "ckpt/ckpt.h"
#include "cli.h"
#include "diag/diag.h"
#include "json_out.h"
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPOOL_CHUNK	(1u << 20)

static char stdin_path[32];	/* "/proc/self/fd/N", once spooled */

const char *cli_name(const char *arg)
{
	return strcmp(arg, "-") ? arg : CLI_STDIN_NAME;
}

/* Copy all of @in to @out (sequential reads, whole writes).  0 or -errno. */
int cli_copy_fd(int in, int out)
{
	char *buf = malloc(SPOOL_CHUNK);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(in, buf, SPOOL_CHUNK), w;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n ? -errno : 0;
			break;
		}
		for (ssize_t done = 0; done < n; done += w) {
			w = write(out, buf + done, (size_t)(n - done));
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				goto fail;
		}
	}
	free(buf);
	return rc;
fail:
	rc = -errno;
	free(buf);
	return rc;
}

/* A deleted temporary file in $TMPDIR, open for reading and writing. */
int cli_spool_fd(void)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX];
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	if (snprintf(path, sizeof(path), "%s/ptfs-spool.XXXXXX", dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = mkstemp(path);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

/* Make stdin_path name standard input, spooled if need be.  0 or -errno. */
static int spool_stdin(struct diag *d)
{
	struct stat st;
	int fd, rc;

	if (stdin_path[0])
		return 0;
	if (isatty(STDIN_FILENO))
		return diag_set(d, -EBADF, DIAG_NO_OFFSET, "is a terminal: "
				"give a checkpoint file, or redirect one "
				"into it");
	if (fstat(STDIN_FILENO, &st))
		return diag_errno(d, -errno, "%s", strerror(errno));
	if (S_ISREG(st.st_mode)) {
		fd = STDIN_FILENO;	/* read in place, by offset */
	} else {
		fd = cli_spool_fd();
		rc = fd < 0 ? fd : cli_copy_fd(STDIN_FILENO, fd);
		if (rc) {
			if (fd >= 0)
				close(fd);
			return diag_errno(d, rc, "cannot spool it to a "
					  "temporary file in $TMPDIR: %s",
					  strerror(-rc));
		}
	}
	snprintf(stdin_path, sizeof(stdin_path), "/proc/self/fd/%d", fd);
	return 0;
}

const char *cli_input(const char *arg)
{
	struct diag d;

	if (strcmp(arg, "-"))
		return arg;
	diag_init(&d, CLI_STDIN_NAME);
	if (spool_stdin(&d)) {
		cli_diag(&d);
		return NULL;
	}
	return stdin_path;
}

int cli_open(const char *arg, struct ckpt **out, struct diag *d)
{
	return cli_open_with(arg, 0, out, d);
}

int cli_open_with(const char *arg, unsigned flags, struct ckpt **out,
		  struct diag *d)
{
	bool in = !strcmp(arg, "-");
	int rc;

	diag_init(d, cli_name(arg));
	rc = in ? spool_stdin(d) : 0;
	*out = NULL;
	if (!rc)
		rc = ckpt_open_with(in ? stdin_path : arg, flags, out, d);
	if (*out)	/* CKPT_OPEN_KEEP: a failed one too */
		(*out)->path = cli_name(arg);
	return rc;
}

void cli_json_error(FILE *f, const struct diag *d, const char *head,
		    const char *tail)
{
	char line[1024];

	fputs("{", f);
	if (head)
		fputs(head, f);
	fputs("\"file\":", f);
	json_cstr(f, d->path);
	fputs(",\"status\":\"unreadable\",\"error\":", f);
	json_cstr(f, diag_line(d, line, sizeof(line)));
	if (d->off == DIAG_NO_OFFSET)
		fputs(",\"offset\":null", f);
	else
		fprintf(f, ",\"offset\":%" PRIu64, d->off);
	fprintf(f, ",\"errno\":%d,\"kind\":\"%s\"%s}\n", -d->err,
		d->err == -EILSEQ ? "corrupt" :
		d->err == -ENOTSUP ? "unsupported" : "system",
		tail ? tail : "");
}

static const char *kind_name(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISFIFO(m) ? "a pipe" :
	       S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Is @st the file standard output writes to? */
static bool is_stdout(const struct stat *st)
{
	struct stat o;

	return !fstat(STDOUT_FILENO, &o) && o.st_dev == st->st_dev &&
	       o.st_ino == st->st_ino;
}

enum cli_out cli_output(const char *arg, char **target)
{
	struct stat l, st;

	*target = NULL;
	if (!strcmp(arg, "-"))
		return CLI_OUT_STDOUT;
	if (src_is_url(arg)) {
		cli_error("%s: ptfs reads URLs and writes local files only: "
			  "write it here, then upload it", arg);
		return CLI_OUT_REFUSED;
	}
	if (lstat(arg, &l))
		return errno == ENOENT ? CLI_OUT_FILE :
		       (cli_error("%s: %s", arg, strerror(errno)),
			CLI_OUT_REFUSED);
	if (stat(arg, &st)) {
		cli_error("%s: a symbolic link to nothing (%s): not written "
			  "through", arg, strerror(errno));
		return CLI_OUT_REFUSED;
	}
	if (!S_ISREG(st.st_mode)) {
		if (is_stdout(&st))
			return CLI_OUT_STDOUT;
		if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))
			return CLI_OUT_STREAM;
		cli_error("%s: %s: only a regular file, a pipe or a "
			  "character device can be written", arg,
			  kind_name(st.st_mode));
		return CLI_OUT_REFUSED;
	}
	if (S_ISLNK(l.st_mode)) {
		*target = realpath(arg, NULL);
		if (!*target) {
			cli_error("%s: %s", arg, strerror(errno));
			return CLI_OUT_REFUSED;
		}
	}
	return CLI_OUT_FILE;
}
