/*
 * test_pkl_emit.c - the pickle emitter (core/pickle/pkl_emit.c).  Parse,
 * emit, parse again and compare the two graphs (kinds, values, identity)
 * for Python's values_p0..p5.pkl, hand-made cyclic pickles and every
 * fixture's data.pkl; byte identity with what torch.save and pickle.dumps
 * wrote; hooks; hostile graphs; and Python's own unpickler on the output.
 */
#include "test_pkl.h"
#include "fixtures.h"

#include "pickle/pkl_emit.h"
#include "zip/ptz.h"

#include <fcntl.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Emit @doc's root; 0 with *@out set (caller frees), or -errno. */
static int emit_doc(const struct pkl_doc *doc, const struct pkl_emit_hooks *h,
		    unsigned char **out, size_t *n, struct diag *d)
{
	struct pkl_emit *e;
	int rc;

	*out = NULL;
	diag_init(d, "emitted.pkl");
	rc = pkl_emit_init(&e, doc->nnodes, h, d);
	if (rc < 0)
		return rc;
	rc = pkl_emit_value(e, doc->root);
	if (!rc)
		rc = pkl_emit_finish(e, out, n);
	pkl_emit_free(e);
	return rc;
}

/*
 * Graph comparison: a node-id map each way.  Kinds that carry identity
 * (what the pickler memoizes) must map one to one; scalars compare by value.
 * Protocol 2 rewrites some kinds: bytes become _codecs.encode(s, 'latin1')
 * calls, sets set([...]) calls, OBJ/INST calls REDUCE.
 */
struct iso {
	uint32_t *ab, *ba;	/* partner's id + 1 */
};

static bool has_identity(const struct pkl_value *v)
{
	switch (v->kind) {
	case PKL_STR: case PKL_STRING: case PKL_BYTES: case PKL_LIST:
	case PKL_DICT: case PKL_SET: case PKL_FROZENSET: case PKL_CALL:
		return true;
	case PKL_TUPLE:
		return v->u.items.n > 0;
	default:
		return false;
	}
}

static void same(struct iso *m, const struct pkl_value *a,
		 const struct pkl_value *b);

static void same_items(struct iso *m, struct pkl_value *const *a, size_t na,
		       struct pkl_value *const *b, size_t nb, uint64_t off)
{
	cr_assert_eq(na, nb, "0x%llx: %zu items, then %zu",
		     (unsigned long long)off, na, nb);
	for (size_t i = 0; i < na; i++)
		same(m, a[i], b[i]);
}

/* @b is REDUCE(GLOBAL @module.@name, args); returns args. */
static const struct pkl_value *reduce_of(const struct pkl_value *a,
					 const struct pkl_value *b,
					 const char *module, const char *name)
{
	cr_assert(b->kind == PKL_CALL && b->how == PKL_REDUCE &&
		  pkl_is_global(b->u.call.func, module, name),
		  "0x%llx: %s became %s, not a %s.%s call",
		  (unsigned long long)a->off, pkl_kind_name(a->kind),
		  pkl_kind_name(b->kind), module, name);
	return pkl_call_args(b);
}

static void same_bytes(const struct pkl_value *a, const struct pkl_value *b)
{
	const struct pkl_value *args, *s;
	size_t k = 0;

	if (!a->u.s.n) {
		args = reduce_of(a, b, "__builtin__", "bytes");
		cr_assert_eq(pkl_len(args), 0);
		return;
	}
	args = reduce_of(a, b, "_codecs", "encode");
	cr_assert_eq(pkl_len(args), 2);
	assert_str(pkl_item(args, 1), "latin1");
	s = pkl_item(args, 0);
	cr_assert_eq(s->kind, PKL_STR);
	for (size_t i = 0; i < a->u.s.n; i++) {
		unsigned char c = (unsigned char)a->u.s.p[i];

		if (c < 0x80) {
			cr_assert_eq((unsigned char)s->u.s.p[k++], c);
			continue;
		}
		cr_assert_eq((unsigned char)s->u.s.p[k++], 0xc0 | c >> 6);
		cr_assert_eq((unsigned char)s->u.s.p[k++], 0x80 | (c & 0x3f));
	}
	cr_assert_eq(k, s->u.s.n);
}

