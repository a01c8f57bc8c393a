/*
 * fuzz_hfindex.c - libFuzzer target for the Hugging Face index reader
 * (core/fmt/hf/ckpt_hfindex.c): any bytes as an index.  hfix_parse() must
 * return 0 or a refusal with its offset inside the input, never read past
 * it, and leave nothing behind after hfix_release() and arena_release().
 */
#include "fuzz_common.h"

#include <errno.h>

#include "fmt/hf/ckpt_hfindex.h"
#include "diag/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena a = { 0 };
	struct hfix ix;
	struct diag d;
	int rc;

	diag_init(&d, "fuzz.index.json");
	rc = hfix_parse((const char *)data, size, &a, "", &ix, &d);
	if (rc == -EILSEQ && d.off != DIAG_NO_OFFSET && d.off > size)
		abort();	/* a refusal points inside the index */
	for (uint32_t i = 0; !rc && i < ix.n; i++)
		if (ix.e[i].shard >= ix.nshards ||
		    hfix_find(&ix, ix.e[i].key, ix.e[i].klen) != &ix.e[i])
			abort();
	hfix_release(&ix);
	arena_release(&a);
	return 0;
}
