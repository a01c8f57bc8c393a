/*
 * pkl_int.h - internals of the pickle module, shared by the parser
 * (pkl_parse.c, pkl_object.c, pkl_text.c), the memo (pkl_memo.c) and the
 * value code (pkl_value.c): node chunks owned by a document, growable
 * pointer arrays, the memo table, the parser state and its helpers.
 */
#ifndef PT_PICKLE_PKL_INT_H
#define PT_PICKLE_PKL_INT_H

#ifndef PT_INTERNAL
#error "pkl_int.h is internal to core/pickle; define PT_INTERNAL"
#endif

#include "pkl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

/*
 * Nodes are carved from chunks so that a document is freed by walking the
 * chunks, never the value graph (which may be cyclic or a million deep).
 * doc->chunks is the newest chunk; ->next leads to older ones.
 */
struct pkl_chunk {
	struct pkl_chunk *next;
	uint32_t n, cap;
	uint32_t pop;		/* nodes populated ahead of use (pkl_value.c) */
	struct pkl_value v[];
};

/* A zeroed node of @kind made by the opcode at @off; NULL: out of memory. */
struct pkl_value *pkl_node_new(struct pkl_doc *doc, int kind, uint64_t off);

/* Give call @v its own pkl_call_ext (once).  0 or -ENOMEM. */
int pkl_call_own(struct pkl_value *v);

/*
 * Make room for @need pointers in *@v (capacity *@cap), growing
 * geometrically.  Returns 0 or -ENOMEM (then *@v is unchanged).
 */
int pkl_vec_grow(struct pkl_value ***v, size_t *cap, size_t need);

/*
 * The memo: 32-bit key -> node.  Keys below @dcap sit in a dense array (how
 * Python numbers them: 0, 1, 2 ...); the dense array only grows while it
 * stays proportional to the number of entries, so a hostile key such as
 * 0xffffffff goes to a small open-addressing table instead.
 */
struct pkl_memo {
	struct pkl_value **dense;	/* [dcap], NULL = unset */
	uint32_t dcap;
	uint32_t *keys;			/* sparse table, [hcap] */
	struct pkl_value **vals;	/* NULL = empty slot */
	uint32_t hcap, hcount;
	uint32_t seed;
	uint32_t count;			/* entries in both */
	uint32_t limit;			/* most entries (pkl_op_put() sets
					   it); 0: PKL_MAX_MEMO */
};

/* The node stored under @key, or NULL. */
struct pkl_value *pkl_memo_get(const struct pkl_memo *m, uint32_t key);

/*
 * Store @v under @key (replacing any earlier node).  Returns 0, -ENOMEM, or
 * -E2BIG when a new key would exceed m->limit (or PKL_MAX_MEMO) entries.
 */
int pkl_memo_put(struct pkl_memo *m, uint32_t key, struct pkl_value *v);

/*
 * Grow the dense array to cover @key now if a put of @key would (that is
 * all a put decides by itself).  Returns 0 or -ENOMEM.
 */
int pkl_memo_cover(struct pkl_memo *m, uint32_t key);

/* Free the tables (not the nodes); a zeroed memo is fine. */
void pkl_memo_release(struct pkl_memo *m);

/* Opcodes (Lib/pickletools.py), by protocol. */
enum {
	OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1',
	OP_DUP = '2', OP_FLOAT = 'F', OP_INT = 'I', OP_BININT = 'J',
	OP_BININT1 = 'K', OP_LONG = 'L', OP_BININT2 = 'M', OP_NONE = 'N',
	OP_PERSID = 'P', OP_BINPERSID = 'Q', OP_REDUCE = 'R',
	OP_STRING = 'S', OP_BINSTRING = 'T', OP_SHORT_BINSTRING = 'U',
	OP_UNICODE = 'V', OP_BINUNICODE = 'X', OP_APPEND = 'a',
	OP_BUILD = 'b', OP_GLOBAL = 'c', OP_DICT = 'd', OP_EMPTY_DICT = '}',
	OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h', OP_INST = 'i',
	OP_LONG_BINGET = 'j', OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o',
	OP_PUT = 'p', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r', OP_SETITEM = 's',
	OP_TUPLE = 't', OP_EMPTY_TUPLE = ')', OP_SETITEMS = 'u',
	OP_BINFLOAT = 'G',
	/* protocol 2 */
	OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83,
	OP_EXT4 = 0x84, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87,
	OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b,
	/* protocol 3 */
	OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C',
	/* protocol 4 */
	OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e,
	OP_EMPTY_SET = 0x8f, OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91,
	OP_NEWOBJ_EX = 0x92, OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94,
	OP_FRAME = 0x95,
	/* protocol 5 */
	OP_BYTEARRAY8 = 0x96, OP_NEXT_BUFFER = 0x97, OP_READONLY_BUFFER = 0x98,
};

/*
 * The parser's state.  A MARK opens a frame, as in Lib/pickle.py's
 * metastack: values below the last mark are out of reach of plain pops.
 * Helpers that return a pointer give NULL on failure with ->rc set; the
 * others return 0 or the -errno the diag got.
 */