static void same_call(struct iso *m, const struct pkl_value *a,
		      const struct pkl_value *b)
{
	const struct pkl_call_ext *x = pkl_call_x(a), *y = pkl_call_x(b);

	cr_assert_eq(b->kind, PKL_CALL);
	cr_assert_eq(a->how == PKL_OBJ ? PKL_REDUCE : a->how, b->how);
	same(m, a->u.call.func, b->u.call.func);
	same(m, pkl_call_args(a), pkl_call_args(b));
	same_items(m, x->list, x->nlist, y->list, y->nlist, a->off);
	same_items(m, x->dict, x->ndict, y->dict, y->ndict, a->off);
	cr_assert_eq(!x->state, !y->state);
	if (x->state)
		same(m, x->state, y->state);
}

static void same(struct iso *m, const struct pkl_value *a,
		 const struct pkl_value *b)
{
	unsigned long long off = (unsigned long long)a->off;

	if (has_identity(a)) {
		if (m->ab[a->id] || m->ba[b->id]) {
			cr_assert(m->ab[a->id] == b->id + 1 &&
				  m->ba[b->id] == a->id + 1,
				  "0x%llx: %s shared in one graph only", off,
				  pkl_kind_name(a->kind));
			return;
		}
		m->ab[a->id] = b->id + 1;
		m->ba[b->id] = a->id + 1;
	}
	switch (a->kind) {
	case PKL_BYTES:
		return same_bytes(a, b);
	case PKL_SET:
	case PKL_FROZENSET: {
		const struct pkl_value *args = reduce_of(a, b, "__builtin__",
			a->kind == PKL_SET ? "set" : "frozenset");

		cr_assert_eq(pkl_len(args), 1);
		cr_assert_eq(pkl_item(args, 0)->kind, PKL_LIST);
		same_items(m, a->u.items.v, a->u.items.n,
			   pkl_item(args, 0)->u.items.v,
			   pkl_item(args, 0)->u.items.n, a->off);
		return;
	}
	case PKL_CALL:
		return same_call(m, a, b);
	default:
		break;
	}
	cr_assert_eq(a->kind, b->kind, "0x%llx: %s became %s", off,
		     pkl_kind_name(a->kind), pkl_kind_name(b->kind));
	switch (a->kind) {
	case PKL_BOOL:
	case PKL_INT:
		cr_assert_eq(a->u.i, b->u.i, "0x%llx", off);
		break;
	case PKL_FLOAT:
		cr_assert_eq(memcmp(&a->u.f, &b->u.f, sizeof(a->u.f)), 0);
		break;
	case PKL_BIGINT:
	case PKL_STR:
	case PKL_STRING:
		cr_assert_eq(a->u.s.n, b->u.s.n, "0x%llx", off);
		cr_assert_eq(memcmp(a->u.s.p, b->u.s.p, a->u.s.n), 0);
		break;
	case PKL_TUPLE:
	case PKL_LIST:
	case PKL_DICT:
		same_items(m, a->u.items.v, a->u.items.n, b->u.items.v,
			   b->u.items.n, a->off);
		break;
	case PKL_GLOBAL:
		cr_assert_str_eq(a->u.global.module, b->u.global.module);
		cr_assert_str_eq(a->u.global.name, b->u.global.name);
		break;
	case PKL_PERSID:
		same(m, pkl_call_args(a), pkl_call_args(b));
		break;
	default:
		break;
	}
}

static void assert_isomorphic(const struct pkl_doc *a, const struct pkl_doc *b)
{
	struct iso m = {
		.ab = calloc(a->nnodes + 1, sizeof(uint32_t)),
		.ba = calloc(b->nnodes + 1, sizeof(uint32_t)),
	};

	cr_assert(m.ab && m.ba);
	same(&m, a->root, b->root);
	free(m.ab);
	free(m.ba);
}

/*
 * Parse @p, emit it, parse that and compare the graphs.  Returns 0 with
 * the emitted pickle in *@out (caller frees), or the emitter's -errno
 * with @d set.
 */
static int roundtrip(const unsigned char *p, size_t n, unsigned char **out,
		     size_t *nout, struct diag *d)
{
	struct pkl_doc *a = parse_ok(p, n), *b;
	int rc = emit_doc(a, NULL, out, nout, d);

	if (rc == 0) {
		b = parse_ok(*out, *nout);
		assert_isomorphic(a, b);
		pkl_doc_free(b);
	}
	pkl_doc_free(a);
	return rc;
}

/* Round trip that must work and give back exactly @p. */
static void roundtrip_identical(const unsigned char *p, size_t n)
{
	unsigned char *out;
	size_t nout;
	struct diag d;
	int rc = roundtrip(p, n, &out, &nout, &d);

	cr_assert_eq(rc, 0, "emit failed: %s", d.msg);
	cr_assert_eq(nout, n, "emitted %zu bytes, not %zu", nout, n);
	cr_assert_eq(memcmp(out, p, n), 0, "emitted bytes differ");
	free(out);
}

