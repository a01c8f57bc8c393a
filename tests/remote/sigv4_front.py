#!/usr/bin/python3
# sigv4_front.py - the S3 the remote tests read: a proxy before s3rver
# that checks every request's AWS Signature V4 as S3 does, since s3rver
# stores objects and serves ranges but takes any V4 signature (its
# authentication.js: "Signature version 4 calculation is unimplemented").
#
#   sigv4_front.py PORT_FILE S3RVER_PORT CONFIG.json LOG
#
# CONFIG: {"region": R, "keys": {KEY_ID: {"secret": S, "token": T|null}},
# "public": [BUCKET...]}.  A request with an Authorization header is
# signed with a key of CONFIG (else 403 InvalidAccessKeyId), whose token,
# when it has one, comes as X-Amz-Security-Token (else 403 InvalidToken);
# host and every x-amz-* header are signed; its scope names R and "s3";
# X-Amz-Date is within 15 minutes; the signature, recomputed by
# python3-botocore's S3SigV4Auth over the canonical request made from the
# headers as they came (canonical URI and query encoded once, as S3 does),
# must match, else 403 SignatureDoesNotMatch.  Every refusal has S3's XML
# error body.  A request without one is anonymous: a GET, HEAD or listing
# of a bucket in "public" is served, anything else is 403 AccessDenied.
# Accepted requests go to s3rver without their signature (it would take
# it anyway) and its reply comes back streamed.
#
# Where s3rver 3.7.1 is not S3 (lib/controllers/object.js and
# lib/stores/filesystem.js), the front does what S3 does:
#   - a suffix range "bytes=-N" is read by s3rver as "bytes=0-N" (it
#     splits on '-' and takes Number("") = 0): N+1 bytes from the start
#     with Content-Range 0-N/SIZE.  The front asks s3rver for the size
#     (HEAD) and sends "bytes=SIZE-N-(SIZE-1)" instead;
#   - several ranges ("bytes=0-1,5-6") parse as nonsense there; S3 serves
#     none of them (200, the whole object): so does the front;
#   - If-Match and If-Unmodified-Since are ignored by s3rver's GET (only
#     If-None-Match and If-Modified-Since are looked at): the front
#     answers 412 PreconditionFailed when s3rver's ETag or Last-Modified
#     says the condition fails, before any body byte.
# One log line per request (proxylib.Log): method, path, status, body
# bytes, Range, If-Match, the key id or "-", the error code or "ok".
import datetime
import email.utils
import hashlib
import hmac
import json
import os
import re
import sys
from urllib.parse import parse_qsl, quote, unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402

from botocore.auth import S3SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

AUTH = re.compile(r"^AWS4-HMAC-SHA256\s+Credential=([^/,\s]+)/(\d{8})/"
                  r"([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
                  r"SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$")


class Canonical(S3SigV4Auth):
    """botocore's S3 signer over a request as it came: the path taken
    once decoded and encoded again (S3's canonical URI), the query from
    params (encoded by botocore)."""

    def _normalize_url_path(self, path):
        return quote(unquote(path), safe="/~")


def error(code, msg, status):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            '<Message>%s</Message></Error>\n' % (code, msg)).encode()
    return status, code, body