enum {
	PKL_SHARED_NONE = 256, PKL_SHARED_TRUE, PKL_SHARED_FALSE,
	PKL_SHARED_TUPLE, PKL_SHARED_N
};

struct pkl_parser {
	/*
	 * The input: buf[0..len) is the whole pickle, or with a source
	 * (pkl_parse_src()) a window on it that pkl_fill() moves on;
	 * pointers into it last until the next pkl_fill()
	 */
	const unsigned char *buf;
	size_t len, pos;		/* pos: next byte to consume */
	uint64_t base;			/* file offset of buf[0] */
	uint64_t end;			/* file offset just past the pickle */
	const struct pkl_src *src;	/* NULL: buf is the whole pickle */
	unsigned char *win;		/* with src: buf, owned */
	size_t wcap;			/* its size: window, or more while
					   a longer value is read */
	size_t window;
	size_t look;			/* bytes wanted at each opcode */
	uint64_t off;			/* file offset of this opcode */
	unsigned char op;		/* the current opcode */
	const char *name;		/* and its name */
	struct diag *d;
	struct pkl_doc *doc;
	struct pkl_value **stack;
	size_t n, cap;
	size_t *marks;			/* stack heights at each MARK */
	size_t nmarks, capmarks;
	struct pkl_memo memo;
	/*
	 * Immutable values made often (per tensor: offsets, small sizes,
	 * False, the hooks' empty tuple) share one node per document:
	 * BININT1 0..255, then None, True, False, ().  Saves ~40% of nodes.
	 */
	struct pkl_value *shared[PKL_SHARED_N];
	int rc;
	/* folding (pkl_fold.c) */
	bool fold;			/* PKL_FOLD */
	bool refold;			/* a released value was wanted again */
	uint32_t last_put;		/* the newest memo key */
	struct pkl_fold_kind *kinds[PKL_FOLD_KINDS];	/* in the doc */
	unsigned nkinds, last_kind;
	/* the GLOBALs a fold found to be _rebuild_tensor_v2 and
	   OrderedDict: torch memoizes each once, and folding never
	   releases a GLOBAL, so the same node is the same function */
	struct pkl_value *g_rebuild, *g_odict;
	bool lane;			/* pkl_lane() may run */
	bool scan;			/* PKL_SCAN */
};

/* PKL_SCAN: note what opcode p->op did to @v at p->off.  0 or -ENOMEM. */
int pkl_note(struct pkl_parser *p, const char *what,
	     const struct pkl_value *v);

