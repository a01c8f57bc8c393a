/*
 * ptdiff_out.c - ptdiff's report: one line per difference and a summary
 * line (the tag first, then the path, so that grep finds either), or one
 * JSON object with every item and the totals (docs/ptdiff.1).
 */
#include "ckpt_fmt.h"
#include "ptdiff.h"

#include "json_out.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pd_kind pd_kind_of(const struct ckpt_node *n)
{
	return n->kind == CKPT_N_TENSOR ? K_TENSOR :
	       n->kind == CKPT_N_LINK ? K_LINK :
	       ckpt_node_is_dir(n) ? K_DIR : K_VALUE;
}

const char *pd_kind_name(enum pd_kind k)
{
	static const char *const names[] = {
		"tensor", "value", "directory", "link"
	};
	return names[k];
}

static void dims(char *buf, size_t size, const int64_t *v, int n)
{
	size_t k = snprintf(buf, size, "(");

	for (int i = 0; i < n && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%" PRId64, i ? ", " : "",
			      v[i]);
	if (k < size)
		snprintf(buf + k, size - k, n == 1 ? ",)" : ")");
}


/* ---- text output ---- */

static void text_layout(const struct pd_item *it)
{
	const struct ckpt_tensor *a = it->a->tensor, *b = it->b->tensor;
	char sa[1024], sb[1024];

	printf("layout: %s:", it->path);
	if (it->stride_diff) {
		dims(sa, sizeof(sa), ckpt_tensor_stride(a), a->ndim);
		dims(sb, sizeof(sb), ckpt_tensor_stride(b), b->ndim);
		printf(" stride %s vs %s%s", sa, sb,
		       it->offset_diff ? "," : "");
	}
	if (it->offset_diff)
		printf(" offset %" PRIu64 " vs %" PRIu64, a->offset, b->offset);
	putchar('\n');
}

static void text_values(const struct pd_item *it)
{
	const struct pd_elems *e = &it->el;
	char sa[40], sb[40];

	printf("values: %s: %" PRIu64 " of %" PRIu64 " differ", it->path,
	       e->differ, e->numel);
	if (e->nan)
		printf(" (%" PRIu64 " NaN)", e->nan);
	if (!e->raw)
		printf(", max abs %s, max rel %s",
		       ckpt_float_repr(e->max_abs, sa, sizeof(sa)),
		       ckpt_float_repr(e->max_rel, sb, sizeof(sb)));
	if (e->has_rel_l2)
		printf(", rel L2 %.3g", e->rel_l2);
	putchar('\n');
}

void pd_text_item(const struct pd_item *it, const struct pd_opts *o)
{
	const struct ckpt_node *a = it->a, *b = it->b;
	const char *p = it->path;
	char sa[1024], sb[1024];

	if (it->status == ST_ONLY_A || it->status == ST_ONLY_B) {
		const struct ckpt_node *n = a ? a : b;

		printf("only in %s: %s%s\n", a ? "A" : "B", p,
		       ckpt_node_is_dir(n) && n->parent ? "/" : "");
		return;
	}
	if (it->status == ST_EQUAL) {
		if (o->verbose)
			printf("equal: %s\n", p);
		return;
	}
	if (it->kind)
		printf("kind: %s: %s vs %s\n", p, pd_kind_name(pd_kind_of(a)),
		       pd_kind_name(pd_kind_of(b)));
	if (it->target) {
		char *ta = ckpt_node_path(a->target);
		char *tb = ckpt_node_path(b->target);

		printf("link: %s: -> %s vs -> %s\n", p, ta ? ta : "?",
		       tb ? tb : "?");
		free(ta);
		free(tb);
	}
	if (it->value) {
		fmt_printable(sa, a);
		fmt_printable(sb, b);
		printf("value: %s: %s vs %s", p, sa, sb);
		if (strcmp(a->type, b->type))
			printf(" (%s vs %s)", a->type, b->type);
		putchar('\n');
	}
	if (it->dtype)
		printf("dtype: %s: %s vs %s\n", p, a->tensor->dtype->name,
		       b->tensor->dtype->name);
	if (it->shape) {
		dims(sa, sizeof(sa), a->tensor->shape, a->tensor->ndim);
		dims(sb, sizeof(sb), b->tensor->shape, b->tensor->ndim);
		printf("shape: %s: %s vs %s\n", p, sa, sb);
	}
	if (it->layout)
		text_layout(it);
	if (it->nattrs) {
		printf("attrs: %s:", p);
		for (int i = 0; i < it->nattrs; i++)
			printf("%s %s %s vs %s", i ? "," : "",
			       it->attrs[i].name, it->attrs[i].a,
			       it->attrs[i].b);
		putchar('\n');
	}
	if (it->values)
		text_values(it);
}

