#!/usr/bin/python3
# faultproxy.py - an HTTP proxy before nginx that injects the faults the
# remote client must survive (issue 40, "Faults"): each ends in a correct
# read after retries, or in one line and an error, never in wrong bytes.
#
#   faultproxy.py PORT_FILE UPSTREAM_PORT LOG
#
# A request for /fault/SPEC/PATH is forwarded as /PATH to nginx on
# 127.0.0.1:UPSTREAM_PORT, with the fault SPEC applied; any other path is
# forwarded untouched.  SPEC is MODE[@START][xCOUNT]: the START-th to
# (START+COUNT-1)-th GET of that SPEC and PATH since the last reset
# (counted from 1; START 1 and COUNT 1 by default) get the fault, the
# others pass.  Modes:
#
#   drop     the headers and half of the body, then a reset (RST)
#   short    Content-Length as nginx says, half of the body, then a
#            clean close: a short body
#   e500     500 Internal Server Error, no body
#   e503     503 Service Unavailable with Retry-After: 1
#   e429     429 Too Many Requests with Retry-After: 1
#   norange  Range dropped: 200 with the whole object (COUNT default:
#            every request)
#   change   from the START-th request on (COUNT: every one after), PATH
#            is served as PATH.v2 (a file the test puts beside it, its
#            mtime and so its ETag another): the object changed under the
#            reader.  The client's If-Match goes to nginx as it came, so
#            nginx answers 412 for the old ETag; without one the reply
#            carries the new ETag
#   flip     PATH while the switch is off, PATH.v2 once GET /_flip has
#            turned it on (If-Match as for change): the object changes
#            at a moment the test chooses, under a mount
#   e404     404 Not Found; e403: 403 Forbidden (one-line refusals)
#
# GET /_reset sets every count back to 0 and the switch off (the tests
# call it before each case); GET /_flip turns the switch on.  One log
# line per request (proxylib.Log): method, path as asked, status, body
# bytes sent, Range, If-Match, the SPEC, what was done, the time.
import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402

MODES = ("drop", "short", "e500", "e503", "e429", "norange", "change",
         "flip", "e404", "e403")
SPEC = re.compile(r"^(?P<mode>[a-z]+[0-9]*)(?:@(?P<start>\d+))?"
                  r"(?:x(?P<count>\d+))?$")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.flipped = False

    def hit(self, key):
        """The request number of @key (SPEC, PATH), from 1."""
        with self.lock:
            n = self.counts.get(key, 0) + 1
            self.counts[key] = n
            return n

    def reset(self):
        with self.lock:
            self.counts.clear()
            self.flipped = False


STATE = State()


class Fault(proxylib.Handler):
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path, spec, what = self.path, "-", "pass"
        if path in ("/_reset", "/_flip"):
            if path == "/_reset":
                STATE.reset()
            else:
                STATE.flipped = True
            sent = self.reply(200, path[2:].encode() + b"\n")
            LOG.write(self.command, path, 200, sent, None, None, "-",
                      path[2:])
            return
        m = re.match(r"^/fault/([^/]+)(/.*)$", path)
        mode = None
        if m:
            spec, path = m.group(1), m.group(2)
            sm = SPEC.match(spec)
            if not sm or sm.group("mode") not in MODES:
                sent = self.reply(400, b"bad fault spec\n")
                LOG.write(self.command, self.path, 400, sent, None, None,
                          spec, "bad spec")
                return
            mode = sm.group("mode")
            start = int(sm.group("start") or 1)
            dflt = None if mode in ("norange", "change") else 1
            count = int(sm.group("count")) if sm.group("count") else dflt
            n = STATE.hit((spec, path)) if self.command == "GET" else 0
            active = n >= start and (count is None or n < start + count)
            if mode == "flip":
                active = STATE.flipped
            if not active:
                mode = None
        status, sent = self.forward(path, mode)
        if mode:
            what = mode
        if getattr(self, "aborted", False):
            UP.drop()
            what += ",client closed"
        LOG.write(self.command, self.path, status, sent,
                  self.headers.get("Range"), self.headers.get("If-Match"),
                  spec, what)

    def forward(self, path, mode):
        """(status, body bytes sent) of @path with fault @mode (None:
        none)."""
        if mode in ("e500", "e503", "e429", "e404", "e403"):
            code = int(mode[1:])
            hdr = [("Retry-After", "1")] if code in (429, 503) else []
            return code, self.reply(code, b"", hdr)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in proxylib.FORWARD}
        if mode == "norange":
            headers.pop("Range", None)
            headers.pop("range", None)
        upath = path + ".v2" if mode in ("change", "flip") else path
        try:
            resp, _ = UP.request(self.command, upath, headers)
        except OSError as e:
            return 502, self.reply(502, ("upstream: %s\n" % e).encode())
        length = int(resp.getheader("Content-Length") or 0)
        if mode in ("drop", "short") and self.command == "GET" and \
                length >= 2:
            sent = self.relay(resp, limit=length // 2,
                              cut="rst" if mode == "drop" else "fin")
            UP.drop()	# the rest of the body unread
            return resp.status, sent
        return resp.status, self.relay(resp)


def main(argv):
    global UP, LOG
    if len(argv) != 4:
        proxylib.die("usage: faultproxy.py PORT_FILE UPSTREAM_PORT LOG")
    UP = proxylib.Upstream("127.0.0.1", int(argv[2]))
    LOG = proxylib.Log(argv[3])
    proxylib.serve(Fault, argv[1])


if __name__ == "__main__":
    main(sys.argv)
