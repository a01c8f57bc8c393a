/*
 * fuzz_pickle.c - libFuzzer target for the pickle parser (core/pickle):
 * the input is one pickle.  A parsed document is walked for its globals
 * and emitted again as protocol 2 (pkl_emit.c); whatever the emitter
 * writes must parse again, since write-back feeds it to torch.
 */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <string.h>

#include "diag/diag.h"
#include "pickle/pkl.h"
#include "pickle/pkl_emit.h"

static void count_global(const struct pkl_value *g, void *arg)
{
	size_t *n = arg;

	if (!g->u.global.module || !g->u.global.name)
		abort();
	(*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pkl_doc *doc = NULL, *again = NULL;
	struct pkl_emit *e = NULL;
	unsigned char *out = NULL;
	size_t len = 0, nglobals = 0;
	struct diag d;

	diag_init(&d, "fuzz.pkl");
	if (pkl_parse(data, size, 0, &doc, &d) < 0) {
		if (doc || !d.msg[0])
			abort();
		return 0;
	}
	if (doc->end > size)
		abort();
	pkl_doc_each_global(doc, count_global, &nglobals);
	diag_init(&d, "fuzz.pkl");
	if (pkl_emit_init(&e, doc->nnodes, NULL, &d) == 0 &&
	    pkl_emit_value(e, doc->root) == 0 &&
	    pkl_emit_finish(e, &out, &len) == 0) {
		diag_init(&d, "emitted.pkl");
		if (pkl_parse(out, len, 0, &again, &d) < 0) {
			fprintf(stderr, "emitted pickle does not parse: %s\n",
				d.msg);
			abort();
		}
		pkl_doc_free(again);
		free(out);
	}
	pkl_emit_free(e);
	pkl_doc_free(doc);
	return 0;
}
