/*
 * faultinj.c - an LD_PRELOAD fault injector for the daemon (faults_io.sh):
 * makes chosen write, fsync and copy calls fail with an errno, as a failing
 * disk would, without device-mapper.  The rules live in the file named by
 * $PTFS_FAULTS and are re-read whenever it changes (so a test can arm and
 * disarm them while the daemon runs), one per line:
 *
 *	CALL SUBSTRING NTH ERRNO
 *
 *   CALL       write (write, pwrite, writev, pwritev), sync (fsync,
 *              fdatasync), copy (copy_file_range), clone (ioctl FICLONE,
 *              on the descriptor cloned into), rename (rename, renameat,
 *              renameat2) or unlink (unlink, unlinkat)
 *   SUBSTRING  the call fails only on a descriptor whose path
 *              (/proc/self/fd/N) contains it, e.g. ".ptfs-new." for the
 *              write-back's temporary file; rename and unlink: the path
 *              of the name renamed or removed
 *   NTH        the NTH matching call after the rules were (re)loaded
 *              fails, and every later one too: a disk that went bad stays
 *              bad until the rule goes away
 *   ERRNO      EIO, ENOSPC, EDQUOT or EROFS; or KILL: the process kills
 *              itself (SIGKILL) instead of making the call, a crash at
 *              exactly that step (hf_write.sh); or STOP: it stops itself
 *              (SIGSTOP) and makes the call once continued (SIGCONT), so
 *              that a test can do something at exactly that step, such
 *              as another program's rename (inplace.sh)
 *
 * Each failure is logged to $PTFS_FAULTS.log ("write /path: EIO"), so a
 * test can tell that the fault was hit (a STOP before it stops).  Test
 * code, not part of ptfs.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RULES 16
#define F_KILL	(-1)	/* not errnos: what to do instead of failing */
#define F_STOP	(-2)

enum call { C_WRITE, C_SYNC, C_COPY, C_CLONE, C_RENAME, C_UNLINK };

struct rule {
	int call;
	char sub[256];
	unsigned long nth, seen;
	int err;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int nrules;
static struct timespec loaded_mtime;
static off_t loaded_size = -1;

static int errno_of(const char *s)
{
	if (!strcmp(s, "EIO"))
		return EIO;
	if (!strcmp(s, "ENOSPC"))
		return ENOSPC;
	if (!strcmp(s, "EDQUOT"))
		return EDQUOT;
	if (!strcmp(s, "EROFS"))
		return EROFS;
	if (!strcmp(s, "KILL"))
		return F_KILL;
	if (!strcmp(s, "STOP"))
		return F_STOP;
	return 0;
}

/* Re-read the rules when the file changed; called with the lock held. */
static void reload(void)
{
	const char *path = getenv("PTFS_FAULTS");
	char line[512], call[16], sub[256], err[16];
	struct stat st;
	FILE *f;

	if (!path || stat(path, &st)) {
		nrules = 0;
		loaded_size = -1;
		return;
	}
	if (st.st_size == loaded_size &&
	    st.st_mtim.tv_sec == loaded_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == loaded_mtime.tv_nsec)
		return;
	loaded_size = st.st_size;
	loaded_mtime = st.st_mtim;
	nrules = 0;
	f = fopen(path, "re");
	if (!f)
		return;
	while (nrules < MAX_RULES && fgets(line, sizeof(line), f)) {
		struct rule *r = &rules[nrules];
		unsigned long nth;

		if (sscanf(line, "%15s %255s %lu %15s", call, sub, &nth,
			   err) != 4 || !errno_of(err) || !nth)
			continue;
		r->call = !strcmp(call, "write") ? C_WRITE :
			  !strcmp(call, "sync") ? C_SYNC :
			  !strcmp(call, "copy") ? C_COPY :
			  !strcmp(call, "clone") ? C_CLONE :
			  !strcmp(call, "rename") ? C_RENAME :
			  !strcmp(call, "unlink") ? C_UNLINK : -1;
		if (r->call < 0)
			continue;
		memcpy(r->sub, sub, sizeof(r->sub));
		r->nth = nth;
		r->seen = 0;
		r->err = errno_of(err);
		nrules++;
	}
	fclose(f);
}

static void note(const char *what, const char *path, int err)
{
	const char *p = getenv("PTFS_FAULTS");
	char log[4096];
	FILE *f;

	if (!p || (size_t)snprintf(log, sizeof(log), "%s.log", p) >= sizeof(log))
		return;
	f = fopen(log, "ae");
	if (!f)
		return;
	fprintf(f, "%s %s: %s\n", what, path, err == F_KILL ? "KILL" :
		err == F_STOP ? "STOP" : strerrorname_np(err));
	fclose(f);
}

/* 0, or the errno this call on @path must fail with; KILL kills, STOP
 * stops the process (every thread) and, once continued, makes the call. */
static int fault_path(int call, const char *what, const char *path)
{
	int err = 0, saved = errno;

	pthread_mutex_lock(&lock);
	reload();
	for (int i = 0; i < nrules && !err; i++) {
		struct rule *r = &rules[i];

		if (r->call == call && strstr(path, r->sub) &&
		    ++r->seen >= r->nth)
			err = r->err;
	}
	if (err)
		note(what, path, err);
	pthread_mutex_unlock(&lock);
	if (err == F_KILL)
		raise(SIGKILL);
	if (err == F_STOP) {
		raise(SIGSTOP);
		err = 0;
	}
	errno = saved;
	return err;
}

/* The path of @name relative to directory @dfd (AT_FDCWD: as is). */
static void path_at(int dfd, const char *name, char *out, size_t size)
{
	char link[64];
	ssize_t n = 0;

	if (name[0] != '/' && dfd != AT_FDCWD) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dfd);
		n = readlink(link, out, size - 2);
		n = n < 0 ? 0 : n;
		out[n++] = '/';
	}
	snprintf(out + n, size - n, "%s", name);
}

