"""dtype_torch.py - the torch half of tests/fs/edit/dtype.sh, run under the torch
being tested (Debian's 1.13, or 2.x in the chroot).

  gen DIR      write DIR/d.pt (float32 bit patterns that exercise every
               rounding, overflow and NaN rule, every float16 and
               bfloat16 pattern, float64 values that round twice, a tied
               pair with a transposed view, a Parameter, an int tensor, a
               tensor that requires grad) and DIR/plan.json: for each
               cast the mount will make, the key, the dtype and torch's
               own t.to(dtype) as bytes (DIR/ref/<key>.<dtype>)
  verify DIR   torch.load DIR/d.pt after the mount wrote it back and
               compare it with torch.load of DIR/orig.pt: every cast
               tensor bit for bit equal to t.to(dtype) of the original
               (t.to(a).to(b) for two casts in a row),
               ties and views still sharing their storage, Parameters and
               requires_grad kept, everything else unchanged

Prints "ok   LABEL: ..." or "FAIL LABEL: ..." per check, then
"N passed, N failed".  torch 1.13's bfloat16 NaN is another pattern than
2.x's (and depends on the copy kernel's path); ptfs writes 2.x's, so
under 1.13 a NaN becoming bfloat16 is checked to be a NaN, not its bits
(docs/editing.md).
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")

import torch

T2 = int(torch.__version__.split(".")[0]) >= 2
F8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def raw(t):
    """A tensor's contiguous bytes, whatever its dtype."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
        t = t.view(torch.int16)
    elif T2 and str(t.dtype)[6:] in F8:
        t = t.view(torch.uint8)
    return t.numpy().tobytes()


def from_bits(words):
    return torch.tensor(words, dtype=torch.int64).to(torch.int32) \
        .view(torch.float32)


def patterns(g):
    """float32 values for every rule of cvt.c: ties to even for each
    narrower type, subnormals, overflow per type, NaN, signed zeros."""
    special = [0.0, -0.0, float("inf"), -float("inf"), float("nan"),
               1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38,
               65504.0, 65519.0, 65520.0, 65536.0, 6.1e-5, 5.96e-8, 2.98e-8,
               448.0, 464.0, 480.0, -448.0, 57344.0, 61439.0, 61440.0,
               1e-3, 0.0078125, 2 ** -10, 2 ** -17, 2 ** -16, 1.0, -1.0]
    ties = [0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,  # bfloat16
            0x3f801000, 0x3f803000, 0x3f801001,              # float16
            0x3f840000, 0x3f8c0000, 0x3f880000,              # float8
            0x7fc00001, 0xffc00000, 0x7f800001, 0x7fbfffff]  # NaNs
    t = [torch.tensor(special), from_bits([w - (1 << 32) if w >> 31 else w
                                           for w in ties])]
    for scale in (1e-40, 1e-30, 1e-8, 1e-3, 1.0, 100.0, 1e4, 1e20, 1e38):
        t.append(torch.randn(512, generator=g) * scale)
    # every float16 and every bfloat16 value, as float32
    t.append(torch.arange(-32768, 32768, dtype=torch.int32)
             .to(torch.int16).view(torch.float16).float())
    t.append((torch.arange(0, 65536, dtype=torch.int32) << 16)
             .view(torch.float32))
    return torch.cat(t)


def model():
    g = torch.Generator().manual_seed(1913)
    pat = patterns(g)
    f64 = torch.cat([pat.double(),
                     torch.randn(4096, generator=g, dtype=torch.float64),
                     # between two float32s: rounding to float32 first,
                     # as torch does, differs from rounding once
                     1 + torch.arange(1, 200, dtype=torch.float64) * 2 ** -30])
    tied = torch.randn(8, 16, generator=g)
    sd = {
        "pat_bf16": pat.clone(), "pat_f16": pat.clone(),
        "pat_f64": pat.clone().reshape(-1, 1),
        "f64": f64,
        "f16_all": torch.arange(-32768, 32768, dtype=torch.int32)
        .to(torch.int16).view(torch.float16).clone(),
        "bf16_all": torch.arange(-32768, 32768, dtype=torch.int32)
        .to(torch.int16).view(torch.bfloat16).clone(),
        "tied_a": tied, "tied_b": tied, "tied_t": tied.t(),
        "par": torch.nn.Parameter(torch.randn(3, 4, generator=g)),
        "i32": torch.arange(-6, 6, dtype=torch.int32),
        "keep": torch.randn(3, 5, generator=g),
        "later": torch.randn(7, generator=g),
        "grad": torch.randn(5, generator=g).requires_grad_(),
    }
    if T2:
        for k in F8:
            sd["pat_" + k] = pat.clone()
    return sd


# The casts dtype.sh makes (before the kill -9, then after the remount),
# and the tensors each one changes with it.
def plan():
    before = [("pat_bf16", "bfloat16", []), ("pat_f16", "float16", []),
              ("pat_f64", "float64", []), ("f64", "bfloat16", []),
              ("tied_a", "float16", ["tied_b", "tied_t"]),
              ("par", "float64", [])]
    after = [("f16_all", "float32", []), ("bf16_all", "float16", []),
             ("later", "bfloat16", []), ("pat_f64", "float32", [])]
    if T2:
        before += [("pat_" + k, k, []) for k in F8[:2]]
        after += [("pat_" + k, k, []) for k in F8[2:]]
    return before, after


