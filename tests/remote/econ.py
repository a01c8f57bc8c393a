"""econ.py - the requests and body bytes one command cost, from a server's
log, against issue 40's economy limits (tests/remote/run.sh).

  econ.py KIND LOG OFFSET WHAT ECON.json PREFIX

KIND nginx (servers.py's access log: METHOD URI STATUS BYTES ...) or s3
(sigv4_front.py's tab-separated log); the lines of LOG after byte OFFSET
are the command's.  PREFIX: the fixtures' folder as the server's paths
begin ("/" for nginx, "/ptdata/" for S3).  WHAT:

  zip:NAME     ptls of a zip checkpoint: at most 4 requests, and at most
               data.pkl's record + the central directory + 128 KiB of
               body bytes (ECON, written by gen.py)
  meta:NAME    a mount's metadata (ls -lR, every xattr): the same byte
               limit, no tensor bytes
  st:NAME      safetensors: at most 2 requests
  hf:DIR:N     an HF folder of N shards: at most 2 requests per shard,
               the index once, and at most two more that are neither (a
               listing over S3; over HTTP, which lists nothing, the
               probes for .metadata and the other index name, 404s)
  dcp:DIR      a DCP directory: its .metadata (at most 2 requests of it,
               plus one listing or probe), and no tensor bytes: a .distcp
               is read at most once and one cache block (16 KiB), which
               is what its size costs over HTTP (no listing) and what the
               python values a state dict keeps as bytes items cost
               (ptls shows them); every tensor of gen.py's DCP fixtures
               is larger than that on each rank
  any:NAME     no limit: the figures only

Prints one line: "ok<TAB>figures" or "FAIL<TAB>what is over; figures",
and exits 0 or 1.  Figures: requests, body bytes, the requests by path.
"""
import collections
import json
import sys
from urllib.parse import unquote, urlsplit

KIB128 = 128 * 1024


def lines(kind, log, offset):
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    out = []
    for ln in text.splitlines():
        if not ln.strip():
            continue
        if kind == "nginx":
            p = ln.split(" ")
            out.append((p[0], p[1], int(p[2]), int(p[3])))
        else:
            p = ln.split("\t")
            out.append((p[0], p[1], int(p[2]), int(p[3])))
    return out


def main(argv):
    if len(argv) != 7:
        sys.exit(__doc__)
    kind, log, offset, what, econ_path, prefix = argv[1:]
    reqs = lines(kind, log, int(offset))
    with open(econ_path) as f:
        econ = json.load(f)
    by = collections.Counter()
    rel = []
    for m, uri, st, n in reqs:
        u = urlsplit(uri)
        path = unquote(u.path)
        r = path[len(prefix):] if path.startswith(prefix) else path
        if u.query:
            r = "?" + u.query	# an S3 listing
        by[r] += 1
        rel.append((r, st, n))
    nreq = len(reqs)
    nbytes = sum(n for _, _, n in rel)
    fig = "%d requests, %d body bytes (%s)" % (
        nreq, nbytes, ", ".join("%s x%d" % kv for kv in sorted(by.items())))
    over = [] if nreq else ["no request in the log"]
    kindw, _, arg = what.partition(":")
    if kindw in ("zip", "meta"):
        e = econ[arg]
        limit = e["data_pkl"] + e["central_directory"] + KIB128
        fig += "; limit %d bytes (data.pkl %d + central directory %d + " \
            "128 KiB)" % (limit, e["data_pkl"], e["central_directory"])
        if kindw == "zip" and nreq > 4:
            over.append("%d requests > 4" % nreq)
        if nbytes > limit:
            over.append("%d bytes > %d" % (nbytes, limit))
    elif kindw == "st":
        if nreq > 2:
            over.append("%d requests > 2" % nreq)
    elif kindw == "hf":
        d, _, n = arg.partition(":")
        n = int(n)
        found = {r for r, st, _ in rel if st < 400}
        shards = {r: c for r, c in by.items() if r in found and
                  r.startswith(d + "/") and not r.endswith(".json")}
        index = {r: c for r, c in by.items() if r.endswith(".index.json")
                 and c and any(st < 300 for rr, st, _ in rel if rr == r)}
        other = nreq - sum(shards.values()) - sum(index.values())
        for r, c in sorted(shards.items()):
            if c > 2:
                over.append("%s: %d requests > 2" % (r, c))
        if len(shards) > n:
            over.append("%d shards read, the index names %d" %
                        (len(shards), n))
        if sum(index.values()) != 1:
            over.append("the index read %d times" % sum(index.values()))
        if other > 2:
            over.append("%d requests neither shard nor index > 2" % other)
    elif kindw == "dcp":
        d = arg
        distcp = [(r, st, n) for r, st, n in rel if r.endswith(".distcp")]
        meta = by.get(d + "/.metadata", 0)
        other = nreq - meta - len(distcp)
        per = collections.Counter()
        for r, _, n in distcp:
            per[r] += 1
            if n > 16384:
                over.append("%s: %d bytes read" % (r, n))
        for r, c in sorted(per.items()):
            if c > 1:
                over.append("%s: %d requests" % (r, c))
        if meta < 1 or meta > 2:
            over.append(".metadata read %d times" % meta)
        if other > 1:
            over.append("%d other requests > 1" % other)
    elif kindw != "any":
        sys.exit("econ.py: unknown WHAT %s" % what)
    if over:
        print("FAIL\t%s; %s" % ("; ".join(over), fig))
        return 1
    print("ok\t%s" % fig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
