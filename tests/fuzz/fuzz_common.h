/*
 * fuzz_common.h - what the libFuzzer targets share: the input as a file
 * (a memfd reused for every run, so ptz/ckpt read it with pread as they
 * would a checkpoint) and a diag that is simply discarded.
 */
#ifndef PT_TESTS_FUZZ_COMMON_H
#define PT_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

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

#endif
