/*
 * fuzz_ckpt.c - libFuzzer target for the whole checkpoint model: the input
 * is a file (zip, legacy stream, safetensors ...) in a memfd, opened by ckpt_open()
 * through /proc/self/fd.  Every tensor is then read through
 * ckpt_tensor_read() at its start, its middle and its end (strided views
 * gathered), and every node's path is built, as ptls and ptfs do.  The
 * model promises that any byte of any tensor can be read without further
 * checks; a read past a storage would show up here as an ASan report.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char *buf;
	int fd = fuzz_memfd(data, size);
	char path[64];
	struct ckpt *c = NULL;
	struct diag d;

	if (!buf && !(buf = malloc(FUZZ_CHUNK)))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	diag_init(&d, path);
	if (ckpt_open(path, &c, &d) < 0) {
		if (c || !d.msg[0])
			abort();
		return 0;
	}
	for (uint32_t i = 0; i < c->ntensors; i++) {
		const struct ckpt_tensor *t = c->tensors[i];
		uint64_t size_t_ = ckpt_tensor_size(t);

		if (size_t_ == 0)
			continue;
		fuzz_read_at(c, t, buf, 0);
		fuzz_read_at(c, t, buf, size_t_ / 2);
		fuzz_read_at(c, t, buf, size_t_ > FUZZ_CHUNK ?
			     size_t_ - FUZZ_CHUNK : 0);
	}
	for (uint32_t i = 0; i < c->nnodes && i < 4096; i++) {
		char *p = ckpt_node_path(c->nodes[i]);

		free(p);
	}
	ckpt_close(c);
	return 0;
}
