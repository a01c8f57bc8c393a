/*
 * fuzz_write.c - libFuzzer target for write-back (core/ckpt/ckpt_write.c,
 * core/pickle/pkl_emit.c, ckpt_stwrite.c): a file that ckpt_open() accepts
 * is written out again as ptfs umount would after a structural edit (a new
 * data.pkl), or as a torch zip or a safetensors file, and what was
 * written must open again.  A write may refuse (an extension code, a
 * cyclic tuple, a python value in a safetensors file) but never crash or
 * write a file that we cannot read back.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

#include "ckpt/ckpt.h"
#include "diag/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int out = -1;
	struct ckpt_write_opts o;
	struct ckpt *c = NULL, *again = NULL;
	char path[64], path2[64];
	struct diag d;
	int fd = fuzz_memfd(data, size);

	if (out < 0 && (out = memfd_create("fuzz-out.pt", 0)) < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	snprintf(path2, sizeof(path2), "/proc/self/fd/%d", out);
	diag_init(&d, path);
	if (ckpt_open(path, &c, &d) < 0)
		return 0;
	if (ftruncate(out, 0) < 0)
		abort();
	memset(&o, 0, sizeof(o));
	o.repickle = size & 1;	/* both: data.pkl copied, and emitted anew */
	/* and each format: its own, a torch zip, safetensors (values left
	   out or refused) */
	o.to = (uint8_t)((size >> 1) % 3);
	o.st_drop = (size >> 3) & 1;
	diag_init(&d, path);
	if (ckpt_write(c, out, &o, &d) == 0) {
		diag_init(&d, path2);
		if (ckpt_open(path2, &again, &d) < 0) {
			fprintf(stderr, "written file does not open: %s\n",
				d.msg);
			abort();
		}
		ckpt_close(again);
	} else if (!d.msg[0]) {
		abort();
	}
	ckpt_close(c);
	return 0;
}
