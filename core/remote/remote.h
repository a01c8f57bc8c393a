/*
 * remote.h - objects behind a URL (http://, https://, s3://), read by byte
 * ranges through libcurl, for the source layer (core/source): a remote
 * object is a file the formats read like any other, never downloaded
 * whole.
 *
 *   open      one request: a GET of the first block (Range), whose reply
 *             gives the size (Content-Range), the ETag and Last-Modified,
 *             which are pinned; the block is kept
 *   read      a bounded LRU block cache (rmt_conf.cache bytes, shared by
 *             every object of the process, 16 KiB blocks), readahead that
 *             doubles on sequential reads (a read starting where one of
 *             the last 8 readers' ended: 128 KiB to 16 MiB, at most a
 *             quarter of the cache), and fetches over 1 MiB split into
 *             parallel range requests (rmt_conf.conns connections, reused).
 *             A read misses in one request (its first missing block to
 *             its last); read metadata in one call, since a member read
 *             in sequential pieces is read ahead past its end
 *   identity  every range request carries If-Match (the pinned ETag, or
 *             If-Unmodified-Since without one) and its reply's ETag is
 *             checked: an object that changed is -ESTALE, "changed under
 *             the mount", never bytes of two versions
 *   faults    timeouts, resets, 5xx and 429 (Retry-After honoured) are
 *             retried with backoff, rmt_conf.retries times; a short body,
 *             a 200 for a range of a larger object, a 416 or a
 *             Content-Range other than the one asked for is refused with
 *             one line, never passed on as data
 *   S3        s3://BUCKET/KEY, signed with AWS Signature V4 by libcurl
 *             (CURLOPT_AWS_SIGV4); credentials and region as the AWS CLI
 *             finds them (environment, AWS_PROFILE, ~/.aws/credentials and
 *             ~/.aws/config), anonymous when there are none; an endpoint
 *             (AWS_ENDPOINT_URL or rmt_conf.endpoint) is addressed
 *             path-style, ENDPOINT/BUCKET/KEY, else
 *             https://BUCKET.s3.REGION.amazonaws.com/KEY
 *
 * Credentials never reach a message: a URL is printed only as
 * rmt_redact() writes it (user and password replaced), and secrets are
 * never formatted into one.  Thread-safe: the FUSE daemon reads from many
 * threads.
 */
#ifndef PT_REMOTE_REMOTE_H
#define PT_REMOTE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

/* Settings of the process; zero fields take the defaults shown. */
struct rmt_conf {
	uint64_t cache;		/* block cache bytes (256 MiB) */
	unsigned conns;		/* parallel connections (8) */
	unsigned retries;	/* retries of a failed request (5) */
	bool insecure;		/* https without certificate checks */
	const char *endpoint;	/* S3 endpoint URL (AWS_ENDPOINT_URL) */
};

#define RMT_CONNS_MAX	64	/* rmt_conf.conns at most */

/* Set before the first rmt_open() or rmt_list() (copied; the cache is
 * sized and the AWS settings are read at the first).  0, or -EINVAL with
 * @d saying which setting is refused (too late, conns over
 * RMT_CONNS_MAX, retries over 100, a cache under one 16 KiB block, an
 * endpoint that is no http:// or https:// URL). */
int rmt_configure(const struct rmt_conf *conf, struct diag *d);

/* Is @s a URL this layer opens (http://, https://, s3://)? */
bool rmt_is_url(const char *s);

/* @url with its user and password ("user:pw@") replaced by "***@", and
 * the values of a presigned URL's credential parameters (X-Amz-Signature,
 * X-Amz-Credential, X-Amz-Security-Token, Signature, AWSAccessKeyId, sig,
 * token) by "***"; nothing else changed.  Into @out (always terminated,
 * cut short to @size).  Returns @out. */
const char *rmt_redact(const char *url, char *out, size_t size);

struct rmt_obj;

/*
 * Open the object at @url (one request, above).  0, or -errno with @d set
 * to one line naming the redacted URL: -ENOENT (404), -EACCES (401, 403),
 * -EIO (a transfer that failed after its retries), -EPROTO (a reply that
 * is not what was asked for).  Caller owns *@out: rmt_close().
 */
int rmt_open(const char *url, struct rmt_obj **out, struct diag *d);

uint64_t rmt_size(const struct rmt_obj *o);
/* Last-Modified in seconds since the epoch, or 0 when the server sent
 * none. */
int64_t rmt_mtime(const struct rmt_obj *o);
/* The redacted URL (borrowed; valid until rmt_close()). */
const char *rmt_name(const struct rmt_obj *o);

/*
 * Read all @len bytes at @off.  0; -ENODATA when the object ends before
 * @off + @len (@d untouched, as io_pread_full()); -ESTALE when it
 * changed; other -errno with @d set (NULL: not said).
 */
int rmt_pread(struct rmt_obj *o, void *buf, size_t len, uint64_t off,
	      struct diag *d);

void rmt_close(struct rmt_obj *o);

/* An object a listing names (borrowed for the callback). */
struct rmt_entry {
	const char *name;	/* relative to the folder ("sub/x.pt") */
	uint64_t size;
	const char *etag;	/* as the listing quotes it, or "" */
	int64_t mtime;		/* LastModified, 0 when unknown */
};

/*
 * The objects under the folder @url (ending in '/'): @fn(arg, entry) for
 * each.  S3: one ListObjectsV2 request per 1000 keys.  Plain HTTP has no
 * listing: -ENOTSUP, @d untouched.  @fn returns 0 to go on or -errno to
 * stop.
 */
int rmt_list(const char *url, int (*fn)(void *arg,
					const struct rmt_entry *e),
	     void *arg, struct diag *d);

/*
 * Open the object at @url, which a listing named as @e (@e->name is not
 * read), without a request: its size, ETag and mtime are the listing's, and the
 * first read is pinned to them (If-Match), so a change since the listing
 * is -ESTALE as any other.  Without an ETag it is rmt_open().
 */
int rmt_open_listed(const char *url, const struct rmt_entry *e,
		    struct rmt_obj **out, struct diag *d);

/* Requests sent and body bytes received since the process started (for
 * tests and the benchmark's own accounting). */
void rmt_counters(uint64_t *requests, uint64_t *bytes);

#endif
