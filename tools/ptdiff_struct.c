/*
 * ptdiff_struct.c - the differences of structure ptdiff reports beyond
 * keys and values (issue 19.4): a container's own type and hidden state
 * (an OrderedDict turned into a dict, its _metadata dropped, which
 * load_state_dict needs for versioned modules), and which tensors share a
 * storage (tied weights untied by a conversion, a view saved as a copy).
 */
#include "ptdiff.h"

#include "pickle/pkl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Do @a's and @b's hidden states differ (by their repr)? */
bool pd_states_differ(const struct ckpt_node *a,
			  const struct ckpt_node *b)
{
	const struct pkl_value *sa = ckpt_node_state(a);
	const struct pkl_value *sb = ckpt_node_state(b);
	char *ra, *rb;
	size_t la = 0, lb = 0;
	bool differ;

	if (!sa || !sb)
		return !sa != !sb;
	ra = ckpt_repr(sa, 1u << 20, &la);
	rb = ckpt_repr(sb, 1u << 20, &lb);
	differ = !ra || !rb || la != lb || memcmp(ra, rb, la);
	free(ra);
	free(rb);
	return differ;
}

/*
 * Two containers at one path whose own type or hidden state differ (an
 * OrderedDict turned into a dict, _metadata dropped) are an item of their
 * own, before their children.
 */
bool pd_dirs_differ(const struct ckpt_node *a, const struct ckpt_node *b)
{
	return strcmp(a->type, b->type) || pd_states_differ(a, b);
}

/* A storage index, or -1, of side @n of a tensor pair. */
static int64_t storage_of(const struct ckpt_node *n)
{
	return n && n->kind == CKPT_N_TENSOR && n->tensor->storage ?
	       (int64_t)n->tensor->storage->index : -1;
}

/*
 * Ties: for every pair of tensors, the first earlier pair whose tensor
 * shares its storage, on each side.  They differ when A ties two keys
 * that B saves apart (a conversion that untied weights) or the reverse.
 */
int pd_ties(struct pairs *p, const struct ckpt *a, const struct ckpt *b)
{
	int64_t *fa = malloc((a->nstorages + 1) * sizeof(*fa));
	int64_t *fb = malloc((b->nstorages + 1) * sizeof(*fb));

	if (!fa || !fb) {
		free(fa);
		free(fb);
		return -ENOMEM;
	}
	memset(fa, 0xff, (a->nstorages + 1) * sizeof(*fa));
	memset(fb, 0xff, (b->nstorages + 1) * sizeof(*fb));
	for (size_t i = 0; i < p->n; i++) {
		int64_t sa = storage_of(p->v[i].a), sb = storage_of(p->v[i].b);

		if (sa < 0 || sb < 0 || sa >= a->nstorages ||
		    sb >= b->nstorages)
			continue;
		if (fa[sa] < 0)
			fa[sa] = (int64_t)i;
		if (fb[sb] < 0)
			fb[sb] = (int64_t)i;
		p->v[i].tie_a = fa[sa] == (int64_t)i ? -1 : fa[sa];
		p->v[i].tie_b = fb[sb] == (int64_t)i ? -1 : fb[sb];
	}
	free(fa);
	free(fb);
	return 0;
}

/* A container's hidden state for a message: "_metadata" (its keys). */
const char *pd_describe_state(const struct ckpt_node *n)
{
	static char buf[2][96];
	static int k;
	const struct pkl_value *s = ckpt_node_state(n);
	char *out = buf[k++ & 1];
	size_t o = 0;

	if (!s)
		return "None";
	if (s->kind != PKL_DICT) {
		snprintf(out, 96, "a %s", pkl_kind_name(s->kind));
		return out;
	}
	out[0] = 0;
	for (size_t i = 0; i + 1 < s->u.items.n && o < 80; i += 2) {
		const struct pkl_value *key = s->u.items.v[i];

		o += (size_t)snprintf(out + o, 96 - o, "%s%s", o ? " " : "",
				      key->kind == PKL_STR ? key->u.s.p : "?");
	}
	if (!o)
		snprintf(out, 96, "{}");
	return out;
}
