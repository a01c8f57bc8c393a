/*
 * pkl_parse.c - decode one pickle (protocols 0 to 5) into a value graph
 * without executing anything.  One loop over the opcodes with an explicit
 * value stack, mark stack and memo: no recursion, every length checked
 * against the input before anything is allocated, hard limits from pkl.h.
 * Opcodes and argument formats follow CPython's Lib/pickletools.py; stack
 * semantics follow Lib/pickle.py's _Unpickler (a MARK opens a new frame that
 * plain pops cannot cross).  Containers and calls are built in
 * pkl_object.c, protocol 0 text arguments decoded in pkl_text.c.
 */
#ifndef PT_INTERNAL
#define PT_INTERNAL 1
#endif
#include "pkl_int.h"

#include "diag/diag.h"
#include "util/le.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HIGHEST_PROTOCOL 5

static const char *const opnames[256] = {
	[OP_MARK] = "MARK", [OP_STOP] = "STOP", [OP_POP] = "POP",
	[OP_POP_MARK] = "POP_MARK", [OP_DUP] = "DUP", [OP_FLOAT] = "FLOAT",
	[OP_INT] = "INT", [OP_BININT] = "BININT", [OP_BININT1] = "BININT1",
	[OP_LONG] = "LONG", [OP_BININT2] = "BININT2", [OP_NONE] = "NONE",
	[OP_PERSID] = "PERSID", [OP_BINPERSID] = "BINPERSID",
	[OP_REDUCE] = "REDUCE", [OP_STRING] = "STRING",
	[OP_BINSTRING] = "BINSTRING", [OP_SHORT_BINSTRING] = "SHORT_BINSTRING",
	[OP_UNICODE] = "UNICODE", [OP_BINUNICODE] = "BINUNICODE",
	[OP_APPEND] = "APPEND", [OP_BUILD] = "BUILD", [OP_GLOBAL] = "GLOBAL",
	[OP_DICT] = "DICT", [OP_EMPTY_DICT] = "EMPTY_DICT",
	[OP_APPENDS] = "APPENDS", [OP_GET] = "GET", [OP_BINGET] = "BINGET",
	[OP_INST] = "INST", [OP_LONG_BINGET] = "LONG_BINGET",
	[OP_LIST] = "LIST", [OP_EMPTY_LIST] = "EMPTY_LIST", [OP_OBJ] = "OBJ",
	[OP_PUT] = "PUT", [OP_BINPUT] = "BINPUT",
	[OP_LONG_BINPUT] = "LONG_BINPUT", [OP_SETITEM] = "SETITEM",
	[OP_TUPLE] = "TUPLE", [OP_EMPTY_TUPLE] = "EMPTY_TUPLE",
	[OP_SETITEMS] = "SETITEMS", [OP_BINFLOAT] = "BINFLOAT",
	[OP_PROTO] = "PROTO", [OP_NEWOBJ] = "NEWOBJ", [OP_EXT1] = "EXT1",
	[OP_EXT2] = "EXT2", [OP_EXT4] = "EXT4", [OP_TUPLE1] = "TUPLE1",
	[OP_TUPLE2] = "TUPLE2", [OP_TUPLE3] = "TUPLE3",
	[OP_NEWTRUE] = "NEWTRUE", [OP_NEWFALSE] = "NEWFALSE",
	[OP_LONG1] = "LONG1", [OP_LONG4] = "LONG4",
	[OP_BINBYTES] = "BINBYTES", [OP_SHORT_BINBYTES] = "SHORT_BINBYTES",
	[OP_SHORT_BINUNICODE] = "SHORT_BINUNICODE",
	[OP_BINUNICODE8] = "BINUNICODE8", [OP_BINBYTES8] = "BINBYTES8",
	[OP_EMPTY_SET] = "EMPTY_SET", [OP_ADDITEMS] = "ADDITEMS",
	[OP_FROZENSET] = "FROZENSET", [OP_NEWOBJ_EX] = "NEWOBJ_EX",
	[OP_STACK_GLOBAL] = "STACK_GLOBAL", [OP_MEMOIZE] = "MEMOIZE",
	[OP_FRAME] = "FRAME", [OP_BYTEARRAY8] = "BYTEARRAY8",
	[OP_NEXT_BUFFER] = "NEXT_BUFFER",
	[OP_READONLY_BUFFER] = "READONLY_BUFFER",
};

