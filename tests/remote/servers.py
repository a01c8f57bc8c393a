#!/usr/bin/python3
# servers.py - the real servers the remote tests read from (issue 40),
# on 127.0.0.1 only, free ports, everything under one scratch directory,
# stopped when the test ends however it ends.  Standard library (plus
# python3-botocore in sigv4_front.py); run by /usr/bin/python3.
#
#   servers.py start SCRATCH SERVEDIR [PID] > ENV; . ENV
#                                        start them all; prints NAME=VALUE
#                                        lines (below, quoted for sh);
#                                        exit 1 with one line when one
#                                        cannot start (77 and a line on
#                                        stdout: nginx, node or s3rver
#                                        not installed)
#   servers.py stop SCRATCH              stop them (also done when the
#                                        process that ran start exits)
#
# start forks a supervisor (its pid in SCRATCH/supervisor.pid) that owns
# the servers and stops them all when `stop` asks, when process PID is
# gone (default: the caller of `start`, its parent: give the shell's $$
# when start runs in a subshell, as in $(...)), or when one of them dies.
#
#   PT_HTTP=http://127.0.0.1:P     nginx, SERVEDIR at /: single and
#                                  multiple ranges, If-Match; and at
#                                  /private/ too, behind basic auth
#   PT_HTTP_USER, PT_HTTP_PASS     /private/'s user and password
#   PT_HTTP_LOG                    its access log: per request
#                                  METHOD URI STATUS BODY_BYTES "RANGE"
#                                  "IF_MATCH" CONNECTION (space-separated,
#                                  "-" for none)
#   PT_FAULT=http://127.0.0.1:Q    faultproxy.py before that nginx
#                                  (/fault/SPEC/PATH, /_reset)
#   PT_FAULT_LOG                   its log (proxylib.Log's fields)
#   PT_S3_ENDPOINT=http://127.0.0.1:R  sigv4_front.py before s3rver
#   PT_S3_LOG                      its log (proxylib.Log's fields)
#   PT_S3_BUCKET, PT_S3_PUBLIC     the bucket that needs credentials and
#                                  the public one; each holds every file
#                                  of SERVEDIR under its relative path
#   PT_S3_REGION                   us-east-1
#   PT_S3_KEY_ID, PT_S3_SECRET     long-term credentials
#   PT_S3_TMP_KEY_ID, PT_S3_TMP_SECRET, PT_S3_TOKEN
#                                  session credentials (the token needed)
#
# Secrets and the password are drawn anew for each start, so that a test
# can grep its outputs for them.  SERVEDIR is read at start (copied into
# s3rver's store); nginx serves it as it is then and after.
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
S3RVER = os.environ.get("PT_S3RVER", "/var/cache/ptfs/s3rver/node_modules/"
                        "s3rver/bin/s3rver.js")
REGION = "us-east-1"
BUCKET, PUBLIC = "ptdata", "ptpublic"

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    log_format pt '$request_method $request_uri $status $body_bytes_sent '
                  '"$http_range" "$http_if_match" $connection';
    client_body_temp_path %(d)s/tmp/body;
    proxy_temp_path %(d)s/tmp/proxy;
    fastcgi_temp_path %(d)s/tmp/fastcgi;
    uwsgi_temp_path %(d)s/tmp/uwsgi;
    scgi_temp_path %(d)s/tmp/scgi;
    default_type application/octet-stream;
    keepalive_requests 10000;
    sendfile on;
    server {
        listen 127.0.0.1:%(port)d;
        access_log %(d)s/access.log pt;
        root %(root)s;
        autoindex off;
        max_ranges 64;
        location /private/ {
            alias %(root)s/;
            auth_basic "pt";
            auth_basic_user_file %(d)s/htpasswd;
        }
    }
}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, secs=20):
    t = time.time() + secs
    while time.time() < t:
        if proc.poll() is not None:
            return "%s exited with %s" % (what, proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return None
        except OSError:
            time.sleep(0.05)
    return "%s did not listen on %d within %d s" % (what, port, secs)


def wait_file(path, proc, what, secs=20):
    t = time.time() + secs
    while time.time() < t:
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read()), None
        if proc.poll() is not None:
            return 0, "%s exited with %s" % (what, proc.returncode)
        time.sleep(0.05)
    return 0, "%s wrote no port within %d s" % (what, secs)


