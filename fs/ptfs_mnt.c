/*
 * ptfs_mnt.c - which ptfs mount a path is in, for the commands that talk
 * to a running mount (ptfs_cli.c): the longest mount point in
 * /proc/self/mountinfo that holds it, when that one is fuse.ptfs, with its
 * source (ptfs sets fsname to the checkpoint's absolute path).  The path
 * need not exist (a removed key), and a dead daemon's mount point cannot
 * be resolved (ENOTCONN): the part that resolves is resolved, the rest
 * taken as written.
 * And, before a mount, whether a directory may become one (not a mount
 * already, a directory, empty unless -o nonempty), and when the mount
 * itself fails, one line saying why and what to do (libfuse's own words
 * are kept for it, not printed).
 */
#define _GNU_SOURCE 1
#include "ptfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ptfs_mnt_free(struct ptfs_mnt *m)
{
	free(m->root);
	free(m->source);
	free(m->rest);
}

/* mountinfo's octal escapes (\040 for a space) undone in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* Append @comp to absolute @p (PATH_MAX), handling "." and "..". */
static void path_push(char *p, const char *comp, size_t len)
{
	size_t n = strlen(p);

	if (!len || (len == 1 && comp[0] == '.'))
		return;
	if (len == 2 && comp[0] == '.' && comp[1] == '.') {
		while (n > 1 && p[n - 1] != '/')
			n--;
		p[n > 1 ? n - 1 : 1] = 0;
		return;
	}
	if (n + len + 2 > PATH_MAX)
		return;
	if (n > 1)
		p[n++] = '/';
	memcpy(p + n, comp, len);
	p[n + len] = 0;
}

/*
 * @arg as an absolute path: its longest prefix that resolves (realpath:
 * symbolic links followed), then the rest as written.  A removed key or a
 * dead daemon's mount point do not resolve, and need not.
 */
static void absolute_path(const char *arg, char *out)
{
	char buf[PATH_MAX], *real;
	size_t cut = strlen(arg);

	if (cut >= PATH_MAX) {
		strcpy(out, "/");
		return;
	}
	for (;;) {
		memcpy(buf, arg, cut);
		buf[cut] = 0;
		real = realpath(cut ? buf : ".", NULL);
		if (real || !cut)
			break;
		while (cut && arg[cut - 1] == '/')
			cut--;
		while (cut && arg[cut - 1] != '/')
			cut--;
		if (cut == 0 && arg[0] == '/')
			cut = 1;
	}
	strcpy(out, "/");
	if (real) {
		snprintf(out, PATH_MAX, "%s", real);
		free(real);
	}
	for (const char *p = arg + cut; *p;) {
		size_t n = strcspn(p, "/");

		path_push(out, p, n);
		p += n;
		while (*p == '/')
			p++;
	}
}

/* Is mount point @mp a prefix of @path, component-wise? */
static bool under(const char *path, const char *mp)
{
	size_t n = strlen(mp);

	if (!strcmp(mp, "/"))
		return true;
	return !strncmp(path, mp, n) && (path[n] == '/' || !path[n]);
}

/*
 * One line of mountinfo into @mp, @fstype (256 bytes) and @source (both
 * PATH_MAX), unescaped: false when it does not parse.
 */
static bool mount_line(const char *line, char *mp, char *fstype,
		       char *source)
{
	const char *dash = strstr(line, " - ");

	/* id parent maj:min root mountpoint ... - fstype source */
	if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
	    sscanf(dash + 3, "%255s %4095s", fstype, source) != 2)
		return false;
	unescape(mp);
	unescape(source);
	return true;
}

/*
 * The mount on top of those that hold @path (absolute): the longest mount
 * point, the last listed of equals.  Its mount point, type and source
 * into @mp, @fstype (256 bytes) and @source; 0, 1 when none (not even /
 * is listed), or -errno.
 */
static int mount_holding(const char *path, char *mp, char *fstype,
			 char *source)
{
	char line[3 * PATH_MAX], m[PATH_MAX], t[256], src[PATH_MAX];
	int rc = 1;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!mount_line(line, m, t, src) || !under(path, m) ||
		    (!rc && strlen(m) < strlen(mp)))
			continue;
		strcpy(mp, m);
		strcpy(fstype, t);
		strcpy(source, src);
		rc = 0;
	}
	fclose(f);
	return rc;
}

int ptfs_find_mount(const char *arg, struct ptfs_mnt *m)
{
	char path[PATH_MAX], best[PATH_MAX], src[PATH_MAX], fstype[256];
	int rc;

	memset(m, 0, sizeof(*m));
	absolute_path(arg, path);
	rc = mount_holding(path, best, fstype, src);
	if (rc)
		return rc;
	if (strcmp(fstype, "fuse.ptfs"))
		return 1;
	m->root = strdup(best);
	m->source = strdup(src);
	m->rest = strdup(path + strlen(best) + (strcmp(best, "/") &&
						 path[strlen(best)] == '/'));
	if (!m->root || !m->source || !m->rest) {
		ptfs_mnt_free(m);
		return -ENOMEM;
	}
	return 0;
}