static void expect_emit_fail(const unsigned char *p, size_t n, uint64_t off,
			     const char *msg)
{
	struct pkl_doc *doc = parse_ok(p, n);
	unsigned char sentinel, *out = &sentinel;
	size_t nout;
	struct diag d;
	int rc = emit_doc(doc, NULL, &out, &nout, &d);

	cr_assert_eq(rc, -ENOTSUP, "rc %d (%s)", rc, d.msg);
	cr_assert_null(out);
	cr_assert_eq(d.off, off, "offset %llu, want %llu (%s)",
		     (unsigned long long)d.off, (unsigned long long)off, d.msg);
	cr_assert_not_null(strstr(d.msg, msg), "'%s' lacks '%s'", d.msg, msg);
	pkl_doc_free(doc);
}

/*
 * The data.pkl record of checkpoint @path, or NULL (not a zip, none);
 * *@script: a TorchScript archive (has constants.pkl).
 */
static unsigned char *fixture_pkl(const char *path, size_t *n, bool *script)
{
	struct ptz_reader z = { 0 };
	struct ptz_entry *e;
	unsigned char *p = NULL;
	struct diag d;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	diag_init(&d, path);
	if (!ptz_reader_open(&z, fd, path, &d)) {
		*script = ptz_find_rel(&z, "constants.pkl") != NULL;
		e = ptz_find_rel(&z, "data.pkl");
		if (e && ptz_entry_read(&z, e, 1u << 30, &p, n, &d) < 0)
			p = NULL;
	}
	ptz_reader_release(&z);
	close(fd);
	return p;
}

static bool have_python(void)
{
	if (access("/usr/bin/python3", X_OK) == 0)
		return true;
	cr_log_warn("/usr/bin/python3 not found: skipping");
	return false;
}

/* Run a Python script with @arg; true if it exits 0. */
static bool python(const char *script, const char *arg)
{
	char path[] = "/tmp/pkl_emit_pyXXXXXX", cmd[512];
	int fd = mkstemp(path);
	bool ok;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, script, strlen(script)), (ssize_t)strlen(script));
	close(fd);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s", path, arg);
	ok = system(cmd) == 0;
	unlink(path);
	return ok;
}

/* ---- primitives ---- */

static void expect_bytes(struct pkl_emit *e, const unsigned char *want,
			 size_t n)
{
	unsigned char *out;
	size_t len;

	cr_assert_eq(pkl_emit_finish(e, &out, &len), 0);
	cr_assert_eq(len, n + 3, "length %zu, want %zu", len, n + 3);
	cr_assert_eq(memcmp(out, "\x80\x02", 2), 0);
	cr_assert_eq(memcmp(out + 2, want, n), 0, "bytes differ");
	cr_assert_eq(out[len - 1], '.');
	free(out);
	pkl_emit_free(e);
}

static struct pkl_emit *new_emit(struct diag *d)
{
	struct pkl_emit *e;

	diag_init(d, "emitted.pkl");
	cr_assert_eq(pkl_emit_init(&e, 0, NULL, d), 0);
	return e;
}

Test(pkl_emit, ints_as_save_long)
{
	/* expected bytes: pickle.dumps(i, 2) of Python 3.11 */
	static const struct {
		int64_t i;
		const char *b;
		size_t n;
	} c[] = {
		{ 0, "K\x00", 2 }, { 255, "K\xff", 2 },
		{ 256, "M\x00\x01", 3 }, { 65535, "M\xff\xff", 3 },
		{ 65536, "J\x00\x00\x01\x00", 5 },
		{ -1, "J\xff\xff\xff\xff", 5 },
		{ INT32_MAX, "J\xff\xff\xff\x7f", 5 },
		{ INT32_MIN, "J\x00\x00\x00\x80", 5 },
		{ 1ll << 31, "\x8a\x05\x00\x00\x00\x80\x00", 7 },
		{ -(1ll << 31) - 1, "\x8a\x05\xff\xff\xff\x7f\xff", 7 },
		{ 1ll << 32, "\x8a\x05\x00\x00\x00\x00\x01", 7 },
		{ -(1ll << 39), "\x8a\x05\x00\x00\x00\x00\x80", 7 },
		{ INT64_MAX, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10 },
		{ INT64_MIN, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10 },
	};
	struct diag d;

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		struct pkl_emit *e = new_emit(&d);

		cr_assert_eq(pkl_emit_int(e, c[k].i), 0);
		expect_bytes(e, (const unsigned char *)c[k].b, c[k].n);
	}
	assert_no_leaks();
}

