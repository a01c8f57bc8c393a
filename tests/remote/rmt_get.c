/*
 * rmt_get.c - a test driver of core/remote: open a URL and write the bytes
 * of each OFF LEN range, read with rmt_pread(), to stdout (or the listing
 * of an s3:// folder), so that shell tests compare them with dd of the
 * file behind the server.  Failures: the diag line on stderr, exit 1.
 *
 *   rmt_get [--insecure] [--endpoint URL] [--cache BYTES] [--conns N]
 *           [--retries N] [--chunk N] [--threads N] [--stat] [--count]
 *           [--list] URL [OFF LEN]...
 * LEN "end": to the end of the object.  --chunk: each range read N bytes
 * at a time (as FUSE reads); --threads: the ranges read at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "remote/remote.h"

struct job {
	struct rmt_obj *o;
	uint64_t off, len, chunk;
	unsigned char *buf;
	struct diag d;
	int rc;
};

static void *run(void *arg)
{
	struct job *j = arg;
	uint64_t step = j->chunk ? j->chunk : j->len;

	diag_init(&j->d, NULL);
	for (uint64_t p = 0; p < j->len && !j->rc; p += step) {
		uint64_t n = j->len - p < step ? j->len - p : step;

		j->rc = rmt_pread(j->o, j->buf + p, n, j->off + p, &j->d);
	}
	return NULL;
}

static int show(void *arg, const struct rmt_entry *e)
{
	(void)arg;
	printf("%s %" PRIu64 " %s\n", e->name, e->size, e->etag);
	return 0;
}

static int fail(const struct diag *d, int rc)
{
	char line[512];

	if (diag_failed(d))
		fprintf(stderr, "rmt_get: %s\n", diag_line(d, line, sizeof(line)));
	else
		fprintf(stderr, "rmt_get: %s\n", strerror(-rc));
	return 1;
}

int main(int argc, char **argv)
{
	struct rmt_conf conf = { 0 };
	bool stat = false, count = false, list = false;
	unsigned threads = 0;
	uint64_t chunk = 0, req, bytes;
	struct rmt_obj *o = NULL;
	struct job *jobs;
	struct diag d;
	int i, n, rc = 0;

	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";

		if (!strcmp(a, "--insecure"))
			conf.insecure = true;
		else if (!strcmp(a, "--stat"))
			stat = true;
		else if (!strcmp(a, "--count"))
			count = true;
		else if (!strcmp(a, "--list"))
			list = true;
		else if (!strcmp(a, "--endpoint") && ++i)
			conf.endpoint = v;
		else if (!strcmp(a, "--cache") && ++i)
			conf.cache = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--conns") && ++i)
			conf.conns = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--retries") && ++i)
			conf.retries = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--chunk") && ++i)
			chunk = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--threads") && ++i)
			threads = (unsigned)strtoul(v, NULL, 0);
		else
			break;
	}
	if (i >= argc || (argc - i - 1) % 2) {
		fprintf(stderr, "usage: rmt_get [--insecure] [--endpoint URL] "
			"[--cache B] [--conns N] [--retries N] [--chunk N] "
			"[--threads N] [--stat] [--count] [--list] URL [OFF LEN]...\n");
		return 2;
	}
	diag_init(&d, NULL);
	if (rmt_configure(&conf, &d)) {
		fprintf(stderr, "rmt_get: %s\n", d.msg);
		return 2;
	}
	if (list) {
		rc = rmt_list(argv[i], show, NULL, &d);
		goto out;
	}
	rc = rmt_open(argv[i], &o, &d);
	if (rc)
		goto out;
	if (stat)
		printf("size %" PRIu64 "\nmtime %" PRId64 "\nname %s\n",
		       rmt_size(o), rmt_mtime(o), rmt_name(o));
	n = (argc - i - 1) / 2;
	jobs = calloc((size_t)n + 1, sizeof(*jobs));
	for (int k = 0; jobs && k < n; k++) {
		struct job *j = &jobs[k];

		j->o = o;
		j->chunk = chunk;
		j->off = strtoull(argv[i + 1 + 2 * k], NULL, 0);
		j->len = strcmp(argv[i + 2 + 2 * k], "end") ?
			 strtoull(argv[i + 2 + 2 * k], NULL, 0) :
			 rmt_size(o) - (j->off < rmt_size(o) ? j->off : rmt_size(o));
		j->buf = malloc(j->len ? j->len : 1);
		if (!j->buf) {
			fprintf(stderr, "rmt_get: out of memory\n");
			return 1;
		}
	}
	if (!jobs) {
		fprintf(stderr, "rmt_get: out of memory\n");
		return 1;
	}
	for (int k = 0; k < n; k += threads ? (int)threads : 1) {
		pthread_t tid[64];
		int m = threads ? (int)threads : 1;

		if (m > 64)
			m = 64;
		for (int t = 0; t < m && k + t < n; t++)
			if (pthread_create(&tid[t], NULL, run, &jobs[k + t]))
				run(&jobs[k + t]);
			else if (!threads)
				pthread_join(tid[t], NULL);
		for (int t = 0; threads && t < m && k + t < n; t++)
			pthread_join(tid[t], NULL);
	}
	for (int k = 0; k < n; k++) {
		if (jobs[k].rc && !rc) {
			rc = jobs[k].rc;
			d = jobs[k].d;
		}
		if (!rc)
			fwrite(jobs[k].buf, 1, jobs[k].len, stdout);
		free(jobs[k].buf);
	}
	free(jobs);
	rmt_close(o);
out:
	if (count) {
		rmt_counters(&req, &bytes);
		fprintf(stderr, "requests %" PRIu64 " bytes %" PRIu64 "\n", req,
			bytes);
	}
	if (rc)
		return fail(&d, rc);
	return fflush(stdout) ? 1 : 0;
}