/* Bottom of the current frame. */
static inline size_t pkl_frame_base(const struct pkl_parser *p)
{
	return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

/* The value @i below the top of the stack (0: the top). */
#define PKL_TOP(p, i) ((p)->stack[(p)->n - 1 - (i)])

/* What a memo entry of a released node holds: a GET of it refolds. */
extern struct pkl_value pkl_gone;

/* pkl_fold.c: fold REDUCE result @v if it is a plain tensor rebuild. */
int pkl_fold_try(struct pkl_parser *p, struct pkl_value *v);

/*
 * The oldest memo key a fold whose newest is @hi looks at for the entries
 * of the values it releases: the newest 32 keys.
 */
static inline uint32_t pkl_fold_window(uint32_t hi)
{
	return hi >= 32 ? hi - 31 : 0;
}

/*
 * The kind for storage class @cls, location @loc and hooks' global
 * @hooks: met before, or new; NULL when the table is full (the call is
 * not folded) or there is no memory (*@rc set).
 */
struct pkl_fold_kind *pkl_fold_kind_of(struct pkl_parser *p,
				       struct pkl_value *cls,
				       const struct pkl_value *loc,
				       struct pkl_value *hooks, int *rc);

/* A struct pkl_fold with room for its dims, on the stack. */
union pkl_fold_room {
	struct pkl_fold f;
	unsigned char b[sizeof(struct pkl_fold) +
			2 * PKL_FOLD_DIMS * sizeof(int64_t)];
};

/* Make @v (a call) folded, with a copy of record @r and its dims. */
int pkl_fold_set(struct pkl_parser *p, struct pkl_value *v,
		 const struct pkl_fold *r);

/*
 * At a BINGET of _rebuild_tensor_v2: the whole call of torch.save's
 * usual form read and folded at once, what the opcodes one by one and
 * pkl_fold_try() would have made (pkl_lane.c).  1: done, p->pos past
 * the call's REDUCE; 0: not that form, nothing changed; or -errno.
 */
int pkl_lane(struct pkl_parser *p);

/* A tuple item array of @k pointers from the document (reused ones
 * first); NULL: out of memory. */
struct pkl_value **pkl_array_new(struct pkl_doc *doc, size_t k);

/* pkl_parse.c: the machine */
int pkl_want(struct pkl_parser *p, size_t k);	/* frame holds @k values */
int pkl_push(struct pkl_parser *p, struct pkl_value *v);
int pkl_pop_mark(struct pkl_parser *p, size_t *base);
struct pkl_value *pkl_mk(struct pkl_parser *p, int kind);
struct pkl_value *pkl_mkpush(struct pkl_parser *p, int kind);
int pkl_push_scalar(struct pkl_parser *p, int kind, int64_t i);
int pkl_push_owned(struct pkl_parser *p, int kind, char *s, size_t n);
int pkl_push_copy(struct pkl_parser *p, int kind, const unsigned char *s,
		  size_t n);
int pkl_fill(struct pkl_parser *p, size_t need);
int pkl_line(struct pkl_parser *p, const unsigned char **s, size_t *n);
int pkl_line2(struct pkl_parser *p, const unsigned char **s1, size_t *n1,
	      const unsigned char **s2, size_t *n2);
char *pkl_dup0(struct pkl_parser *p, const unsigned char *s, size_t n);
int pkl_op_put(struct pkl_parser *p, uint64_t key);
int pkl_op_get(struct pkl_parser *p, uint64_t key);

/* pkl_object.c: opcodes that build containers, globals and calls */
int pkl_op_global(struct pkl_parser *p);
int pkl_op_stack_global(struct pkl_parser *p);
int pkl_op_collect(struct pkl_parser *p, int kind);
int pkl_op_tuple_n(struct pkl_parser *p, size_t k);
int pkl_op_add_top(struct pkl_parser *p, size_t k);
int pkl_op_add_marked(struct pkl_parser *p, bool pairs);
int pkl_op_call(struct pkl_parser *p, int how, size_t k);
int pkl_op_obj(struct pkl_parser *p, bool inst);
int pkl_op_build(struct pkl_parser *p);
int pkl_op_persid(struct pkl_parser *p, bool text);

/* pkl_text.c: protocol 0 text opcodes */
int pkl_op_text_int(struct pkl_parser *p, bool is_long);
int pkl_op_float(struct pkl_parser *p);
int pkl_op_text_str(struct pkl_parser *p, bool is_unicode);
int pkl_op_text_memo(struct pkl_parser *p, bool put);

/*
 * Protocol 0 text arguments, each @s[0..@n) a line without its newline,
 * read as CPython's C unpickler (Modules/_pickle.c) reads it.  Each
 * returns 0, -EILSEQ with *@why set to a short reason where CPython
 * raises, or -ENOMEM.  Out buffers are malloc'd, NUL-terminated, and
 * owned by the caller.
 */

/* How a line is an integer: _pickle.c's load_int, load_long, load_get. */
enum pkl_text_how {
	PKL_TEXT_INT,	/* INT: C strtol(s, &end, 0) when that takes the
			   whole line (so "010" is 8, two characters it reads
			   as 0 or 1 are False and True), else as LONG */
	PKL_TEXT_LONG,	/* LONG: a last 'L' dropped, then
			   PyLong_FromString(s, NULL, 0) */
	PKL_TEXT_KEY,	/* GET, PUT: PyLong_FromString(s, NULL, 10) */
};

struct pkl_text_int {
	int kind;		/* PKL_INT, PKL_BOOL or PKL_BIGINT */
	int64_t i;		/* PKL_INT, PKL_BOOL */
	unsigned char *big;	/* PKL_BIGINT: minimal little-endian two's
				   complement, caller owns */
	size_t nbig;
};

/*
 * An integer argument read @how (enum pkl_text_how), in *@out.  A NUL
 * ends the text; Python's limit of 4300 decimal digits holds, and ptfs's
 * of PKL_MAX_LONG bytes (hex, octal and binary ones have no other).
 * (pkl_textnum.c)
 */
int pkl_text_int(const unsigned char *s, size_t n, int how,
		 struct pkl_text_int *out, const char **why);

/*
 * FLOAT's argument: PyOS_string_to_double() with the end at the NUL or
 * the newline (no whitespace, no underscores, inf and nan spelt as
 * Python does, overflow refused).  (pkl_textnum.c)
 */
int pkl_text_float(const unsigned char *s, size_t n, double *f,
		   const char **why);

/*
 * STRING's argument: a quoted Python 2 str repr, PyBytes_DecodeEscape()
 * of what is between the quotes.
 */
int pkl_text_string(const unsigned char *s, size_t n, char **out,
		    size_t *nout, const char **why);

/* UNICODE's argument: raw-unicode-escape (latin-1, \uXXXX, \UXXXXXXXX). */
int pkl_text_unicode(const unsigned char *s, size_t n, char **out,
		     size_t *nout, const char **why);

/*
 * True if @s[0..@n) is UTF-8; encoded lone surrogates are allowed, as
 * Python's "surrogatepass" does for pickled str.
 */
bool pkl_utf8_valid(const unsigned char *s, size_t n);

/*
 * Mark PKL_STRING @v (STRING, BINSTRING, SHORT_BINSTRING) PKL_S_UTF8 if
 * its bytes decode as torch.load's encoding="utf-8" decodes them: UTF-8
 * without surrogates ("strict").
 */
void pkl_string_mark(struct pkl_value *v);

#endif