/* Check the current frame holds @k values for the opcode to pop or use. */
int pkl_want(struct pkl_parser *p, size_t k)
{
	if (p->n - pkl_frame_base(p) < k)
		return diag_corrupt(p->d, p->off, "stack underflow in %s",
				    p->name);
	return 0;
}

int pkl_push(struct pkl_parser *p, struct pkl_value *v)
{
	if (p->n == p->cap) {
		size_t ncap = 2 * p->cap;
		struct pkl_value **ns;

		if (p->n >= PKL_MAX_STACK)
			return diag_corrupt(p->d, p->off, "stack deeper "
					    "than PKL_MAX_STACK (%u)",
					    PKL_MAX_STACK);
		if (ncap > PKL_MAX_STACK)
			ncap = PKL_MAX_STACK;
		ns = realloc(p->stack, ncap * sizeof(*ns));
		if (!ns)
			return diag_nomem(p->d);
		p->stack = ns;
		p->cap = ncap;
	}
	p->stack[p->n++] = v;
	return 0;
}

/* A new node of @kind for the current opcode; NULL with p->rc set. */
struct pkl_value *pkl_mk(struct pkl_parser *p, int kind)
{
	struct pkl_value *v;

	if (p->doc->nnodes >= PKL_MAX_NODES) {
		p->rc = diag_corrupt(p->d, p->off,
				     "more than PKL_MAX_NODES (%u) values",
				     PKL_MAX_NODES);
		return NULL;
	}
	v = pkl_node_new(p->doc, kind, p->off);
	if (!v)
		p->rc = diag_nomem(p->d);
	return v;
}

struct pkl_value *pkl_mkpush(struct pkl_parser *p, int kind)
{
	struct pkl_value *v = pkl_mk(p, kind);

	if (v) {
		p->rc = pkl_push(p, v);
		if (p->rc < 0)
			return NULL;
	}
	return v;
}

/*
 * Have @need bytes from p->pos in the window, or all that is left of the
 * pickle: the unread bytes move to the front and more are read after
 * them, into a window of @need bytes if that is more than p->window (and
 * back to p->window after).  Pointers into the window taken before the
 * call are stale after it.  Nothing to do for a pickle given whole.
 * 0 or -errno with p->rc set.
 */
int pkl_fill(struct pkl_parser *p, size_t need)
{
	uint64_t left = p->end - (p->base + p->len);	/* not read yet */
	size_t have = p->len - p->pos, size, n;
	int rc;

	if (have >= need || !left)
		return 0;
	memmove(p->win, p->win + p->pos, have);
	p->buf = p->win;
	p->base += p->pos;
	p->pos = 0;
	p->len = have;
	size = need > p->window ? need : p->window;
	if (size != p->wcap) {
		unsigned char *w = realloc(p->win, size);

		if (!w)
			return p->rc = diag_nomem(p->d);
		p->buf = p->win = w;
		p->wcap = size;
	}
	n = p->wcap - have;
	if (n > left)
		n = (size_t)left;
	rc = p->src->read(p->src->ctx, p->win + have, n, p->base + have,
			  p->d);
	if (rc < 0)
		return p->rc = rc;
	p->len = have + n;
	return 0;
}

/* Bytes of the pickle from p->pos on, read or not. */
static uint64_t unread(const struct pkl_parser *p)
{
	return p->end - (p->base + p->pos);
}

