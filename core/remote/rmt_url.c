/*
 * rmt_url.c - the URLs of core/remote: which strings are URLs, the
 * redacted form every message prints, and where a request for an object
 * goes.  http(s) URLs are fetched as written (curl takes user:pass from
 * them); s3://BUCKET/KEY is addressed path-style under an endpoint
 * (ENDPOINT/BUCKET/KEY) or virtual-hosted at AWS
 * (https://BUCKET.s3.REGION.amazonaws.com/KEY), and signed by libcurl.
 */
#include "rmt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "diag/diag.h"
#include "util/sbuf.h"

static const char *const schemes[] = { "http://", "https://", "s3://" };

bool rmt_is_url(const char *s)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i]);

		if (!strncasecmp(s, schemes[i], n) && s[n])
			return true;
	}
	return false;
}

/* Query parameters of presigned URLs that are themselves credentials. */
static bool secret_param(const char *p, size_t n)
{
	static const char *const names[] = {
		"x-amz-signature", "x-amz-credential", "x-amz-security-token",
		"signature", "awsaccesskeyid", "sig", "token",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncasecmp(p, names[i], n))
			return true;
	return false;
}

const char *rmt_redact(const char *url, char *out, size_t size)
{
	struct sbuf b = { 0 };
	const char *auth = strstr(url, "://");
	const char *p = url, *end, *at = NULL, *q;

	if (!size)
		return out;
	if (auth) {
		auth += 3;
		end = auth + strcspn(auth, "/?#");
		for (q = auth; q < end; q++)
			if (*q == '@')
				at = q;
		if (at) {
			sb_add(&b, url, (size_t)(auth - url));
			sb_puts(&b, "***");
			p = at;
		}
	}
	q = strchr(p, '?');
	if (!q) {
		sb_puts(&b, p);
	} else {
		sb_add(&b, p, (size_t)(q - p));
		while (*q) {
			size_t n = strcspn(q + 1, "&#"), k = strcspn(q + 1, "=&#");

			sb_add(&b, q, 1);
			if (k < n && secret_param(q + 1, k)) {
				sb_add(&b, q + 1, k + 1);
				sb_puts(&b, "***");
			} else {
				sb_add(&b, q + 1, n);
			}
			q += 1 + n;
			if (*q == '#') {
				sb_puts(&b, q);
				break;
			}
		}
	}
	if (b.oom || !b.p)
		snprintf(out, size, "%s", b.oom ? "(url)" : url);
	else
		snprintf(out, size, "%s", b.p);
	free(b.p);
	return out;
}

int rmt_s3_split(const char *url, char **bucket, char **key)
{
	const char *b, *slash;

	*bucket = *key = NULL;
	if (strncasecmp(url, "s3://", 5))
		return -EINVAL;
	b = url + 5;
	slash = strchr(b, '/');
	if (slash == b || !*b)
		return -EINVAL;
	*bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
	*key = strdup(slash ? slash + 1 : "");
	if (!*bucket || !*key) {
		free(*bucket);
		free(*key);
		*bucket = *key = NULL;
		return -ENOMEM;
	}
	return 0;
}

void rmt_target_release(struct rmt_target *t)
{
	free(t->url);
	free(t->name);
	free(t->sigv4);
	free(t->user);
	if (t->secret)
		memset(t->secret, 0, strlen(t->secret));
	free(t->secret);
	free(t->token);
	memset(t, 0, sizeof(*t));
}

static char *redacted(const char *url)
{
	size_t n = strlen(url) + 16;
	char *s = malloc(n);

	if (s)
		rmt_redact(url, s, n);
	return s;
}

/*
 * @t for @bucket with @path (encoded, "/KEY", or "" for the bucket) and
 * @query (or NULL).  A bucket name with a dot cannot be a host name under AWS's
 * wildcard certificate, so it goes path-style there too.
 */
static int s3_address(struct rmt_target *t, const char *bucket,
		      const char *path, const char *query, const char *name,
		      struct diag *d)
{
	const struct rmt_aws *aws = rmt_aws_get();
	struct sbuf b = { 0 };

	memset(t, 0, sizeof(*t));
	if (!aws)
		return diag_nomem(d);
	if (strspn(bucket, "abcdefghijklmnopqrstuvwxyz"
		   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != strlen(bucket))
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET,
				"%s: not a valid bucket name", name);
	if (aws->endpoint) {
		size_t n = strlen(aws->endpoint);

		while (n && aws->endpoint[n - 1] == '/')
			n--;
		sb_add(&b, aws->endpoint, n);
		sb_printf(&b, "/%s", bucket);
	} else if (strchr(bucket, '.')) {
		sb_printf(&b, "https://s3.%s.amazonaws.com/%s", aws->region,
			  bucket);
	} else {
		sb_printf(&b, "https://%s.s3.%s.amazonaws.com", bucket,
			  aws->region);
		if (!*path)
			sb_puts(&b, "/");
	}
	sb_puts(&b, path);
	if (query)
		sb_printf(&b, "?%s", query);
	t->url = sb_detach(&b, NULL);
	t->name = redacted(name);
	if (aws->key) {
		size_t n = strlen(aws->region) + 16;

		t->sigv4 = malloc(n);
		if (t->sigv4)
			snprintf(t->sigv4, n, "aws:amz:%s:s3", aws->region);
		t->user = strdup(aws->key);
		t->secret = strdup(aws->secret);
		if (aws->token)
			t->token = strdup(aws->token);
		if (!t->sigv4 || !t->user || !t->secret ||
		    (aws->token && !t->token))
			goto out_nomem;
	}
	if (!t->url || !t->name)
		goto out_nomem;
	return 0;

out_nomem:
	rmt_target_release(t);
	return diag_nomem(d);
}

int rmt_target_init(struct rmt_target *t, const char *url, struct diag *d)
{
	struct sbuf path = { 0 };
	char *bucket, *key;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!rmt_is_url(url)) {
		char nm[256];

		return diag_set(d, -EINVAL, DIAG_NO_OFFSET, "%s: not a URL",
				rmt_redact(url, nm, sizeof(nm)));
	}
	if (strncasecmp(url, "s3://", 5)) {
		t->url = strdup(url);
		t->name = redacted(url);
		if (!t->url || !t->name) {
			rmt_target_release(t);
			return diag_nomem(d);
		}
		return 0;
	}
	rc = rmt_s3_split(url, &bucket, &key);
	if (rc == -ENOMEM)
		return diag_nomem(d);
	if (rc || !*key) {
		free(bucket);
		free(key);
		return diag_set(d, -EINVAL, DIAG_NO_OFFSET,
				"%s: not s3://BUCKET/KEY", url);
	}
	sb_puts(&path, "/");
	sb_pct(&path, key, strlen(key), true);
	if (path.oom || !path.p)
		rc = diag_nomem(d);
	else
		rc = s3_address(t, bucket, path.p, NULL, url, d);
	free(path.p);
	free(bucket);
	free(key);
	return rc;
}

int rmt_target_list(struct rmt_target *t, const char *bucket,
		    const char *query, const char *name, struct diag *d)
{
	return s3_address(t, bucket, "", query, name, d);
}