void pd_text_totals(const struct pd_totals *t, const struct pd_opts *o)
{
	uint64_t differ = t->changed + t->only_a + t->only_b;

	if (t->stopped)
		printf("# stopped after %" PRIu64 " difference%s (--count %" PRIu64
		       "): the rest was not compared\n", differ,
		       differ == 1 ? "" : "s", o->limit);
	if (t->not_shown)
		printf("# %" PRIu64 " smaller difference%s not listed (--count %"
		       PRIu64 ")\n", t->not_shown,
		       t->not_shown == 1 ? "" : "s", o->limit);

	printf("# %" PRIu64 " difference%s (%" PRIu64 " changed, %" PRIu64
	       " only in A, %" PRIu64 " only in B); %" PRIu64 " compared (%"
	       PRIu64 " tensor%s, %" PRIu64 " value%s, %" PRIu64 " other); %"
	       PRIu64 " equal\n", differ, differ == 1 ? "" : "s", t->changed,
	       t->only_a, t->only_b, t->tensors + t->values + t->other,
	       t->tensors, t->tensors == 1 ? "" : "s", t->values,
	       t->values == 1 ? "" : "s", t->other, t->equal);
}

/* ---- JSON output ---- */

static void json_num(FILE *f, double v)
{
	char buf[40];

	ckpt_float_repr(v, buf, sizeof(buf));
	if (isfinite(v))
		fputs(buf, f);
	else
		json_cstr(f, buf);	/* "inf": JSON has no infinity */
}

static void json_dims(FILE *f, const int64_t *v, int n)
{
	putc('[', f);
	for (int i = 0; i < n; i++) {
		if (i)
			putc(',', f);
		json_i64(f, v[i]);
	}
	putc(']', f);
}

static void json_pair_str(FILE *f, const char *key, const char *a,
			  const char *b)
{
	fprintf(f, ",\"%s\":[", key);
	json_cstr(f, a);
	putc(',', f);
	json_cstr(f, b);
	putc(']', f);
}

/* "attrs":{name:[A, B], ...}, when there are any. */
static void json_attrs(FILE *f, const struct pd_item *it)
{
	if (!it->nattrs)
		return;
	fputs(",\"attrs\":{", f);
	for (int i = 0; i < it->nattrs; i++) {
		const struct pd_attr *t = &it->attrs[i];

		fprintf(f, "%s\"%s\":[", i ? "," : "", t->name);
		if (t->boolean) {
			fprintf(f, "%s,%s]", *t->a == 'T' ? "true" : "false",
				*t->b == 'T' ? "true" : "false");
		} else {
			json_cstr(f, t->a);
			putc(',', f);
			json_cstr(f, t->b);
			putc(']', f);
		}
	}
	putc('}', f);
}

static void json_tensors(FILE *f, const struct pd_item *it)
{
	const struct ckpt_tensor *a = it->a->tensor, *b = it->b->tensor;
	const struct pd_elems *e = &it->el;

	json_pair_str(f, "dtype", a->dtype->name, b->dtype->name);
	fputs(",\"shape\":[", f);
	json_dims(f, a->shape, a->ndim);
	putc(',', f);
	json_dims(f, b->shape, b->ndim);
	fputs("],\"stride\":[", f);
	json_dims(f, ckpt_tensor_stride(a), a->ndim);
	putc(',', f);
	json_dims(f, ckpt_tensor_stride(b), b->ndim);
	fprintf(f, "],\"offset\":[%" PRIu64 ",%" PRIu64 "]", a->offset,
		b->offset);
	fprintf(f, ",\"layout_differs\":%s",
		it->stride_diff || it->offset_diff ? "true" : "false");
	json_attrs(f, it);
	if (!it->compared)
		return;
	fputs(",\"elements\":{\"numel\":", f);
	json_u64(f, e->numel);
	fputs(",\"differ\":", f);
	json_u64(f, e->differ);
	fputs(",\"nan\":", f);
	json_u64(f, e->nan);
	fputs(",\"first\":", f);
	if (e->differ)
		json_u64(f, e->first);
	else
		fputs("null", f);
	fputs(",\"max_abs\":", f);
	if (e->raw)
		fputs("null", f);
	else
		json_num(f, e->max_abs);
	fputs(",\"max_rel\":", f);
	if (e->raw)
		fputs("null", f);
	else
		json_num(f, e->max_rel);
	if (e->has_rel_l2) {
		fputs(",\"rel_l2\":", f);
		json_num(f, e->rel_l2);
	}
	fputs("}", f);
}

