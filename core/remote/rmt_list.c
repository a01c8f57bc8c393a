/*
 * rmt_list.c - the objects under an s3:// folder, by S3 ListObjectsV2
 * (GET BUCKET?list-type=2&prefix=P, 1000 keys a page, the next page asked
 * for with the reply's NextContinuationToken).  The reply is XML; only
 * <Contents><Key>, <Size>, <IsTruncated> and <NextContinuationToken> are
 * read, with the five XML entities and character references decoded.
 * Plain HTTP has no listing.
 */
#define _DEFAULT_SOURCE 1	/* timegm */
#include "rmt_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "diag/diag.h"
#include "util/sbuf.h"

/* The text of the first <TAG> in [@p, @end), decoded, malloc'd; NULL when
 * there is none (*@oom on a failed allocation). */
static char *xml_text(const char *p, const char *end, const char *tag,
		      bool *oom)
{
	char open[48], close[48];
	const char *a, *e;
	struct sbuf b = { 0 };
	char *s;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	a = strstr(p, open);
	if (!a || a >= end)
		return NULL;
	a += strlen(open);
	e = strstr(a, close);
	if (!e || e > end)
		return NULL;
	while (a < e) {
		const char *semi = *a == '&' ? memchr(a, ';', (size_t)(e - a)) : NULL;
		static const struct { const char *n; char c; } ent[] = {
			{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
			{ "&quot;", '"' }, { "&apos;", '\'' },
		};
		size_t i, n = semi ? (size_t)(semi - a) + 1 : 0;

		if (!semi) {
			sb_add(&b, a++, 1);
			continue;
		}
		for (i = 0; i < sizeof(ent) / sizeof(ent[0]); i++)
			if (strlen(ent[i].n) == n && !strncmp(a, ent[i].n, n))
				break;
		if (i < sizeof(ent) / sizeof(ent[0])) {
			sb_add(&b, &ent[i].c, 1);
		} else if (n > 3 && a[1] == '#') {
			bool hex = a[2] == 'x' || a[2] == 'X';
			unsigned long c = strtoul(a + 2 + hex, NULL, hex ? 16 : 10);

			sb_utf8(&b, c && c <= 0x10ffff ? (uint32_t)c : 0xfffd);
		} else {
			sb_add(&b, a, n);
		}
		a += n;
	}
	s = sb_detach(&b, NULL);
	if (!s)
		*oom = true;
	return s;
}

/* "2026-12-02T14:42:00.000Z" as seconds since the epoch, or 0. */
static int64_t iso_time(const char *s)
{
	struct tm tm = { 0 };

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon,
			 &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
			 &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm);
}

struct page {
	const char *prefix;
	int (*fn)(void *arg, const struct rmt_entry *e);
	void *arg;
	char *next;		/* the continuation token, or NULL */
};

/* One reply's keys to @pg->fn.  0, -errno from fn, -EPROTO, -ENOMEM. */
static int page_walk(struct page *pg, const char *body, const char *name,
		     struct diag *d)
{
	size_t plen = strlen(pg->prefix);
	const char *p = body, *end;
	bool oom = false;
	char *trunc;
	int rc = 0;

	if (!strstr(body, "<ListBucketResult"))
		return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
				"%s: the listing is not a ListBucketResult", name);
	while (!rc && (p = strstr(p, "<Contents>"))) {
		char *key, *size, *etag, *when;

		end = strstr(p, "</Contents>");
		if (!end)
			return diag_set(d, -EPROTO, DIAG_NO_OFFSET,
					"%s: the listing is cut short", name);
		key = xml_text(p, end, "Key", &oom);
		size = xml_text(p, end, "Size", &oom);
		etag = xml_text(p, end, "ETag", &oom);
		when = xml_text(p, end, "LastModified", &oom);
		if (key && size && !strncmp(key, pg->prefix, plen) &&
		    key[plen])
			rc = pg->fn(pg->arg, &(struct rmt_entry){
				key + plen, strtoull(size, NULL, 10),
				etag ? etag : "", iso_time(when) });
		free(key);
		free(size);
		free(etag);
		free(when);
		p = end;
	}
	if (oom)
		return diag_nomem(d);
	if (rc)
		return rc;
	trunc = xml_text(body, body + strlen(body), "IsTruncated", &oom);
	if (trunc && !strcmp(trunc, "true")) {
		pg->next = xml_text(body, body + strlen(body),
				    "NextContinuationToken", &oom);
		if (!pg->next && !oom)
			rc = diag_set(d, -EPROTO, DIAG_NO_OFFSET,
				      "%s: a truncated listing without "
				      "NextContinuationToken", name);
	}
	free(trunc);
	return oom ? diag_nomem(d) : rc;
}

int rmt_list(const char *url, int (*fn)(void *arg,
					const struct rmt_entry *e),
	     void *arg, struct diag *d)
{
	struct page pg = { .fn = fn, .arg = arg };
	char *bucket, *key, *prefix = NULL, *token = NULL, nm[256];
	int rc;

	rmt_redact(url, nm, sizeof(nm));
	if (!rmt_is_url(url))
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s: not a URL", nm);
	if (strncasecmp(url, "s3://", 5))
		return -ENOTSUP;
	rc = rmt_s3_split(url, &bucket, &key);
	if (rc)
		return rc == -ENOMEM ? diag_nomem(d) :
		       diag_set(d, rc, DIAG_NO_OFFSET, "%s: not s3://BUCKET/", nm);
	if (*key && key[strlen(key) - 1] != '/') {
		struct sbuf b = { 0 };

		sb_printf(&b, "%s/", key);
		prefix = sb_detach(&b, NULL);
	} else {
		prefix = strdup(key);
	}
	if (!prefix) {
		rc = diag_nomem(d);
		goto out;
	}
	pg.prefix = prefix;
	rc = rmt_cache_start() ? diag_nomem(d) : 0;
	do {
		struct rmt_target t;
		struct sbuf q = { 0 };
		char *body;
		size_t len;

		/* SigV4's canonical query: names sorted, values encoded */
		if (token) {
			sb_puts(&q, "continuation-token=");
			sb_pct(&q, token, strlen(token), false);
			sb_puts(&q, "&");
		}
		sb_puts(&q, "list-type=2&prefix=");
		sb_pct(&q, prefix, strlen(prefix), false);
		free(token);
		token = NULL;
		if (q.oom) {
			free(q.p);
			rc = diag_nomem(d);
			break;
		}
		if (!rc)
			rc = rmt_target_list(&t, bucket, q.p, nm, d);
		free(q.p);
		if (rc)
			break;
		rc = rmt_http_body(&t, &body, &len, d);
		rmt_target_release(&t);
		if (rc)
			break;
		rc = page_walk(&pg, body, nm, d);
		free(body);
		token = pg.next;
		pg.next = NULL;
	} while (!rc && token);
out:
	free(token);
	free(prefix);
	free(bucket);
	free(key);
	return rc;
}
