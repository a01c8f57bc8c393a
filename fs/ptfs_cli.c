/*
 * ptfs_cli.c - the commands that talk to a running mount through its
 * control files (.ptfs/, ptfs_ctl.c), so a user never has to know them:
 *
 *   ptfs umount [-q] [-v] [--discard] MOUNTPOINT   (ptfs_umount.c)
 *   ptfs status [-j] [-q] PATH    what is staged in the mount holding PATH
 *   ptfs revert [-q] PATH...      make key paths what the checkpoint holds,
 *                                 keeping the other staged edits
 *
 * Options are parsed as the tools parse theirs (getopt_long, the common
 * letters and their help lines from util/cliopt.h): -h/--help and
 * -V/--version everywhere, -q/--quiet, -j/--json and -v/--verbose where
 * they mean something.  Messages are one line on stderr; reports go to
 * stdout (-q: none).  A dead daemon is told apart from a path that is no
 * ptfs mount: the kernel answers ENOTCONN for the first, and
 * /proc/self/mountinfo names the checkpoint (fsname=CHECKPOINT).
 */
#define _GNU_SOURCE 1
#include "ptfs.h"

#include "util/cliopt.h"
#include "util/json_out.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the options of a subcommand set. */
struct cli_opts {
	bool json, quiet, verbose, discard;
};

/* ---- ptfs status ---- */

/* {"path": @arg, "error": @msg} on stdout, for -j (not with -q). */
static void json_error(const struct cli_opts *o, const char *arg,
		       const char *msg)
{
	if (!o->json || o->quiet)
		return;
	fputs("{\"path\":", stdout);
	json_cstr(stdout, arg);
	fputs(",\"error\":", stdout);
	json_cstr(stdout, msg);
	fputs("}\n", stdout);
}

/* An error of ptfs status: one line on stderr, and with -j the same as
 * JSON on stdout.  Returns 2. */
static int status_error(const struct cli_opts *o, const char *arg,
			const char *msg)
{
	fprintf(stderr, "ptfs: %s: %s\n", arg, msg);
	json_error(o, arg, msg);
	return 2;
}

/*
 * Is anything staged, going by status @text: 1 yes, 0 no, 2 unknown (the
 * daemon could not say).  Key paths are printed quoted when they hold a
 * newline, so only the "staged:" line starts a line with it.
 */
static int staged_in(const char *text)
{
	const char *l = !strncmp(text, "staged: ", 8) ? text :
			strstr(text, "\nstaged: ");

	if (!l)
		return 2;
	l += *l == '\n' ? 9 : 8;
	return !strncmp(l, "nothing", 7) ? 0 : !strncmp(l, "unknown", 7) ?
	       2 : 1;
}

static int status_main(const char *arg, const struct cli_opts *o)
{
	struct ptfs_mnt m;
	char *text, *json = NULL;
	int fd, staged, rc = ptfs_find_mount(arg, &m);

	if (rc)
		return status_error(o, arg, rc > 0 ? "not in a ptfs mount" :
				    strerror(-rc));
	fd = ptfs_open_ctl(&m, "status", O_RDONLY);
	if (fd < 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
		ptfs_daemon_gone(arg, &m, false);
		json_error(o, arg, "the ptfs daemon is gone (killed?)");
		ptfs_mnt_free(&m);
		return 2;
	}
	if (fd < 0 && errno == ENOENT) {
		/* a read-only mount has no control files */
		if (o->json && !o->quiet) {
			fputs("{\"checkpoint\":", stdout);
			json_cstr(stdout, m.source);
			fputs(",\"read_only\":true,\"counts\":{\"changed\":0,"
			      "\"renamed\":0,\"removed\":0,\"added\":0,"
			      "\"value\":0},\"storages\":0,\"staged\":[],"
			      "\"unlisted\":0,\"refused_count\":0,"
			      "\"refused\":[]}\n", stdout);
		} else if (!o->quiet) {
			printf("checkpoint: %s\nread-only mount: no edits are "
			       "taken or written back through it\n", m.source);
		}
		ptfs_mnt_free(&m);
		return fflush(stdout) ? 2 : 0;
	}
	if (fd < 0) {
		char msg[PATH_MAX + 64];

		snprintf(msg, sizeof(msg), "%s/.ptfs/status: %s", m.root,
			 strerror(errno));
		ptfs_mnt_free(&m);
		return status_error(o, arg, msg);
	}
	text = ptfs_read_all(fd);
	close(fd);
	if (text && o->json && !o->quiet) {
		fd = ptfs_open_ctl(&m, "status.json", O_RDONLY);
		json = fd >= 0 ? ptfs_read_all(fd) : NULL;
		if (fd >= 0)
			close(fd);
	}
	ptfs_mnt_free(&m);
	if (!text || (o->json && !o->quiet && !json)) {
		free(text);
		return status_error(o, arg, "cannot read the status (out of "
				    "memory?)");
	}
	staged = staged_in(text);
	if (!o->quiet)
		fputs(o->json ? json : text, stdout);
	free(json);
	free(text);
	if (fflush(stdout))
		return 2;
	/* -q: the exit status says whether edits are staged */
	return o->quiet ? staged : 0;
}

