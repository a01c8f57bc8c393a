/*
 * ckpt_globals.c - torch's weights-only allowlist (torch 2.x default;
 * torch-format.md section 6).  A global outside it is what a plain
 * torch.load would import and run, so ptls reports each one.  Python 2 names
 * (__builtin__) map to Python 3 ones as pickle's fix_imports does.  The
 * model keeps the list of what it met (ckpt_unsafe_add(), from
 * ckpt_scan.c).
 */
#include "ckpt_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Findings kept per checkpoint: a pickle of a million distinct globals
 * is unsafe well before its last one, and each is looked for among
 * those kept. */
#define CKPT_MAX_UNSAFE		1000u
#define CKPT_MAX_UNSAFE_S	"1000"

static const char *const allowed[] = {
	"collections.OrderedDict",
	"collections.Counter",
	"torch.nn.parameter.Parameter",
	"torch.serialization._get_layout",
	"torch.Size",
	"torch.Tensor",
	"torch.device",
	"_codecs.encode",
	"builtins.bytearray",
	"builtins.set",
	"builtins.complex",
	"torch._utils._rebuild_parameter",
	"torch._utils._rebuild_parameter_with_state",
	"torch._utils._rebuild_tensor",
	"torch._utils._rebuild_tensor_v2",
	"torch._utils._rebuild_tensor_v3",
	"torch._utils._rebuild_sparse_tensor",
	"torch._utils._rebuild_meta_tensor_no_storage",
	"torch._utils._rebuild_qtensor",
	"torch._utils._rebuild_nested_tensor",
	"torch._utils._rebuild_wrapper_subclass",
	"torch._utils._rebuild_device_tensor_from_numpy",
	"torch._utils._rebuild_device_tensor_from_cpu_tensor",
	"torch._tensor._rebuild_from_type_v2",
	"torch.per_tensor_affine",
	"torch.per_tensor_symmetric",
	"torch.per_channel_affine",
	"torch.per_channel_symmetric",
	"torch.per_channel_affine_float_qparams",
	"torch.storage.UntypedStorage",
	/* jagged nested tensors: torch 2.x's weights-only loader takes
	   them once torch.nested and torch._dynamo are imported */
	"torch.nested._internal.nested_tensor.NestedTensor",
	"torch.nested._internal.nested_tensor._rebuild_njt",
	"torch._dynamo.decorators._DimRange",
};

/* Legacy tensor type classes: torch.FloatTensor, torch.cuda.HalfTensor ... */
static bool legacy_class(const char *module, const char *name, const char *sfx)
{
	size_t n = strlen(name), m = strlen(sfx);

	if (strcmp(module, "torch") && strcmp(module, "torch.cuda") &&
	    strcmp(module, "torch.sparse") && strcmp(module, "torch.cuda.sparse"))
		return false;
	return n > m && !strcmp(name + n - m, sfx);
}

bool ckpt_global_allowed(const char *module, const char *name)
{
	char full[256];

	if (!strcmp(module, "__builtin__"))
		module = "builtins";
	if (!strcmp(module, "torch") && ckpt_dtype_by_name(name))
		return true;
	if (legacy_class(module, name, "Storage") ||
	    legacy_class(module, name, "Tensor"))
		return true;
	if ((size_t)snprintf(full, sizeof(full), "%s.%s", module, name) >=
	    sizeof(full))
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		if (!strcmp(full, allowed[i]))
			return true;
	return false;
}

bool ckpt_global_any(const char *module, const char *name)
{
	(void)module;
	(void)name;
	return true;
}

static const char *dup(struct ckpt *c, const char *s)
{
	return arena_strndup(&c->arena, s ? s : "", s ? strlen(s) : 0);
}

static bool same(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

int ckpt_unsafe_add(struct ckpt *c, int kind, const char *pickle,
		    uint64_t off, const char *module, const char *name,
		    const char *why)
{
	struct ckpt_global *ng, *g;

	if (c->nglobals > CKPT_MAX_UNSAFE)
		return 0;
	if (c->nglobals == CKPT_MAX_UNSAFE) {	/* one last, that says so */
		kind = CKPT_U_OPCODE;
		module = name = NULL;
		why = "more findings than ptfs lists (" CKPT_MAX_UNSAFE_S
		      "): the first are above";
	}
	for (uint32_t i = 0; i < c->nglobals; i++) {
		g = &c->globals[i];
		if (g->kind == kind && same(g->module, module) &&
		    same(g->name, name) && same(g->pickle, pickle) &&
		    same(g->why, why))
			return 0;
	}
	ng = realloc(c->globals, (c->nglobals + 1) * sizeof(*ng));
	if (!ng)
		return -ENOMEM;
	c->globals = ng;
	g = &ng[c->nglobals];
	*g = (struct ckpt_global){
		.module = dup(c, module), .name = dup(c, name), .off = off,
		.pickle = dup(c, pickle), .why = why ? dup(c, why) : NULL,
		.kind = (uint8_t)kind,
	};
	if (!g->module || !g->name || !g->pickle || (why && !g->why))
		return -ENOMEM;
	c->nglobals++;
	return 0;
}

int ckpt_unsafe_take(struct ckpt *c, const struct ckpt *from,
		     const char *file)
{
	for (uint32_t i = 0; from && i < from->nglobals; i++) {
		const struct ckpt_global *g = &from->globals[i];
		char pickle[512];

		snprintf(pickle, sizeof(pickle), "%s%s%s", file,
			 g->pickle[0] ? ": " : "", g->pickle);
		if (ckpt_unsafe_add(c, g->kind, pickle, g->off, g->module,
				    g->name, g->why))
			return -ENOMEM;
	}
	return 0;
}