/* Consume @k argument bytes of the current opcode; NULL with p->rc set. */
static const unsigned char *arg(struct pkl_parser *p, size_t k)
{
	const unsigned char *a;

	if (p->len - p->pos < k && pkl_fill(p, k) < 0)
		return NULL;
	if (p->len - p->pos < k) {
		p->rc = diag_corrupt(p->d, p->off,
				     "%s argument past end of pickle", p->name);
		return NULL;
	}
	a = p->buf + p->pos;
	p->pos += k;
	return a;
}

/* Consume a counted payload; its length came from the input. */
static const unsigned char *payload(struct pkl_parser *p, uint64_t k)
{
	const unsigned char *a;

	if (k > unread(p)) {
		p->rc = diag_corrupt(p->d, p->off,
				     "%s length %" PRIu64 " past end of pickle",
				     p->name, k);
		return NULL;
	}
	if (pkl_fill(p, (size_t)k) < 0)
		return NULL;
	a = p->buf + p->pos;
	p->pos += (size_t)k;
	return a;
}

/*
 * Have @k line ends in the window from p->pos, reading on as needed: 1,
 * 0 when the pickle ends first, or -errno.
 */
static int have_lines(struct pkl_parser *p, int k)
{
	for (;;) {
		const unsigned char *a = p->buf + p->pos;
		const unsigned char *e = p->buf + p->len, *nl;
		size_t have = p->len - p->pos;
		int got = 0, rc;

		for (; got < k && (nl = memchr(a, '\n', (size_t)(e - a)));
		     got++)
			a = nl + 1;
		if (got == k)
			return 1;
		if (p->base + p->len == p->end)
			return 0;
		rc = pkl_fill(p, have + (have > p->look ? have : p->look));
		if (rc < 0)
			return rc;
	}
}

/* Consume a protocol 0 text argument up to its newline (not included). */
int pkl_line(struct pkl_parser *p, const unsigned char **s, size_t *n)
{
	const unsigned char *a;
	int rc = have_lines(p, 1);

	if (rc < 0)
		return rc;
	if (!rc)
		return diag_corrupt(p->d, p->off,
				    "%s argument has no end of line", p->name);
	a = p->buf + p->pos;
	*s = a;
	*n = (size_t)((const unsigned char *)memchr(a, '\n',
						    p->len - p->pos) - a);
	p->pos += *n + 1;
	return 0;
}

/* Two pkl_line()s whose results are both valid after the second. */
int pkl_line2(struct pkl_parser *p, const unsigned char **s1, size_t *n1,
	      const unsigned char **s2, size_t *n2)
{
	int rc = have_lines(p, 2);

	if (rc < 0)
		return rc;
	rc = pkl_line(p, s1, n1);
	return rc ? rc : pkl_line(p, s2, n2);
}

char *pkl_dup0(struct pkl_parser *p, const unsigned char *s, size_t n)
{
	return arena_strndup(&p->doc->arena, (const char *)s, n);
}

/* Push a str/bytes-like node of @s (malloc'd, NUL-ended; freed here). */
int pkl_push_owned(struct pkl_parser *p, int kind, char *s, size_t n)
{
	int rc = pkl_push_copy(p, kind, (const unsigned char *)s, n);

	free(s);
	return rc;
}

/* Push a str/bytes-like node holding a copy of @s[0..@n) (in the arena). */
int pkl_push_copy(struct pkl_parser *p, int kind, const unsigned char *s,
		  size_t n)
{
	char *c = pkl_dup0(p, s, n);
	struct pkl_value *v;

	if (!c)
		return diag_nomem(p->d);
	v = pkl_mkpush(p, kind);
	if (!v)
		return p->rc;
	v->u.s.p = c;
	v->u.s.n = n;
	return 0;
}

