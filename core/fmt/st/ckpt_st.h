/*
 * ckpt_st.h - the safetensors reader (ckpt_safetensors.c) as its
 * descriptor (ckpt_fmt_st.c) calls it.  Internal to core/fmt/st.
 */
#ifndef PT_FMT_ST_CKPT_ST_H
#define PT_FMT_ST_CKPT_ST_H

#include "ckpt/ckpt_int.h"

/* ckpt_safetensors.c: read a .safetensors file's header into c. */
int ckpt_safetensors_open(struct ckpt *c, struct diag *d);


#endif