void pd_json_item(FILE *f, const struct pd_item *it, bool first)
{
	static const char *const st[] = {
		"equal", "changed", "only_a", "only_b"
	};
	static const char *const tags[] = {
		"kind", "target", "value", "dtype", "shape", "layout",
		"attrs", "values"
	};
	const struct ckpt_node *a = it->a, *b = it->b;
	bool on[] = { it->kind, it->target, it->value, it->dtype, it->shape,
		      it->layout, it->nattrs > 0, it->values };
	bool any = false;

	fputs(first ? "\n  {\"path\":" : ",\n  {\"path\":", f);
	json_cstr(f, it->path);
	fprintf(f, ",\"status\":\"%s\",\"kind\":[", st[it->status]);
	json_cstr(f, a ? pd_kind_name(pd_kind_of(a)) : NULL);
	putc(',', f);
	json_cstr(f, b ? pd_kind_name(pd_kind_of(b)) : NULL);
	fputs("],\"diffs\":[", f);
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		if (on[i]) {
			fprintf(f, "%s\"%s\"", any ? "," : "", tags[i]);
			any = true;
		}
	putc(']', f);
	json_pair_str(f, "type", a ? a->type : NULL, b ? b->type : NULL);
	if (!a || !b || it->kind) {
		fputs("}", f);
		return;
	}
	if (a->kind == CKPT_N_TENSOR) {
		json_tensors(f, it);
	} else if (a->kind == CKPT_N_LINK) {
		char *ta = ckpt_node_path(a->target);
		char *tb = ckpt_node_path(b->target);

		json_pair_str(f, "target", ta ? ta : "?", tb ? tb : "?");
		free(ta);
		free(tb);
	} else if (!ckpt_node_is_dir(a)) {
		fputs(",\"value\":[", f);
		json_str(f, a->text, a->textlen);
		putc(',', f);
		json_str(f, b->text, b->textlen);
		putc(']', f);
	} else {
		json_attrs(f, it);
	}
	fputs("}", f);
}

void pd_json_head(FILE *f, const char *pa, const char *pb,
		      const struct pd_opts *o)
{
	fputs("{\"a\":", f);
	json_cstr(f, pa);
	fputs(",\"b\":", f);
	json_cstr(f, pb);
	fputs(",\"atol\":", f);
	json_num(f, o->atol);
	fputs(",\"rtol\":", f);
	json_num(f, o->rtol);
	fputs(",\"rel_l2\":", f);
	if (o->rel_l2 >= 0)
		json_num(f, o->rel_l2);
	else
		fputs("null", f);
	fprintf(f, ",\"nan_differ\":%s,\"ignore_layout\":%s,\"sort\":",
		o->nan_differ ? "true" : "false",
		o->ignore_layout ? "true" : "false");
	json_cstr(f, pd_sort_name(o->sort));
	fputs(",\"limit\":", f);
	if (o->limit)
		json_u64(f, o->limit);
	else
		fputs("null", f);
	fputs(",\"items\":[", f);
}

void pd_json_tail(FILE *f, const struct pd_totals *t, uint64_t bytes,
		      const char *error)
{
	fprintf(f, "\n ],\"differences\":%" PRIu64 ",\"changed\":%" PRIu64
		",\"only_a\":%" PRIu64 ",\"only_b\":%" PRIu64 ",\"compared\":%"
		PRIu64 ",\"equal\":%" PRIu64 ",\"tensors\":%" PRIu64
		",\"values\":%" PRIu64 ",\"other\":%" PRIu64
		",\"bytes_compared\":%" PRIu64 ",\"stopped\":%s,"
		"\"not_shown\":%" PRIu64 ",\"error\":",
		t->changed + t->only_a + t->only_b, t->changed, t->only_a,
		t->only_b, t->tensors + t->values + t->other, t->equal,
		t->tensors, t->values, t->other, bytes,
		t->stopped ? "true" : "false", t->not_shown);
	json_cstr(f, error);
	fputs("}\n", f);
}
