/*
 * fuzz_gguf.c - libFuzzer target for GGUF files (core/fmt/gguf): the input
 * is a file in a memfd, opened by ckpt_open() through /proc/self/fd, and
 * then used as ptls, ptverify and a mount use it: every key/value's text
 * (c->meta), every tensor's attributes (ckpt_tensor_attrs()) and bytes
 * (ckpt_tensor_read() at its start and end), the descriptor's verify, and
 * for every coded tensor (ckpt_coded(): Q8_0, Q4_K ...) a bounded number
 * of values decoded (ckpt_coded_values()) at its start, middle and end.
 * A refusal must be one message, with its offset inside the file.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <string.h>

#include "ckpt/ckpt_format.h"

#define VALUES	4096u		/* decoded at each place */

/* A callback's strings are NUL-terminated (strlen is what ASan checks). */
static void attr(void *arg, const char *name, const char *value)
{
	(void)arg;
	if (!strlen(name) || strlen(value) > FUZZ_CHUNK)
		abort();
}

static void problem(void *arg, const char *check, const char *path,
		    uint64_t off, const char *msg)
{
	(void)arg;
	(void)path;
	(void)off;
	if (!strlen(check) || !strlen(msg))
		abort();
}

/* Values [@first, @first + VALUES) of coded tensor @t, clipped. */
static void values_at(struct ckpt *c, const struct ckpt_tensor *t,
		      const struct ckpt_coded *k, float *val, uint64_t first)
{
	uint64_t n = k->numel - first < VALUES ? k->numel - first : VALUES;
	struct diag d;

	diag_init(&d, "fuzz.gguf");
	if (ckpt_tensor_coded_values(c, t, k, val, first, n, &d) && !d.msg[0])
		abort();
}

static void coded(struct ckpt *c, const struct ckpt_tensor *t, float *val)
{
	struct ckpt_coded k;
	uint64_t numel = 1;

	if (!ckpt_coded(c, t, &k))
		return;
	for (int i = 0; i < k.ndim; i++)
		numel *= (uint64_t)k.shape[i];
	/* the values' blocks are exactly the tensor's bytes */
	if (numel != k.numel || !k.block || k.numel % k.block ||
	    k.numel / k.block * k.bytes != ckpt_tensor_size(t))
		abort();
	if (!k.numel)
		return;
	values_at(c, t, &k, val, 0);
	values_at(c, t, &k, val, k.numel / 2);
	values_at(c, t, &k, val, k.numel > VALUES ? k.numel - VALUES : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char *buf;
	static float *val;
	int fd = fuzz_memfd(data, size);
	uint64_t checked = 0;
	char path[64], line[512];
	struct ckpt *c = NULL;
	struct diag d;

	if (!buf && !(buf = malloc(FUZZ_CHUNK)))
		abort();
	if (!val && !(val = malloc(VALUES * sizeof(*val))))
		abort();
	if (size < 4 || memcmp(data, "GGUF", 4))
		return 0;	/* another format: fuzz_ckpt's */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	diag_init(&d, path);
	if (ckpt_open(path, &c, &d) < 0) {
		/* one line, and a corrupt file's offset lies inside it */
		if (c || !d.msg[0] || strchr(diag_line(&d, line, sizeof(line)),
					     '\n') ||
		    (d.err == -EILSEQ && d.off != DIAG_NO_OFFSET &&
		     d.off > size))
			abort();
		return 0;
	}
	for (uint32_t i = 0; i < c->nmeta; i++) {
		const struct ckpt_meta *m = &c->meta[i];

		if (m->val[m->vlen] || m->key[m->klen] ||
		    (m->type && !strlen(m->type)))
			abort();
	}
	if (ckpt_fmt(c)->describe)
		ckpt_fmt(c)->describe(c, line, sizeof(line));
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_tensor *t = c->tensors[i];
		uint64_t n = ckpt_tensor_size(t);

		ckpt_tensor_attrs(c, t, attr, NULL);
		if (n) {
			fuzz_read_at(c, t, buf, 0);
			fuzz_read_at(c, t, buf, n > FUZZ_CHUNK ?
				     n - FUZZ_CHUNK : 0);
		}
		coded(c, t, val);
	}
	ckpt_verify(c, false, &checked, problem, NULL);
	ckpt_close(c);
	return 0;
}
