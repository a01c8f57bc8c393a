/*
 * rmt_int.h - what the files of core/remote share: the settings, a
 * request's target (URL, signing), an open object, the range request the
 * cache hands to the HTTP layer, and the block cache's sizes.
 *
 * Internal: the files of core/remote and tests define PT_INTERNAL (like
 * libarchive's *_private.h headers).
 */
#ifndef PT_REMOTE_RMT_INT_H
#define PT_REMOTE_RMT_INT_H

#ifndef PT_INTERNAL
#error "rmt_int.h is internal to core/remote and its tests"
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "remote/remote.h"
#include "util/sbuf.h"

#define RMT_BLOCK	(16u << 10)	/* cache unit: small, for metadata */
#define RMT_SPLIT	(1u << 20)	/* fetches above this go parallel */
#define RMT_PART_MIN	(256u << 10)	/* smallest part of a split fetch */
#define RMT_RA_MIN	(128u << 10)	/* first readahead of a sequence */
#define RMT_RA_MAX	(16u << 20)	/* readahead stops doubling here */
#define RMT_PIECE	(32u << 20)	/* most bytes held by one fetch */
#define RMT_TAG		128		/* ETag and Last-Modified room */
#define RMT_STREAMS	8		/* sequential readers told apart */

/* The settings with their defaults filled in (rmt_cache.c). */
extern struct rmt_conf rmt_cf;
/* curl_global_init() and the shared connection cache, once. */
void rmt_global_init(void);

/* Where a request goes and how it is signed. */
struct rmt_target {
	char *url;	/* what curl fetches (may hold user:pass: never print) */
	char *name;	/* the redacted URL, for messages */
	char *sigv4;	/* "aws:amz:REGION:s3", or NULL: unsigned */
	char *user, *secret, *token;	/* S3 credentials (token: NULL) */
};

/* The target of the object at @url (http, https, s3).  0 or -errno
 * with @d set.  Release with rmt_target_release(). */
int rmt_target_init(struct rmt_target *t, const char *url, struct diag *d);
/* The target of a ListObjectsV2 request for @bucket with the already
 * canonical (sorted, encoded) @query; @name is the folder's URL. */
int rmt_target_list(struct rmt_target *t, const char *bucket,
		    const char *query, const char *name, struct diag *d);
void rmt_target_release(struct rmt_target *t);
/* Split "s3://BUCKET/KEY" into malloc'd parts: 0, -EINVAL, -ENOMEM. */
int rmt_s3_split(const char *url, char **bucket, char **key);

/* Credentials, region and endpoint as the AWS CLI finds them (loaded
 * once; borrowed for the process). */
struct rmt_aws {
	char *key, *secret, *token;	/* key NULL: anonymous */
	char *region;			/* never NULL */
	char *endpoint;			/* NULL: AWS itself */
};
const struct rmt_aws *rmt_aws_get(void);

struct rmt_obj {
	struct rmt_target t;
	uint64_t id;		/* the cache's key, never reused */
	uint64_t size;
	int64_t mtime;
	char etag[RMT_TAG];	/* "" when the server sent none */
	char lastmod[RMT_TAG];	/* the Last-Modified header as sent */
	_Atomic bool stale;	/* it changed: every read is -ESTALE */
	/* sequential streams (readers of one object at once, under the
	 * cache lock): where each one's last read ended, its readahead
	 * window, and when it was last used (for replacing the oldest) */
	struct rmt_stream {
		uint64_t next_off, ra, used;
	} st[RMT_STREAMS];
};

/* The block cache (rmt_cache.c), under its own lock. */
/* Start the cache at the settings of the moment: 0 or -ENOMEM.  Later
 * calls do nothing; rmt_configure() fails once it has run. */
int rmt_cache_start(void);
bool rmt_cache_started(void);
/* Keep the blocks that [@off, @off + @len) of @o covers whole. */
void rmt_cache_put(const struct rmt_obj *o, uint64_t off,
		   const unsigned char *buf, uint64_t len);
/* Forget every block of @o. */
void rmt_cache_drop(const struct rmt_obj *o);

/* One range request: @len bytes at @off into @buf, and what its reply
 * said (filled by rmt_http_ranges). */
struct rmt_range {
	uint64_t off, len;
	unsigned char *buf;
	/* or, when not NULL, the cache blocks the body goes to: its byte i
	   into blk[i / RMT_BLOCK] at i % RMT_BLOCK (@off is a block's) */
	unsigned char *const *blk;
	uint64_t got;		/* body bytes kept */
	uint64_t total;		/* the object's size, from the reply */
	char etag[RMT_TAG], lastmod[RMT_TAG];
};

/*
 * Fetch the @n ranges at once (one connection each), retrying transfer
 * failures, 5xx and 429.  @pin: the open object whose ETag (or
 * Last-Modified) every reply must match, and whose size bounds them; NULL
 * at open, where a reply may be shorter than asked (a small object) and
 * gives the size.  0 or -errno with @d set.
 */
int rmt_http_ranges(const struct rmt_target *t, const struct rmt_obj *pin,
		    struct rmt_range *r, unsigned n, struct diag *d);
/* GET the whole (small: at most 64 MiB) body at @t, for listings.  *@body
 * is malloc'd and terminated.  0 or -errno with @d set. */
int rmt_http_body(const struct rmt_target *t, char **body, size_t *len,
		  struct diag *d);
#define RMT_BODY_MAX	(64u << 20)	/* a listing page is ~300 KiB */

/* One transfer and its reply (the reply part is reset at each status
 * line: a redirect or 100 Continue comes before the final one). */
struct rmt_xfer {
	struct rmt_range *r;	/* NULL: the whole body (listing) */
	CURL *h;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
	CURLcode cc;
	bool pending;
	long status;
	char reason[48];
	char etag[RMT_TAG], lastmod[RMT_TAG], crange[96];
	bool has_clen, overflow;
	uint64_t clen, got;
	long retry_after;	/* seconds, -1: none */
	struct sbuf body;	/* listing body, or the start of an error's */
};

static inline bool rmt_ok_status(long s)
{
	return s >= 200 && s < 300;
}

enum { RMT_OK = 0, RMT_RETRY = 1 };
/* The finished transfer @x of @t (pinned to @pin, or NULL at open):
 * RMT_OK with its range's reply fields set, RMT_RETRY with *@why saying
 * why, or -errno with @d set (rmt_reply.c). */
int rmt_judge(struct rmt_xfer *x, const struct rmt_target *t,
	      const struct rmt_obj *pin, char *why, size_t wsize,
	      struct diag *d);

/* Count a request sent and @bytes of body received. */
void rmt_count(uint64_t requests, uint64_t bytes);

#endif
