/*
 * globals.h - the unsafe globals of a checkpoint as the tools word them
 * (globals.c): ptls and ptverify say the same sentence.
 */
#ifndef PT_TOOLS_GLOBALS_H
#define PT_TOOLS_GLOBALS_H

#include <stddef.h>
#include <stdint.h>

struct ckpt;
struct ckpt_node;

/* The deepest node whose value refers to @c's unsafe global @i, or NULL
 * (borrowed from @c). */
const struct ckpt_node *fmt_global_holder(const struct ckpt *c, uint32_t i);

/*
 * What @c's finding @i (c->globals, ckpt_scan.c) is, in the one wording
 * of every tool, into @buf:
 *
 *   unsafe global MOD.NAME in PICKLE@where: a plain torch.load would
 *     import it, and weights_only=True refuses the file; held by KEY
 *   unsafe global name computed at load time in PICKLE@where: WHY
 *   unsafe call|persistent id|opcode in PICKLE@where: WHY[; held by KEY]
 *   unsafe archive@where: WHY
 *
 * @where: "" or where it is, " (offset 0x36)"; the holder is left out
 * when none is found.
 */
void fmt_global_text(const struct ckpt *c, uint32_t i, const char *where,
		     char *buf, size_t size);

#endif
