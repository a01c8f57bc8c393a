/*
 * fuzz_zip.c - libFuzzer target for the zip reader (core/zip): the input
 * is a whole archive in a memfd.  Opens it, looks every name up again,
 * locates every record and reads those up to 1 MiB (inflating deflated
 * ones).  Any failure must be a clean -errno with a message.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

#include "diag/diag.h"
#include "zip/ptz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = fuzz_memfd(data, size);
	struct ptz_reader z;
	struct diag d;

	memset(&z, 0, sizeof(z));
	diag_init(&d, "fuzz.zip");
	if (ptz_reader_open(&z, fd, "fuzz.zip", &d) < 0) {
		if (!diag_failed(&d) || !d.msg[0])
			abort();	/* a failure without a message */
		ptz_reader_release(&z);
		return 0;
	}
	for (uint32_t i = 0; i < z.nentries; i++) {
		struct ptz_entry *e = &z.entries[i];
		unsigned char *buf = NULL;
		size_t len = 0;

		if (ptz_find(&z, e->name) == NULL)
			abort();	/* every listed name can be found */
		diag_init(&d, "fuzz.zip");
		if (ptz_entry_locate(&z, e, &d) < 0)
			continue;
		if (e->data_off + e->csize > z.file_size)
			abort();	/* locate checked the bounds */
		diag_init(&d, "fuzz.zip");
		if (ptz_entry_read(&z, e, 1u << 20, &buf, &len, &d) == 0) {
			if (len != e->usize)
				abort();
			free(buf);
		}
	}
	ptz_find_rel(&z, "data.pkl");
	ptz_reader_release(&z);
	return 0;
}