/* Push the document's one node for an immutable value (see shared[]). */
static int push_shared(struct pkl_parser *p, unsigned idx, int kind,
		       int64_t i)
{
	struct pkl_value *v = p->shared[idx];

	if (v)
		return pkl_push(p, v);
	v = pkl_mkpush(p, kind);
	if (!v)
		return p->rc;
	v->u.i = i;
	p->shared[idx] = v;
	return 0;
}

int pkl_push_scalar(struct pkl_parser *p, int kind, int64_t i)
{
	struct pkl_value *v = pkl_mkpush(p, kind);

	if (!v)
		return p->rc;
	v->u.i = i;
	return 0;
}

/* LONG1/LONG4 payload: little-endian two's complement, @k bytes. */
static int push_long(struct pkl_parser *p, const unsigned char *b, size_t k)
{
	size_t m = k;
	uint64_t u = 0;
	int64_t i;

	/* A non-minimal encoding may carry redundant sign bytes. */
	while (m > 1 && ((b[m - 1] == 0 && !(b[m - 2] & 0x80)) ||
			 (b[m - 1] == 0xff && (b[m - 2] & 0x80))))
		m--;
	if (m > 8)
		return pkl_push_copy(p, PKL_BIGINT, b, k);
	for (size_t j = m; j-- > 0;)
		u = u << 8 | b[j];
	if (m && m < 8 && (b[m - 1] & 0x80))
		u |= UINT64_MAX << (8 * m);
	memcpy(&i, &u, sizeof(i));
	return pkl_push_scalar(p, PKL_INT, i);
}

/* Length-prefixed str/bytes: @lb length bytes, signed for BINSTRING. */
static int op_counted(struct pkl_parser *p, size_t lb, int kind)
{
	const unsigned char *a = arg(p, lb), *s;
	uint64_t k;
	int rc;

	if (!a)
		return p->rc;
	k = lb == 1 ? a[0] : lb == 4 ? le32(a) : le64(a);
	if (p->op == OP_BINSTRING && k > INT32_MAX)
		return diag_corrupt(p->d, p->off, "BINSTRING length %" PRId32
				    " is negative", (int32_t)k);
	s = payload(p, k);
	if (!s)
		return p->rc;
	if (kind == PKL_STR && !pkl_utf8_valid(s, (size_t)k))
		return diag_corrupt(p->d, p->off, "%s is not UTF-8", p->name);
	rc = pkl_push_copy(p, kind, s, (size_t)k);
	if (!rc && kind == PKL_STRING)
		pkl_string_mark(PKL_TOP(p, 0));
	return rc;
}

/* LONG4: a signed 4-byte length, then the bytes (at most PKL_MAX_LONG). */
static int op_long4(struct pkl_parser *p)
{
	const unsigned char *a = arg(p, 4), *s;
	uint32_t k;

	if (!a)
		return p->rc;
	k = le32(a);
	if (k > INT32_MAX)
		return diag_corrupt(p->d, p->off, "LONG4 length %" PRId32
				    " is negative", (int32_t)k);
	s = payload(p, k);
	if (!s)
		return p->rc;
	if (k > PKL_MAX_LONG)
		return diag_corrupt(p->d, p->off, "LONG4 of %" PRIu32
				    " bytes is over PKL_MAX_LONG (%u)", k,
				    PKL_MAX_LONG);
	return push_long(p, s, k);
}

int pkl_pop_mark(struct pkl_parser *p, size_t *base)
{
	if (!p->nmarks)
		return diag_corrupt(p->d, p->off, "%s without a MARK",
				    p->name);
	*base = p->marks[--p->nmarks];
	return 0;
}

static int op_mark(struct pkl_parser *p)
{
	if (p->nmarks == p->capmarks) {
		size_t ncap = p->capmarks ? 2 * p->capmarks : 16;
		size_t *nm;

		if (p->nmarks >= PKL_MAX_MARKS)
			return diag_corrupt(p->d, p->off, "more than "
					    "PKL_MAX_MARKS (%u) nested marks",
					    PKL_MAX_MARKS);
		nm = realloc(p->marks, ncap * sizeof(*nm));
		if (!nm)
			return diag_nomem(p->d);
		p->marks = nm;
		p->capmarks = ncap;
	}
	p->marks[p->nmarks++] = p->n;
	return 0;
}

