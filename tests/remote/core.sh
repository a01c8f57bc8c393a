#!/bin/sh
# core.sh - core/remote through its test driver (tests/remote/rmt_get.c)
# on the servers of servers.py, no torch, no FUSE: the bytes of ranges
# read over HTTP and S3 are dd's of the file behind the server, faults
# are retried or refused in one line, S3 credentials are found as the
# AWS CLI finds them, and the counts the driver reports are the server
# log's.  The tools' and mounts' tests are run.sh's.
#
#   usage: sh tests/remote/core.sh [-k CASE] RMT_GET
#
# Cases: ranges_http, ranges_s3 (six ranges, whole and 4 KiB at a time
# by 4 threads), open_cost (an open is one request, and the driver's
# counters are the log's), faults (each faultproxy.py mode), s3_creds
# (environment, session token, ~/.aws profile, public bucket, and the
# refusals: wrong secret, no token, anonymous, 404), s3_list (names,
# sizes and ETags of a folder), http_auth (a URL password works, and is *** in the
# 401 line), secrets.  Exit 0, 1, or 77 (no nginx, node or s3rver).
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=$here/../fs
. "$fs/lib/cases.sh"
LC_ALL=C
export LC_ALL
[ $# = 1 ] || { echo "usage: sh $0 [-k CASE] RMT_GET" >&2; exit 2; }
G=$1
case $G in /*) ;; *) G=$(pwd)/$G ;; esac
[ -x "$G" ] || { echo "not found or not executable: $G" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-rmtcore.XXXXXX") || exit 1
. "$fs/lib/lib.sh"
SRV=$WORK/servers S=$WORK/srv
trap '/usr/bin/python3 "$here/servers.py" stop "$SRV"; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP
DET=$WORK/det
mkdir -p "$S/sub" "$WORK/home" && : >"$DET"
head -c 3000017 /dev/urandom >"$S/obj.bin"
head -c 777 /dev/urandom >"$S/sub/small.bin"
cp "$S/obj.bin" "$S/obj.bin.v2"
printf 'X' | dd of="$S/obj.bin.v2" bs=1 seek=2500000 conv=notrunc 2>/dev/null
touch -d '2020-01-01 00:00:00' "$S/obj.bin.v2"
if [ "$PT_CASE" != list ]; then
	/usr/bin/python3 "$here/servers.py" start "$SRV" "$S" >"$WORK/env" \
		2>"$WORK/servers.err"
	r=$?
	[ $r = 77 ] && { cat "$WORK/env"; exit 77; }
	[ $r = 0 ] || { echo "FAIL servers: $(head -n 1 "$WORK/servers.err")"; exit 1; }
	. "$WORK/env"
fi
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy \
	AWS_PROFILE AWS_SESSION_TOKEN AWS_DEFAULT_REGION AWS_ACCESS_KEY_ID \
	AWS_SECRET_ACCESS_KEY AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
HOME=$WORK/home NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
AWS_ENDPOINT_URL=${PT_S3_ENDPOINT:-} AWS_REGION=${PT_S3_REGION:-}
export HOME NO_PROXY no_proxy AWS_ENDPOINT_URL AWS_REGION
SIZE=3000017
RANGES="0 100 16383 2 1000000 1048576 2999000 1017 $((SIZE - 1)) 1 123456 end"

# the bytes of RANGES, as the file holds them
: >"$WORK/want"
set -- $RANGES
while [ $# -ge 2 ]; do
	if [ "$2" = end ]; then
		tail -c +$(($1 + 1)) "$S/obj.bin" >>"$WORK/want"
	else
		tail -c +$(($1 + 1)) "$S/obj.bin" | head -c "$2" >>"$WORK/want"
	fi
	shift 2
done

# ranges LABEL URL [ENV...]: RANGES read whole and in 4 KiB reads by 4
# threads; each the file's bytes
ranges() {
	_l=$1 _u=$2
	shift 2
	for _how in "" "--chunk 4096 --threads 4"; do
		# shellcheck disable=SC2086
		if env "$@" "$G" $_how "$_u" $RANGES >"$WORK/got" 2>"$WORK/err"
		then
			cmp -s "$WORK/got" "$WORK/want" ||
				note "rmt_get $_how: WRONG BYTES: $(cmp "$WORK/got" "$WORK/want" 2>&1 | head -n 1)"
		else
			note "rmt_get $_how: $(head -n 1 "$WORK/err")"
		fi
	done
	check "$_l" "6 ranges, whole and 4 KiB at a time by 4 threads: the file's bytes"
}

if want ranges_http; then ranges ranges_http "$PT_HTTP/obj.bin"; fi
if want ranges_s3; then
	ranges ranges_s3 "s3://$PT_S3_BUCKET/obj.bin" \
		AWS_ACCESS_KEY_ID="$PT_S3_KEY_ID" AWS_SECRET_ACCESS_KEY="$PT_S3_SECRET"
fi
if want open_cost; then
	o=$(wc -c <"$PT_HTTP_LOG")
	"$G" --count "$PT_HTTP/obj.bin" 0 10 >/dev/null 2>"$WORK/count"
	sleep 0.5
	n=$(tail -c +$((o + 1)) "$PT_HTTP_LOG" | wc -l)
	b=$(tail -c +$((o + 1)) "$PT_HTTP_LOG" | awk '{ s += $4 } END { print s + 0 }')
	c=$(grep '^requests' "$WORK/count")
	[ "$n" = 1 ] || note "an open and a 10-byte read took $n requests, not 1"
	[ "$c" = "requests $n bytes $b" ] ||
		note "the driver counted '$c', the log 'requests $n bytes $b'"
	check open_cost "open + a read of its first block: $c, as nginx logged"
fi

# fault SPEC retry|either|refuse PATTERN: the range 1000000+1048576 through
# faultproxy.py
fault() {
	curl -s "$PT_FAULT/_reset" >/dev/null
	if "$G" "$PT_FAULT/fault/$1/obj.bin" 1000000 1048576 >"$WORK/got" \
	    2>"$WORK/err"; then
		tail -c +1000001 "$S/obj.bin" | head -c 1048576 | cmp -s - "$WORK/got" ||
			note "$1: WRONG BYTES"
		[ "$2" != refuse ] || note "$1: exit 0, not refused"
	else
		[ "$2" != retry ] || note "$1: not recovered: $(head -n 1 "$WORK/err")"
		[ "$(wc -l <"$WORK/err")" = 1 ] || note "$1: $(wc -l <"$WORK/err") lines"
		grep -Eq "$3" "$WORK/err" || note "$1: '$(head -n 1 "$WORK/err")' lacks /$3/"
	fi
}
if want faults; then
	for s in drop drop@2x2 e500x2 e503@2 e429@2 short short@2; do
		fault "$s" retry .
	done
	fault norange either "Range|200"
	fault change@2 refuse "changed"
	fault e403 refuse 403
	fault e404 refuse 404
	fault e500x1000 refuse "500"
	check faults "resets, short bodies, 500, 503 and 429 retried; no Range, a change, 403, 404, endless 500 refused in one line"
fi

if want s3_creds; then
	Z=s3://$PT_S3_BUCKET/sub/small.bin
	ok() {
		env "$@" "$G" "$Z" 0 777 >"$WORK/got" 2>"$WORK/err" &&
			cmp -s "$WORK/got" "$S/sub/small.bin" ||
			note "$*: $(head -n 1 "$WORK/err")"
	}
	no() {
		_p=$1
		shift
		env "$@" "$G" "$Z" 0 777 >"$WORK/got" 2>"$WORK/err" &&
			note "$*: exit 0"
		[ ! -s "$WORK/got" ] || note "$*: bytes on stdout"
		grep -Eq "$_p" "$WORK/err" || note "$*: '$(head -n 1 "$WORK/err")' lacks /$_p/"
	}
	ok AWS_ACCESS_KEY_ID="$PT_S3_KEY_ID" AWS_SECRET_ACCESS_KEY="$PT_S3_SECRET"
	ok AWS_ACCESS_KEY_ID="$PT_S3_TMP_KEY_ID" \
		AWS_SECRET_ACCESS_KEY="$PT_S3_TMP_SECRET" AWS_SESSION_TOKEN="$PT_S3_TOKEN"
	mkdir -p "$WORK/home/.aws"
	printf '[p]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$PT_S3_KEY_ID" "$PT_S3_SECRET" >"$WORK/home/.aws/credentials"
	printf '[profile p]\nregion = %s\n' "$PT_S3_REGION" >"$WORK/home/.aws/config"
	ok -u AWS_REGION AWS_PROFILE=p
	rm -rf "$WORK/home/.aws"
	Z=s3://$PT_S3_PUBLIC/sub/small.bin
	ok
	Z=s3://$PT_S3_BUCKET/sub/small.bin
	no 403 AWS_ACCESS_KEY_ID="$PT_S3_KEY_ID" AWS_SECRET_ACCESS_KEY="${PT_S3_SECRET}x"
	no 403 AWS_ACCESS_KEY_ID="$PT_S3_TMP_KEY_ID" AWS_SECRET_ACCESS_KEY="$PT_S3_TMP_SECRET"
	no 403 AWS_REGION="$PT_S3_REGION"
	Z=s3://$PT_S3_BUCKET/no/such.bin
	no 404 AWS_ACCESS_KEY_ID="$PT_S3_KEY_ID" AWS_SECRET_ACCESS_KEY="$PT_S3_SECRET"
	check s3_creds "environment, session token, AWS_PROFILE, public; wrong secret, no token, anonymous 403; 404"
fi
if want s3_list; then
	env AWS_ACCESS_KEY_ID="$PT_S3_KEY_ID" AWS_SECRET_ACCESS_KEY="$PT_S3_SECRET" \
		"$G" --list "s3://$PT_S3_BUCKET/" >"$WORK/list" 2>"$WORK/err" ||
		note "--list: $(head -n 1 "$WORK/err")"
	# each name, size and ETag (s3rver's: the MD5 of the body, quoted,
	# what a read is pinned to when the listing opens it)
	(cd "$S" && find . -type f -printf '%P %s\n' | sort |
		while read -r _n _s; do
			echo "$_n $_s \"$(md5sum <"$_n" | cut -d' ' -f1)\""
		done) >"$WORK/want"
	sort "$WORK/list" | cmp -s - "$WORK/want" ||
		note "the listing is not find's: $(sort "$WORK/list" | diff - "$WORK/want" | head -n 3 | tr '\n' ' ')"
	check s3_list "$(wc -l <"$WORK/want") objects, names and sizes as find says"
fi
if want http_auth; then
	hp=${PT_HTTP#http://}
	"$G" "http://$PT_HTTP_USER:$PT_HTTP_PASS@$hp/private/sub/small.bin" 0 777 \
		>"$WORK/got" 2>"$WORK/err" && cmp -s "$WORK/got" "$S/sub/small.bin" ||
		note "with the password: $(head -n 1 "$WORK/err")"
	"$G" "http://$PT_HTTP_USER:${PT_HTTP_PASS}x@$hp/private/sub/small.bin" 0 777 \
		>"$WORK/got" 2>"$WORK/err" && note "a wrong password: exit 0"
	grep -q '401' "$WORK/err" && grep -qF '***' "$WORK/err" ||
		note "a wrong password: '$(head -n 1 "$WORK/err")' (401 and *** wanted)"
	check http_auth "$(head -n 1 "$WORK/err")"
fi
if [ "$PT_CASE" != list ]; then
	for s in "$PT_S3_SECRET" "$PT_S3_TMP_SECRET" "$PT_S3_TOKEN" "$PT_HTTP_PASS"; do
		grep -rlF --exclude-dir=srv -e "$s" "$WORK" | grep -v -e "^$SRV/env\$" \
			-e "^$WORK/env\$" -e "^$SRV/sigv4_front.json\$" \
			-e "^$SRV/nginx/htpasswd\$" >>"$WORK/found"
	done
	[ ! -s "$WORK/found" ] || note "a secret in $(sort -u "$WORK/found" | tr '\n' ' ')"
	check secrets "no secret in the driver's output or the servers' logs"
fi
summary
[ "$nfail" = 0 ]