Test(pkl_emit, primitives_and_memo_keys)
{
	struct diag d;
	struct pkl_emit *e = new_emit(&d);

	cr_assert_eq(pkl_emit_float(e, -1.25), 0);
	cr_assert_eq(pkl_emit_global(e, "torch", "FloatStorage"), 0);
	cr_assert_eq(pkl_emit_global(e, "torch", "FloatStorag"), 0);
	cr_assert_eq(pkl_emit_global(e, "torch", "FloatStorage"), 0);
	cr_assert_eq(pkl_emit_str(e, "k", 1), 0);
	cr_assert_not(pkl_emit_memo_get(e, 1ull << 32));
	cr_assert_eq(pkl_emit_memo_put(e, 1ull << 32), 0);
	cr_assert(pkl_emit_memo_get(e, 1ull << 32));
	cr_assert_eq(pkl_emit_mark(e), 0);
	cr_assert_eq(pkl_emit_op(e, PKL_OP_TUPLE), 0);
	expect_bytes(e, LIT("G\xbf\xf4\x00\x00\x00\x00\x00\x00"
			    "ctorch\nFloatStorage\nq\x00"
			    "ctorch\nFloatStorag\nq\x01" "h\x00"
			    "X\x01\x00\x00\x00kq\x02h\x02(t"));
	assert_no_leaks();
}

Test(pkl_emit, errors_are_sticky)
{
	struct diag d;
	struct pkl_emit *e = new_emit(&d);
	unsigned char sentinel, *out = &sentinel;
	size_t n;

	cr_assert_eq(pkl_emit_global(e, "a\nb", "c"), -ENOTSUP);
	cr_assert_not_null(strstr(d.msg, "newline"), "%s", d.msg);
	cr_assert_eq(pkl_emit_int(e, 1), -ENOTSUP);
	cr_assert_eq(pkl_emit_str(e, "x", 1), -ENOTSUP);
	cr_assert_not(pkl_emit_memo_get(e, 1ull << 32));
	cr_assert_eq(pkl_emit_finish(e, &out, &n), -ENOTSUP);
	cr_assert_null(out);
	pkl_emit_free(e);
	pkl_emit_free(NULL);
	assert_no_leaks();
}

/* ---- round trips ---- */

Test(pkl_emit, roundtrips_python_values_of_every_protocol)
{
	for (int proto = 0; proto <= 5; proto++) {
		size_t n, nout;
		unsigned char *p = read_values(proto, &n), *out;
		struct diag d;
		int rc = roundtrip(p, n, &out, &nout, &d);

		/* bytes, sets, NEWOBJ: all have protocol 2 forms */
		cr_assert_eq(rc, 0, "protocol %d: %s", proto, d.msg);
		if (proto == 2) {
			/* pickle.dumps wrote it: we must write the same */
			cr_assert_eq(nout, n);
			cr_assert_eq(memcmp(out, p, n), 0);
		}
		free(out);
		free(p);
	}
	assert_no_leaks();
}

Test(pkl_emit, roundtrips_self_references)
{
	/* d = {'self': d, 'l': l} with l = [l] */
	roundtrip_identical(LIT("\x80\x02}q\x00(X\x04\x00\x00\x00selfq\x01"
				"h\x00X\x01\x00\x00\x00lq\x02]q\x03h\x03" "au."));
	/* an OrderedDict whose BUILD state holds itself, and a NEWOBJ */
	roundtrip_identical(LIT("\x80\x02" "ccollections\nOrderedDict\nq\x00"
				")Rq\x01}q\x02X\x02\x00\x00\x00meq\x03h\x01sb."));
	roundtrip_identical(LIT("\x80\x02" "c__main__\nP\nq\x00)\x81q\x01"
				"]q\x02h\x01" "a(K\x01K\x02K\x03K\x04tq\x03"
				"\x86q\x04" "b."));
	assert_no_leaks();
}