int pkl_op_put(struct pkl_parser *p, uint64_t key)
{
	int rc = pkl_want(p, 1);

	if (rc < 0)
		return rc;
	if (key > UINT32_MAX)
		return diag_corrupt(p->d, p->off, "%s memo key %" PRIu64
				    " out of range", p->name, key);
	/* the memo may grow with the values (nnodes <= PKL_MAX_NODES) */
	p->memo.limit = PKL_MAX_MEMO + p->doc->nnodes;
	rc = pkl_memo_put(&p->memo, (uint32_t)key, PKL_TOP(p, 0));
	if (!rc && (PKL_TOP(p, 0)->refs & PKL_R_MEMO) != PKL_R_MEMO)
		PKL_TOP(p, 0)->refs++;
	p->last_put = (uint32_t)key;
	if (rc == -E2BIG)
		return diag_corrupt(p->d, p->off, "memo holds more than %u "
				    "entries (PKL_MAX_MEMO plus one per "
				    "value)", p->memo.limit);
	if (rc < 0)
		return diag_nomem(p->d);
	return 0;
}

int pkl_op_get(struct pkl_parser *p, uint64_t key)
{
	struct pkl_value *v = NULL;

	if (key <= UINT32_MAX)
		v = pkl_memo_get(&p->memo, (uint32_t)key);
	if (!v)
		return diag_corrupt(p->d, p->off, "%s of unset memo key %"
				    PRIu64, p->name, key);
	if (v == &pkl_gone) {	/* folded away: parse again, unfolded */
		p->refold = true;
		return -EAGAIN;
	}
	v->refs |= PKL_R_AGAIN;
	return pkl_push(p, v);
}

static int op_proto(struct pkl_parser *p)
{
	const unsigned char *a = arg(p, 1);

	if (!a)
		return p->rc;
	if (a[0] > HIGHEST_PROTOCOL)
		return diag_unsupported(p->d, p->off,
					"pickle protocol %u", a[0]);
	p->doc->proto = a[0];
	return 0;
}

static int op_frame(struct pkl_parser *p)
{
	const unsigned char *a = arg(p, 8);
	uint64_t k;

	if (!a)
		return p->rc;
	k = le64(a);
	/* Only validated: the frame's opcodes follow and are read as usual. */
	if (k > unread(p))
		return diag_corrupt(p->d, p->off, "FRAME length %" PRIu64
				    " past end of pickle", k);
	return 0;
}

static int op_ext(struct pkl_parser *p, size_t lb)
{
	const unsigned char *a = arg(p, lb);
	int64_t code;

	if (!a)
		return p->rc;
	code = lb == 1 ? a[0] : lb == 2 ? le16(a) : (int32_t)le32(a);
	if (code <= 0)
		return diag_corrupt(p->d, p->off, "%s code %" PRId64
				    " is not positive", p->name, code);
	return pkl_push_scalar(p, PKL_EXT, code);
}

static int op_binint(struct pkl_parser *p, size_t lb)
{
	const unsigned char *a = arg(p, lb);

	if (!a)
		return p->rc;
	if (lb == 1)
		return push_shared(p, a[0], PKL_INT, a[0]);
	if (lb == 2)
		return pkl_push_scalar(p, PKL_INT, le16(a));
	return pkl_push_scalar(p, PKL_INT, (int32_t)le32(a));
}

static int op_binfloat(struct pkl_parser *p)
{
	const unsigned char *a = arg(p, 8);
	struct pkl_value *v;
	uint64_t u;

	if (!a)
		return p->rc;
	u = be64(a);
	v = pkl_mkpush(p, PKL_FLOAT);
	if (!v)
		return p->rc;
	memcpy(&v->u.f, &u, sizeof(u));
	return 0;
}

