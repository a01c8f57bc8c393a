/*
 * pkl.h - a restricted pickle parser: every opcode of protocols 0 to 5
 * decodes into a value graph, and nothing is ever executed.  Globals stay
 * symbolic (module + name), calls stay symbolic (callable + arguments, plus
 * the state BUILD gave them and the items SETITEM(S)/APPEND(S) added).
 *
 * Memo references keep identity: BINGET returns the very node BINPUT stored,
 * so two dict entries can be one tensor and a list can contain itself.  The
 * result is therefore a graph, not a tree; all nodes live in one document and
 * are freed together (pkl_doc_free()).  Walkers must bound their depth and
 * guard against cycles.
 *
 * Reference: Python's Lib/pickletools.py (opcode table), Lib/pickle.py.
 */
#ifndef PT_PICKLE_PKL_H
#define PT_PICKLE_PKL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"

struct diag;

/* Hard limits; exceeding any is a corrupt-input error with its offset. */
#define PKL_MAX_STACK	(1u << 22)	/* values on the stack */
#define PKL_MAX_MARKS	4096u		/* nested MARKs */
#define PKL_MAX_MEMO	(1u << 22)	/* memo entries beyond one per node:
					   torch memoizes ~8 per tensor, so
					   the memo grows with the nodes and
					   its 8 bytes an entry stay below
					   their 40 (PKL_MAX_NODES bounds
					   both); only MEMOIZE spam of one
					   value meets this */
#define PKL_MAX_ITEMS	(1u << 26)	/* elements of one container */
#define PKL_MAX_NODES	(1u << 26)	/* nodes in one document */
#define PKL_MAX_LONG	(1u << 16)	/* bytes of one LONG1/LONG4/LONG */

enum pkl_kind {
	PKL_NONE,
	PKL_BOOL,	/* .i is 0 or 1 */
	PKL_INT,	/* .i, fits int64 */
	PKL_BIGINT,	/* .s: little-endian two's complement bytes */
	PKL_FLOAT,	/* .f */
	PKL_STR,	/* .s: UTF-8 (unicode opcodes) */
	PKL_BYTES,	/* .s: BINBYTES, SHORT_BINBYTES, BYTEARRAY8 */
	PKL_STRING,	/* .s: protocol 0-2 STRING/BINSTRING (py2 str);
			   .how: PKL_S_UTF8 */
	PKL_TUPLE,	/* .items */
	PKL_LIST,	/* .items */
	PKL_DICT,	/* .items holds key, value, key, value, ... */
	PKL_SET,	/* .items */
	PKL_FROZENSET,	/* .items */
	PKL_GLOBAL,	/* .global: GLOBAL / STACK_GLOBAL / INST's class */
	PKL_CALL,	/* .call: REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST */
	PKL_PERSID,	/* .call.args: the persistent id (BINPERSID/PERSID) */
	PKL_EXT,	/* .i: EXT1/2/4 extension code (registry unknown) */
	PKL_BUFFER,	/* NEXT_BUFFER: out-of-band buffer, no data here */
	PKL_FOLDED,	/* .fold: a PKL_CALL of torch.save's plain tensor
			   rebuild, its arguments folded (PKL_FOLD) */
};

