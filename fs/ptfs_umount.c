/*
 * ptfs_umount.c - `ptfs umount [-q] [-v] [--discard] MOUNTPOINT`, the
 * client side (ptfs_cli.c parses the options): write back through
 * .ptfs/commit and wait, with a progress line on a terminal, say what was
 * written (and what was refused; -v: each edit), unmount; or drop every
 * staged edit through .ptfs/discard.  A dead daemon is told apart from a
 * path that is no ptfs mount, and the message says exactly what to run.
 */
#define _GNU_SOURCE 1
#include "ptfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The commit write, on a thread of its own while the caller shows progress. */
struct commit_job {
	int fd;
	ssize_t n;
	int err;
	bool done;
};

static void *commit_thread(void *arg)
{
	struct commit_job *j = arg;

	j->n = write(j->fd, "commit\n", 7);
	j->err = errno;
	__atomic_store_n(&j->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Write "commit" to @fd (.ptfs/commit): it returns when write-back is done.
 * When stderr is a terminal and it takes over a second, show how far it is
 * from @pfd (.ptfs/progress, opened before: opening waits for the daemon's
 * lock, which write-back holds).  Once every record is written, what is
 * left is the fsync of the new file, its rename and the directory's fsync
 * (seconds on a big file): the line says so rather than stay at 100%.
 * Returns write()'s result, errno in *@err.
 */
static ssize_t commit(int fd, int pfd, const char *mnt, int *err)
{
	struct commit_job j = { .fd = fd };
	struct timespec t0, now, tick = { 0, 100 * 1000 * 1000 };
	bool shown = false;
	pthread_t th;

	if (pfd < 0 || !isatty(STDERR_FILENO) ||
	    pthread_create(&th, NULL, commit_thread, &j)) {
		commit_thread(&j);
		*err = j.err;
		return j.n;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!__atomic_load_n(&j.done, __ATOMIC_ACQUIRE)) {
		unsigned long long done, total;
		char buf[64];
		ssize_t n;

		nanosleep(&tick, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec < 1)
			continue;
		n = pread(pfd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		if (sscanf(buf, "%llu %llu", &done, &total) != 2 || !total)
			continue;
		if (done >= total)
			fprintf(stderr, "\rptfs: %s: written back (%llu MB), "
				"syncing it to disk\033[K", mnt, total >> 20);
		else
			fprintf(stderr, "\rptfs: %s: writing back %3llu%% (%llu "
				"of %llu MB)\033[K", mnt, done * 100 / total,
				done >> 20, total >> 20);
		shown = true;
	}
	pthread_join(th, NULL);
	if (shown)
		fprintf(stderr, "\r\033[K");
	*err = j.err;
	return j.n;
}

/* The lines of status @text under "staged:" (the edits, one a line;
 * malloc'd, "" when none, NULL without memory). */
static char *staged_lines(const char *text)
{
	const char *l = text ? strstr(text, "\nstaged: ") : NULL;
	const char *e;

	if (!l)
		return strdup("");
	l = strchr(l + 1, '\n');
	for (e = l ? l + 1 : ""; e[0] == ' ' && e[1] == ' ';)
		e += strcspn(e, "\n") + (strchr(e, '\n') ? 1 : 0);
	return l ? strndup(l + 1, e - (l + 1)) : strdup("");
}

/*
 * What was done, for the user: status's "written back:" line ("nothing
 * to write back" when nothing was), @edits after it (-v: the edits as
 * status listed them before), and its "refused:" section, on stdout.
 */
static void report(const struct ptfs_mnt *m, const char *edits)
{
	int fd = ptfs_open_ctl(m, "status", O_RDONLY);
	char *text = fd >= 0 ? ptfs_read_all(fd) : NULL;
	bool on = false;

	if (fd >= 0)
		close(fd);
	for (char *l = text, *e; l && *l; l = e) {
		e = l + strcspn(l, "\n");
		if (*e)
			*e++ = 0;
		if (*l != ' ')
			on = !strncmp(l, "written back:", 13) ||
			     !strncmp(l, "refused:", 8);
		if (on && !strncmp(l, "written back: nothing", 21)) {
			puts("nothing to write back");
		} else if (on) {
			puts(l);
			if (edits && !strncmp(l, "written back:", 13))
				fputs(edits, stdout);
		}
	}
	free(text);
}

static int fusermount_u(const char *mnt)
{
	int st;
	pid_t pid;

	/* root unmounts itself: spawning fusermount3 cost 10-45 ms, as
	   much as a whole clone-and-patch write-back */
	if (geteuid() == 0 && !umount2(mnt, UMOUNT_NOFOLLOW))
		return 0;
	pid = fork();

	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
		_exit(127);
	}
	return pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
	       WEXITSTATUS(st) ? -1 : 0;
}

/*
 * Ask the daemon to write back through .ptfs/commit (the write returns
 * when the archive is on disk, or fails with EIO and the reason is what
 * the file then reads), say what was written, then unmount.
 */
static int umount_main(const char *mnt, bool quiet, bool verbose)
{
	char path[PATH_MAX], msg[600], *edits = NULL;
	struct ptfs_mnt m = { 0 };
	ssize_t n;
	int fd, pfd, err = 0;

	snprintf(path, sizeof(path), "%s/.ptfs", mnt);
	if (access(path, F_OK)) {
		if ((errno == ENOTCONN || errno == ECONNABORTED) &&
		    !ptfs_find_mount(mnt, &m))
			ptfs_daemon_gone(mnt, &m, false);
		else if (errno == ENOTCONN || errno == ECONNABORTED)
			fprintf(stderr, "ptfs: %s: the ptfs daemon is gone "
				"(killed?); staged edits are safe on disk: run "
				"fusermount3 -u %s, mount the checkpoint "
				"again (they come back), then ptfs umount\n",
				mnt, mnt);
		else
			fprintf(stderr, "ptfs: %s: not a ptfs mount\n", mnt);
		ptfs_mnt_free(&m);
		return 1;
	}
	m.root = strdup(mnt);
	if (!m.root) {
		fprintf(stderr, "ptfs: %s: out of memory\n", mnt);
		return 1;
	}
	/* a read-only mount has no control file: nothing to write back */
	fd = ptfs_open_ctl(&m, "commit", O_RDWR);
	if (fd < 0 && errno == ENOTCONN) {
		fprintf(stderr, "ptfs: %s: the ptfs daemon is gone (killed?); "
			"run fusermount3 -u %s, then mount again: staged edits "
			"come back\n", mnt, mnt);
		ptfs_mnt_free(&m);
		return 1;
	}
	/* read-only: -o ro, or written back already through .ptfs/commit */
	if (fd < 0 && errno != ENOENT && errno != EROFS) {
		fprintf(stderr, "ptfs: %s/.ptfs/commit: %s\n", mnt,
			strerror(errno));
		ptfs_mnt_free(&m);
		return 1;
	}
	if (fd >= 0 && verbose && !quiet) {
		/* the edits, as status lists them before they are written */
		int sfd = ptfs_open_ctl(&m, "status", O_RDONLY);
		char *text = sfd >= 0 ? ptfs_read_all(sfd) : NULL;

		if (sfd >= 0)
			close(sfd);
		edits = staged_lines(text);
		free(text);
	}
	pfd = fd >= 0 ? ptfs_open_ctl(&m, "progress", O_RDONLY) : -1;
	if (fd >= 0 && commit(fd, pfd, mnt, &err) != 7) {
		if (err == ENOTCONN || err == ECONNABORTED) {
			/* (a rank set committed but not all renamed is
			   made the new one by that mount) */
			fprintf(stderr, "ptfs: %s: the ptfs daemon died during "
				"write-back: the checkpoint is the old one "
				"with the edits still staged, or the complete "
				"new one once mounted again; run fusermount3 "
				"-u %s and mount it again\n", mnt, mnt);
		} else {
			n = pread(fd, msg, sizeof(msg) - 1, 0);
			msg[n > 0 ? n : 0] = 0;
			msg[strcspn(msg, "\n")] = 0;
			fprintf(stderr, "ptfs: write-back failed, %s stays "
				"mounted and nothing is lost: %s\n", mnt,
				n > 0 ? msg : strerror(err));
		}
		close(fd);
		if (pfd >= 0)
			close(pfd);
		free(edits);
		ptfs_mnt_free(&m);
		return 1;
	}
	if (pfd >= 0)
		close(pfd);
	if (fd >= 0)
		close(fd);
	if (!quiet && fd >= 0)
		report(&m, edits);
	else if (!quiet)
		puts("nothing to write back (a read-only mount)");
	free(edits);
	ptfs_mnt_free(&m);
	if (fflush(stdout))
		fprintf(stderr, "ptfs: standard output: %s\n", strerror(errno));
	if (fusermount_u(mnt)) {
		fprintf(stderr, "ptfs: written back, but fusermount3 -u %s "
			"failed\n", mnt);
		return 1;
	}
	return 0;
}

/* Is @root still a ptfs mount point? */
static bool still_mounted(const char *root)
{
	struct ptfs_mnt m;
	bool yes = !ptfs_find_mount(root, &m) && !strcmp(m.root, root);

	ptfs_mnt_free(&m);
	return yes;
}

/*
 * Drop every staged edit through .ptfs/discard (the daemon removes its
 * overlay, says what it dropped, and unmounts when the file is closed),
 * then make sure the mount is gone.
 */
static int discard_main(const char *mnt, bool quiet)
{
	struct ptfs_mnt m;
	char *text;
	int fd, err, rc = ptfs_find_mount(mnt, &m);

	if (rc || *m.rest) {
		fprintf(stderr, "ptfs: %s: %s\n", mnt, rc < 0 ? strerror(-rc) :
			rc ? "not a ptfs mount" : "not the mount point");
		if (!rc)
			ptfs_mnt_free(&m);
		return 1;
	}
	fd = ptfs_open_ctl(&m, "discard", O_RDWR);
	err = errno;
	if (fd < 0 && (err == ENOTCONN || err == ECONNABORTED)) {
		ptfs_daemon_gone(mnt, &m, true);
		ptfs_mnt_free(&m);
		return 1;
	}
	if (fd < 0 && err == EROFS) {
		/* written back (or discarded) already: say which */
		fd = ptfs_open_ctl(&m, "status", O_RDONLY);
		text = fd >= 0 ? ptfs_read_all(fd) : NULL;
		if (fd >= 0)
			close(fd);
		const char *why = "the mount takes no more edits";

		for (char *l = text, *e; l && *l; l = e) {
			e = l + strcspn(l, "\n");
			if (*e)
				*e++ = 0;
			if (!strncmp(l, "written back:", 13) ||
			    !strncmp(l, "discarded:", 10)) {
				why = l;
				break;
			}
		}
		fprintf(stderr, "ptfs: %s: nothing to discard (%s); it stays "
			"mounted\n", mnt, why);
		free(text);
		ptfs_mnt_free(&m);
		return 1;
	}
	if (fd < 0 && err != ENOENT) {
		fprintf(stderr, "ptfs: %s/.ptfs/discard: %s\n", mnt,
			strerror(err));
		ptfs_mnt_free(&m);
		return 1;
	}
	if (fd >= 0 && write(fd, "discard\n", 8) != 8) {
		err = errno;
		text = ptfs_read_all(fd);
		if (text)
			text[strcspn(text, "\n")] = 0;
		fprintf(stderr, "ptfs: %s: %s; it stays mounted\n", mnt,
			text && *text ? text : strerror(err));
		free(text);
		close(fd);
		ptfs_mnt_free(&m);
		return 1;
	}
	text = fd >= 0 ? ptfs_read_all(fd) : NULL;
	if (fd >= 0)
		close(fd);	/* the daemon unmounts now */
	if (!quiet)
		fputs(fd < 0 ? "nothing to discard (a read-only mount takes "
		      "no edits)\n" : text ? text : "discarded\n", stdout);
	free(text);
	if (fflush(stdout))
		fprintf(stderr, "ptfs: standard output: %s\n", strerror(errno));
	for (int i = 0; i < 100 && fd >= 0 && still_mounted(m.root); i++)
		usleep(100 * 1000);
	rc = still_mounted(m.root) && fusermount_u(m.root) ? 1 : 0;
	if (rc)
		fprintf(stderr, "ptfs: %s: discarded, but fusermount3 -u %s "
			"failed\n", mnt, m.root);
	ptfs_mnt_free(&m);
	return rc;
}

int ptfs_umount(const char *mnt, bool quiet, bool verbose, bool discard)
{
	return discard ? discard_main(mnt, quiet) :
	       umount_main(mnt, quiet, verbose);
}
