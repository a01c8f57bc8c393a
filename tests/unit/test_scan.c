/*
 * test_scan.c - what torch.load would run, as the model lists it
 * (core/ckpt/ckpt_scan.c): each way a pickle hides a payload from a scan
 * that reads only what the model builds, in a file of its own, opened
 * with CKPT_OPEN_KEEP as ptls --check opens it.  A finding must be there
 * whether or not the checkpoint opens; a file torch.save writes has none.
 */
#include "pickle_asm.h"
#include "test_util.h"
#include "zip_builder.h"

#include "ckpt/ckpt.h"
#include "diag/diag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open @path as ptls --check does; the checkpoint, opened or not. */
static struct ckpt *open_keep(const char *path, int *rc, struct diag *d)
{
	struct ckpt *c = NULL;

	diag_init(d, path);
	*rc = ckpt_open_with(path, CKPT_OPEN_KEEP, &c, d);
	cr_assert_not_null(c, "CKPT_OPEN_KEEP gave no checkpoint");
	return c;
}

/* The finding of @kind whose module.name or why holds @what, or NULL. */
static const struct ckpt_global *finding(const struct ckpt *c, int kind,
					 const char *what)
{
	for (uint32_t i = 0; i < c->nglobals; i++) {
		const struct ckpt_global *g = &c->globals[i];
		char full[512];

		snprintf(full, sizeof(full), "%s.%s", g->module, g->name);
		if (g->kind == kind && (strstr(full, what) ||
					(g->why && strstr(g->why, what))))
			return g;
	}
	return NULL;
}

static void expect(const struct ckpt *c, int kind, const char *what,
		   const char *pickle)
{
	const struct ckpt_global *g = finding(c, kind, what);
	char all[4096] = "";

	for (uint32_t i = 0; i < c->nglobals; i++) {
		size_t n = strlen(all);

		snprintf(all + n, sizeof(all) - n, " [%d %s.%s in %s: %s]",
			 c->globals[i].kind, c->globals[i].module,
			 c->globals[i].name, c->globals[i].pickle,
			 c->globals[i].why ? c->globals[i].why : "");
	}
	cr_assert_not_null(g, "no finding of kind %d naming '%s'; found:%s",
			   kind, what, all[0] ? all : " none");
	cr_assert_str_eq(g->pickle, pickle);
}

/* A data.pkl that ends with an empty dict: the model opens, or not. */
static const char *zip_of(struct buf *b)
{
	const char *path = write_ckpt(b, "3\n", NULL, 0);

	free(b->p);
	return path;
}

/* posix.system('true') left on the stack, then POPped */
static void pk_payload(struct buf *b)
{
	pk_global(b, "posix", "system");
	pk_str(b, "true");
	op(b, 0x85);		/* TUPLE1 */
	op(b, 'R');
	op(b, '0');
}

/* _codecs.encode(@rot13, 'rot13'): allowed, and what it returns is
 * torch's to know */
static void pk_rot13(struct buf *b, const char *rot13)
{
	pk_global(b, "_codecs", "encode");
	pk_str(b, rot13);
	pk_str(b, "rot13");
	op(b, 0x86);		/* TUPLE2 */
	op(b, 'R');
}

Test(scan, names_a_global_whose_name_is_computed)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	pk_rot13(&b, "cbfvk");		/* posix */
	pk_rot13(&b, "flfgrz");		/* system */
	op(&b, 0x93);			/* STACK_GLOBAL */
	pk_str(&b, "true");
	op(&b, 0x85);
	op(&b, 'R');
	op(&b, '0');
	op(&b, '}');
	op(&b, '.');
	c = open_keep(zip_of(&b), &rc, &d);
	cr_expect_eq(rc, -EILSEQ, "the model cannot show it: refused");
	expect(c, CKPT_U_COMPUTED, "_codecs.encode", "data.pkl");
	ckpt_close(c);
}

Test(scan, names_a_computed_name_fetched_from_the_memo)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	pk_rot13(&b, "bf");		/* os */
	op(&b, 'q'); op(&b, 1);		/* BINPUT 1 */
	op(&b, '0');
	pk_str(&b, "system");
	op(&b, 'q'); op(&b, 2);
	op(&b, '0');
	op(&b, 'h'); op(&b, 1);		/* BINGET 1 */
	op(&b, 'h'); op(&b, 2);
	op(&b, 0x93);
	op(&b, '0');
	op(&b, '}');
	op(&b, '.');
	c = open_keep(zip_of(&b), &rc, &d);
	(void)rc;
	expect(c, CKPT_U_COMPUTED, "_codecs.encode", "data.pkl");
	ckpt_close(c);
}

Test(scan, takes_escaped_protocol_0_strings_as_the_names_they_spell)
{
	static const char pkl[] = "S'\\x6fs'\nS'sys\\x74em'\n\x93(S'true'\n"
				  "tR0}.";
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	zb_put_bytes(&b, pkl, sizeof(pkl) - 1);
	c = open_keep(zip_of(&b), &rc, &d);
	(void)rc;
	expect(c, CKPT_U_GLOBAL, "os.system", "data.pkl");
	ckpt_close(c);
}

Test(scan, names_a_build_on_a_global)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	pk_global(&b, "torch", "Tensor");
	op(&b, '}');
	pk_str(&b, "__reduce_ex__");
	pk_global(&b, "posix", "system");
	op(&b, 's');
	op(&b, 'b');			/* BUILD on the class */
	op(&b, '0');
	op(&b, '}');
	op(&b, '.');
	c = open_keep(zip_of(&b), &rc, &d);
	cr_expect_eq(rc, -EILSEQ);
	expect(c, CKPT_U_OPCODE, "torch.Tensor", "data.pkl");
	expect(c, CKPT_U_GLOBAL, "posix.system", "data.pkl");
	ckpt_close(c);
}