def name(dt):
    return str(dt).replace("torch.", "")


def gen(d):
    os.makedirs(d + "/ref", exist_ok=True)
    sd = model()
    torch.save(sd, d + "/d.pt")
    torch.save(sd, d + "/orig.pt")
    before, after = plan()
    out = {"torch": torch.__version__, "t2": T2, "before": [], "after": [],
           "tensors": {}}
    cur = {k: t.detach() for k, t in sd.items()}
    for part, casts in (("before", before), ("after", after)):
        for key, to, also in casts:
            for k in [key] + also:
                # a second cast converts what the first one made
                cur[k] = cur[k].to(getattr(torch, to))
                with open("%s/ref/%s.%s" % (d, k, to), "wb") as f:
                    f.write(raw(cur[k]))
            out[part].append([key, to, also])
    for k, t in sd.items():
        out["tensors"][k] = {"dtype": name(t.dtype), "shape": list(t.shape),
                             "numel": t.numel()}
        with open("%s/ref/%s.orig" % (d, k), "wb") as f:
            f.write(raw(t))
    with open(d + "/plan.json", "w") as f:
        json.dump(out, f, indent=1)


def same_bits(a, b, to):
    """a (ptfs) and b (torch's .to()) equal bit for bit; under 1.13 a NaN
    becoming bfloat16 only has to be a NaN.  (equal, NaN lanes excused)"""
    ra, rb = raw(a), raw(b)
    if ra == rb and a.dtype == b.dtype:
        return True, 0
    if T2 or to != "bfloat16" or a.dtype != b.dtype or a.shape != b.shape:
        return False, 0
    fa, fb = a.float().reshape(-1), b.float().reshape(-1)
    differ = (a.view(torch.int16) != b.view(torch.int16)).reshape(-1)
    nan = torch.isnan(fa) & torch.isnan(fb)
    return bool((differ & ~nan).sum() == 0), int((differ & nan).sum())


def verify(d):
    npass = nfail = 0

    def check(label, ok, msg, why):
        nonlocal npass, nfail
        if ok:
            npass += 1
            print("ok   %s: %s" % (label, msg))
        else:
            nfail += 1
            print("FAIL %s: %s" % (label, why))

    with open(d + "/plan.json") as f:
        p = json.load(f)
    orig = torch.load(d + "/orig.pt")
    try:
        got = torch.load(d + "/d.pt")
    except Exception as e:
        check("torch.load", False, "", "the written-back file: %s" % e)
        print("%d passed, %d failed" % (npass, nfail))
        return 1
    cast, want = {}, {k: t.detach() for k, t in orig.items()}
    path = {k: name(t.dtype) for k, t in orig.items()}
    for key, to, also in p["before"] + p["after"]:
        for k in [key] + also:
            cast[k] = to
            want[k] = want[k].to(getattr(torch, to))
            path[k] += " -> " + to
    # what the mount test wrote over a tensor after casting it
    wrote = {}
    if os.path.exists(d + "/expect.json"):
        with open(d + "/expect.json") as f:
            wrote = json.load(f)
    for k, t in orig.items():
        g = got.get(k)
        if g is None:
            check(k, False, "", "missing")
            continue
        to = cast.get(k)
        if k in wrote:
            with open(d + "/" + wrote[k]["bytes"], "rb") as f:
                b = f.read()
            check(k, name(g.dtype) == wrote[k]["dtype"] and raw(g) == b,
                  "cast to %s, then np.save of %s data: as written" % (
                      wrote[k]["dtype"], wrote[k]["dtype"]),
                  "%s, bytes %s" % (name(g.dtype), "equal" if raw(g) == b
                                    else "differ"))
            continue
        if to is None:
            check(k, raw(g) == raw(t) and g.dtype == t.dtype,
                  "unchanged (%s)" % name(t.dtype), "changed")
            continue
        same, excused = same_bits(g, want[k], to)
        check(k, name(g.dtype) == to and list(g.shape) == list(t.shape) and
              g.stride() == t.stride() and same,
              "%s, %d values bit for bit as torch %s's .to()%s" % (
                  path[k], t.numel(), torch.__version__,
                  " (%d NaNs: 1.13's bfloat16 NaN is another pattern)" %
                  excused if excused else ""),
              "%s %s stride %s, want %s %s %s; bits %s" % (
                  name(g.dtype), list(g.shape), g.stride(), to,
                  list(t.shape), t.stride(), "equal" if same else "differ"))
    ptr = (lambda t: t.untyped_storage().data_ptr()) if T2 else \
        (lambda t: t.storage().data_ptr())
    check("tie", ptr(got["tied_a"]) == ptr(got["tied_b"]) ==
          ptr(got["tied_t"]) and torch.equal(got["tied_t"], got["tied_a"].t()),
          "tied_a, tied_b and the transpose tied_t share one float16 storage",
          "the cast untied them")
    check("Parameter", isinstance(got["par"], torch.nn.Parameter) and
          got["par"].requires_grad and got["grad"].requires_grad,
          "par is still a Parameter, requires_grad kept", "lost")
    check("keys", list(got) == list(orig), "%d keys, in order" % len(got),
          "%s vs %s" % (list(got), list(orig)))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(verify(sys.argv[2]))