class Fail(Exception):
    pass


class Servers:
    def __init__(self, scratch, served):
        self.d = os.path.abspath(scratch)
        self.root = os.path.abspath(served)
        self.procs = []
        self.env = {}

    def spawn(self, argv, log):
        out = open(os.path.join(self.d, log), "ab")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, cwd=self.d)
        self.procs.append(p)
        return p

    def tail(self, log):
        try:
            with open(os.path.join(self.d, log), errors="replace") as f:
                return " ".join(f.read().split("\n")[-3:]).strip()
        except OSError:
            return ""

    def nginx(self):
        nd = os.path.join(self.d, "nginx")
        os.makedirs(os.path.join(nd, "tmp"), exist_ok=True)
        user, pw = "ptuser", secrets.token_hex(8)
        with open(os.path.join(nd, "htpasswd"), "w") as f:
            f.write("%s:{PLAIN}%s\n" % (user, pw))
        conf = os.path.join(nd, "nginx.conf")

        def argv(port):
            with open(conf, "w") as f:
                f.write(NGINX_CONF % {
                    "d": nd, "root": self.root, "port": port})
            return ["nginx", "-p", nd, "-c", conf, "-e",
                    os.path.join(nd, "error.log")]
        port = self.on_free_port("nginx", argv, "nginx.out",
                                 "nginx/error.log")
        self.env.update(PT_HTTP="http://127.0.0.1:%d" % port,
                        PT_HTTP_USER=user, PT_HTTP_PASS=pw,
                        PT_HTTP_LOG=os.path.join(nd, "access.log"))
        return port

    def on_free_port(self, name, argv, out, log):
        """Start argv(PORT) on a free port, up to 5 tries (another
        process may take the port between the pick and the bind)."""
        for attempt in range(5):
            port = free_port()
            p = self.spawn(argv(port), out)
            why = wait_port(port, p, name)
            if why is None:
                return port
            self.procs.remove(p)
            p.kill()
            p.wait()
        raise Fail("%s: %s" % (why, self.tail(log)))

    def pyserver(self, name, *args):
        pf = os.path.join(self.d, name + ".port")
        # -B: no __pycache__ written into the source tree
        p = self.spawn([PY, "-B", os.path.join(HERE, name + ".py"), pf] +
                       [str(a) for a in args], name + ".out")
        port, why = wait_file(pf, p, name)
        if why:
            raise Fail("%s: %s" % (why, self.tail(name + ".out")))
        return port

    def s3(self):
        store = os.path.join(self.d, "s3rver")
        os.makedirs(store, exist_ok=True)
        port = self.on_free_port(
            "s3rver", lambda port: [
                "node", S3RVER, "-d", store, "-a", "127.0.0.1", "-p",
                str(port), "--silent", "--configure-bucket", BUCKET,
                "--configure-bucket", PUBLIC], "s3rver.out", "s3rver.out")
        self.upload(port)
        keys = {
            "AKPT" + secrets.token_hex(8).upper(): {
                "secret": secrets.token_urlsafe(30), "token": None},
            "ASPT" + secrets.token_hex(8).upper(): {
                "secret": secrets.token_urlsafe(30),
                "token": secrets.token_urlsafe(60)},
        }
        conf = os.path.join(self.d, "sigv4_front.json")
        with open(conf, "w") as f:
            json.dump({"region": REGION, "keys": keys, "public": [PUBLIC]},
                      f)
        front = self.pyserver("sigv4_front", port, conf,
                              os.path.join(self.d, "s3.log"))
        (k1, v1), (k2, v2) = sorted(keys.items())
        self.env.update(
            PT_S3_ENDPOINT="http://127.0.0.1:%d" % front,
            PT_S3_LOG=os.path.join(self.d, "s3.log"),
            PT_S3_BUCKET=BUCKET, PT_S3_PUBLIC=PUBLIC, PT_S3_REGION=REGION,
            PT_S3_KEY_ID=k1, PT_S3_SECRET=v1["secret"],
            PT_S3_TMP_KEY_ID=k2, PT_S3_TMP_SECRET=v2["secret"],
            PT_S3_TOKEN=v2["token"])

    def upload(self, port):
        """Every file of SERVEDIR into both buckets (s3rver itself takes
        anonymous PUTs)."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for top, dirs, files in os.walk(self.root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(top, name)
                rel = os.path.relpath(path, self.root)
                key = "/".join(rel.split(os.sep))
                with open(path, "rb") as f:
                    data = f.read()
                for b in (BUCKET, PUBLIC):
                    conn.request("PUT", "/%s/%s" % (b, key), body=data,
                                 headers={"Content-Length": str(len(data))})
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        raise Fail("s3rver: PUT %s/%s: %d" % (b, key,
                                                               r.status))
        conn.close()

    def start(self):
        http_port = self.nginx()
        fport = self.pyserver("faultproxy", http_port,
                              os.path.join(self.d, "fault.log"))
        self.env.update(PT_FAULT="http://127.0.0.1:%d" % fport,
                        PT_FAULT_LOG=os.path.join(self.d, "fault.log"))
        self.s3()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        t = time.time() + 5
        for p in self.procs:
            try:
                p.wait(max(0.1, t - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


def supervise(scratch, served, watch, ready_fd):
    """The supervisor's life: start, say ready (the env or the failure)
    on @ready_fd, then wait for a reason to stop."""
    os.setsid()
    # off the caller's descriptors: a shell's $(servers.py start) ends
    # when start exits, not when the supervisor does
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    srv = Servers(scratch, served)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    signal.signal(signal.SIGHUP, lambda *a: stop.append(1))
    with open(os.path.join(scratch, "supervisor.pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    try:
        srv.start()
        msg = "".join("%s=%s\n" % (k, shlex.quote(v))
                      for k, v in sorted(srv.env.items()))
        with open(os.path.join(scratch, "env"), "w") as f:
            f.write(msg)
        os.write(ready_fd, b"ok\n" + msg.encode())
    except (Fail, OSError) as e:
        srv.stop()
        os.write(ready_fd, ("fail\n%s\n" % e).encode())
        os._exit(1)
    os.close(ready_fd)
    why = None
    while not stop and why is None:
        time.sleep(0.2)
        try:
            os.kill(watch, 0)
        except ProcessLookupError:
            why = "the test (pid %d) is gone" % watch
        for p in srv.procs:
            if p.poll() is not None:
                why = "%s exited with %s" % (p.args[0], p.returncode)
    srv.stop()
    try:
        os.unlink(os.path.join(scratch, "supervisor.pid"))
    except OSError:
        pass
    if why:
        with open(os.path.join(scratch, "supervisor.out"), "a") as f:
            f.write("stopped: %s\n" % why)
    os._exit(0)


def start(scratch, served, watch):
    for prog, what in (("nginx", "nginx-light"), ("node", "nodejs")):
        if shutil.which(prog) is None and not os.path.exists(
                "/usr/sbin/" + prog):
            print("%s not installed (apt-get install %s): skipping" %
                  (prog, what))
            return 77
    if not os.path.exists(S3RVER):
        print("s3rver not installed in %s (scripts/setup.sh): skipping" %
              S3RVER)
        return 77
    os.makedirs(scratch, exist_ok=True)
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        supervise(scratch, served, watch, w)
    os.close(w)
    with os.fdopen(r) as f:
        answer = f.read()
    status, _, rest = answer.partition("\n")
    if status != "ok":
        sys.stderr.write("servers.py: %s" % (rest or "the supervisor died\n"))
        return 1
    sys.stdout.write(rest)
    return 0


def stop(scratch):
    pf = os.path.join(scratch, "supervisor.pid")
    try:
        with open(pf) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return 0
    t = time.time() + 10
    while time.time() < t and os.path.exists(pf):
        time.sleep(0.05)
    return 0


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "start":
        return start(argv[2], argv[3],
                     int(argv[4]) if len(argv) == 5 else os.getppid())
    if len(argv) == 3 and argv[1] == "stop":
        return stop(argv[2])
    sys.stderr.write("usage: servers.py start SCRATCH SERVEDIR [PID] | "
                     "stop SCRATCH\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
