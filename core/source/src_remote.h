/*
 * src_remote.h - remote objects as the source layer's files (source.c
 * only).  A remote object is opened as a stand-in descriptor (util/io.h:
 * a real, empty, read-refusing file of the object's size and mtime, mode
 * 0444, whose reads io_pread*() send to core/remote), so every format
 * reads it as it reads a local file.  A remote folder is a shadow: a
 * private local directory of empty, sparse files named and sized as the
 * folder's objects (an S3 listing, or over plain HTTP the marks probed:
 * .metadata, __N.metadata, the Hugging Face index names), for the
 * formats' bids and scans; its members are opened as stand-ins, never
 * through the shadow.
 */
#ifndef PT_SOURCE_SRC_REMOTE_H
#define PT_SOURCE_SRC_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>

struct diag;
struct rmt_entry;

/*
 * @url (a file, or a folder: ending in '/', or an S3 prefix) opened: the
 * stand-in's or the shadow's fd, *@st its fstat.  The same URL twice
 * gives the same file (a dup).  -errno with @d set.
 */
int srcr_open(const char *url, struct stat *st, struct diag *d);

/* Object @url alone (a member): as srcr_open(); with @quiet an absent
 * one is -ENOENT with @d untouched. */
int srcr_open_object(const char *url, struct stat *st, unsigned quiet,
		     struct diag *d);

/* The shadow of folder @url (no trailing '/'), made now (listed over S3,
 * empty over HTTP) unless srcr_open() made it, for one more source: its
 * path (borrowed until that source's srcr_unshadow()), or NULL with @d
 * set. */
const char *srcr_shadow(const char *url, struct diag *d);

/* A source of shadow @path is done: the last removes it.  (A shadow no
 * source took is removed when its process exits.) */
void srcr_unshadow(const char *path);

/* "@root/@name" with @name (@len bytes) percent-encoded as a URL path:
 * malloc'd, or NULL. */
char *srcr_join(const char *root, const char *name, size_t len);

/* @url as messages show it (its user and password hidden), into @out;
 * the hidden part is kept, so srcr_open() of what this returns still
 * reaches the object.  Returns @out. */
const char *srcr_shown(const char *url, char *out, size_t size);

/* ---- between source.c, src_remote.c (objects) and src_shadow.c
 * (folders) ---- */

/* Why member name @name (@len bytes) is refused (source.h's rules: "is
 * empty", "has a '..' component", ...), or NULL. */
const char *src_bad_name(const char *name, size_t len);

/* @msg with its first "@url: " (or "@url/: ", @url's trailing '/'s
 * aside) taken out: a line whose diagnostic names @url already. */
void srcr_unname(char *msg, const char *url);

/* @url with a hidden authority put back (malloc'd), or NULL. */
char *srcr_real(const char *url);

/* Note object @e of the folder @url, so that opening it needs no
 * request (rmt_open_listed()).  0 or -ENOMEM. */
int srcr_know(const char *url, const struct rmt_entry *e);

/* @v, an array of @n elements of @each bytes, with room for one more
 * (doubled at powers of two), or NULL. */
static inline void *srcr_grow(void *v, size_t n, size_t each)
{
	return (n & (n - 1)) ? v : realloc(v, (n ? 2 * n : 4) * each);
}

#endif