static int op_pop(struct pkl_parser *p)
{
	if (p->n > pkl_frame_base(p))
		p->n--;
	else if (p->nmarks)
		/* As pickle.py does: POP on an empty frame drops its mark. */
		p->nmarks--;
	else
		return pkl_want(p, 1);
	return 0;
}

static int op_pop_mark(struct pkl_parser *p)
{
	size_t base = 0;
	int rc = pkl_pop_mark(p, &base);

	if (rc < 0)
		return rc;
	p->n = base;
	return 0;
}

static int op_memo_bin(struct pkl_parser *p, size_t lb, bool put)
{
	const unsigned char *a = arg(p, lb);
	uint32_t key;

	if (!a)
		return p->rc;
	key = lb == 1 ? a[0] : le32(a);
	return put ? pkl_op_put(p, key) : pkl_op_get(p, key);
}

static int op_dup(struct pkl_parser *p)
{
	int rc = pkl_want(p, 1);

	if (rc < 0)
		return rc;
	PKL_TOP(p, 0)->refs |= PKL_R_AGAIN;
	return pkl_push(p, PKL_TOP(p, 0));
}

static int op_long1(struct pkl_parser *p)
{
	const unsigned char *a = arg(p, 1), *s;
	size_t k;

	if (!a)
		return p->rc;
	k = a[0];	/* payload() may move the window */
	s = payload(p, k);
	return s ? push_long(p, s, k) : p->rc;
}

