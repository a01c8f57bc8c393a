/*
 * ptdump_pkl.c - ptdump --pickle: a symbolic listing of a pickle that is
 * line for line what Python's `python3 -m pickletools` prints
 * (Lib/pickletools.py dis(): offset, opcode, argument as repr(), MARK
 * blocks indented, "(MARK at N)" where a mark is popped, memo checks), and
 * with --annotate what `pickletools -a` adds.  It decodes opcodes only; it
 * shares no code with the parser (core/pickle), so it also lists pickles
 * the parser refuses, up to the first opcode pickletools would refuse.
 */
#include "ptdump.h"
#include "ptdump_pkl.h"

#include "json_out.h"
#include "pyrepr.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- the emulated stack and memo (only "object" or "mark" matters) ---- */

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64;
	void *nv;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	nv = realloc(*v, c * size);
	if (!nv)
		return false;
	*v = nv;
	*cap = c;
	return true;
}

static uint64_t *memo_slot(struct dis *s, uint64_t key)
{
	size_t i = (key * 0x9e3779b97f4a7c15ull >> 17) & (s->capmemo - 1);

	while (s->memo[i] && s->memo[i] != key + 1)
		i = (i + 1) & (s->capmemo - 1);
	return &s->memo[i];
}

static bool memo_has(struct dis *s, uint64_t key)
{
	return s->capmemo && *memo_slot(s, key);
}

static bool memo_add(struct dis *s, uint64_t key)
{
	if (2 * (s->nmemo + 1) > s->capmemo) {
		uint64_t *old = s->memo;
		size_t ocap = s->capmemo;

		s->capmemo = ocap ? 2 * ocap : 256;
		s->memo = calloc(s->capmemo, sizeof(*s->memo));
		if (!s->memo) {
			s->memo = old;
			s->capmemo = ocap;
			return false;
		}
		for (size_t i = 0; i < ocap; i++)
			if (old[i])
				*memo_slot(s, old[i] - 1) = old[i];
		free(old);
	}
	*memo_slot(s, key) = key + 1;
	s->nmemo++;
	return true;
}

/* ---- the listing ---- */

static void json_op(FILE *f, bool first, uint64_t pos,
		    const struct opinfo *op, const struct sbuf *arg,
		    int has_arg, size_t depth, const char *markmsg)
{
	fputs(first ? "\n  {\"pos\":" : ",\n  {\"pos\":", f);
	json_u64(f, pos);
	fputs(",\"op\":", f);
	json_cstr(f, op->name);
	fprintf(f, ",\"code\":%u,\"depth\":%zu,\"arg\":", op->code, depth);
	if (has_arg)
		json_str(f, arg->p, arg->n);
	else
		fputs("null", f);
	if (markmsg) {
		fputs(",\"note\":", f);
		json_cstr(f, markmsg);
	}
	putc('}', f);
}

/*
 * Disassemble the one pickle in @p[0..@len), whose first byte is at
 * position @base (pickletools prints positions of the file it reads), as
 * pickletools.dis(annotate=@annotate) does.  *@end gets the position
 * after STOP.  Returns 0, or -1 with the error printed (one line).
 */
