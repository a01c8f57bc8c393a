#!/usr/bin/env python3
"""ptrepack_check.py MANIFEST - load what ptrepack wrote and what it was
written from with the torch under test, and compare.  Runs under torch 1.13
(/usr/bin/python3) and torch 2.x (the chroot).  MANIFEST lines are

    MODE <TAB> ORIGINAL <TAB> WRITTEN [<TAB> EXTRA]

  same    the same objects: types, keys, python values, tensor dtypes,
          shapes, strides, offsets, requires_grad, Parameter or not,
          quantizer parameters, bytes, and which tensors share a storage
  clone   the same, except that storage offsets may differ and every
          storage of WRITTEN is at most as large as ORIGINAL's; EXTRA is
          the largest byte count WRITTEN's storages may add up to
  view    the same, except that storage offsets may differ (a legacy
          storage view's offset moves into its tensors)
  mmap    the same, WRITTEN loaded with mmap=True (torch >= 2.1 only); with
          EXTRA = ALIGN every storage's data pointer is ALIGN-aligned
          in the mapping, and with calculate_storage_offsets too

One line per check, "ok ..." or "FAIL ...", then "N passed, N failed";
exit 0 or 1.
"""
import collections
import math
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

V2 = int(torch.__version__.split(".")[0]) >= 2
passed = failed = 0