Test(pkl_emit, long_memo_indices_past_256)
{
	struct bytes b = { 0 };
	unsigned char r[5];
	char s[16];

	/* a list of 1000 distinct strings, then the same 1000 again */
	add(&b, "\x80\x02]q\x00(", 6);
	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t k = (uint32_t)snprintf(s, sizeof(s), "s%u", i);

		add(&b, "X", 1);
		put_le32(r, k);
		add(&b, r, 4);
		add(&b, s, k);
		r[0] = i + 1 < 256 ? 'q' : 'r';
		put_le32(r + 1, i + 1);
		add(&b, r, i + 1 < 256 ? 2 : 5);
	}
	add(&b, "e(", 2);
	for (uint32_t i = 0; i < 1000; i++) {
		r[0] = i + 1 < 256 ? 'h' : 'j';
		put_le32(r + 1, i + 1);
		add(&b, r, i + 1 < 256 ? 2 : 5);
	}
	add(&b, "e.", 2);
	roundtrip_identical(b.p, b.n);
	free(b.p);
	assert_no_leaks();
}

/* ---- what pickle.dumps (the C pickler) writes ---- */

static const char batches_py[] =
	"import collections, pickle, sys\n"
	"class L(list): pass\n"
	"class D(dict): pass\n"
	"class P:\n"
	"    def __init__(self): self.x = [self]\n"
	"cases = []\n"
	"for n in (0, 1, 2, 999, 1000, 1001, 2000, 2001):\n"
	"    cases += [list(range(n)), {i: str(i) for i in range(n)},\n"
	"              collections.OrderedDict((str(i), i) for i in range(n)),\n"
	"              set(range(n)), frozenset(range(n)), L(range(n)),\n"
	"              D((i, i) for i in range(n))]\n"
	"s = 'shared'\n"
	"cases += [[b'', b'a\\xff', b'a\\xff', bytes(range(256)), b'']]\n"
	"cases += [[2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**64, -2**64,\n"
	"           2**2100, -2**2100, 1.5, -0.0, float('inf')]]\n"
	"cases += [[(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ('a',) * 9]]\n"
	"cases += [[s, s, [s], {s: s}, (s, s)], P(), [P, P, print, len]]\n"
	"for i, c in enumerate(cases):\n"
	"    with open('%s/%d.pkl' % (sys.argv[1], i), 'wb') as f:\n"
	"        f.write(pickle.dumps(c, protocol=2))\n";

Test(pkl_emit, matches_pickle_dumps_byte_for_byte)
{
	char dir[] = "/tmp/pkl_emitXXXXXX", path[64];
	unsigned cases = 0;

	if (!have_python())
		return;
	cr_assert_not_null(mkdtemp(dir));
	cr_assert(python(batches_py, dir), "python failed");
	for (;; cases++) {
		unsigned char *p;
		size_t n;

		snprintf(path, sizeof(path), "%s/%u.pkl", dir, cases);
		p = read_file(path, &n);
		if (!p)
			break;
		cr_log_info("case %u: %zu bytes", cases, n);
		roundtrip_identical(p, n);
		free(p);
		unlink(path);
	}
	rmdir(dir);
	cr_assert_geq(cases, 60);
	assert_no_leaks();
}

static const char load_py[] =
	"import pickle, sys\n"
	"class Point:\n"
	"    def __eq__(self, o):\n"
	"        return type(o) is Point and vars(self) == vars(o)\n"
	"a = pickle.load(open(sys.argv[1], 'rb'))\n"
	"b = pickle.load(open(sys.argv[2], 'rb'))\n"
	"assert a == b, (a, b)\n"
	"assert b['a'] is b['b']\n"
	"for k, t in (('bytes', bytes), ('set', set), ('frozen', frozenset)):\n"
	"    assert type(b[k]) is t, k\n";

Test(pkl_emit, python_loads_what_we_write)
{
	char path[] = "/tmp/pkl_emit_outXXXXXX", arg[256];

	if (!have_python())
		return;
	/* protocol 5's bytes and frozenset come back as protocol 2 forms */
	for (int proto = 2; proto <= 5; proto += 3) {
		size_t n, nout;
		unsigned char *p = read_values(proto, &n), *out;
		struct diag d;
		int fd = mkstemp(path);

		cr_assert_geq(fd, 0);
		cr_assert_eq(roundtrip(p, n, &out, &nout, &d), 0);
		cr_assert_eq(write(fd, out, nout), (ssize_t)nout);
		close(fd);
		snprintf(arg, sizeof(arg), "%s/values_p%d.pkl %s", PT_TEST_DATA,
			 proto, path);
		cr_assert(python(load_py, arg), "python disagrees (p%d)", proto);
		unlink(path);
		strcpy(path, "/tmp/pkl_emit_outXXXXXX");
		free(out);
		free(p);
	}
	assert_no_leaks();
}

/* ---- torch's data.pkl ---- */