/* ---- ptfs revert ---- */

/* @s on stderr as one line: a key path in a message may hold newlines. */
static void put_line(const char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '\n')
		n--;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n')
			fputs("\\n", stderr);
		else if (c < 0x20 || c == 0x7f)
			fprintf(stderr, "\\x%02x", c);
		else
			fputc(c, stderr);
	}
	fputc('\n', stderr);
}

/*
 * Send @n key paths of mount @m (relative to its root) to .ptfs/revert in
 * one request, so that they are reverted together; print what was done.
 * Each path ends with a NUL, so that any key name arrives whole (a
 * newline in it too).  0, 1 refused (the reason on stderr), 2 no daemon.
 */
static int revert_batch(const char *arg, const struct ptfs_mnt *m,
			char *const *rel, int n, bool quiet)
{
	size_t len = 0;
	char *req, *text;
	int fd, rc = 0;

	for (int k = 0; k < n; k++)
		len += strlen(rel[k]) + 2;
	req = malloc(len + 1);
	if (!req) {
		fprintf(stderr, "ptfs: out of memory\n");
		return 1;
	}
	len = 0;
	/* the mount point itself is "." (an empty path is no path) */
	for (int k = 0; k < n; k++) {
		const char *p = *rel[k] ? rel[k] : ".";

		memcpy(req + len, p, strlen(p) + 1);
		len += strlen(p) + 1;
	}
	fd = ptfs_open_ctl(m, "revert", O_RDWR);
	if (fd < 0 && (errno == ENOTCONN || errno == ECONNABORTED)) {
		ptfs_daemon_gone(arg, m, false);
		free(req);
		return 2;
	}
	if (fd < 0) {
		fprintf(stderr, "ptfs: %s: %s\n", arg, errno == ENOENT ||
			errno == EROFS ? "the mount takes no edits (read-only, "
			"written back or discarded): nothing to revert" :
			strerror(errno));
		free(req);
		return 1;
	}
	if (write(fd, req, len) != (ssize_t)len) {
		int err = errno;

		text = ptfs_read_all(fd);
		fputs("ptfs: ", stderr);
		put_line(text && *text ? text : strerror(err));
		rc = err == ENOTCONN || err == ECONNABORTED ? 2 : 1;
	} else if (!quiet && (text = ptfs_read_all(fd))) {
		fputs(text, stdout);
	} else {
		text = NULL;
	}
	free(text);
	free(req);
	close(fd);
	return rc;
}

static int revert_main(char **args, int n, bool quiet)
{
	struct ptfs_mnt m0 = { 0 }, m;
	char *rel[16];
	int nrel = 0, rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		int r = ptfs_find_mount(args[i], &m);

		if (r) {
			fprintf(stderr, "ptfs: %s: %s\n", args[i], r > 0 ?
				"not in a ptfs mount" : strerror(-r));
			rc = 2;
			break;
		}
		if (m0.root && strcmp(m0.root, m.root)) {
			fprintf(stderr, "ptfs: %s: not in the mount at %s "
				"(revert the paths of each mount by "
				"themselves)\n", args[i], m0.root);
			rc = 2;
		}
		rel[nrel++] = m.rest;
		m.rest = NULL;
		if (!m0.root) {
			m0 = m;
		} else {
			ptfs_mnt_free(&m);
		}
		/* 16 to a request: those are reverted together */
		if (!rc && (nrel == 16 || i == n - 1)) {
			rc = revert_batch(args[0], &m0, rel, nrel, quiet);
			while (nrel)
				free(rel[--nrel]);
		}
	}
	while (nrel)
		free(rel[--nrel]);
	ptfs_mnt_free(&m0);
	if (fflush(stdout) && !rc)
		rc = 2;
	return rc;
}

/* ---- the options ---- */

enum { OPT_DISCARD = 256 };

/* A subcommand: its options (getopt_long's), synopsis and help. */
struct cli_cmd {
	const char *name;
	const char *shortopts;
	const struct option *longopts;
	const char *synopsis;	/* after "ptfs NAME " */
	const char *help;	/* what it does, then its own options */
	const char *common;	/* the common options' lines it has */
	int nargs;		/* paths: 1, or -1 for one or more */
	const char *which;	/* the usage error without one */
};

