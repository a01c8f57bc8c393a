/*
 * ckpt.h - the checkpoint model: what a torch.save file holds, built from its
 * zip index (or legacy stream) and its pickle without running anything.
 *
 *   storages  one per storage record ("data/<key>"): dtype, numel, location
 *   tensors   views into a storage: dtype, offset, shape, stride (elements)
 *   nodes     the object tree as a file system sees it: dicts, lists and
 *             objects are directories, tensors and python values are files
 *
 * Every tensor is checked against its storage and every storage against its
 * record, so a consumer may read any tensor byte without further checks.
 *
 * Only an umbrella: the declarations are in the headers below, one topic
 * each.  Including this one gives them all.
 */
#ifndef PT_CKPT_CKPT_H
#define PT_CKPT_CKPT_H

#include "ckpt_types.h"		/* dtypes, storages, tensors */
#include "ckpt_node.h"		/* the object tree, rows */
#include "ckpt_model.h"		/* struct ckpt, formats, open, reads, names */
#include "ckpt_edit.h"		/* edits: the in-memory half, values */
#include "ckpt_write.h"		/* write-back, save, in place, patch */
#include "fmt/hf/ckpt_hf.h"		/* Hugging Face sharded folders */
#include "fmt/dcp/ckpt_dcpapi.h"	/* DCP directories */
#include "ckpt_image.h"		/* computed safetensors files */
#include "ckpt_member.h"	/* member files: freshness, access */
#include "ckpt_format.h"	/* the table of formats */

#endif
