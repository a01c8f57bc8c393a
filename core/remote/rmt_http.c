/*
 * rmt_http.c - range GETs with libcurl, checked before a byte is handed on.
 *
 * Each range is one easy handle; a batch of them runs on a multi handle,
 * and a share handle keeps the connections (and DNS, TLS sessions) for the
 * next batch.  Every range carries If-Match with the pinned ETag (or
 * If-Unmodified-Since); rmt_reply.c judges each reply, and timeouts,
 * resets, 5xx and 429 are retried with exponential backoff (Retry-After
 * honoured), rmt_cf.retries times.  Credentials go to
 * curl (SigV4 by CURLOPT_AWS_SIGV4) and never into a message.
 */
#include "rmt_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "diag/diag.h"
#include "util/sbuf.h"

#define ERRBODY_MAX	4096		/* kept of an error reply, for <Code> */
#define POOL_MAX	64
/* SHA-256 of the empty body: S3 wants x-amz-content-sha256 signed, and
 * curl 7.88 does not add it by itself */
#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLSH *g_share;
static pthread_mutex_t g_share_lock[CURL_LOCK_DATA_LAST];
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURL *g_pool[POOL_MAX];
static unsigned g_npool;
static _Atomic uint64_t g_requests, g_bytes;

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access a,
		       void *u)
{
	(void)h, (void)a, (void)u;
	pthread_mutex_lock(&g_share_lock[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *u)
{
	(void)h, (void)u;
	pthread_mutex_unlock(&g_share_lock[data]);
}

static void global_init(void)
{
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&g_share_lock[i], NULL);
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		return;
	g_share = curl_share_init();
	if (!g_share)
		return;
	curl_share_setopt(g_share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(g_share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(g_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

void rmt_global_init(void)
{
	pthread_once(&g_once, global_init);
}

void rmt_count(uint64_t requests, uint64_t bytes)
{
	atomic_fetch_add(&g_requests, requests);
	atomic_fetch_add(&g_bytes, bytes);
}

void rmt_counters(uint64_t *requests, uint64_t *bytes)
{
	if (requests)
		*requests = atomic_load(&g_requests);
	if (bytes)
		*bytes = atomic_load(&g_bytes);
}

static CURL *pool_get(void)
{
	CURL *h = NULL;

	pthread_mutex_lock(&g_pool_lock);
	if (g_npool)
		h = g_pool[--g_npool];
	pthread_mutex_unlock(&g_pool_lock);
	if (h)
		curl_easy_reset(h);
	return h ? h : curl_easy_init();
}

static void pool_put(CURL *h)
{
	pthread_mutex_lock(&g_pool_lock);
	if (g_npool < POOL_MAX) {
		g_pool[g_npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&g_pool_lock);
	if (h)
		curl_easy_cleanup(h);
}


static void copy_val(char *dst, size_t size, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= size)
		n = size - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static bool hdr_is(const char *p, size_t n, const char *name, size_t *vo)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(p, name, k) || p[k] != ':')
		return false;
	*vo = k + 1;
	return true;
}

static size_t on_header(char *p, size_t size, size_t nitems, void *arg)
{
	struct rmt_xfer *x = arg;
	size_t n = size * nitems, vo;
	char v[RMT_TAG];

	if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', n);

		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		x->reason[0] = x->etag[0] = x->lastmod[0] = x->crange[0] = '\0';
		if (sp && (size_t)(sp - p) + 5 < n)
			copy_val(x->reason, sizeof(x->reason), sp + 5,
				 n - (size_t)(sp - p) - 5);
		x->has_clen = false;
		x->retry_after = -1;
	} else if (hdr_is(p, n, "etag", &vo)) {
		copy_val(x->etag, sizeof(x->etag), p + vo, n - vo);
	} else if (hdr_is(p, n, "last-modified", &vo)) {
		copy_val(x->lastmod, sizeof(x->lastmod), p + vo, n - vo);
	} else if (hdr_is(p, n, "content-range", &vo)) {
		copy_val(x->crange, sizeof(x->crange), p + vo, n - vo);
	} else if (hdr_is(p, n, "content-length", &vo)) {
		copy_val(v, sizeof(v), p + vo, n - vo);
		x->has_clen = true;
		x->clen = strtoull(v, NULL, 10);
	} else if (hdr_is(p, n, "retry-after", &vo)) {
		copy_val(v, sizeof(v), p + vo, n - vo);
		if (*v >= '0' && *v <= '9') {
			x->retry_after = strtol(v, NULL, 10);
		} else {
			time_t when = curl_getdate(v, NULL);

			x->retry_after = when > 0 ? (long)(when - time(NULL)) : -1;
		}
	} else if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
		/* a 200 for a range of a larger object: stop before its body */
		if (x->r && x->status == 200 && x->has_clen &&
		    x->clen > x->r->len) {
			x->overflow = true;
			return 0;
		}
	}
	return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct rmt_xfer *x = arg;
	size_t n = size * nmemb;

	rmt_count(0, n);
	if (rmt_ok_status(x->status) && x->r) {
		if (n > x->r->len - x->got) {
			x->overflow = true;
			return 0;
		}
		if (!x->r->blk) {
			memcpy(x->r->buf + x->got, p, n);
			x->got += n;
		}
		for (size_t k, left = x->r->blk ? n : 0; left; left -= k) {
			size_t at = x->got % RMT_BLOCK;

			k = RMT_BLOCK - at < left ? RMT_BLOCK - at : left;
			memcpy(x->r->blk[x->got / RMT_BLOCK] + at, p, k);
			p += k;
			x->got += k;
		}
	} else if (rmt_ok_status(x->status)) {
		if (x->body.n + n > RMT_BODY_MAX || x->body.oom) {
			x->overflow = true;
			return 0;
		}
		sb_add(&x->body, p, n);
	} else if (x->body.n < ERRBODY_MAX) {
		sb_add(&x->body, p, n < ERRBODY_MAX ? n : ERRBODY_MAX);
	}
	return n;
}

static int xfer_setup(struct rmt_xfer *x, const struct rmt_target *t,
		      const struct rmt_obj *pin)
{
	char line[64 + RMT_TAG];
	CURL *h;

	x->h = h = pool_get();
	if (!h)
		return -ENOMEM;
	x->status = 0;
	x->got = 0;
	x->overflow = false;
	x->errbuf[0] = '\0';
	x->body.n = 0;
	if (x->body.p)
		x->body.p[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, t->url);
	curl_easy_setopt(h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(h, CURLOPT_SHARE, g_share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
	/* a stalled transfer is a timeout, retried */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "ptfs/" PT_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	if (rmt_cf.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	/* a header, not CURLOPT_RANGE, so that SigV4 signs it too */
	if (x->r) {
		snprintf(line, sizeof(line), "Range: bytes=%" PRIu64 "-%" PRIu64,
			 x->r->off, x->r->off + x->r->len - 1);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (pin && pin->etag[0] && strncmp(pin->etag, "W/", 2)) {
		snprintf(line, sizeof(line), "If-Match: %s", pin->etag);
		x->hdrs = curl_slist_append(x->hdrs, line);
	} else if (pin && pin->lastmod[0]) {
		snprintf(line, sizeof(line), "If-Unmodified-Since: %s",
			 pin->lastmod);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (t->sigv4) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t->sigv4);
		curl_easy_setopt(h, CURLOPT_USERNAME, t->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, t->secret);
		x->hdrs = curl_slist_append(x->hdrs,
					    "x-amz-content-sha256: " EMPTY_SHA256);
		if (t->token) {
			struct sbuf b = { 0 };
			char *s;

			sb_printf(&b, "x-amz-security-token: %s", t->token);
			s = sb_detach(&b, NULL);
			if (!s)
				return -ENOMEM;
			x->hdrs = curl_slist_append(x->hdrs, s);
			free(s);
		}
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
	return 0;
}

static void xfer_done(struct rmt_xfer *x)
{
	if (x->h)
		pool_put(x->h);
	x->h = NULL;
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Run the pending transfers of @xs on one multi handle until all end. */
static int run_batch(struct rmt_xfer *xs, unsigned n, const struct rmt_target *t,
		     const struct rmt_obj *pin)
{
	CURLM *m = curl_multi_init();
	CURLMsg *msg;
	int running = 0, q, rc = 0;

	if (!m)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		if (!xs[i].pending)
			continue;
		xs[i].cc = CURLE_FAILED_INIT;
		rc = xfer_setup(&xs[i], t, pin);
		if (rc)
			goto out;
		curl_multi_add_handle(m, xs[i].h);
		rmt_count(1, 0);
	}
	do {
		if (curl_multi_perform(m, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	} while (running);
	while ((msg = curl_multi_info_read(m, &q))) {
		struct rmt_xfer *x;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		x->cc = msg->data.result;
	}
out:
	for (unsigned i = 0; i < n; i++) {
		if (xs[i].h)
			curl_multi_remove_handle(m, xs[i].h);
		xfer_done(&xs[i]);
	}
	curl_multi_cleanup(m);
	return rc;
}

/* The transfers of @xs with their retries.  0 or -errno with @d set. */
static int run(struct rmt_xfer *xs, unsigned n, const struct rmt_target *t,
	       const struct rmt_obj *pin, struct diag *d)
{
	char why[160] = "";
	unsigned attempt = 0;

	rmt_global_init();
	if (!g_share)
		return diag_set(d, -EIO, DIAG_NO_OFFSET,
				"%s: libcurl could not be set up", t->name);
	for (unsigned i = 0; i < n; i++)
		xs[i].pending = true;
	for (;;) {
		unsigned long wait_ms;
		long after = -1;
		bool again = false;
		int rc = run_batch(xs, n, t, pin);

		if (rc)
			return rc == -ENOMEM ? diag_nomem(d) :
			       diag_set(d, rc, DIAG_NO_OFFSET, "%s: %s",
					t->name, strerror(-rc));
		for (unsigned i = 0; i < n; i++) {
			if (!xs[i].pending)
				continue;
			rc = rmt_judge(&xs[i], t, pin, why, sizeof(why), d);
			if (rc < 0)
				return rc;
			xs[i].pending = rc == RMT_RETRY;
			if (rc == RMT_RETRY) {
				again = true;
				if (xs[i].retry_after > after)
					after = xs[i].retry_after;
			}
		}
		if (!again)
			return 0;
		if (attempt >= rmt_cf.retries)
			return diag_set(d, -EIO, DIAG_NO_OFFSET,
					"%s: %s (after %u retries)", t->name,
					why, attempt);
		/* 200 ms doubling, to 10 s; Retry-After to a minute */
		wait_ms = 200ul << (attempt < 6 ? attempt : 6);
		if (wait_ms > 10000)
			wait_ms = 10000;
		if (after >= 0)
			wait_ms = (unsigned long)(after < 60 ? after : 60) * 1000;
		attempt++;
		sleep_ms(wait_ms);
	}
}

int rmt_http_ranges(const struct rmt_target *t, const struct rmt_obj *pin,
		    struct rmt_range *r, unsigned n, struct diag *d)
{
	struct rmt_xfer *xs = calloc(n, sizeof(*xs));
	int rc;

	if (!xs)
		return diag_nomem(d);
	for (unsigned i = 0; i < n; i++)
		xs[i].r = &r[i];
	rc = run(xs, n, t, pin, d);
	for (unsigned i = 0; i < n; i++)
		free(xs[i].body.p);
	free(xs);
	return rc;
}

int rmt_http_body(const struct rmt_target *t, char **body, size_t *len,
		  struct diag *d)
{
	struct rmt_xfer x = { 0 };
	int rc = run(&x, 1, t, NULL, d);

	*body = NULL;
	if (!rc) {
		*body = sb_detach(&x.body, len);
		if (!*body)
			return diag_nomem(d);
		return 0;
	}
	free(x.body.p);
	return rc;
}
