/*
 * ckpt_dtype.c - torch's dtypes: names, legacy storage classes, element
 * sizes and numpy descriptors (torch-format.md section 4.2).  Storage
 * classes decide the dtype of _rebuild_tensor_v2 tensors; the 2.x "new
 * dtypes" have no storage class and come through _rebuild_tensor_v3.
 * The last column is the safetensors name ("F32"; safetensors/src/tensor.rs
 * Dtype, mapped as safetensors/torch.py maps it), or none: complex128,
 * complex32 and the quantized types have no safetensors form.  F4 is
 * float4_e2m1fn_x2 with the last size halved (as safetensors' torch
 * binding loads it); the sub-byte dtypes torch cannot hold are their
 * bytes (the last three entries).
 */
#include "ckpt.h"

#include <string.h>

static const struct ckpt_dtype dtypes[] = {
	{ "float64", "DoubleStorage", 8, CKPT_DT_FLOAT, "f8", "F64", 0, 0 },
	{ "float32", "FloatStorage", 4, CKPT_DT_FLOAT, "f4", "F32", 0, 0 },
	{ "float16", "HalfStorage", 2, CKPT_DT_FLOAT, "f2", "F16", 0, 0 },
	{ "bfloat16", "BFloat16Storage", 2, CKPT_DT_FLOAT, NULL, "BF16", 0, 0 },
	{ "int64", "LongStorage", 8, CKPT_DT_INT, "i8", "I64", 0, 0 },
	{ "int32", "IntStorage", 4, CKPT_DT_INT, "i4", "I32", 0, 0 },
	{ "int16", "ShortStorage", 2, CKPT_DT_INT, "i2", "I16", 0, 0 },
	{ "int8", "CharStorage", 1, CKPT_DT_INT, "i1", "I8", 0, 0 },
	{ "uint8", "ByteStorage", 1, CKPT_DT_UINT, "u1", "U8", 0, 0 },
	{ "bool", "BoolStorage", 1, CKPT_DT_BOOL, "b1", "BOOL", 0, 0 },
	{ "complex128", "ComplexDoubleStorage", 16, CKPT_DT_COMPLEX, "c16", NULL, 0, 0 },
	{ "complex64", "ComplexFloatStorage", 8, CKPT_DT_COMPLEX, "c8", "C64", 0, 0 },
	{ "qint8", "QInt8Storage", 1, CKPT_DT_QUANT, "i1", NULL, 0, 0 },
	{ "qint32", "QInt32Storage", 4, CKPT_DT_QUANT, "i4", NULL, 0, 0 },
	{ "quint8", "QUInt8Storage", 1, CKPT_DT_QUANT, "u1", NULL, 0, 0 },
	{ "quint4x2", "QUInt4x2Storage", 1, CKPT_DT_QUANT, "u1", NULL, 0, 0 },
	{ "quint2x4", "QUInt2x4Storage", 1, CKPT_DT_QUANT, "u1", NULL, 0, 0 },
	/* torch 2.x dtypes without a storage class (_rebuild_tensor_v3) */
	{ "complex32", NULL, 4, CKPT_DT_COMPLEX, NULL, NULL, 0, 0 },
	{ "uint16", NULL, 2, CKPT_DT_UINT, "u2", "U16", 0, 0 },
	{ "uint32", NULL, 4, CKPT_DT_UINT, "u4", "U32", 0, 0 },
	{ "uint64", NULL, 8, CKPT_DT_UINT, "u8", "U64", 0, 0 },
	{ "float8_e5m2", NULL, 1, CKPT_DT_FLOAT, NULL, "F8_E5M2", 0, 0 },
	{ "float8_e4m3fn", NULL, 1, CKPT_DT_FLOAT, NULL, "F8_E4M3", 0, 0 },
	{ "float8_e5m2fnuz", NULL, 1, CKPT_DT_FLOAT, NULL, "F8_E5M2FNUZ", 0, 0 },
	{ "float8_e4m3fnuz", NULL, 1, CKPT_DT_FLOAT, NULL, "F8_E4M3FNUZ", 0, 0 },
	{ "float8_e8m0fnu", NULL, 1, CKPT_DT_FLOAT, NULL, "F8_E8M0", 0, 0 },
	{ "float4_e2m1fn_x2", NULL, 1, CKPT_DT_FLOAT, NULL, "F4", 2, 0 },
	{ "bits8", NULL, 1, CKPT_DT_BITS, NULL, NULL, 0, 0 },
	{ "bits1x8", NULL, 1, CKPT_DT_BITS, NULL, NULL, 0, 0 },
	{ "bits2x4", NULL, 1, CKPT_DT_BITS, NULL, NULL, 0, 0 },
	{ "bits4x2", NULL, 1, CKPT_DT_BITS, NULL, NULL, 0, 0 },
	{ "bits16", NULL, 2, CKPT_DT_BITS, NULL, NULL, 0, 0 },
	{ "uint1", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint2", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint3", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint4", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint5", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint6", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "uint7", NULL, 1, CKPT_DT_UINT, NULL, NULL, 0, 0 },
	{ "int1", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int2", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int3", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int4", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int5", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int6", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	{ "int7", NULL, 1, CKPT_DT_INT, NULL, NULL, 0, 0 },
	/* safetensors sub-byte dtypes as bytes (ckpt_types.h, bits); kept
	   last: an entry's index is journaled */
	{ "F4", NULL, 1, CKPT_DT_BITS, NULL, "F4", 0, 4 },
	{ "F6_E2M3", NULL, 1, CKPT_DT_BITS, NULL, "F6_E2M3", 0, 6 },
	{ "F6_E3M2", NULL, 1, CKPT_DT_BITS, NULL, "F6_E3M2", 0, 6 },
};

/* torch's aliases for the same dtypes (torch.float is float32 ...). */
static const struct {
	const char *alias, *name;
} aliases[] = {
	{ "float", "float32" }, { "double", "float64" }, { "half", "float16" },
	{ "long", "int64" }, { "int", "int32" }, { "short", "int16" },
	{ "cfloat", "complex64" }, { "cdouble", "complex128" },
	{ "chalf", "complex32" },
};

static const struct ckpt_dtype untyped = {
	"uint8", "UntypedStorage", 1, CKPT_DT_UINT, "u1", NULL, 0, 0
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

const struct ckpt_dtype *ckpt_dtype_by_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(aliases); i++)
		if (!strcmp(name, aliases[i].alias))
			name = aliases[i].name;
	for (size_t i = 0; i < ARRAY_SIZE(dtypes); i++)
		if (!dtypes[i].bits && !strcmp(name, dtypes[i].name))
			return &dtypes[i];
	return NULL;
}

const struct ckpt_dtype *ckpt_dtype_by_storage(const char *cls)
{
	for (size_t i = 0; i < ARRAY_SIZE(dtypes); i++)
		if (dtypes[i].storage && !strcmp(cls, dtypes[i].storage))
			return &dtypes[i];
	return NULL;
}

const struct ckpt_dtype *ckpt_dtype_by_st(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(dtypes); i++)
		if (dtypes[i].st && !dtypes[i].bits &&
		    !strcmp(name, dtypes[i].st))
			return &dtypes[i];
	return NULL;
}

const struct ckpt_dtype *ckpt_dtype_st_bytes(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(dtypes); i++)
		if (dtypes[i].bits && !strcmp(name, dtypes[i].st))
			return &dtypes[i];
	return NULL;
}

unsigned ckpt_dtype_index(const struct ckpt_dtype *dt)
{
	return (unsigned)(dt - dtypes);
}

const struct ckpt_dtype *ckpt_dtype_at(unsigned i)
{
	return &dtypes[i];
}

const struct ckpt_dtype *ckpt_dtype_bytes(void)
{
	return &untyped;
}
