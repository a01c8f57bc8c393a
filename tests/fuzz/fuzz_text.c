/*
 * fuzz_text.c - libFuzzer target for the text view's streaming parser
 * (core/view/view_text.c).  Input layout:
 *
 *   OFFSET  SIZE  FIELD
 *   0       1     dtype (index into the list below, modulo its length)
 *   1       1     bit 0: big-endian; bits 1-7: chunking seed
 *   2       2     numel the tensor claims, little-endian
 *   4       ...   the text
 *
 * The text is fed in chunks whose sizes come from the seed (1 byte at a
 * time up to the whole text), and the parser must never write past the
 * output it was promised: (len / 2 + 2) * itemsize bytes per call.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

#include "diag/diag.h"
#include "view/view.h"

static const char *const names[] = {
	"float64", "float32", "float16", "bfloat16", "int64", "int32",
	"int16", "int8", "uint8", "bool", "complex128", "complex64",
	"complex32", "uint16", "uint32", "uint64", "qint8", "qint32",
	"quint8", "float8_e5m2", "float8_e4m3fn", "bits16", "uint4",
	"quint4x2",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct ckpt_dtype *dt;
	struct view_parser p;
	struct diag d;
	unsigned seed;
	size_t pos = 4, len, total = 0;
	int rc = 0;

	if (size < 4)
		return 0;
	dt = ckpt_dtype_by_name(names[data[0] % (sizeof(names) /
						  sizeof(names[0]))]);
	if (!dt)
		abort();
	seed = data[1] >> 1;
	view_parser_init(&p, dt, data[1] & 1, data[2] | data[3] << 8);
	diag_init(&d, "fuzz.txt");
	do {
		size_t chunk, cap, nout = 0;
		unsigned char *out;

		len = size - pos;
		chunk = seed == 0 ? len : (seed * 7 + total) % (seed + 1) + 1;
		if (chunk > len)
			chunk = len;
		/* exactly what view_parse promises to stay within */
		cap = (chunk / 2 + 2) * dt->size;
		out = malloc(cap);
		if (!out)
			abort();
		rc = view_parse(&p, (const char *)data + pos, chunk,
				pos + chunk == size, out, &nout, &d);
		free(out);
		if (nout > cap)
			abort();
		total += nout;
		pos += chunk;
	} while (rc == 0 && pos < size);
	if (rc < 0 && !d.msg[0])
		abort();
	if (rc == 0 && p.count > p.want)
		abort();
	return 0;
}
