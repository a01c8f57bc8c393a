/*
 * test_newvalue.c - new files where python values live (issue 39.17,
 * docs/editing.md): the text of a new file parsed as a new value
 * (ckpt_value_parse_new()), which directories take values
 * (ckpt_dir_takes_values()), and through the overlay: a new file in the
 * sample's config/ is a value at its close() and again after a replay;
 * one in model/ (tensors) or of bytes that are not text stays a tensor;
 * a file of text renamed over a str keeps its bytes.
 */
#define _GNU_SOURCE 1
#include "test_util.h"
#include "ovl_fixture.h"

/* @text parsed as a new value: its type, or NULL when it is no text */
static const char *parsed(const char *text, struct ckpt_literal *lit,
			  char *buf)
{
	return ckpt_value_parse_new(text, strlen(text), buf, lit) ? NULL :
	       lit->type;
}

Test(ckpt_value_parse_new, literals_quoted_strs_and_text)
{
	struct ckpt_literal lit;
	char buf[64];

	cr_assert_str_eq(parsed("0.1\n", &lit, buf), "float");
	cr_assert_float_eq(lit.f, 0.1, 1e-15);
	cr_assert_str_eq(parsed(" 3 \n", &lit, buf), "int");
	cr_assert_eq(lit.i, 3);
	cr_assert_str_eq(parsed("True\n", &lit, buf), "bool");
	cr_assert_eq(lit.i, 1);
	cr_assert_str_eq(parsed("None", &lit, buf), "NoneType");
	cr_assert_str_eq(parsed("'x'\n", &lit, buf), "str");
	cr_assert_eq(lit.len, 1);
	cr_assert_eq(memcmp(lit.text, "x", 1), 0);
	cr_assert_str_eq(parsed("\"it's\\n\"", &lit, buf), "str");
	cr_assert_eq(lit.len, 5);
	cr_assert_eq(memcmp(lit.text, "it's\n", 5), 0);
	cr_assert_str_eq(parsed("'3'", &lit, buf), "str");
	cr_assert_eq(memcmp(lit.text, "3", 1), 0);
	/* other text: a str of it, without one newline */
	cr_assert_str_eq(parsed("hello world\n", &lit, buf), "str");
	cr_assert_eq(lit.len, 11);
	cr_assert_str_eq(parsed("'a' 'b'\n", &lit, buf), "str");
	cr_assert_eq(lit.len, 7);
	cr_assert_str_eq(parsed("'\\x41'", &lit, buf), "str");
	cr_assert_eq(lit.len, 6, "an escape python has but we do not: as written");
	/* not text: a tensor's bytes */
	cr_assert_null(parsed("", &lit, buf));
	cr_assert_null(parsed("\x01\x02", &lit, buf));
	cr_assert_null(parsed("K\xceQ", &lit, buf));
	cr_assert_eq(ckpt_value_parse_new("a\0b", 3, buf, &lit), -EINVAL);
}

static void fx_init(struct fx *f)
{
	fx_make(f, "test_newvalue");
	fx_load_ok(f, false);
}

/* A new file @name in @dir holding @text, closed: the node. */
static struct ckpt_node *new_file(struct fx *f, const char *dir,
				  const char *name, const char *text)
{
	struct ckpt_node *n;
	size_t len = strlen(text);

	cr_assert_eq(ovl_create(f->v, fx_node(f, dir), name, &n, &f->d), 0,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_write(f->v, n, text, len, 0, &f->d), (long long)len,
		     "%s", f->d.msg);
	cr_assert_eq(ovl_flush(f->v, n, &f->d), 0, "%s", f->d.msg);
	cr_assert_eq(ovl_release(f->v, n, &f->d), 0, "%s", f->d.msg);
	return n;
}

Test(ovl_new_value, among_values_a_value_among_tensors_a_tensor)
{
	struct fx f;
	struct ckpt_node *n;
	char buf[16];

	fx_init(&f);
	cr_assert(ckpt_dir_takes_values(fx_node(&f, "config")));
	cr_assert(ckpt_dir_takes_values(f.c->root), "model/ beside values");
	cr_assert_not(ckpt_dir_takes_values(fx_node(&f, "model")));
	n = new_file(&f, "config", "new_dropout", "0.1\n");
	cr_assert_eq(n->kind, CKPT_N_VALUE);
	cr_assert_str_eq(n->type, "float");
	cr_assert_str_eq(n->text, "0.1");
	n = new_file(&f, "config", "raw", "K\xceQ");
	cr_assert_eq(n->kind, CKPT_N_TENSOR, "bytes that are not text");
	n = new_file(&f, "model", "scale", "0.1\n");
	cr_assert_eq(n->kind, CKPT_N_TENSOR, "a new file among tensors");
	/* a temporary of text renamed over a str: the str takes its bytes
	   as they are (sed -i), not the value the temporary became */
	n = new_file(&f, "config", ".name.tmp", "'quoted'\n");
	cr_assert_str_eq(n->type, "str");
	cr_assert_eq(ovl_rename(f.v, fx_node(&f, "config"), ".name.tmp",
				fx_node(&f, "config"), "name", false, &f.d), 0,
		     "%s", f.d.msg);
	/* the journal makes the same again */
	for (int pass = 0; pass < 2; pass++) {
		n = fx_node(&f, "config/new_dropout");
		cr_assert_eq(n->kind, CKPT_N_VALUE);
		cr_assert_str_eq(n->type, "float");
		cr_assert_eq(fx_node(&f, "config/raw")->kind, CKPT_N_TENSOR);
		cr_assert_eq(fx_node(&f, "model/scale")->kind, CKPT_N_TENSOR);
		n = fx_node(&f, "config/name");
		cr_assert_str_eq(n->type, "str");
		cr_assert_eq(ovl_read(f.v, n, buf, sizeof(buf), 0, &f.d), 9);
		cr_assert_eq(memcmp(buf, "'quoted'\n", 9), 0);
		cr_assert_null(ovl_resolve(f.v, "config/.name.tmp", 16));
		fx_close(&f);
		fx_load_ok(&f, false);
	}
	fx_fini(&f);
	assert_no_leaks();
}
