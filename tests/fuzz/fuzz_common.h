/*
 * fuzz_common.h - what the libFuzzer targets share: the input as a file
 * (a memfd reused for every run, so ptz/ckpt read it with pread as they
 * would a checkpoint), a diag that is simply discarded, and a tensor read
 * that must give what it promises.
 */
#ifndef PT_TESTS_FUZZ_COMMON_H
#define PT_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "diag/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Replace the memfd's contents with @data; returns the fd (never closed). */
static inline int fuzz_memfd(const uint8_t *data, size_t size)
{
	static int fd = -1;
	size_t done = 0;

	if (fd < 0) {
		fd = memfd_create("fuzz.pt", 0);
		if (fd < 0) {
			perror("memfd_create");
			abort();
		}
	}
	if (ftruncate(fd, 0) < 0)
		abort();
	while (done < size) {
		ssize_t n = pwrite(fd, data + done, size - done, done);

		if (n <= 0)
			abort();
		done += n;
	}
	return fd;
}

#define FUZZ_CHUNK	(64u << 10)

/* Read FUZZ_CHUNK bytes of @t at @pos into @buf: the model promises any
 * byte of a tensor reads, so a short read or a failure with no message
 * aborts (and a read past a storage is an ASan report). */
static inline void fuzz_read_at(struct ckpt *c, const struct ckpt_tensor *t,
				unsigned char *buf, uint64_t pos)
{
	uint64_t size = ckpt_tensor_size(t);
	uint64_t want = size - pos < FUZZ_CHUNK ? size - pos : FUZZ_CHUNK;
	struct diag d;
	long long n;

	diag_init(&d, "fuzz");
	n = ckpt_tensor_read(c, t, buf, FUZZ_CHUNK, pos, &d);
	if (n < 0 ? !d.msg[0] : (uint64_t)n != want) {
		fprintf(stderr, "tensor %u: read %lld bytes at %llu, want %llu "
			"(%s)\n", t->index, n, (unsigned long long)pos,
			(unsigned long long)want, d.msg);
		abort();
	}
}

#endif
