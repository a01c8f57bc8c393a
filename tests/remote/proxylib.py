# proxylib.py - what the remote tests' two Python servers share (the SigV4
# front of s3rver, sigv4_front.py, and the fault proxy before nginx,
# faultproxy.py): a threaded HTTP/1.1 server on 127.0.0.1 that writes its
# port to a file once it listens, forwarding of one request to an upstream
# (body streamed, Range and the conditional headers passed on) and one log
# line per request for the tests to count.  Standard library only.
import http.client
import http.server
import os
import socketserver
import socket
import struct
import sys
import threading
import time

# request headers passed upstream (the rest, Host and hop-by-hop ones
# included, are not)
FORWARD = ("range", "if-match", "if-none-match", "if-modified-since",
           "if-unmodified-since", "content-type", "content-length",
           "content-md5")
# reply headers passed back to the client
BACK = ("content-type", "content-range", "etag", "last-modified",
        "accept-ranges", "retry-after", "x-amz-request-id")
CHUNK = 65536


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class Log:
    """One line per request, tab-separated: method, path, status, body
    bytes sent, Range, If-Match, who (a key id or '-'), a note, and the
    time it was written (seconds since the epoch, 3 decimals)."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, *fields):
        line = "\t".join([str(f) if f not in (None, "") else "-"
                          for f in fields] + ["%.3f" % time.time()])
        with self.lock:
            self.f.write(line + "\n")


def serve(handler, port_file):
    """Listen on 127.0.0.1, a free port, written to @port_file (through a
    rename, so a reader never sees half a number); serve until killed."""
    srv = Server(("127.0.0.1", 0), handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


class Upstream:
    """Keep-alive connections to one upstream host, one per thread."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.local = threading.local()

    def drop(self):
        """Close this thread's connection (a body left unread on it)."""
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
            self.local.conn = None

    def request(self, method, path, headers, body=None):
        """(response, connection); a dropped kept-alive connection is
        opened again once."""
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port,
                                                  timeout=60)
                self.local.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                return conn.getresponse(), conn
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Handler(http.server.BaseHTTPRequestHandler):
    """Base of both proxies: HTTP/1.1, quiet, with helpers to answer."""
    protocol_version = "HTTP/1.1"
    server_version = "pt-test"

    def log_message(self, fmt, *args):	# the Log says what happened
        pass

    def body_in(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, body=b"", headers=()):
        """A whole reply; returns the body bytes sent."""
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
            return len(body)
        return 0

    def relay(self, resp, status=None, extra=(), limit=None, cut=None):
        """Send upstream's reply @resp back: its status (or @status), the
        BACK headers and @extra, then its body streamed.  @limit: send at
        most that many body bytes (the rest is read and thrown away).
        @cut: after @limit bytes, end the connection ("fin" a clean close,
        "rst" a reset) instead of finishing the body.  Returns the body
        bytes sent; a client that went away sets self.aborted (the
        caller drops the upstream connection, its body unread)."""
        self.aborted = False
        length = resp.getheader("Content-Length")
        self.send_response(status or resp.status)
        for k in BACK:
            v = resp.getheader(k)
            if v is not None:
                self.send_header(k, v)
        for k, v in extra:
            self.send_header(k, v)
        data = None
        if length is None and self.command != "HEAD":
            data = resp.read()	# chunked upstream: sent with a length
            length = str(len(data))
        if length is not None:
            self.send_header("Content-Length", length)
        if cut:
            self.send_header("Connection", "close")
        self.end_headers()
        sent = 0
        if self.command == "HEAD":
            resp.read()
            return 0
        if data is not None:
            chunks = [data]
        else:
            chunks = iter(lambda: resp.read(CHUNK), b"")
        for c in chunks:
            if limit is not None and sent + len(c) > limit:
                c = c[:max(0, limit - sent)]
            if c:
                try:
                    self.wfile.write(c)
                except OSError:	# the client closed: a reader that
                    self.aborted = True	# refused what it was sent
                    self.close_connection = True
                    return sent
                sent += len(c)
            if limit is not None and sent >= limit:
                break
        resp.read()	# drain, so the upstream connection stays usable
        if cut:
            self.wfile.flush()
            self.cut(cut)
        return sent

    def cut(self, how):
        """End the client's connection now: "rst" with a reset (linger
        0), else with a plain close."""
        self.close_connection = True
        if how == "rst":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        else:
            try:
                self.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        self.connection.close()


def die(msg):
    sys.stderr.write("%s: %s\n" % (os.path.basename(sys.argv[0]), msg))
    sys.exit(1)