/* A PKL_GLOBAL's .how: its module and name as written, or computed. */
#define PKL_G_COMPUTED	1	/* STACK_GLOBAL of values other than two
				   strings (a call's result, say): what
				   torch.load imports is known only once
				   it runs; module and name are "?" where
				   they were not literal (PKL_SCAN only) */

/* How a PKL_CALL came about (the argument layout differs). */
enum pkl_call_how {
	PKL_REDUCE,	/* func(*args) */
	PKL_NEWOBJ,	/* cls.__new__(cls, *args) */
	PKL_NEWOBJ_EX,	/* cls.__new__(cls, *args, **kwargs) */
	PKL_OBJ,	/* OBJ / INST: cls(*args) */
};

/*
 * What a PKL_CALL gathers after it is made: BUILD's state, the items that
 * APPEND(S)/SETITEM(S)/ADDITEMS added, NEWOBJ_EX's kwargs.  Few calls get
 * any, so only those that do have one (pkl_call_own()): it takes the
 * node's args pointer with it, which keeps a node at 32 bytes.  Read it
 * with pkl_call_x() (the shared, empty pkl_no_ext when there is none) and
 * the arguments with pkl_call_args().
 */
struct pkl_call_ext {
	struct pkl_value *args;		/* the call's arguments */
	struct pkl_value *kwargs;	/* NEWOBJ_EX, else NULL */
	struct pkl_value *state;	/* BUILD's argument, or NULL */
	struct pkl_value **list;	/* list items */
	uint32_t nlist, caplist;	/* <= PKL_MAX_ITEMS */
	struct pkl_value **dict;	/* key, value, key, value ... */
	uint32_t ndict, capdict;
};

extern struct pkl_call_ext pkl_no_ext;

/* 32 bytes: a state dict's graph holds three a tensor, an object's many. */
struct pkl_value {
	uint8_t kind;		/* enum pkl_kind */
	uint8_t how;		/* enum pkl_call_how, for PKL_CALL;
				   PKL_G_*, for PKL_GLOBAL */
	uint8_t refs;		/* PKL_R_*, set by the parser */
	bool has_x;		/* PKL_CALL/PERSID: u.call.ax is .x */
	uint32_t id;		/* creation order, unique within the doc */
	uint64_t off;		/* pickle offset of the opcode that made it */
	union {
		int64_t i;
		double f;
		struct {
			char *p;	/* NUL-terminated (may hold NULs) */
			size_t n;
		} s;
		struct {
			struct pkl_value **v;
			uint32_t n, cap;	/* <= PKL_MAX_ITEMS */
		} items;
		struct {
			char *module;	/* NUL-terminated */
			char *name;
		} global;
		struct {
			struct pkl_value *func;	/* callable or class */
			/* read through pkl_call_args(), pkl_call_x() */
			union {
				/* a PKL_TUPLE (or any for PERSID) */
				struct pkl_value *args;
				struct pkl_call_ext *x;	/* has_x */
			} ax;
		} call;
		struct {	/* laid out as .call, without an ext */
			struct pkl_value *func;	/* _rebuild_tensor_v2 */
			struct pkl_fold *rec;
		} fold;
	} u;
};

_Static_assert(PKL_MAX_ITEMS <= UINT32_MAX, "item counts are 32-bit");

/* A call's arguments. */
static inline struct pkl_value *pkl_call_args(const struct pkl_value *v)
{
	return v->has_x ? v->u.call.ax.x->args : v->u.call.ax.args;
}

/* What a call gathered after it was made; &pkl_no_ext (empty) if none. */
static inline struct pkl_call_ext *pkl_call_x(const struct pkl_value *v)
{
	return v->has_x ? v->u.call.ax.x : &pkl_no_ext;
}

/* Set call @v's arguments. */
static inline void pkl_call_set_args(struct pkl_value *v,
				     struct pkl_value *args)
{
	if (v->has_x)
		v->u.call.ax.x->args = args;
	else
		v->u.call.ax.args = args;
}

/*
 * pkl_value.refs: how many memo entries hold the node (saturating), and
 * whether it was pushed again (GET, DUP), i.e. may be referred to from
 * more than the one place it was put.  Folding releases only nodes whose
 * every reference it can account for; the model builder remembers only
 * what it may meet twice.
 */
#define PKL_R_MEMO	3u	/* mask: memo entries, 3 = 3 or more */
#define PKL_R_AGAIN	4u
#define PKL_R_FOLD	8u	/* pkl_fold.c: about to be released */

/* Can the graph reach @v from more than one place? */
static inline bool pkl_shared(const struct pkl_value *v)
{
	return v->refs & PKL_R_AGAIN;
}

/*
 * A PKL_STRING's .how: PKL_S_UTF8 when its bytes are UTF-8 without
 * surrogates, so that torch.load, which unpickles with encoding="utf-8",
 * makes a str of it (one STACK_GLOBAL takes as a name, say); without it,
 * torch.load fails there with a UnicodeDecodeError.
 */
#define PKL_S_UTF8	1u

/* Is @v a str once torch.load has read it? */
static inline bool pkl_loads_as_str(const struct pkl_value *v)
{
	return v->kind == PKL_STR ||
	       (v->kind == PKL_STRING && (v->how & PKL_S_UTF8));
}

/*
 * What is left of a folded call (see PKL_FOLD below):
 *
 *   _rebuild_tensor_v2(PERSID(('storage', cls, key, loc, numel)),
 *                      offset, (size...), (stride...), requires_grad,
 *                      collections.OrderedDict())
 *
 * The str and global nodes stay in the graph; the tuples, the persistent
 * id, the hooks' call and the ints are released for the next tensor's.
 * What most calls share (storage class, location, the hooks' global) is
 * kept once per document, as a kind: a record is 40 bytes and 16 a
 * dimension.
 */
#define PKL_FOLD_DIMS	8	/* more dimensions are not folded */
#define PKL_FOLD_KINDS	64	/* calls of more kinds are not folded */

struct pkl_fold_kind {
	struct pkl_value *cls;		/* GLOBAL: the storage class */
	struct pkl_value *hooks;	/* GLOBAL collections.OrderedDict */
	char *loc;			/* the location's bytes (a STR's) */
	size_t loc_n;
};

struct pkl_fold {
	const struct pkl_fold_kind *kind;
	struct pkl_value *key;		/* STR: storage key */
	int64_t numel, offset;
	uint32_t pid_back;	/* the call's offset - the BINPERSID's */
	uint8_t ndim;
	bool requires_grad;
	int64_t dims[];			/* size[ndim], then stride[ndim] */
};

/*
 * The arguments of folded call @v made again, in @fv, as plain nodes (ids
 * UINT32_MAX but the call's; the location too, since the calls of a kind
 * share its bytes): read-only walkers see what an unfolded parse made.
 * Returns the call to walk instead of @v (@v itself when it is not
 * PKL_FOLDED).  Nothing of @fv may be kept past its life.
 */
struct pkl_fold_view {
	struct pkl_value call, args, pid, pidt, tag, loc, size, stride, hooks;
	struct pkl_value empty, rg, off, numel, ints[2 * PKL_FOLD_DIMS];
	struct pkl_value *a[6], *t[5], *dims[2 * PKL_FOLD_DIMS];
};

const struct pkl_value *pkl_unfolded(const struct pkl_value *v,
				     struct pkl_fold_view *fv);

/*
 * What a PKL_SCAN parse passed over instead of refusing: an opcode whose
 * effect at load time the graph does not show (BUILD on a value that is
 * no call sets that object's attributes, say).
 */
struct pkl_note {
	uint64_t off;			/* of the opcode */
	const char *what;		/* static text */
	const struct pkl_value *v;	/* the value it acted on, or NULL */
};
#define PKL_MAX_NOTES	256u	/* more are counted, not kept */

/* A STACK_GLOBAL's note (.what): .v is the value that computes it. */
extern const char pkl_note_computed[];

struct pkl_doc {
	struct pkl_value *root;	/* what STOP returned */
	uint64_t end;		/* offset just past STOP */
	int proto;		/* PROTO's argument, 0 if none */
	/* internal: node chunks, and the arena holding strings and tuples */
	struct pkl_chunk *chunks;
	uint32_t nnodes;
	struct arena arena;
	/* folding (pkl_fold.c): released nodes and small tuple arrays for
	   reuse, the number of calls folded (nlane of them read whole by
	   pkl_lane.c), and after pkl_unfold() the whole document their
	   arguments now live in */
	struct pkl_value *free_nodes;
	struct pkl_value **free_arrays[7];	/* by length, 1..6 */
	uint32_t nfolded, nlane;
	struct pkl_doc *whole;
	/* PKL_SCAN: the notes (nnotes may pass PKL_MAX_NOTES: only the
	   first are kept), and whether the pickle failed at failed_at
	   (then root is NULL and the graph is what came before) */
	struct pkl_note *notes;
	uint32_t nnotes;
	bool failed;
	uint64_t failed_at;
};

/*
 * Parse one pickle from @buf[0..@len) (offsets in diagnostics are
 * @base_off + position, so a pickle inside a larger file reports file
 * offsets).  Parsing stops at STOP; doc->end says where, so several pickles
 * in a row (the legacy format) can be read one after another.
 * On success *@out is set; caller owns it (pkl_doc_free()).
 * Returns 0 or -errno (-EILSEQ for malformed input) with @d set.
 */
int pkl_parse(const unsigned char *buf, size_t len, uint64_t base_off,
	      struct pkl_doc **out, struct diag *d);

/*
 * pkl_parse() with @flags.  PKL_FOLD: fold the tensor rebuild calls of
 * torch.save's usual form while parsing (struct pkl_fold), so that the
 * graph never holds their arguments: about a third of the memory of a
 * state dict's graph (docs/design.md, "Memory per tensor").  A pickle that
 * refers again to what was released is parsed a second time, unfolded.
 */
#define PKL_FOLD	1u
/*
 * With PKL_FOLD: fold only after the opcodes were read one by one, as
 * without pkl_lane.c's fast path; the result is the same document (the
 * tests compare the two).
 */
#define PKL_FOLD_SLOW	2u

/*
 * For a safety scan (core/ckpt/ckpt_scan.c), never for a model: a
 * STACK_GLOBAL of other values than two str gives a PKL_G_COMPUTED
 * global, a BUILD on a value that is no call is noted (doc->notes) and
 * passed over, and a pickle that fails still gives its document (*out
 * set, doc->failed, the error in @d): what torch.load met, and may have
 * run, before the point where it fails too.
 */
#define PKL_SCAN	4u

int pkl_parse_with(const unsigned char *buf, size_t len, uint64_t base_off,
		   unsigned flags, struct pkl_doc **out, struct diag *d);

/*
 * Where pkl_parse_src() reads a pickle from: @read gets @n bytes at
 * offset @off (@base_off and on, as in diagnostics) into @buf, 0 or
 * -errno with @d set.  @window: the bytes held at a time, 0 for
 * PKL_WINDOW; a value longer than that is held whole while it is read.
 */
struct pkl_src {
	int (*read)(void *ctx, unsigned char *buf, size_t n, uint64_t off,
		    struct diag *d);
	void *ctx;
	size_t window;
};
#define PKL_WINDOW	(256u << 10)

/*
 * pkl_parse_with() of the @len bytes at @base_off of @src, read through a
 * window instead of whole: the document holds copies of what it needs,
 * so a torch.save pickle (about 95 bytes a tensor) never has to be in
 * memory beside its graph (docs/design.md, "Memory per tensor").
 */
int pkl_parse_src(const struct pkl_src *src, uint64_t base_off,
		  uint64_t len, unsigned flags, struct pkl_doc **out,
		  struct diag *d);

/*
 * Make @doc whole again: parse @buf (the same pickle) without folding and
 * point every folded call at the arguments of the same call there (ids
 * are creation order, so both documents number every value alike; the
 * second is freed with @doc).  Nothing to do when none was folded.
 * Returns 0 or -errno with @d set (-ESTALE: @buf is not @doc's pickle).
 */
int pkl_unfold(struct pkl_doc *doc, const unsigned char *buf, size_t len,
	       uint64_t base_off, struct diag *d);

/* The document every node of @doc's graph lives in: for a walk over all
 * nodes (pkl_chunk), after pkl_unfold(). */
const struct pkl_doc *pkl_doc_all(const struct pkl_doc *doc);

/* Free a document and all its nodes.  NULL is fine. */
void pkl_doc_free(struct pkl_doc *doc);

/*
 * Call @fn for every PKL_GLOBAL node of @doc (GLOBAL, STACK_GLOBAL, INST
 * classes), reachable from the root or not, in the order they were made.
 */
void pkl_doc_each_global(const struct pkl_doc *doc,
			 void (*fn)(const struct pkl_value *g, void *arg),
			 void *arg);

/* Call @fn for every node of @doc that holds a value, in the order they
 * were made. */
void pkl_doc_each(const struct pkl_doc *doc,
		  void (*fn)(const struct pkl_value *v, void *arg), void *arg);

/* True if @v is PKL_GLOBAL module.name (e.g. "torch._utils", "..."). */
bool pkl_is_global(const struct pkl_value *v, const char *module,
		   const char *name);

/* Number of elements of a TUPLE/LIST/SET/FROZENSET (pairs for DICT). */
size_t pkl_len(const struct pkl_value *v);

/* Element @i of a tuple/list, NULL when out of range or not a sequence. */
struct pkl_value *pkl_item(const struct pkl_value *v, size_t i);

/* Short name of a kind, for messages: "int", "tuple", ... */
const char *pkl_kind_name(int kind);

#endif