static const struct option umount_lopts[] = {
	CLI_LOPT_QUIET, CLI_LOPT_VERBOSE,
	{ "discard", no_argument, NULL, OPT_DISCARD },
	CLI_LOPT_HELP, CLI_LOPT_VERSION, { NULL, 0, NULL, 0 }
};
static const struct option status_lopts[] = {
	CLI_LOPT_JSON, CLI_LOPT_QUIET, CLI_LOPT_HELP, CLI_LOPT_VERSION,
	{ NULL, 0, NULL, 0 }
};
static const struct option revert_lopts[] = {
	CLI_LOPT_QUIET, CLI_LOPT_HELP, CLI_LOPT_VERSION, { NULL, 0, NULL, 0 }
};

static const struct cli_cmd cmds[] = {
	{ "umount", "qvhV", umount_lopts, "[-q] [-v] [--discard] MOUNTPOINT",
	  "Write back the staged edits, wait until the new file is on disk, "
	  "say what\nwas written (and what was refused), unmount.\n\n"
	  "  -v, --verbose         each edit written back, one a line\n"
	  "      --discard         drop every staged edit instead (the "
	  "checkpoint stays\n"
	  "                        as it is), say what was dropped, unmount\n",
	  CLI_HELP_QUIET CLI_HELP_HELP CLI_HELP_VERSION, 1,
	  "which mount?" },
	{ "status", "jqhV", status_lopts, "[-j] [-q] PATH",
	  "What is staged in the mount that holds PATH: the checkpoint, the "
	  "daemon,\nthe overlay, each edit, the edits that were refused.  "
	  "Exit status 0; with\n-q, 1 when edits are staged, 0 when none; 2 "
	  "when PATH is in no ptfs\nmount or the daemon is gone.\n",
	  CLI_HELP_JSON CLI_HELP_QUIET CLI_HELP_HELP CLI_HELP_VERSION, 1,
	  "which path?" },
	{ "revert", "qhV", revert_lopts, "[-q] PATH...",
	  "Make each key path what the checkpoint holds, keeping every other "
	  "staged\nedit (the mount point itself: all of them).  Exit status "
	  "0, 1 refused, 2\nno ptfs mount or no daemon.\n",
	  CLI_HELP_QUIET CLI_HELP_HELP CLI_HELP_VERSION, -1,
	  "which key path?" },
};

static int cmd_help(const struct cli_cmd *c)
{
	printf("usage: ptfs %s %s\n%s\nCommon options:\n%s", c->name,
	       c->synopsis, c->help,
	       c->common);
	return fflush(stdout) ? 2 : 0;
}

static int cmd_usage(const struct cli_cmd *c, const char *msg,
		     const char *arg)
{
	fflush(stdout);
	if (msg)
		fprintf(stderr, "ptfs: %s: %s%s%s\n", c->name, arg ? arg : "",
			arg ? ": " : "", msg);
	fprintf(stderr, "usage: ptfs %s %s\nTry 'ptfs %s --help' for more "
		"information.\n", c->name, c->synopsis, c->name);
	return 2;
}

int ptfs_cli_main(int argc, char **argv)
{
	const struct cli_cmd *c = NULL;
	struct cli_opts o = { 0 };
	char prog[64];
	int ch;

	for (size_t k = 0; argc >= 2 && k < sizeof(cmds) / sizeof(cmds[0]);
	     k++)
		if (!strcmp(argv[1], cmds[k].name))
			c = &cmds[k];
	if (!c)
		return -1;
	/* getopt's own messages name "ptfs COMMAND" */
	snprintf(prog, sizeof(prog), "ptfs: %s", c->name);
	argv[1] = prog;
	opterr = 1;
	optind = 1;
	while ((ch = getopt_long(argc - 1, argv + 1, c->shortopts,
				 c->longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			o.json = true;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'v':
			o.verbose = true;
			break;
		case OPT_DISCARD:
			o.discard = true;
			break;
		case 'h':
			return cmd_help(c);
		case 'V':
			printf("ptfs %s\n", PT_VERSION);
			return fflush(stdout) ? 2 : 0;
		default:	/* getopt said what */
			return cmd_usage(c, NULL, NULL);
		}
	}
	argc -= optind + 1;
	argv += optind + 1;
	if (!argc)
		return cmd_usage(c, c->which, NULL);
	if (c->nargs == 1 && argc > 1)
		return cmd_usage(c, "one path only", argv[1]);
	if (!strcmp(c->name, "status"))
		return status_main(argv[0], &o);
	if (!strcmp(c->name, "revert"))
		return revert_main(argv, argc, o.quiet);
	return ptfs_umount(argv[0], o.quiet, o.verbose, o.discard);
}