/* "the daemon is gone" for @arg in mount @m: what to run. */
void ptfs_daemon_gone(const char *arg, const struct ptfs_mnt *m,
		      bool discard)
{
	/* the checkpoint, unless its path could not be the fsname (a ',') */
	const char *ck = m->source[0] == '/' ? m->source : "CHECKPOINT";

	if (discard)
		fprintf(stderr, "ptfs: %s: the ptfs daemon is gone (killed?); "
			"to drop the staged edits: fusermount3 -u %s; ptfs %s "
			"%s -o discard; ptfs umount %s\n", arg, m->root,
			ck, m->root, m->root);
	else
		fprintf(stderr, "ptfs: %s: the ptfs daemon is gone (killed?); "
			"staged edits are safe on disk: fusermount3 -u %s, "
			"then ptfs %s %s shows them again\n", arg, m->root,
			ck, m->root);
}

/* A control file of mount @m: open(2)'s result. */
int ptfs_open_ctl(const struct ptfs_mnt *m, const char *name, int flags)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/.ptfs/%s", m->root, name);
	return open(path, flags | O_CLOEXEC);
}

/* All of @fd from offset 0 (malloc'd, NUL-terminated), or NULL. */
char *ptfs_read_all(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ssize_t n;

	while (buf && (n = pread(fd, buf + len, cap - len - 1, len)) > 0) {
		len += n;
		if (cap - len < 1024) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				break;
			buf = nb;
		}
	}
	if (buf)
		buf[len] = 0;
	return buf;
}


/* ---- before and at the mount ---- */

/* The mount on top at exactly @path (absolute): its type and source. */
static bool mount_at(const char *path, char *fstype, char *source)
{
	char mp[PATH_MAX];

	return !mount_holding(path, mp, fstype, source) && !strcmp(mp, path);
}

/* The first name in directory @path but . and .., into @name; false
 * when there is none (or it cannot be read: the mount will say). */
static bool first_entry(const char *path, char *name, size_t size)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	bool found = false;

	while (dir && !found && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(name, size, "%s", e->d_name);
		found = true;
	}
	if (dir)
		closedir(dir);
	return found;
}

/* Is @mp (absolute: @path) a mount already that ptfs does not go over?
 * 1 with one line said, or 0. */
static int over_a_mount(const char *mp, const char *path, bool nonempty)
{
	char fstype[256], source[PATH_MAX];

	if (!mount_at(path, fstype, source))
		return 0;
	if (!strcmp(fstype, "fuse.ptfs")) {
		fprintf(stderr, "ptfs: %s: already a ptfs mount (of %s); a "
			"second mount would hide it: ptfs umount %s first, or "
			"mount somewhere else\n", mp, source, mp);
		return 1;
	}
	/* an automount point is where the mount goes */
	if (nonempty || !strcmp(fstype, "autofs"))
		return 0;
	fprintf(stderr, "ptfs: %s: already a mount point (of a %s file "
		"system); the mount would hide it: mount somewhere else, or "
		"give -o nonempty\n", mp, fstype);
	return 1;
}

int ptfs_mountpoint_check(const char *mountpoint, bool nonempty)
{
	char path[PATH_MAX], name[256];
	struct stat st;

	absolute_path(mountpoint, path);
	if (over_a_mount(mountpoint, path, nonempty))
		return 1;
	if (stat(mountpoint, &st)) {
		fprintf(stderr, "ptfs: %s: %s\n", mountpoint, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "ptfs: %s: not a directory: a mount point must "
			"be one\n", mountpoint);
		return 1;
	}
	if (!nonempty && first_entry(mountpoint, name, sizeof(name))) {
		fprintf(stderr, "ptfs: %s: not empty (it holds %s); the "
			"mount would hide what is in it: mount on an empty "
			"directory, or give -o nonempty\n", mountpoint, name);
		return 1;
	}
	return 0;
}

/* What libfuse logged while it mounted (its words, for the one line). */
static char said[512];

static void keep_log(enum fuse_log_level level, const char *fmt,
		     va_list ap)
{
	size_t n = strlen(said);

	(void)level;
	if (n < sizeof(said) - 1)
		vsnprintf(said + n, sizeof(said) - n, fmt, ap);
}

void ptfs_mount_log(bool keep)
{
	if (keep) {
		said[0] = 0;
		fuse_set_log_func(keep_log);
	} else {
		fuse_set_log_func(NULL);	/* libfuse's own again */
	}
}

void ptfs_mount_said(void)
{
	if (said[0])
		fputs(said, stderr);
	said[0] = 0;
}

void ptfs_mount_failed(const char *mountpoint)
{
	char *nl;
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	int err = fd < 0 ? errno : 0;

	if (fd >= 0)
		close(fd);
	/* libfuse's first line, without its "fuse: " */
	nl = strchr(said, '\n');
	if (nl)
		*nl = 0;
	if (err == ENOENT || err == ENODEV || err == ENXIO)
		fprintf(stderr, "ptfs: %s: not mounted: there is no /dev/fuse "
			"(load the module: modprobe fuse; a container needs "
			"--device /dev/fuse)\n", mountpoint);
	else if (err)
		fprintf(stderr, "ptfs: %s: not mounted: /dev/fuse: %s (this "
			"user needs read and write access to it; a container "
			"needs --device /dev/fuse)\n", mountpoint,
			strerror(err));
	else
		fprintf(stderr, "ptfs: %s: not mounted: %s (a container needs "
			"--device /dev/fuse and --cap-add SYS_ADMIN)\n",
			mountpoint, said[0] ? said + (strncmp(said, "fuse: ", 6)
						      ? 0 : 6) :
			"the mount failed");
	said[0] = 0;
}