static int step(struct pkl_parser *p)
{
	switch (p->op) {
	case OP_MARK: return op_mark(p);
	case OP_POP: return op_pop(p);
	case OP_POP_MARK: return op_pop_mark(p);
	case OP_DUP: return op_dup(p);
	case OP_FLOAT: return pkl_op_float(p);
	case OP_INT: return pkl_op_text_int(p, false);
	case OP_LONG: return pkl_op_text_int(p, true);
	case OP_BININT: return op_binint(p, 4);
	case OP_BININT1: return op_binint(p, 1);
	case OP_BININT2: return op_binint(p, 2);
	case OP_NONE: return push_shared(p, PKL_SHARED_NONE, PKL_NONE, 0);
	case OP_NEWTRUE: return push_shared(p, PKL_SHARED_TRUE, PKL_BOOL, 1);
	case OP_NEWFALSE: return push_shared(p, PKL_SHARED_FALSE, PKL_BOOL, 0);
	case OP_PERSID: return pkl_op_persid(p, true);
	case OP_BINPERSID: return pkl_op_persid(p, false);
	case OP_REDUCE: return pkl_op_call(p, PKL_REDUCE, 2);
	case OP_NEWOBJ: return pkl_op_call(p, PKL_NEWOBJ, 2);
	case OP_NEWOBJ_EX: return pkl_op_call(p, PKL_NEWOBJ_EX, 3);
	case OP_OBJ: return pkl_op_obj(p, false);
	case OP_INST: return pkl_op_obj(p, true);
	case OP_BUILD: return pkl_op_build(p);
	case OP_STRING: return pkl_op_text_str(p, false);
	case OP_UNICODE: return pkl_op_text_str(p, true);
	case OP_BINSTRING: return op_counted(p, 4, PKL_STRING);
	case OP_SHORT_BINSTRING: return op_counted(p, 1, PKL_STRING);
	case OP_BINUNICODE: return op_counted(p, 4, PKL_STR);
	case OP_SHORT_BINUNICODE: return op_counted(p, 1, PKL_STR);
	case OP_BINUNICODE8: return op_counted(p, 8, PKL_STR);
	case OP_BINBYTES: return op_counted(p, 4, PKL_BYTES);
	case OP_SHORT_BINBYTES: return op_counted(p, 1, PKL_BYTES);
	case OP_BINBYTES8: return op_counted(p, 8, PKL_BYTES);
	case OP_BYTEARRAY8: return op_counted(p, 8, PKL_BYTES);
	case OP_BINFLOAT: return op_binfloat(p);
	case OP_LONG1: return op_long1(p);
	case OP_LONG4: return op_long4(p);
	case OP_GLOBAL: return pkl_op_global(p);
	case OP_STACK_GLOBAL: return pkl_op_stack_global(p);
	case OP_EMPTY_TUPLE:
		return push_shared(p, PKL_SHARED_TUPLE, PKL_TUPLE, 0);
	case OP_EMPTY_LIST: return pkl_mkpush(p, PKL_LIST) ? 0 : p->rc;
	case OP_EMPTY_DICT: return pkl_mkpush(p, PKL_DICT) ? 0 : p->rc;
	case OP_EMPTY_SET: return pkl_mkpush(p, PKL_SET) ? 0 : p->rc;
	case OP_TUPLE: return pkl_op_collect(p, PKL_TUPLE);
	case OP_LIST: return pkl_op_collect(p, PKL_LIST);
	case OP_DICT: return pkl_op_collect(p, PKL_DICT);
	case OP_FROZENSET: return pkl_op_collect(p, PKL_FROZENSET);
	case OP_TUPLE1: return pkl_op_tuple_n(p, 1);
	case OP_TUPLE2: return pkl_op_tuple_n(p, 2);
	case OP_TUPLE3: return pkl_op_tuple_n(p, 3);
	case OP_APPEND: return pkl_op_add_top(p, 1);
	case OP_SETITEM: return pkl_op_add_top(p, 2);
	case OP_APPENDS: return pkl_op_add_marked(p, false);
	case OP_ADDITEMS: return pkl_op_add_marked(p, false);
	case OP_SETITEMS: return pkl_op_add_marked(p, true);
	case OP_BINPUT: return op_memo_bin(p, 1, true);
	case OP_LONG_BINPUT: return op_memo_bin(p, 4, true);
	case OP_BINGET: return op_memo_bin(p, 1, false);
	case OP_LONG_BINGET: return op_memo_bin(p, 4, false);
	case OP_PUT: return pkl_op_text_memo(p, true);
	case OP_GET: return pkl_op_text_memo(p, false);
	case OP_MEMOIZE: return pkl_op_put(p, p->memo.count);
	case OP_PROTO: return op_proto(p);
	case OP_FRAME: return op_frame(p);
	case OP_EXT1: return op_ext(p, 1);
	case OP_EXT2: return op_ext(p, 2);
	case OP_EXT4: return op_ext(p, 4);
	case OP_NEXT_BUFFER: return pkl_mkpush(p, PKL_BUFFER) ? 0 : p->rc;
	case OP_READONLY_BUFFER: return pkl_want(p, 1);
	default:
		return diag_corrupt(p->d, p->off,
				    "unknown pickle opcode 0x%02x", p->op);
	}
}

static int run(struct pkl_parser *p)
{
	int rc;

	for (;;) {
		if (p->len - p->pos < p->look && (rc = pkl_fill(p, p->look)))
			return rc;
		if (p->pos >= p->len)
			break;
		p->op = p->buf[p->pos];
		p->off = p->base + p->pos++;
		p->name = opnames[p->op];
		if (p->op == OP_STOP) {
			rc = pkl_want(p, 1);
			if (rc < 0)
				return rc;
			p->doc->root = PKL_TOP(p, 0);
			p->doc->end = p->base + p->pos;
			return 0;
		}
		if (p->lane && (p->op == OP_BINGET ||
				p->op == OP_LONG_BINGET)) {
			rc = pkl_lane(p);
			if (rc < 0)
				return rc;
			if (rc)
				continue;
		}
		rc = step(p);
		if (rc < 0)
			return rc;
	}
	return diag_corrupt(p->d, p->end, "pickle ends without STOP");
}

