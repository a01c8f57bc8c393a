/*
 * gguf_types.h - the ggml tensor types a GGUF file can hold (ggml.h's enum
 * ggml_type, as gguf-py's constants.py names and sizes them), and their
 * element codecs: pure functions over bytes, no I/O.  The oracle is
 * gguf-py's gguf.quants (quantize / dequantize, numpy float32 arithmetic),
 * which every codec here matches bit for bit (tests/unit/gguf_vectors.py).
 *
 *   gguf_types.c   the table, lookups, plain types, byte swapping
 *   gguf_quant.c   32-element blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
 *   gguf_kquant.c  256-element super-blocks: Q2_K .. Q6_K, Q8_K
 *
 * Byte order.  A block's multi-byte fields (f16 scales, Q5's uint32 qh,
 * Q8_K's f32 d) are decoded little-endian, as gguf-py does on a
 * little-endian host.  What a big-endian GGUF holds depends on its maker:
 *
 *   - GGUFWriter(endianess=BIG) byteswaps each numpy array as given
 *     (tensor.byteswap()): F16/F32/F64/I16/I32/I64 arrays come out
 *     big-endian, but block-quantized data and BF16 are uint8 arrays
 *     (gguf.quants.quantize returns bytes), so nothing in them is swapped:
 *     their scales and BF16 elements stay little-endian.
 *   - GGUFReader of such a file swaps only the plain views (F16, F32, F64,
 *     I8..I64: '>f2' arrays); BF16 and block types are read as uint8, and
 *     gguf.quants.dequantize decodes them little-endian (and, as it uses
 *     data.view(np.float16), even gets a '>f2' F16 array wrong).
 *   - gguf_convert_endian.py (and ggml on a big-endian host, which reads
 *     every field natively) instead swaps BF16 elements and the f16 fields
 *     of Q4_0, Q8_0, Q4_K, Q6_K, Q1_0 and TQ2_0 blocks, and refuses other
 *     block types (Q5_0's qh would need swapping as a uint32 too).
 *
 * So the file's byte order does not say how its blocks are stored.
 * gguf_swap() swaps plain elements only (BF16 included, as ggml does);
 * quantized blocks are always decoded little-endian here.
 */
#ifndef PT_FMT_GGUF_GGUF_TYPES_H
#define PT_FMT_GGUF_GGUF_TYPES_H

#include <stdint.h>

/* One ggml tensor type (ggml.h enum ggml_type). */
struct gguf_type {
	uint32_t id;		/* GGML_TYPE_* value */
	const char *name;	/* "F32", "Q8_0", "Q4_K" as gguf-py names it */
	uint32_t block;		/* elements per block (1 for plain types) */
	uint32_t bytes;		/* bytes per block */
	const char *torch;	/* torch dtype name of a plain type ("float32",
				   "float16", "bfloat16", "float64", "int8",
				   "int16", "int32", "int64"), NULL for a
				   block-quantized type */
	/* dequantize @nblocks blocks at @src into @nblocks*block floats;
	   NULL when ptfs has no dequantization for it */
	void (*dequant)(const unsigned char *src, float *dst, uint64_t nblocks);
	/* quantize as gguf-py does (bit for bit); NULL when not offered */
	void (*quant)(const float *src, unsigned char *dst, uint64_t nblocks);
};

/* The type of GGML_TYPE_* @id; NULL for an unknown id (4 and 5, the
 * removed Q4_2 and Q4_3, and unassigned ones).  Borrowed: static. */
const struct gguf_type *gguf_type_by_id(uint32_t id);

/* The type named @name ("q8_0" or "Q8_0": case-insensitive), or NULL. */
const struct gguf_type *gguf_type_by_name(const char *name);

/* The plain type whose torch dtype is @dtype ("float32": F32), or NULL. */
const struct gguf_type *gguf_type_by_torch(const char *dtype);

/* The @k-th type of the table (from 0, in id order), or NULL past the
 * last: for listing them all. */
const struct gguf_type *gguf_type_at(unsigned k);

/* Swap @nblocks elements of plain type @t at @p in place between little-
 * and big-endian; nothing for 1-byte and block-quantized types. */
void gguf_swap(const struct gguf_type *t, unsigned char *p, uint64_t nblocks);

#endif
