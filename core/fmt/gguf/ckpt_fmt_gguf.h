/*
 * ckpt_fmt_gguf.h - the GGUF format's descriptor, as the table of formats
 * (core/fmt/formats.c) includes it.
 */
#ifndef PT_FMT_GGUF_CKPT_FMT_GGUF_H
#define PT_FMT_GGUF_CKPT_FMT_GGUF_H

#include "ckpt/ckpt_format.h"

extern const struct ckpt_fmt ckpt_fmt_gguf;

#endif