class Front(proxylib.Handler):
    def do_GET(self):
        self.handle_any()

    def do_HEAD(self):
        self.handle_any()

    def do_PUT(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        body = self.body_in()
        who, refusal = self.check(body)
        rng, im = self.headers.get("Range"), self.headers.get("If-Match")
        if refusal:
            status, code, xml = refusal
            sent = self.reply(status, xml,
                              [("Content-Type", "application/xml")])
            LOG.write(self.command, self.path, status, sent, rng, im, who,
                      code)
            return
        status, sent, note = self.forward(body)
        if getattr(self, "aborted", False):
            UP.drop()
            note += ",client closed"
        LOG.write(self.command, self.path, status, sent, rng, im, who, note)

    def check(self, body):
        """(who, None) when the request may go on, else (who, error())."""
        auth = self.headers.get("Authorization")
        bucket = urlsplit(self.path).path.lstrip("/").split("/")[0]
        if auth is None:
            if self.command in ("GET", "HEAD") and bucket in CONF["public"]:
                return "-", None
            return "-", error("AccessDenied", "Access Denied", 403)
        m = AUTH.match(auth.strip())
        if not m:
            return "?", error("AuthorizationHeaderMalformed",
                              "The authorization header is malformed", 400)
        kid, day, region, service, signed, sig = m.groups()
        key = CONF["keys"].get(kid)
        if key is None:
            return kid, error("InvalidAccessKeyId", "The AWS Access Key Id "
                              "you provided does not exist in our records.",
                              403)
        if region != CONF["region"] or service != "s3":
            return kid, error("AuthorizationHeaderMalformed", "the region '%s'"
                              " is wrong; expecting '%s'" %
                              (region, CONF["region"]), 400)
        names = signed.split(";")
        present = [k.lower() for k in self.headers.keys()]
        unsigned = [k for k in present
                    if k.startswith("x-amz-") and k not in names]
        if "host" not in names or unsigned:
            return kid, error("AccessDenied", "There were headers present "
                              "in the request which were not signed", 403)
        token = self.headers.get("X-Amz-Security-Token")
        if key.get("token") is not None and token != key["token"]:
            return kid, error("InvalidToken", "The provided token is "
                              "malformed or otherwise invalid.", 403)
        if key.get("token") is None and token is not None:
            return kid, error("InvalidToken", "The provided token is "
                              "malformed or otherwise invalid.", 403)
        stamp = self.headers.get("X-Amz-Date", "")
        try:
            t = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
        except ValueError:
            return kid, error("AccessDenied", "AWS authentication requires "
                              "a valid Date or x-amz-date header", 403)
        skew = abs((datetime.datetime.utcnow() - t).total_seconds())
        if skew > 900 or stamp[:8] != day:
            return kid, error("RequestTimeTooSkewed", "The difference between"
                              " the request time and the current time is "
                              "too large.", 403)
        sha = self.headers.get("X-Amz-Content-SHA256")
        if sha not in (None, "UNSIGNED-PAYLOAD") and \
                sha != hashlib.sha256(body).hexdigest():
            return kid, error("XAmzContentSHA256Mismatch", "The provided "
                              "'x-amz-content-sha256' header does not match "
                              "what was computed.", 400)
        if not hmac.compare_digest(sig, self.signature(kid, key, region,
                                                       names, stamp, body)):
            return kid, error("SignatureDoesNotMatch", "The request signature"
                              " we calculated does not match the signature "
                              "you provided. Check your key and signing "
                              "method.", 403)
        return kid, None

    def signature(self, kid, key, region, names, stamp, body):
        parts = urlsplit(self.path)
        hdrs = {}
        for n in names:
            vals = self.headers.get_all(n) or []
            hdrs[n] = ",".join(vals)
        req = AWSRequest(method=self.command,
                         url="http://%s%s" % (hdrs.get("host", ""),
                                              parts.path),
                         headers=hdrs, data=body)
        req.params = dict(parse_qsl(parts.query, keep_blank_values=True))
        # without X-Amz-Content-SHA256, botocore takes the payload's own
        # digest (plain http), as S3 would
        req.context["timestamp"] = stamp
        signer = Canonical(Credentials(kid, key["secret"], key.get("token")),
                           "s3", region)
        cr = signer.canonical_request(req)
        return signer.signature(signer.string_to_sign(req, cr), req)

    def forward(self, body):
        """(status, body bytes sent, note) of the request sent on."""
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in proxylib.FORWARD}
        path = self.path
        rng = headers.get("Range") or headers.get("range")
        if rng:
            headers.pop("Range", None)
            headers.pop("range", None)
            m = re.match(r"^bytes=-(\d+)$", rng.strip())
            if "," in rng:
                rng = None	# S3: the whole object
            elif m:
                head, _ = UP.request("HEAD", path, {})
                head.read()
                size = int(head.getheader("Content-Length") or 0)
                if head.status == 200 and size:
                    n = min(int(m.group(1)), size)
                    rng = "bytes=%d-%d" % (size - n, size - 1)
            if rng:
                headers["Range"] = rng
        im = headers.pop("If-Match", None) or headers.pop("if-match", None)
        ius = headers.pop("If-Unmodified-Since", None) or \
            headers.pop("if-unmodified-since", None)
        try:
            resp, _ = UP.request(self.command, path, headers,
                                 body if body else None)
        except OSError as e:
            st, code, xml = error("InternalError", str(e), 500)
            return st, self.reply(st, xml), code
        if resp.status in (200, 206) and (im or ius):
            etag = resp.getheader("ETag")
            lm = resp.getheader("Last-Modified")
            failed = im is not None and im.strip() != "*" and \
                etag not in [t.strip() for t in im.split(",")]
            if ius and lm and not failed:
                try:
                    failed = email.utils.parsedate_to_datetime(lm) > \
                        email.utils.parsedate_to_datetime(ius)
                except (TypeError, ValueError):
                    pass
            if failed:
                resp.read()
                st, code, xml = error("PreconditionFailed", "At least one "
                                      "of the pre-conditions you specified "
                                      "did not hold", 412)
                return st, self.reply(st, xml, [("Content-Type",
                                                 "application/xml")]), code
        return resp.status, self.relay(resp), "ok"


def main(argv):
    global UP, LOG, CONF
    if len(argv) != 5:
        proxylib.die("usage: sigv4_front.py PORT_FILE S3RVER_PORT "
                     "CONFIG.json LOG")
    with open(argv[3]) as f:
        CONF = json.load(f)
    CONF.setdefault("public", [])
    UP = proxylib.Upstream("127.0.0.1", int(argv[2]))
    LOG = proxylib.Log(argv[4])
    proxylib.serve(Front, argv[1])


if __name__ == "__main__":
    main(sys.argv)