/* Bytes the parser wants in the window at each opcode: a lane's call. */
#define LOOKAHEAD	4096u

/* The @len bytes of @buf, or with @src (then @buf is NULL) read from it. */
static int parse(const unsigned char *buf, uint64_t len, uint64_t base_off,
		 const struct pkl_src *src, unsigned flags,
		 struct pkl_doc **out, struct diag *d)
{
	size_t window = src && src->window ? src->window : PKL_WINDOW;
	struct pkl_parser p = {
		.buf = buf, .len = src ? 0 : (size_t)len, .base = base_off,
		.end = base_off + len, .src = src, .d = d,
		.wcap = src ? window : 0, .window = window,
		.look = window < LOOKAHEAD ? window : LOOKAHEAD,
		.fold = flags & PKL_FOLD,
		.lane = (flags & PKL_FOLD) && !(flags & PKL_FOLD_SLOW),
		.scan = flags & PKL_SCAN,
	};
	int rc;

	*out = NULL;
	p.doc = calloc(1, sizeof(*p.doc));
	/* Never NULL, so that p->stack + base is always defined. */
	p.cap = 64;
	p.stack = malloc(p.cap * sizeof(*p.stack));
	if (src)
		p.buf = p.win = malloc(p.wcap);
	if (!p.doc || !p.stack || (src && !p.win)) {
		free(p.win);
		free(p.stack);
		free(p.doc);
		return diag_nomem(d);
	}
	rc = run(&p);
	free(p.win);
	free(p.stack);
	free(p.marks);
	pkl_memo_release(&p.memo);
	if (rc < 0 && p.scan && !p.refold) {
		/* what came before the failure is what torch.load met */
		p.doc->root = NULL;
		p.doc->failed = true;
		p.doc->failed_at = d && d->off != DIAG_NO_OFFSET ? d->off :
				   p.off;
		*out = p.doc;
		return rc;
	}
	if (rc < 0) {
		pkl_doc_free(p.doc);
		return p.refold ? 1 : rc;
	}
	*out = p.doc;
	return 0;
}

int pkl_note(struct pkl_parser *p, const char *what,
	     const struct pkl_value *v)
{
	struct pkl_doc *doc = p->doc;

	if (doc->nnotes < PKL_MAX_NOTES) {
		if (!doc->notes) {
			doc->notes = malloc(PKL_MAX_NOTES *
					    sizeof(*doc->notes));
			if (!doc->notes)
				return diag_nomem(p->d);
		}
		doc->notes[doc->nnotes] = (struct pkl_note){ p->off, what, v };
	}
	if (doc->nnotes < UINT32_MAX)
		doc->nnotes++;
	return 0;
}

/* parse(), and again unfolded if a released value was wanted */
static int parse_folding(const unsigned char *buf, uint64_t len,
			 uint64_t base_off, const struct pkl_src *src,
			 unsigned flags, struct pkl_doc **out,
			 struct diag *d)
{
	int rc = parse(buf, len, base_off, src, flags, out, d);

	if (rc == 1)
		rc = parse(buf, len, base_off, src, 0, out, d);
	return rc;
}

int pkl_parse_with(const unsigned char *buf, size_t len, uint64_t base_off,
		   unsigned flags, struct pkl_doc **out, struct diag *d)
{
	return parse_folding(buf, len, base_off, NULL, flags, out, d);
}

int pkl_parse_src(const struct pkl_src *src, uint64_t base_off,
		  uint64_t len, unsigned flags, struct pkl_doc **out,
		  struct diag *d)
{
	return parse_folding(NULL, len, base_off, src, flags, out, d);
}

int pkl_parse(const unsigned char *buf, size_t len, uint64_t base_off,
	      struct pkl_doc **out, struct diag *d)
{
	return pkl_parse_with(buf, len, base_off, 0, out, d);
}