/* 0, or the errno this call on @fd must fail with. */
static int fault(int call, const char *what, int fd)
{
	char link[64], path[4096];
	ssize_t n;
	int saved = errno;

	pthread_mutex_lock(&lock);
	reload();
	pthread_mutex_unlock(&lock);
	if (!nrules)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	errno = saved;
	if (n <= 0)
		return 0;
	path[n] = '\0';
	return fault_path(call, what, path);
}

#define REAL(ret, name, ...)						\
	static ret (*real)(__VA_ARGS__);				\
	if (!real)							\
		real = (ret (*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(ssize_t, "write", int, const void *, size_t);
	int err = fault(C_WRITE, "write", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	REAL(ssize_t, "pwrite", int, const void *, size_t, off_t);
	int err = fault(C_WRITE, "pwrite", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	REAL(ssize_t, "writev", int, const struct iovec *, int);
	int err = fault(C_WRITE, "writev", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd, iov, cnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	REAL(ssize_t, "pwritev", int, const struct iovec *, int, off_t);
	int err = fault(C_WRITE, "pwritev", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd, iov, cnt, off);
}

int fsync(int fd)
{
	REAL(int, "fsync", int);
	int err = fault(C_SYNC, "fsync", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd);
}

int fdatasync(int fd)
{
	REAL(int, "fdatasync", int);
	int err = fault(C_SYNC, "fdatasync", fd);

	if (err) {
		errno = err;
		return -1;
	}
	return real(fd);
}

ssize_t copy_file_range(int in, loff_t *inoff, int out, loff_t *outoff,
			size_t n, unsigned int flags)
{
	REAL(ssize_t, "copy_file_range", int, loff_t *, int, loff_t *,
	     size_t, unsigned int);
	int err = fault(C_COPY, "copy_file_range", out);

	if (err) {
		errno = err;
		return -1;
	}
	return real(in, inoff, out, outoff, n, flags);
}

int ioctl(int fd, unsigned long req, ...)
{
	REAL(int, "ioctl", int, unsigned long, void *);
	va_list ap;
	void *arg;
	int err;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == FICLONE && (err = fault(C_CLONE, "ioctl FICLONE", fd))) {
		errno = err;
		return -1;
	}
	return real(fd, req, arg);
}

int renameat2(int od, const char *o, int nd, const char *n, unsigned int fl)
{
	REAL(int, "renameat2", int, const char *, int, const char *,
	     unsigned int);
	char path[4096];
	int err;

	path_at(od, o, path, sizeof(path));
	err = fault_path(C_RENAME, "rename", path);
	if (err) {
		errno = err;
		return -1;
	}
	return real(od, o, nd, n, fl);
}

int renameat(int od, const char *o, int nd, const char *n)
{
	return renameat2(od, o, nd, n, 0);
}

int rename(const char *o, const char *n)
{
	return renameat2(AT_FDCWD, o, AT_FDCWD, n, 0);
}

int unlinkat(int dfd, const char *name, int flags)
{
	REAL(int, "unlinkat", int, const char *, int);
	char path[4096];
	int err;

	path_at(dfd, name, path, sizeof(path));
	err = fault_path(C_UNLINK, "unlink", path);
	if (err) {
		errno = err;
		return -1;
	}
	return real(dfd, name, flags);
}

int unlink(const char *name)
{
	return unlinkat(AT_FDCWD, name, 0);
}