def report(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok", what)
    else:
        failed += 1
        print("FAIL", what)


class Diff(Exception):
    pass


def storage_key(t):
    if V2:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    s = t.storage()
    return s.data_ptr(), s.size() * s.element_size()


def tensor_bytes(t):
    if t.is_quantized:
        t = t.int_repr()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.reshape(-1).view(torch.uint8).tolist() if t.numel() else []


def same_scalar(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def compare(a, b, path, mode, tensors, seen):
    if type(a) is not type(b):
        raise Diff("%s: type %s vs %s" % (path, type(a).__name__,
                                          type(b).__name__))
    if id(a) in seen:
        return
    seen.add(id(a))
    if isinstance(a, torch.Tensor):
        for attr in ("dtype", "shape", "requires_grad", "is_quantized",
                     "layout"):
            if getattr(a, attr) != getattr(b, attr):
                raise Diff("%s: %s %s vs %s" % (path, attr, getattr(a, attr),
                                                getattr(b, attr)))
        if a.layout == torch.strided and a.device.type != "meta":
            if a.stride() != b.stride():
                raise Diff("%s: stride %s vs %s" % (path, a.stride(),
                                                    b.stride()))
            if mode not in ("clone", "view") and \
                    a.storage_offset() != b.storage_offset():
                raise Diff("%s: offset %d vs %d" % (path, a.storage_offset(),
                                                    b.storage_offset()))
            tensors.append((path, a, b))
        if a.is_quantized:
            if a.qscheme() != b.qscheme():
                raise Diff("%s: qscheme" % path)
            if a.qscheme() in (torch.per_tensor_affine,
                               torch.per_tensor_symmetric):
                if (a.q_scale(), a.q_zero_point()) != (b.q_scale(),
                                                       b.q_zero_point()):
                    raise Diff("%s: qparams" % path)
        if a.device.type != "meta" and tensor_bytes(a) != tensor_bytes(b):
            raise Diff("%s: values differ" % path)
        for k, v in vars(a).items():
            compare(v, getattr(b, k, None), "%s.%s" % (path, k), mode,
                    tensors, seen)
        return
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            raise Diff("%s: keys %r vs %r" % (path, list(a)[:5], list(b)[:5]))
        for k in a:
            compare(a[k], b[k], "%s/%s" % (path, k), mode, tensors, seen)
        ma, mb = getattr(a, "_metadata", None), getattr(b, "_metadata", None)
        if ma != mb:
            raise Diff("%s: _metadata %r vs %r" % (path, ma, mb))
        return
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise Diff("%s: length %d vs %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, "%s/%d" % (path, i), mode, tensors, seen)
        return
    if isinstance(a, (set, frozenset)):
        if a != b:
            raise Diff("%s: set differs" % path)
        return
    if isinstance(a, (int, float, complex, str, bytes, bool, type(None),
                      torch.dtype, torch.device, torch.Size)):
        if not same_scalar(a, b):
            raise Diff("%s: %r vs %r" % (path, a, b))
        return
    if hasattr(a, "__dict__"):
        compare(vars(a), vars(b), path + ".__dict__", mode, tensors, seen)
        return
    if repr(a) != repr(b):
        raise Diff("%s: %r vs %r" % (path, a, b))


def sharing(tensors, side):
    groups = collections.defaultdict(list)
    for path, a, b in tensors:
        groups[storage_key(a if side == 0 else b)[0]].append(path)
    return sorted(sorted(g) for g in groups.values())


def load(path, **kw):
    if V2 and "weights_only" not in kw:
        kw["weights_only"] = False  # 2.6+ defaults to True
    return torch.load(path, map_location="cpu", **kw)


def serialization_config():
    try:
        import torch.utils.serialization as ser
        return ser.config
    except (ImportError, AttributeError):
        return None


def check(mode, orig, written, extra):
    name = "%s %s" % (mode, written.rsplit("/", 1)[-1])
    try:
        a = load(orig)
    except Exception as e:  # the original does not load here: nothing to say
        print("skip %s: original does not load: %s" % (name, str(e)[:80]))
        return
    kw = {}
    if mode == "mmap":
        if not V2 or serialization_config() is None:
            print("skip %s: torch %s has no mmap=True" % (name,
                                                          torch.__version__))
            return
        kw["mmap"] = True
    try:
        b = load(written, **kw)
    except Exception as e:
        report(False, "%s: torch.load: %s" % (name, str(e)[:200]))
        return
    tensors = []
    try:
        compare(a, b, "", mode, tensors, set())
        if sharing(tensors, 0) != sharing(tensors, 1):
            raise Diff("storage sharing differs")
    except Diff as e:
        report(False, "%s: %s" % (name, e))
        return
    report(True, "%s: same objects (%d tensors)" % (name, len(tensors)))
    if V2:
        try:
            wa = load(orig, weights_only=True)
            ok_a = True
        except Exception:
            ok_a = False
        if ok_a:
            try:
                load(written, weights_only=True, **kw)
                report(True, "%s: weights_only=True loads it" % name)
            except Exception as e:
                report(False, "%s: weights_only=True: %s" % (name,
                                                            str(e)[:200]))
            del wa
    if mode == "clone":
        sizes = {}
        for _, _, t in tensors:
            p, n = storage_key(t)
            sizes[p] = n
        size = sum(sizes.values())
        report(size <= int(extra), "%s: storages hold %d bytes (at most %s)"
               % (name, size, extra))
    if mode == "mmap" and extra:
        align = int(extra)
        bad = [p for p, _, t in tensors
               if t.numel() and storage_key(t)[0] % align]
        report(not bad, "%s: every storage %d-aligned in the mapping%s" %
               (name, align, (": not " + ", ".join(bad[:3])) if bad else ""))
        cfg = serialization_config().load
        old = getattr(cfg, "calculate_storage_offsets", None)
        if old is not None:
            cfg.calculate_storage_offsets = True
            try:
                c = load(written, mmap=True)
                t2 = []
                compare(a, c, "", mode, t2, set())
                report(True, "%s: mmap with calculate_storage_offsets" % name)
            except Exception as e:
                report(False, "%s: calculate_storage_offsets: %s" %
                       (name, str(e)[:200]))
            finally:
                cfg.calculate_storage_offsets = old


def main():
    with open(sys.argv[1]) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            check(parts[0], parts[1], parts[2],
                  parts[3] if len(parts) > 3 else "")
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