Test(scan, names_rebuild_from_type_v2_given_a_shell)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	op(&b, '}');
	pk_str(&b, "x");
	pk_global(&b, "torch._tensor", "_rebuild_from_type_v2");
	op(&b, '(');
	pk_global(&b, "posix", "system");
	pk_global(&b, "torch", "Tensor");
	pk_str(&b, "true");
	op(&b, 0x85);
	op(&b, '}');
	op(&b, 't');
	op(&b, 'R');
	op(&b, 's');
	op(&b, '.');
	c = open_keep(zip_of(&b), &rc, &d);
	(void)rc;
	expect(c, CKPT_U_CALL, "given posix.system as its function",
	       "data.pkl");
	ckpt_close(c);
}

Test(scan, names_a_persistent_id_built_by_a_call)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	op(&b, '}');
	pk_str(&b, "x");
	pk_str(&b, "storage");
	pk_rot13(&b, "gehr");
	op(&b, 0x86);
	op(&b, 'Q');			/* BINPERSID */
	op(&b, 's');
	op(&b, '.');
	c = open_keep(zip_of(&b), &rc, &d);
	cr_expect_eq(rc, -EILSEQ, "not a storage: refused");
	expect(c, CKPT_U_PERSID, "built from the result of _codecs.encode",
	       "data.pkl");
	ckpt_close(c);
}

Test(scan, names_what_came_before_the_pickle_breaks)
{
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	int rc;

	pk_start(&b);
	pk_payload(&b);
	op(&b, 0xff);			/* no such opcode: torch fails here */
	c = open_keep(zip_of(&b), &rc, &d);
	cr_expect_eq(rc, -EILSEQ);
	cr_expect(strstr(d.msg, "opcode 0xff"), "%s", d.msg);
	expect(c, CKPT_U_GLOBAL, "posix.system", "data.pkl");
	ckpt_close(c);
}

Test(scan, reads_every_pickle_of_a_legacy_stream)
{
	static const unsigned char magic[] = {
		0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19,
	};
	struct buf b = { 0 };
	struct diag d;
	struct ckpt *c;
	const char *path;
	int rc;

	pk_start(&b);			/* 1: the magic number */
	op(&b, 0x8a);
	op(&b, sizeof(magic));
	zb_put_bytes(&b, magic, sizeof(magic));
	op(&b, '.');
	pk_start(&b);			/* 2: the protocol */
	op(&b, 'M');
	op(&b, 1001 & 0xff);
	op(&b, 1001 >> 8);
	op(&b, '.');
	pk_start(&b);			/* 3: sys_info, with the payload */
	pk_payload(&b);
	op(&b, '}');
	op(&b, '.');
	pk_start(&b);			/* 4: the object */
	op(&b, '}');
	op(&b, '.');
	pk_start(&b);			/* 5: the storage keys */
	op(&b, ']');
	op(&b, '.');
	path = write_tmp(b.p, b.len);
	free(b.p);
	c = open_keep(path, &rc, &d);
	cr_expect_eq(rc, 0, "%s", d.msg);
	expect(c, CKPT_U_GLOBAL, "posix.system",
	       "pickle 3 of the legacy stream (sys_info)");
	ckpt_close(c);
}

Test(scan, reads_a_bare_pickle_as_torch_load_does)
{
	static const char pkl[] = "cposix\nsystem\n(S'true'\ntR.";
	struct diag d;
	struct ckpt *c;
	int rc;

	c = open_keep(write_tmp(pkl, sizeof(pkl) - 1), &rc, &d);
	cr_expect_eq(rc, -EILSEQ);
	cr_expect(strstr(d.msg, "magic number"), "%s", d.msg);
	expect(c, CKPT_U_GLOBAL, "posix.system",
	       "pickle 1 of the legacy stream (magic number)");
	ckpt_close(c);
}

Test(scan, reads_the_other_pickles_of_an_archive)
{
	struct buf b = { 0 }, x = { 0 };
	struct diag d;
	struct ckpt *c;
	struct zent extra;
	const char *path;
	int rc;

	pk_start(&b);
	op(&b, '}');
	op(&b, '.');
	pk_start(&x);
	pk_payload(&x);
	op(&x, 'N');
	op(&x, '.');
	extra = (struct zent){ "m/extra.pkl", x.p, x.len, false };
	path = write_ckpt(&b, "3\n", &extra, 1);
	free(b.p);
	free(x.p);
	c = open_keep(path, &rc, &d);
	cr_expect_eq(rc, 0, "%s", d.msg);
	expect(c, CKPT_U_GLOBAL, "posix.system", "extra.pkl");
	ckpt_close(c);
}

Test(scan, finds_nothing_in_what_torch_save_writes)
{
	static const int32_t size[] = { 2, 3 }, stride[] = { 3, 1 };
	struct buf b = { 0 };
	struct zent st;
	unsigned char data[24] = { 0 };
	struct diag d;
	struct ckpt *c;
	const char *path;
	int rc;

	pk_start(&b);
	op(&b, '}');
	pk_str(&b, "w");
	pk_tensor(&b, "FloatStorage", "0", 6, 0, size, stride, 2, false);
	op(&b, 's');
	op(&b, '.');
	st = (struct zent){ "m/data/0", data, sizeof(data), false };
	path = write_ckpt(&b, "3\n", &st, 1);
	free(b.p);
	c = open_keep(path, &rc, &d);
	cr_assert_eq(rc, 0, "%s", d.msg);
	cr_expect_eq(c->nglobals, 0, "a finding in a plain state dict: %s %s",
		     c->nglobals ? c->globals[0].pickle : "",
		     c->nglobals && c->globals[0].why ? c->globals[0].why : "");
	ckpt_close(c);
}
