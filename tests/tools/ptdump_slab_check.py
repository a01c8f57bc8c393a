"""ptdump_slab_check.py PTDUMP PTLS FILE... - ptdump --values with
--start/--count/--stride against the slab cut out of the whole tensor
(ptdump --values --json without them, sliced here in plain Python), for
every tensor of each FILE (any format: zip, legacy, tar, TorchScript,
safetensors, DCP chunks, strided views), with two slabs each: the leading
dimensions only, and every dimension with a stride.  Prints one line per
file, "FAIL ..." for each mismatch; exit 1 on any."""
import itertools
import json
import subprocess
import sys

ptdump, ptls, files = sys.argv[1], sys.argv[2], sys.argv[3:]
bad = 0


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cut(flat, shape, start, count, stride):
    lead = [1] * len(shape)
    for j in range(len(shape) - 2, -1, -1):
        lead[j] = lead[j + 1] * shape[j + 1]
    return [flat[sum((s + i * d) * m for i, s, d, m in
                     zip(idx, start, stride, lead))]
            for idx in itertools.product(*[range(c) for c in count])]


def lst(v):
    return ",".join(str(x) for x in v)


for f in files:
    rc, out, err = run(ptls, "--json", "-t", f)
    if rc != 0:
        print("skip %s: %s" % (f, err.strip()))
        continue
    n = 0
    for e in json.loads(out)["entries"]:
        shape = e.get("shape")
        if e["kind"] != "tensor" or not shape or 0 in shape:
            continue
        rc, full, err = run(ptdump, "--values", e["path"], "--json", f)
        if rc != 0:
            continue    # meta tensors and the like: nothing to cut
        full = json.loads(full)["values"]
        nd = len(shape)
        slabs = [
            # the leading dimension only; the rest whole
            ([shape[0] // 2], [max(1, (shape[0] + 1) // 3)], []),
            # every dimension, with a stride where there is room
            ([s // 3 for s in shape], [],
             [2 if s > 3 else 1 for s in shape]),
        ]
        for start, count, stride in slabs:
            st = start + [0] * (nd - len(start))
            sd = stride + [1] * (nd - len(stride))
            cn = count + [(shape[j] - st[j] - 1) // sd[j] + 1
                          for j in range(len(count), nd)]
            args = [ptdump, "--values", e["path"], "--json",
                    "--start", lst(start)]
            if count:
                args += ["--count", lst(count)]
            if stride:
                args += ["--stride", lst(stride)]
            rc, out, err = run(*(args + [f]))
            want = cut(full, shape, st, cn, sd)
            try:
                got = json.loads(out)
            except ValueError:
                got = None
            if rc != 0 or not got or got["values"] != want or \
                    got["count"] != cn or got["start"] != st or \
                    got["stride"] != sd or got["shown"] != len(want):
                bad += 1
                print("FAIL %s %s %s: exit %d %s: got %s want %s" % (
                    f, e["path"], " ".join(args[4:]), rc, err.strip(),
                    out[:200], want[:8]))
            n += 1
    print("ok %s: %d slabs equal the cut of the whole tensor" % (f, n))
sys.exit(1 if bad else 0)
