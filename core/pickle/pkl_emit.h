/*
 * pkl_emit.h - write a pickle value graph (pkl.h) back out as protocol 2,
 * the form torch.save writes and torch's weights-only loader reads.  The
 * output follows CPython's C pickler (what pickle.dumps and torch.save run),
 * so re-emitting a parsed torch data.pkl gives back the same bytes; hooks
 * let a caller replace values (e.g. persistent ids) while it is written.
 */
#ifndef PT_PICKLE_PKL_EMIT_H
#define PT_PICKLE_PKL_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pickle/pkl.h"

struct diag;
struct pkl_emit;

/* Values nested deeper than this are refused (the writer recurses). */
#define PKL_EMIT_MAX_DEPTH	4096u

/* Opcodes a hook may write with pkl_emit_op() (Lib/pickletools.py). */
enum pkl_emit_opcode {
	PKL_OP_MARK = '(', PKL_OP_NONE = 'N', PKL_OP_REDUCE = 'R',
	PKL_OP_BUILD = 'b', PKL_OP_TUPLE = 't', PKL_OP_EMPTY_TUPLE = ')',
	PKL_OP_EMPTY_LIST = ']', PKL_OP_EMPTY_DICT = '}',
	PKL_OP_APPEND = 'a', PKL_OP_APPENDS = 'e', PKL_OP_SETITEM = 's',
	PKL_OP_SETITEMS = 'u', PKL_OP_NEWOBJ = 0x81, PKL_OP_TUPLE1 = 0x85,
	PKL_OP_TUPLE2 = 0x86, PKL_OP_TUPLE3 = 0x87, PKL_OP_NEWTRUE = 0x88,
	PKL_OP_NEWFALSE = 0x89, PKL_OP_BINPERSID = 'Q',
};

/* Hooks let a caller substitute parts of the graph while it is written. */
struct pkl_emit_hooks {
	/*
	 * Called before writing value @v, each time it is reached until it
	 * is in the memo.  Return 1 when the hook wrote a replacement with
	 * the primitives below (the original is then not memoized: to keep
	 * identity, the hook files its replacement with pkl_emit_memo_put(),
	 * under its own key or under @v->id, which makes later references
	 * BINGETs), 0 to let the emitter write @v (never pass @v itself to
	 * pkl_emit_value()), or -errno with pkl_emit_diag() set.
	 */
	int (*value)(struct pkl_emit *e, const struct pkl_value *v, void *arg);
	/*
	 * Called for each PKL_PERSID value: write the persistent id object
	 * (e.g. a 5-tuple with a new storage key); the emitter then writes
	 * BINPERSID.  NULL: the original id (pkl_call_args(pid)) is written.
	 * Return 0, 1 when the hook wrote the object the id stands for
	 * instead (no BINPERSID follows: a legacy module class becomes its
	 * GLOBAL), or -errno.
	 */
	int (*persid)(struct pkl_emit *e, const struct pkl_value *pid,
		      void *arg);
	void *arg;
};

/*
 * Start a pickle: writes PROTO 2.  @nvalues bounds the value ids written
 * (doc->nnodes); values with larger ids still work, through a hash table.
 * Values are memoized by id, so every value written must come from one
 * document (or be written by a hook), or pkl_emit_doc() tell them
 * apart.  @h is copied, NULL for none; @d is borrowed until
 * pkl_emit_free().  Returns 0 or -ENOMEM; free with pkl_emit_free().
 */
int pkl_emit_init(struct pkl_emit **out, uint32_t nvalues,
		  const struct pkl_emit_hooks *h, struct diag *d);

/*
 * Write @v (not NULL) and everything it reaches, as Python's pickler would
 * (a value already in the memo is a BINGET).  Returns 0 or -errno with the diag set:
 * -ENOTSUP for what protocol 2 cannot express (NEWOBJ_EX, extension codes,
 * out-of-band buffers, cyclic tuples, nesting past PKL_EMIT_MAX_DEPTH).
 * After a failure every call returns that error and writes nothing.
 */
int pkl_emit_value(struct pkl_emit *e, const struct pkl_value *v);

/* Primitives for hooks; each returns 0 or -errno. */
int pkl_emit_mark(struct pkl_emit *e);
int pkl_emit_op(struct pkl_emit *e, unsigned char opcode);
/* BININT1/BININT2/BININT, else LONG1 with minimal bytes (pickle's save_long) */
int pkl_emit_int(struct pkl_emit *e, int64_t i);
/* BINFLOAT: big-endian IEEE double */
int pkl_emit_float(struct pkl_emit *e, double f);
/* BINUNICODE of UTF-8 @s[0..@n); not memoized (see pkl_emit_memo_put) */
int pkl_emit_str(struct pkl_emit *e, const char *s, size_t n);
/* bytes as protocol 2 pickles them, memo puts and all:
 * _codecs.encode(latin-1 str, 'latin1'), or __builtin__.bytes() when
 * empty (@off: where a diagnostic points, or DIAG_NO_OFFSET) */
int pkl_emit_bytes(struct pkl_emit *e, const void *p, size_t n, uint64_t off);
/* GLOBAL, memoized by (module, name): the second time it is a BINGET */
int pkl_emit_global(struct pkl_emit *e, const char *module, const char *name);

/*
 * Identity for synthesized objects under caller-chosen keys >= 1 << 32
 * (smaller keys are value ids).  memo_get writes BINGET and returns true
 * if @key is known (false after a failure); memo_put writes BINPUT or
 * LONG_BINPUT for the object on top of the stack and files it under @key
 * (replacing an earlier entry, as Python's memo does).
 */
bool pkl_emit_memo_get(struct pkl_emit *e, uint64_t key);
int pkl_emit_memo_put(struct pkl_emit *e, uint64_t key);

/*
 * Values of several documents in one pickle (a sharded folder's shards):
 * each document numbers its values from 0, so from now on value ids are
 * memoized as @base + id, @base a multiple of 1 << 32 beyond the caller's
 * own keys, one per document (0: the first document's ids as they are).
 * Returns the base before.
 */
uint64_t pkl_emit_doc(struct pkl_emit *e, uint64_t base);

/* The diag given to pkl_emit_init(), for hooks to report through. */
struct diag *pkl_emit_diag(struct pkl_emit *e);

/*
 * Write STOP and hand over the pickle: *@out is malloc'd, caller frees it.
 * Returns 0, or the first error (then *@out is NULL).  The emitter still
 * needs pkl_emit_free().
 */
int pkl_emit_finish(struct pkl_emit *e, unsigned char **out, size_t *len);

/* Free the emitter and any output not handed over.  NULL is fine. */
void pkl_emit_free(struct pkl_emit *e);

#endif
