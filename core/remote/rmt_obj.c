/*
 * rmt_obj.c - the settings of the process and the life of a remote
 * object: rmt_open() is one range GET of the first block, whose reply
 * gives the size (Content-Range) and the ETag and Last-Modified every
 * later read is pinned to; the block is kept in the cache.
 */
#include "rmt_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"

static _Atomic uint64_t next_id = 1;

int rmt_configure(const struct rmt_conf *conf, struct diag *d)
{
	static char *endpoint;
	const char *e = conf->endpoint;

	/* the cache is sized and the AWS settings read at the first use */
	if (rmt_cache_started())
		return diag_errno(d, -EINVAL, "remote settings changed after "
				  "the first remote read");
	if (conf->cache && conf->cache < RMT_BLOCK)
		return diag_errno(d, -EINVAL, "a block cache of %" PRIu64
				  " bytes: at least %u KiB (one block)",
				  conf->cache, RMT_BLOCK >> 10);
	if (conf->conns > RMT_CONNS_MAX)
		return diag_errno(d, -EINVAL, "%u connections: at most %d",
				  conf->conns, RMT_CONNS_MAX);
	if (conf->retries > 100)
		return diag_errno(d, -EINVAL, "%u retries: at most 100",
				  conf->retries);
	if (e && strncmp(e, "http://", 7) && strncmp(e, "https://", 8))
		return diag_errno(d, -EINVAL, "endpoint '%s': not an http:// "
				  "or https:// URL", e);
	free(endpoint);
	endpoint = e ? strdup(e) : NULL;
	if (e && !endpoint)
		return diag_nomem(d);
	rmt_cf.cache = conf->cache ? conf->cache : 256u << 20;
	rmt_cf.conns = conf->conns ? conf->conns : 8;
	rmt_cf.retries = conf->retries ? conf->retries : 5;
	rmt_cf.insecure = conf->insecure;
	rmt_cf.endpoint = endpoint;
	return 0;
}

int rmt_open(const char *url, struct rmt_obj **out, struct diag *d)
{
	struct rmt_range r = { .off = 0, .len = RMT_BLOCK };
	struct rmt_obj *o;
	int rc;

	*out = NULL;
	if (rmt_cache_start())
		return diag_nomem(d);
	o = calloc(1, sizeof(*o));
	r.buf = malloc(RMT_BLOCK);
	if (!o || !r.buf) {
		rc = diag_nomem(d);
		goto out_free;
	}
	rc = rmt_target_init(&o->t, url, d);
	if (rc)
		goto out_free;
	rc = rmt_http_ranges(&o->t, NULL, &r, 1, d);
	if (rc)
		goto out_release;
	o->id = atomic_fetch_add(&next_id, 1);
	o->size = r.total;
	memcpy(o->etag, r.etag, sizeof(o->etag));
	memcpy(o->lastmod, r.lastmod, sizeof(o->lastmod));
	if (o->lastmod[0]) {
		time_t t = curl_getdate(o->lastmod, NULL);

		o->mtime = t > 0 ? (int64_t)t : 0;
	}
	for (int i = 0; i < RMT_STREAMS; i++)
		o->st[i].next_off = UINT64_MAX;
	rmt_cache_put(o, 0, r.buf, r.got);
	free(r.buf);
	*out = o;
	return 0;

out_release:
	rmt_target_release(&o->t);
out_free:
	free(r.buf);
	free(o);
	return rc;
}

int rmt_open_listed(const char *url, const struct rmt_entry *e,
		    struct rmt_obj **out, struct diag *d)
{
	struct rmt_obj *o;
	int rc;

	*out = NULL;
	if (!e->etag[0] || strlen(e->etag) >= RMT_TAG)
		return rmt_open(url, out, d);
	if (rmt_cache_start())
		return diag_nomem(d);
	o = calloc(1, sizeof(*o));
	if (!o)
		return diag_nomem(d);
	rc = rmt_target_init(&o->t, url, d);
	if (rc) {
		free(o);
		return rc;
	}
	o->id = atomic_fetch_add(&next_id, 1);
	o->size = e->size;
	o->mtime = e->mtime;
	snprintf(o->etag, sizeof(o->etag), "%s", e->etag);
	for (int i = 0; i < RMT_STREAMS; i++)
		o->st[i].next_off = UINT64_MAX;
	*out = o;
	return 0;
}

uint64_t rmt_size(const struct rmt_obj *o)
{
	return o->size;
}

int64_t rmt_mtime(const struct rmt_obj *o)
{
	return o->mtime;
}

const char *rmt_name(const struct rmt_obj *o)
{
	return o->t.name;
}

void rmt_close(struct rmt_obj *o)
{
	if (!o)
		return;
	rmt_cache_drop(o);
	rmt_target_release(&o->t);
	free(o);
}
