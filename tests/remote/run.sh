#!/bin/sh
# run.sh - remote checkpoints (issue 40, "Tests"): every tool and a mount
# on URLs served by real servers on 127.0.0.1, the answers compared with
# the same tools on the local files.
#
#   usage: sh tests/remote/run.sh [-k CASE] VERSION BINDIR
#
# VERSION 1.13 or 2: the torch that writes the checkpoints (gen.py gen;
# DCP directories by torch 2.x either way).  BINDIR holds ptls, ptverify,
# ptdiff, ptrepack and ptfs.  servers.py starts nginx, s3rver behind
# sigv4_front.py and faultproxy.py on the fixtures' folder; they stop
# with the test.  Cases (-k, tests/fs/lib/cases.sh; -k list names them):
#
#   TRANSPORT_FORMAT_ls|verify|dump|diff|repack|mount, TRANSPORT http
#   (nginx) or s3 (the credentials bucket), FORMAT zip, legacy, st,
#   hfbin, hfst, dcp1, dcp2:
#     ls      ptls URL prints what ptls LOCAL prints; its requests and
#             body bytes in the server's log within the limits (econ.py)
#     verify  ptverify URL exits 0, its lines LOCAL's with the URL
#     dump    ptdump URL and ptdump --values KEY URL (one tensor's
#             values) print LOCAL's lines, the URL for the path
#     diff    ptdiff LOCAL URL: 0 differences, exit 0
#     repack  ptrepack URL out.pt (and out.safetensors for st) is byte
#             for byte ptrepack LOCAL's
#     mount   ptfs URL m/ (no -o ro) mounts read-only: every file but
#             .ptfs/'s listings byte for byte the local -o ro mount's;
#             cp into it fails with EROFS; at most one line on stderr
#   http_zip_mount_meta, s3_zip_mount_meta  ls -lR and every xattr of a
#             mount of model.pt: no tensor bytes (econ.py meta); then
#             one tensor read, its cost printed
#   s3_profile, s3_session, s3_session_notoken, s3_public, s3_anonymous,
#   s3_wrong_secret, s3_endpoint_opt, http_password, http_wrong_password,
#   http_404: how S3 credentials are found (environment, AWS_PROFILE in
#             ~/.aws of a scratch HOME, AWS_SESSION_TOKEN, none for the
#             public bucket, -o endpoint= for ptfs), and refusals: one
#             line naming the status, a non-zero exit, no object bytes
#   fault_*   ptrepack through faultproxy.py: retried faults (a reset
#             mid-body, 500, 503, 429 with Retry-After: 1, which must be
#             waited for) end in the local bytes; a short body and an
#             ignored Range in the local bytes or one line; a changed
#             object, 403, 404 and a 500 that never ends in one line and
#             a non-zero exit; fault_mount_flip: the object changes under
#             a mount: every read is the old bytes or an error
#
# Last, always: no output, log or xattr of the test holds the S3 secrets,
# the session token or the URL password.  Prints one line per check and
# "N passed, N failed"; exit 0, 1, or 77 (no nginx, node or s3rver; no
# torch with PT_ALLOW_SKIP_TORCH=1).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=$here/../fs
. "$fs/lib/cases.sh"
. "$fs/lib/begin.sh"
fs_args "1.13|2 BINDIR" 2 2 "$@"
b=$2
ptls=$b/ptls ptverify=$b/ptverify ptdiff=$b/ptdiff ptrepack=$b/ptrepack
ptdump=$b/ptdump PTFS=$b/ptfs
fs_progs ptls ptverify ptdiff ptrepack ptdump PTFS
. "$fs/../torch/select.sh"
torch_select_writer "$version" "" ptfs-remote
WORK=$work
. "$fs/lib/lib.sh"
. "$here/lib.sh"
trap 'stop_servers; release_work' EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/mnt" "$WORK/py" "$WORK/out" "$WORK/home" || exit 1
DET=$WORK/det
: >"$DET"

# ---- fixtures, by the torch under test (DCP: torch 2.x), then servers
# (-k list: the case names alone)
if [ "$PT_CASE" = list ]; then
	for v in PT_HTTP PT_HTTP_LOG PT_HTTP_USER PT_HTTP_PASS PT_FAULT \
	    PT_FAULT_LOG PT_S3_ENDPOINT PT_S3_LOG PT_S3_BUCKET PT_S3_PUBLIC \
	    PT_S3_REGION PT_S3_KEY_ID PT_S3_SECRET PT_S3_TMP_KEY_ID \
	    PT_S3_TMP_SECRET PT_S3_TOKEN; do
		eval "$v=-"
	done
else
	gen_fixtures || { summary; exit 1; }
	start_servers || exit $?
fi
# the tools see no proxy, no user's ~/.aws; S3 by the environment
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy \
	AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION AWS_CONFIG_FILE \
	AWS_SHARED_CREDENTIALS_FILE
NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost HOME=$WORK/home
AWS_ENDPOINT_URL=$PT_S3_ENDPOINT AWS_REGION=$PT_S3_REGION
AWS_ACCESS_KEY_ID=$PT_S3_KEY_ID AWS_SECRET_ACCESS_KEY=$PT_S3_SECRET
export NO_PROXY no_proxy HOME AWS_ENDPOINT_URL AWS_REGION \
	AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
FUSE=
if [ "$PT_CASE" != list ] && [ -c /dev/fuse ] && command -v fusermount3 >/dev/null 2>&1 &&
    start_daemon "$S/model.pt" "$WORK/mnt/probe" "$WORK/probe.err" -o ro
then
	FUSE=1
	stop_daemon "$WORK/mnt/probe"
fi

# ---- every format over each transport
for t in http s3; do
	for f in zip legacy st hfbin hfst dcp1 dcp2; do
		fmt_cases "$t" "$f"
	done
	if want "${t}_zip_mount_meta"; then
		mount_meta "$t"
	fi
done

# ---- S3 credentials, HTTP passwords, refusals
. "$here/auth.sh"
# ---- faults through faultproxy.py
. "$here/faults.sh"

[ "$PT_CASE" = list ] || secrets_check
conclude