/*
 * Every protocol 2 data.pkl that torch.save wrote must come back byte for
 * byte.  What differs, and why:
 *  - TorchScript archives (a constants.pkl record): torch::jit's C++
 *    pickler memoizes differently (e.g. no BINPUT after GLOBAL).
 *  - Protocol 0/1/3-5 pickles (e.g. gopickle's files): we write protocol 2.
 *  - Files listed here, each with its reason.
 */
static const char *const not_by_pickle[] = {
	/* dill pickled a function: it writes GLOBAL 'mod __dict__' raw, never
	   memoized, so its second occurrence is a GLOBAL again */
	"real/z2_agilerl_llm_ppo_attributes_peft.pt",
	NULL,
};

struct fixture_run {
	unsigned zips, expected, identical, unsupported;
};

static bool listed(const char *path, const char *const *list)
{
	for (; *list; list++) {
		size_t n = strlen(path), k = strlen(*list);

		if (n > k && path[n - k - 1] == '/' &&
		    !strcmp(path + n - k, *list))
			return true;
	}
	return false;
}

static void fixture_roundtrip(const char *path, void *arg)
{
	struct fixture_run *r = arg;
	struct pkl_doc *doc;
	unsigned char *p, *out;
	size_t n, nout;
	struct diag d;
	bool script, want;
	int rc, proto;

	p = fixture_pkl(path, &n, &script);
	if (!p)
		return;
	/* some real-world files are refused by the parser: not our concern */
	if (parse_at(p, n, 0, &doc, &d) < 0) {
		cr_log_info("%s: parse refused: %s", path, d.msg);
		free(p);
		return;
	}
	proto = doc->proto;
	want = proto == 2 && !script && !listed(path, not_by_pickle);
	pkl_doc_free(doc);
	r->zips++;
	r->expected += want;
	rc = roundtrip(p, n, &out, &nout, &d);
	if (rc < 0) {
		cr_assert_eq(rc, -ENOTSUP, "%s: %s", path, d.msg);
		cr_assert_not(want, "%s: %s", path, d.msg);
		cr_log_info("%s: cannot be protocol 2: %s", path, d.msg);
		r->unsupported++;
		free(p);
		return;
	}
	if (nout == n && !memcmp(out, p, n)) {
		r->identical++;
	} else {
		cr_assert_not(want, "%s: not byte-identical (%zu bytes, "
			      "data.pkl has %zu)", path, nout, n);
		cr_log_info("%s: differs as expected (%s, protocol %d)", path,
			    script ? "TorchScript" : "not torch.save's", proto);
	}
	free(out);
	free(p);
}

Test(pkl_emit, torch_data_pkl_roundtrips_byte_for_byte)
{
	struct fixture_run r = { 0 };

	for_each_fixture(fixture_roundtrip, &r);
	cr_log_info("%u data.pkl round trips, %u byte-identical (of %u "
		    "expected), %u not protocol 2", r.zips, r.identical,
		    r.expected, r.unsupported);
	assert_no_leaks();
}

/* ---- hooks ---- */

/*
 * ('storage', cls, 'k' + key, location, numel), one key string per key, as
 * torch.save would write it with those keys.
 */
static int rekey(struct pkl_emit *e, const struct pkl_value *pid, void *arg)
{
	const struct pkl_value *t = pkl_call_args(pid);
	const char *key = pkl_item(t, 2)->u.s.p;
	uint64_t memo = (1ull << 32) + strtoull(key, NULL, 10);
	char buf[64];

	(*(unsigned *)arg)++;
	pkl_emit_mark(e);
	pkl_emit_value(e, pkl_item(t, 0));
	pkl_emit_value(e, pkl_item(t, 1));
	if (!pkl_emit_memo_get(e, memo)) {
		pkl_emit_str(e, buf, (size_t)snprintf(buf, sizeof(buf), "k%s",
						      key));
		pkl_emit_memo_put(e, memo);
	}
	pkl_emit_value(e, pkl_item(t, 3));
	pkl_emit_value(e, pkl_item(t, 4));
	pkl_emit_op(e, PKL_OP_TUPLE);
	/* the pickler memoizes the tuple too (never used again) */
	return pkl_emit_memo_put(e, (2ull << 32) + *(unsigned *)arg);
}