static int dis_one(FILE *out, const struct dump_opts *o,
		   const unsigned char *p, size_t len, uint64_t base,
		   uint64_t *end, const char *path, uint64_t delta)
{
	struct dis s = { .p = p, .len = len, .base = base };
	struct sbuf ln = { 0 }, arg = { 0 };
	size_t annocol = o->annotate ? 30 : 0;
	int maxproto = -1, rc = -1;
	bool first = true, stopped = false;

	if (o->json)
		fputs("{\"offset\":", out), json_u64(out, base),
		fputs(",\"ops\":[", out);
	while (!stopped) {
		uint64_t pos = base + s.pos, key = 0;
		const struct opinfo *op;
		char markmsg[64] = "";
		size_t npop;
		int has;
		char code[8];

		if (s.pos >= s.len) {
			dis_fail(&s, pos, "pickle exhausted before seeing STOP%s",
			     "");
			goto out;
		}
		op = dis_op(s.p[s.pos]);
		if (!op) {
			snprintf(code, sizeof(code), "0x%02x", s.p[s.pos]);
			dis_fail(&s, pos, "opcode %s unknown", code);
			goto out;
		}
		s.pos++;
		arg.n = 0;
		if (arg.p)
			arg.p[0] = '\0';
		has = dis_read_arg(&s, op, pos, &arg, &key);
		if (has < 0)
			goto out;
		ln.n = 0;
		if (op->code >= 0x20 && op->code < 0x7f)
			snprintf(code, sizeof(code), "%c", op->code);
		else
			snprintf(code, sizeof(code), "\\x%02x", op->code);
		sb_printf(&ln, "%-4s %*s%s", code, (int)(4 * s.nmarks), "",
			  op->name);
		if (op->proto > maxproto)
			maxproto = op->proto;
		npop = op->npop;
		if (op->mark_before || (op->code == '0' && s.nstack &&
					s.stack[s.nstack - 1])) {
			if (s.nmarks) {
				snprintf(markmsg, sizeof(markmsg),
					 "(MARK at %" PRIu64 ")",
					 s.marks[--s.nmarks]);
				while (s.nstack && !s.stack[s.nstack - 1])
					s.nstack--;
				/* an opcode before popped the mark as an item:
				   Python's emulation raises IndexError here */
				if (!s.nstack) {
					/* pickletools has printed "%5d: " */
					if (!o->json)
						fprintf(out, "%5" PRIu64 ": ", pos);
					dis_fail(&s, pos, "list index out of range "
					     "(MARK popped as an item)%s", "");
					goto out;
				}
				s.nstack--;
				if (!op->mark_before)
					npop = 0;
			} else {
				strcpy(markmsg, "no MARK exists on stack");
				dis_fail(&s, pos, "%s", markmsg);
			}
		}
		if (op->code == 'p' || op->code == 'q' || op->code == 'r' ||
		    op->code == 0x94) {
			if (op->code == 0x94) {
				key = s.nmemo;
				snprintf(markmsg, sizeof(markmsg), "(as %zu)",
					 s.nmemo);
			}
			if (memo_has(&s, key))
				dis_fail(&s, pos, "memo key %s already defined",
				     arg.p ? arg.p : "");
			else if (!s.nstack)
				dis_fail(&s, pos, "stack is empty -- can't store "
				     "into memo%s", "");
			else if (s.stack[s.nstack - 1])
				dis_fail(&s, pos, "can't store markobject in the "
				     "memo%s", "");
			else if (!memo_add(&s, key))
				dis_fail(&s, pos, "out of memory%s", "");
		} else if ((op->code == 'g' || op->code == 'h' ||
			    op->code == 'j') && !memo_has(&s, key)) {
			dis_fail(&s, pos, "memo key %s has never been stored into",
			     arg.p ? arg.p : "");
		}
		if (has || markmsg[0]) {
			size_t nl = strlen(op->name);

			sb_printf(&ln, "%*s", nl < 10 ? (int)(10 - nl) : 0, "");
			if (has)
				sb_printf(&ln, " %s", arg.p);
			if (markmsg[0])
				sb_printf(&ln, " %s", markmsg);
		}
		if (annocol) {
			size_t chars = sb_chars(&ln);

			if (annocol > chars)
				sb_printf(&ln, "%*s", (int)(annocol - chars), "");
			annocol = sb_chars(&ln);
			if (annocol > 50)
				annocol = 30;
			sb_printf(&ln, " %s", op->doc);
		}
		if (ln.oom || arg.oom) {
			dis_fail(&s, pos, "out of memory%s", "");
			goto out;
		}
		if (o->json)
			json_op(out, first, pos, op, &arg, has, s.nmarks,
				markmsg[0] ? markmsg : NULL);
		else
			fprintf(out, "%5" PRIu64 ": %s\n", pos, ln.p);
		first = false;
		if (s.err[0])
			goto out;
		/* the stack effect */
		if (s.nstack < npop) {
			snprintf(s.err, sizeof(s.err), "tries to pop %zu items "
				 "from stack with only %zu items", npop,
				 s.nstack);
			s.err_pos = pos;
			goto out;
		}
		s.nstack -= npop;
		if (op->mark_after) {
			if (!grow((void **)&s.marks, &s.capmarks, s.nmarks + 1,
				  sizeof(*s.marks))) {
				dis_fail(&s, pos, "out of memory%s", "");
				goto out;
			}
			s.marks[s.nmarks++] = pos;
		}
		if (!grow((void **)&s.stack, &s.capstack,
			  s.nstack + op->npush + op->mark_after, 1)) {
			dis_fail(&s, pos, "out of memory%s", "");
			goto out;
		}
		for (int k = 0; k < op->npush; k++)
			s.stack[s.nstack++] = 0;
		if (op->mark_after)
			s.stack[s.nstack++] = 1;
		stopped = op->code == '.';
	}
	if (o->json)
		fprintf(out, "\n ],\"highest_protocol\":%d}", maxproto);
	else
		fprintf(out, "highest protocol among opcodes = %d\n", maxproto);
	if (s.nstack) {
		snprintf(s.err, sizeof(s.err), "stack not empty after STOP "
			 "(%zu items)", s.nstack);
		s.err_pos = base + s.pos;
		goto out;
	}
	*end = base + s.pos;
	rc = 0;
out:
	if (rc && o->json && !first)
		fputs("\n ]}", out);
	else if (rc && o->json)
		fputs("]}", out);
	if (rc)
		dump_error(path, s.err_pos + delta, "pickle: %s", s.err);
	free(s.stack);
	free(s.marks);
	free(s.memo);
	free(ln.p);
	free(arg.p);
	return rc;
}

int dump_pickles(FILE *out, const struct dump_opts *o, const char *path,
		 const unsigned char *p, size_t len, uint64_t base, int count,
		 uint64_t file_off)
{
	uint64_t pos = base, end;
	int rc = 0;

	if (o->json) {
		fputs("{\"file\":", out);
		json_cstr(out, path);
		fputs(",\"pickles\":[", out);
	}
	for (int i = 0; i < count && !rc; i++) {
		if (o->json && i)
			fputs(",\n", out);
		rc = dis_one(out, o, p + (pos - base), len - (pos - base), pos,
			     &end, path, file_off - base);
		pos = end;
	}
	if (o->json)
		fputs("]}\n", out);
	return rc;
}
