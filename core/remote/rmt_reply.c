/*
 * rmt_reply.c - the verdict on a finished range GET, before a byte of it
 * is handed on: 206 with the Content-Range asked for and a body of exactly
 * that length, the pinned ETag (or Last-Modified) on the reply, a 200 only
 * when it is the whole object, else one diag line naming the redacted URL
 * (S3's <Code> from an XML error body when there is one).  Timeouts,
 * resets, 5xx and 429 are "retry"; the loop is rmt_http.c's.
 */
#include "rmt_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "diag/diag.h"

static bool retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_COULDNT_RESOLVE_HOST:
		return true;
	default:
		return false;
	}
}

static const char *reason_of(const struct rmt_xfer *x)
{
	static const struct { long s; const char *r; } tab[] = {
		{ 400, "Bad Request" }, { 401, "Unauthorized" },
		{ 403, "Forbidden" }, { 404, "Not Found" }, { 410, "Gone" },
		{ 412, "Precondition Failed" },
		{ 416, "Range Not Satisfiable" },
		{ 429, "Too Many Requests" },
		{ 500, "Internal Server Error" }, { 502, "Bad Gateway" },
		{ 503, "Service Unavailable" }, { 504, "Gateway Timeout" },
	};

	if (x->reason[0])
		return x->reason;
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (tab[i].s == x->status)
			return tab[i].r;
	return "";
}

/* " (SignatureDoesNotMatch)": S3's <Code> of an XML error body, or "". */
static void s3_code(const struct rmt_xfer *x, char *out, size_t size)
{
	const char *a = x->body.p ? strstr(x->body.p, "<Code>") : NULL;
	const char *e = a ? strstr(a, "</Code>") : NULL;

	out[0] = '\0';
	if (e && e - a - 6 > 0 && e - a - 6 < 64)
		snprintf(out, size, " (%.*s)", (int)(e - a - 6), a + 6);
}

/* "HTTP 503 Service Unavailable (SlowDown)" */
static void status_text(const struct rmt_xfer *x, char *out, size_t size)
{
	char code[80];
	const char *r = reason_of(x);

	s3_code(x, code, sizeof(code));
	snprintf(out, size, "HTTP %ld%s%s%s", x->status, *r ? " " : "", r, code);
}

/* The curl error, unless it could hold a credential (it never should). */
static void curl_text(const struct rmt_xfer *x, const struct rmt_target *t,
		      char *out, size_t size)
{
	const char *s = x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->cc);
	size_t n;

	if (strchr(t->url, '@') || (t->user && strstr(s, t->user)) ||
	    (t->secret && strstr(s, t->secret)))
		s = curl_easy_strerror(x->cc);
	n = strlen(s) < size ? strlen(s) : size - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* "bytes A-B/TOTAL" (TOTAL may be "*" only when @total is NULL). */
static bool parse_crange(const char *s, uint64_t *a, uint64_t *b,
			 uint64_t *total)
{
	char *e;

	if (strncasecmp(s, "bytes ", 6))
		return false;
	s += 6;
	if (*s < '0' || *s > '9')
		return false;
	*a = strtoull(s, &e, 10);
	if (*e != '-' || e[1] < '0' || e[1] > '9')
		return false;
	*b = strtoull(e + 1, &e, 10);
	if (*e != '/' || e[1] < '0' || e[1] > '9')
		return false;
	*total = strtoull(e + 1, &e, 10);
	return !*e && *a <= *b && *b < *total;
}

/* The object pinned to @pin's ETag has another now, @now: -ESTALE. */
static int changed(struct diag *d, const struct rmt_target *t,
		   const struct rmt_obj *pin, const char *now)
{
	return diag_set(d, -ESTALE, DIAG_NO_OFFSET, "changed under the mount: "
			"%s: its ETag was %s, now %s", t->name, pin->etag, now);
}

int rmt_judge(struct rmt_xfer *x, const struct rmt_target *t,
		 const struct rmt_obj *pin, char *why, size_t wsize,
		 struct diag *d)
{
	struct rmt_range *r = x->r;
	uint64_t a, b, total;
	char txt[160];