/* The storage keys of a state_dict's tensors, in order. */
static size_t state_dict_keys(const struct pkl_value *od, const char **keys,
			      size_t max)
{
	const struct pkl_call_ext *x = pkl_call_x(od);
	size_t n = 0;

	for (size_t i = 1; i < x->ndict && n < max; i += 2) {
		const struct pkl_value *t = x->dict[i];
		const struct pkl_value *pid = pkl_item(pkl_call_args(t), 0);

		cr_assert_eq(pid->kind, PKL_PERSID);
		cr_assert(pkl_is_global(pkl_item(pkl_call_args(pid), 1),
					"torch", n < 6 ? "FloatStorage" :
						 "LongStorage"));
		keys[n++] = pkl_item(pkl_call_args(pid), 2)->u.s.p;
	}
	return n;
}

Test(pkl_hooks, persid_hook_rewrites_storage_keys)
{
	unsigned calls = 0;
	struct pkl_emit_hooks h = { .persid = rekey, .arg = &calls };
	const char *k0[16], *k1[16];
	struct pkl_doc *a, *b;
	unsigned char *p, *out;
	size_t n, nout, n0, n1;
	struct diag d;
	bool script;

	p = fixture_pkl(PT_TESTENV_DIR "/fixtures/torch-1.13/state_dict.pt",
			&n, &script);
	cr_assert(p, "no state_dict.pt fixture (the \"fixtures\" test makes it)");
	a = parse_ok(p, n);
	cr_assert_eq(emit_doc(a, &h, &out, &nout, &d), 0, "%s", d.msg);
	b = parse_ok(out, nout);
	n0 = state_dict_keys(a->root, k0, 16);
	n1 = state_dict_keys(b->root, k1, 16);
	cr_assert_eq(n0, 7);
	cr_assert_eq(n1, n0);
	cr_assert_eq(calls, 7);
	for (size_t i = 0; i < n0; i++) {
		cr_assert_eq(k1[i][0], 'k');
		cr_assert_str_eq(k1[i] + 1, k0[i]);
	}
	/* the rest is as it was: 7 keys grew by one byte */
	cr_assert_eq(nout, n + 7);
	pkl_doc_free(a);
	pkl_doc_free(b);
	free(out);
	free(p);
	assert_no_leaks();
}

/* Replace every dict holding 'x' by {'y': 2}, one object for all. */
static int swap_dict(struct pkl_emit *e, const struct pkl_value *v, void *arg)
{
	(void)arg;
	if (v->kind == PKL_LIST && pkl_len(v) == 3)
		return diag_unsupported(pkl_emit_diag(e), v->off, "no lists");
	if (v->kind != PKL_DICT || !dict_get(v, "x"))
		return 0;
	if (pkl_emit_memo_get(e, 5ull << 32))
		return 1;
	pkl_emit_op(e, PKL_OP_EMPTY_DICT);
	pkl_emit_memo_put(e, 5ull << 32);
	pkl_emit_str(e, "y", 1);
	pkl_emit_int(e, 2);
	pkl_emit_op(e, PKL_OP_SETITEM);
	return 1;
}

Test(pkl_hooks, value_hook_replaces_a_dict)
{
	struct pkl_emit_hooks h = { .value = swap_dict };
	/* {'a': D, 'b': D, 'c': [1]} with D = {'x': 1} */
	struct pkl_doc *a = parse_ok(LIT(
		"\x80\x02}q\x00(X\x01\x00\x00\x00" "aq\x01"
		"}q\x02X\x01\x00\x00\x00xq\x03K\x01s"
		"X\x01\x00\x00\x00" "bq\x04h\x02"
		"X\x01\x00\x00\x00" "cq\x05]q\x06K\x01" "au.")), *b;
	unsigned char *out;
	size_t nout;
	struct diag d;

	cr_assert_eq(emit_doc(a, &h, &out, &nout, &d), 0, "%s", d.msg);
	b = parse_ok(out, nout);
	cr_assert_eq(dict_get(b->root, "a"), dict_get(b->root, "b"));
	assert_int(dict_get(dict_get(b->root, "a"), "y"), 2);
	cr_assert_null(dict_get(dict_get(b->root, "a"), "x"));
	assert_int(item(dict_get(b->root, "c"), 0), 1);
	pkl_doc_free(b);
	free(out);
	pkl_doc_free(a);

	/* a hook's failure is the emitter's */
	a = parse_ok(LIT("\x80\x02]q\x00(K\x01K\x02K\x03" "e."));
	cr_assert_eq(emit_doc(a, &h, &out, &nout, &d), -ENOTSUP);
	cr_assert_str_eq(d.msg, "no lists");
	pkl_doc_free(a);
	assert_no_leaks();
}

/* ---- hostile graphs ---- */

