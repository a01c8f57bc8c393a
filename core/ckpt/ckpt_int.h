/*
 * ckpt_int.h - what the checkpoint model's files share among themselves:
 * the builder state and the steps ckpt_open() runs.  Not for callers.
 *
 * Only an umbrella over the three headers below, one topic each.
 */
#ifndef PT_CKPT_CKPT_INT_H
#define PT_CKPT_CKPT_INT_H

#include "ckpt_int_build.h"	/* the builder, tree, storages */
#include "ckpt_int_open.h"	/* each format's open */
#include "ckpt_int_write.h"	/* repickle, patching the original */

#endif
