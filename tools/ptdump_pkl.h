/*
 * ptdump_pkl.h - the parts of ptdump's pickle listing (--pickle): the
 * opcode table (ptdump_ops.c), the argument readers that print each
 * argument as Python's repr() (ptdump_arg.c), and the state of one
 * listing that both use (ptdump_pkl.c drives it).
 */
#ifndef PT_TOOLS_PTDUMP_PKL_H
#define PT_TOOLS_PTDUMP_PKL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sbuf;

enum arg {
	A_NONE, A_UINT1, A_UINT2, A_INT4, A_UINT4, A_UINT8,
	A_DECIMALNL_SHORT, A_DECIMALNL_LONG, A_STRINGNL, A_STRINGNL_NOESCAPE,
	A_STRINGNL_NOESCAPE_PAIR, A_STRING1, A_STRING4, A_BYTES1, A_BYTES4,
	A_BYTES8, A_BYTEARRAY8, A_UNICODESTRINGNL, A_UNICODESTRING1,
	A_UNICODESTRING4, A_UNICODESTRING8, A_FLOATNL, A_FLOAT8, A_LONG1,
	A_LONG4,
};

/*
 * One opcode as pickletools.opcodes describes it: code, name, argument,
 * protocol, a markobject among stack_before / stack_after, items popped
 * below the mark (or all), items pushed, and the first line of its doc
 * (for --annotate).
 */
struct opinfo {
	unsigned char code;
	const char *name;
	uint8_t arg, proto, mark_before, mark_after, npop, npush;
	const char *doc;
};

/* The opcode @code stands for, or NULL (pickletools: "unknown"). */
const struct opinfo *dis_op(unsigned char code);

/* One pickle being listed: input, emulated stack and memo, first error. */
struct dis {
	const unsigned char *p;	/* the pickle; positions are base + i */
	size_t len, pos;
	uint64_t base;
	unsigned char *stack;	/* 1 = markobject */
	size_t nstack, capstack;
	uint64_t *marks;	/* positions of the open MARKs */
	size_t nmarks, capmarks;
	uint64_t *memo;		/* open addressing; key + 1, 0 = empty */
	size_t capmemo, nmemo;
	char err[200];
	uint64_t err_pos;
};

/* Note the error at @pos (s->err, s->err_pos); returns -1. */
int dis_fail(struct dis *s, uint64_t pos, const char *fmt, const char *a);

/*
 * Read the argument of @op at s->pos and append its repr() to @b; for
 * memo opcodes *@key gets the key.  Returns 1 when there is an argument,
 * 0 when there is none, -1 on failure (s->err set).
 */
int dis_read_arg(struct dis *s, const struct opinfo *op, uint64_t pos,
		 struct sbuf *b, uint64_t *key);

#endif