/*
 * A cycle through a tuple or a call (torch 1.13's OneCycleLR state holds
 * a bound method of the scheduler, getattr(sched, name), inside the
 * scheduler's own state): pickle writes the value again inside itself and
 * drops the outer copy with POP (POP_MARK) + BINGET.  The inputs are
 * CPython's pickle.dumps(..., protocol=2) of the objects named.
 */
Test(pkl_emit, writes_cycles_as_pickle_does)
{
	struct pkl_doc *a, *b;
	unsigned char *out;
	size_t nout;
	struct diag d;

	/* t = (l,) with l = [t] */
	roundtrip_identical(LIT("\x80\x02]q\x00h\x00\x85q\x01" "a0h\x01."));
	/* t = (l, 1, 2, 3) with l = [t] */
	roundtrip_identical(LIT("\x80\x02(]q\x00(h\x00K\x01K\x02K\x03tq\x01"
				"aK\x01K\x02K\x03" "1h\x01."));
	/* a list reaching itself through a tuple */
	roundtrip_identical(LIT("\x80\x02]q\x00h\x00\x85q\x01" "a."));
	/*
	 * c = F(l) with l = [c] (F.__reduce__ gives (F, (l,))): pickle's
	 * outer copy had a tuple of its own, ours shares the parsed one, so
	 * the bytes differ; the object graph must not
	 */
	a = parse_ok(LIT("\x80\x02" "c__main__\nF\nq\x00]q\x01h\x00h\x01"
			 "\x85q\x02Rq\x03" "a\x85q\x04R0h\x03."));
	cr_assert_eq(emit_doc(a, NULL, &out, &nout, &d), 0, "%s", d.msg);
	b = parse_ok(out, nout);
	assert_isomorphic(a, b);
	cr_assert_eq(b->root->kind, PKL_CALL);
	cr_assert_eq(pkl_item(pkl_item(pkl_call_args(b->root), 0), 0), b->root);
	pkl_doc_free(a);
	pkl_doc_free(b);
	free(out);
	assert_no_leaks();
}

/* a set holding itself: no pickler writes that (it would recurse) */
Test(pkl_emit, refuses_cycle_no_pickler_writes)
{
	expect_emit_fail(LIT("\x80\x04\x8f\x94(h\x00\x90."), 2,
			 "cyclic set that no pickler writes");
	assert_no_leaks();
}

/* @depth containers nested: @make opens one, @add puts it in the outer */
static void nested(struct bytes *b, const char *make, const char *put,
		   size_t depth)
{
	add(b, "\x80\x02", 2);
	add_rep(b, make, depth);
	add_rep(b, put, depth - 1);
	add(b, ".", 1);
}

Test(pkl_emit, bounds_nesting_depth)
{
	struct bytes b = { 0 };
	struct pkl_doc *a, *c;
	const struct pkl_value *v;
	unsigned char *out;
	size_t nout, depth = 0;
	struct diag d;

	/* as deep as allowed: comes back whole (compared without recursion) */
	nested(&b, "]", "a", PKL_EMIT_MAX_DEPTH);
	a = parse_ok(b.p, b.n);
	cr_assert_eq(emit_doc(a, NULL, &out, &nout, &d), 0, "%s", d.msg);
	c = parse_ok(out, nout);
	for (v = c->root; v; v = pkl_item(v, 0))
		depth++;
	cr_assert_eq(depth, PKL_EMIT_MAX_DEPTH);
	pkl_doc_free(c);
	pkl_doc_free(a);
	free(out);
	b.n = 0;
	nested(&b, "]", "a", PKL_EMIT_MAX_DEPTH + 1);
	expect_emit_fail(b.p, b.n, 2 + PKL_EMIT_MAX_DEPTH, "nested deeper");
	b.n = 0;
	add(&b, "\x80\x02)", 3);
	add_rep(&b, "\x85", 100000);
	add(&b, ".", 1);
	expect_emit_fail(b.p, b.n, 2 + 100000 - PKL_EMIT_MAX_DEPTH,
			 "nested deeper");
	free(b.p);
	assert_no_leaks();
}

Test(pkl_emit, refuses_what_protocol2_cannot_say)
{
	expect_emit_fail(LIT("\x80\x02]q\x00\x82\x05" "a."), 5, "extension");
	expect_emit_fail(LIT("\x80\x05\x97."), 2, "buffer");
	expect_emit_fail(LIT("\x80\x04\x8c\x01m\x8c\x01" "C\x93)}\x92."), 11,
			 "NEWOBJ_EX");
	expect_emit_fail(LIT("\x80\x04\x8c\x03m\nx\x8c\x01" "C\x93."), 10,
			 "newline");
	assert_no_leaks();
}
