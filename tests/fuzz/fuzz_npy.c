/*
 * fuzz_npy.c - libFuzzer target for the .npy header parser (core/view):
 * the input is the start of a .npy file.  A header that parses must say
 * where its data start inside the input, and must describe itself again
 * through view_npy_header() as a header that parses to the same shape.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

#include "diag/diag.h"
#include "view/view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char hdr[VIEW_NPY_HEADER_MAX];
	struct view_npy npy, back;
	struct diag d;
	size_t n;

	diag_init(&d, "fuzz.npy");
	if (view_npy_parse(data, size, &npy, &d) < 0) {
		if (!d.msg[0])
			abort();
		return 0;
	}
	if (npy.header_len > size || npy.ndim < 0 ||
	    npy.ndim > CKPT_MAX_DIMS || !npy.dtype)
		abort();
	n = view_npy_header(npy.dtype, npy.big, npy.ndim, npy.shape, hdr);
	if (n == 0 || n > sizeof(hdr) || n % 64)
		abort();
	diag_init(&d, "again.npy");
	if (view_npy_parse(hdr, n, &back, &d) < 0) {
		fprintf(stderr, "our own header does not parse: %s\n", d.msg);
		abort();
	}
	if (back.ndim != npy.ndim || back.numel != npy.numel ||
	    memcmp(back.shape, npy.shape, npy.ndim * sizeof(npy.shape[0])))
		abort();
	return 0;
}