	if (x->cc != CURLE_OK && x->overflow)
		return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
				"%s: HTTP %ld: a reply longer than the %" PRIu64
				" bytes asked for (the server ignored Range)",
				t->name, x->status, r ? r->len : RMT_BODY_MAX);
	if (x->cc != CURLE_OK) {
		curl_text(x, t, txt, sizeof(txt));
		if (retryable(x->cc)) {
			snprintf(why, wsize, "%s", txt);
			return RMT_RETRY;
		}
		return diag_set(d, -EIO, DIAG_NO_OFFSET, "%s: %s", t->name, txt);
	}
	status_text(x, txt, sizeof(txt));
	if (rmt_ok_status(x->status) && pin && pin->etag[0] &&
	    strcmp(x->etag, pin->etag))
		return changed(d, t, pin, x->etag[0] ? x->etag : "none");
	if (rmt_ok_status(x->status) && pin && !pin->etag[0] && pin->lastmod[0] &&
	    strcmp(x->lastmod, pin->lastmod))
		return diag_set(d, -ESTALE, DIAG_NO_OFFSET,
				"changed under the mount: %s: it was modified %s, now %s",
				t->name, pin->lastmod,
				x->lastmod[0] ? x->lastmod : "unknown");
	if (x->status == 200 && (!r || (!pin && x->got <= r->len) ||
				 (pin && r->off == 0 && r->len == pin->size &&
				  x->got == pin->size))) {
		if (r) {
			r->got = x->got;
			r->total = x->got;
		}
		goto out_ok;
	}
	if (x->status == 200)
		return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
				"%s: HTTP 200 with %" PRIu64 " bytes for a range of %"
				PRIu64 " at %" PRIu64 " (the server ignored Range)",
				t->name, x->got, r->len, r->off);
	if (x->status == 206 && r) {
		uint64_t end;

		if (!parse_crange(x->crange, &a, &b, &total))
			return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
					"%s: HTTP 206 with Content-Range '%s'",
					t->name, x->crange);
		end = r->off + r->len < total ? r->off + r->len - 1 : total - 1;
		if ((pin && total != pin->size) || a != r->off || b != end)
			return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
					"%s: asked for bytes %" PRIu64 "-%" PRIu64
					", the reply has Content-Range '%s'",
					t->name, r->off, r->off + r->len - 1,
					x->crange);
		if (x->got != b - a + 1)
			return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
					"%s: a body of %" PRIu64 " bytes for Content-Range '%s'",
					t->name, x->got, x->crange);
		r->got = x->got;
		r->total = total;
		goto out_ok;
	}
	switch (x->status) {
	case 412:
		if (!pin)	/* nothing was made conditional */
			return diag_set(d, -EIO, DIAG_NO_OFFSET, "%s: %s",
					t->name, txt);
		if (pin->etag[0])
			return changed(d, t, pin,
				       x->etag[0] ? x->etag : "another");
		return diag_set(d, -ESTALE, DIAG_NO_OFFSET,
				"changed under the mount: %s: modified since %s",
				t->name, pin->lastmod);
	case 416:
		/* an empty object has no first byte to ask for */
		if (r && !pin && !strcmp(x->crange, "bytes */0")) {
			r->got = r->total = 0;
			goto out_ok;
		}
		return diag_set(d, -EPROTO, DIAG_NO_OFFSET, "%s: %s", t->name, txt);
	case 404:
	case 410:
		return diag_set(d, -ENOENT, DIAG_NO_OFFSET, "%s: %s", t->name, txt);
	case 401:
	case 403:
		return diag_set(d, -EACCES, DIAG_NO_OFFSET, "%s: %s", t->name, txt);
	}
	if (x->status == 429 || (x->status >= 500 && x->status < 600)) {
		snprintf(why, wsize, "%s", txt);
		return RMT_RETRY;
	}
	return diag_set(d, rmt_ok_status(x->status) ? -EPROTO : -EIO, DIAG_NO_OFFSET,
			"%s: %s", t->name, txt);

out_ok:
	if (r) {
		snprintf(r->etag, sizeof(r->etag), "%s", x->etag);
		snprintf(r->lastmod, sizeof(r->lastmod), "%s", x->lastmod);
	}
	return RMT_OK;
}
