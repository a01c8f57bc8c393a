# auth.sh - run.sh's credential cases (sourced; lib.sh's helpers): where
# S3 credentials come from, the public bucket, HTTP passwords, and the
# refusals (403, 401, 404): one line naming the status, a non-zero exit,
# no object bytes.  ptls of model.pt must print what ptls prints of the
# local file.
# $noenv is unquoted on purpose (a command and its options, for
# timeout(1) to run); AWS_SECRET_ACCESS_KEY is exported by run.sh
# shellcheck disable=SC2086,SC2034

# ptfs_refusal LABEL URL PATTERN: expect_refusal (tests/fs/lib/lib.sh) of
# `ptfs URL MNT` with ptls's line, which must match PATTERN
ptfs_refusal() {
	expect_refusal "$1" "$2" "$(ptls_line "$ptls" "$2")"
	grep -Eq "$3" "$WORK/refuse.err" ||
		fail "$1 status" "'$(head -n 1 "$WORK/refuse.err")' does not match /$3/"
}

# same_ls LABEL: the last tool printed ptls $S/model.pt's lines; a result
same_ls() {
	[ -f "$WORK/out/zip.local.ls.out" ] ||
		"$ptls" "$S/model.pt" >"$WORK/out/zip.local.ls.out" 2>&1
	: >"$DET"
	[ "$RC" = 0 ] || note "exit $RC: $(head -n 1 "$WORK/out/$_tn.err")"
	cmp -s "$WORK/out/zip.local.ls.out" "$WORK/out/$_tn.out" ||
		note "not the local file's lines: $(head -n 1 "$WORK/out/$_tn.out")"
	check "$1" "$2"
}

# no_bytes LABEL OFFSET: no reply since OFFSET of $PT_S3_LOG (or $LOG)
# carried object bytes (a 2xx); a result
no_bytes() {
	mark "${3:-$PT_S3_LOG}" >/dev/null
	_nb=$(tail -c +$(($2 + 1)) "${3:-$PT_S3_LOG}" |
		awk -F'[\t ]' '$3 ~ /^2/ { n++ } END { print n + 0 }')
	_all=$(tail -c +$(($2 + 1)) "${3:-$PT_S3_LOG}" | wc -l)
	if [ "$_nb" = 0 ] && [ "$_all" -gt 0 ]; then
		pass "$1" "$_all requests, none answered with object bytes"
	else
		fail "$1" "$_nb of $_all requests answered 2xx"
	fi
}

Z=s3://$PT_S3_BUCKET/model.pt
noenv="env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_REGION"

if want s3_profile; then
	h=$WORK/home_profile
	mkdir -p "$h/.aws"
	printf '[default]\naws_access_key_id = AKNOTTHIS\naws_secret_access_key = notthis\n\n[ptprof]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$PT_S3_KEY_ID" "$PT_S3_SECRET" >"$h/.aws/credentials"
	printf '[default]\nregion = eu-west-3\n\n[profile ptprof]\nregion = %s\n' \
		"$PT_S3_REGION" >"$h/.aws/config"
	tool s3_profile $noenv HOME="$h" AWS_PROFILE=ptprof "$ptls" "$Z"
	same_ls s3_profile "AWS_PROFILE=ptprof from ~/.aws/credentials and config"
fi
if want s3_profile_default; then
	h=$WORK/home_default
	mkdir -p "$h/.aws"
	printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$PT_S3_KEY_ID" "$PT_S3_SECRET" >"$h/.aws/credentials"
	printf '[default]\nregion = %s\n' "$PT_S3_REGION" >"$h/.aws/config"
	tool s3_profile_default $noenv HOME="$h" "$ptls" "$Z"
	same_ls s3_profile_default "the [default] profile of HOME/.aws, its region"
fi
if want s3_default_region; then
	tool s3_default_region env -u AWS_REGION \
		AWS_DEFAULT_REGION="$PT_S3_REGION" "$ptls" "$Z"
	same_ls s3_default_region "AWS_DEFAULT_REGION"
fi
if want s3_session; then
	tool s3_session env AWS_ACCESS_KEY_ID="$PT_S3_TMP_KEY_ID" \
		AWS_SECRET_ACCESS_KEY="$PT_S3_TMP_SECRET" \
		AWS_SESSION_TOKEN="$PT_S3_TOKEN" "$ptls" "$Z"
	same_ls s3_session "session credentials with AWS_SESSION_TOKEN"
fi
if want s3_session_notoken; then
	o=$(mark "$PT_S3_LOG")
	tool s3_session_notoken env AWS_ACCESS_KEY_ID="$PT_S3_TMP_KEY_ID" \
		AWS_SECRET_ACCESS_KEY="$PT_S3_TMP_SECRET" "$ptls" "$Z"
	one_line s3_session_notoken "403"
	no_bytes "s3_session_notoken no bytes" "$o"
fi
if want s3_public; then
	o=$(mark "$PT_S3_LOG")
	tool s3_public $noenv "$ptls" "s3://$PT_S3_PUBLIC/model.pt"
	same_ls s3_public "the public bucket without credentials"
	mark "$PT_S3_LOG" >/dev/null
	n=$(tail -c +$((o + 1)) "$PT_S3_LOG" | awk -F'\t' '$7 != "-"' | wc -l)
	all=$(tail -c +$((o + 1)) "$PT_S3_LOG" | wc -l)
	if [ "$n" = 0 ] && [ "$all" -gt 0 ]; then
		pass "s3_public unsigned" "none of $all requests carried an Authorization header"
	else
		fail "s3_public unsigned" "$n of $all requests were signed without credentials"
	fi
fi
if want s3_anonymous; then
	o=$(mark "$PT_S3_LOG")
	tool s3_anonymous $noenv "$ptls" "$Z"
	one_line s3_anonymous "403"
	no_bytes "s3_anonymous no bytes" "$o"
fi
if want s3_wrong_secret; then
	o=$(mark "$PT_S3_LOG")
	tool s3_wrong_secret env AWS_SECRET_ACCESS_KEY="${PT_S3_SECRET}x" \
		"$ptls" "$Z"
	one_line s3_wrong_secret "403"
	no_bytes "s3_wrong_secret no bytes" "$o"
	tool s3_wrong_secret_json env AWS_SECRET_ACCESS_KEY="${PT_S3_SECRET}x" \
		"$ptls" -j "$Z"
	: >"$DET"
	[ "$RC" -ne 0 ] || note "ptls -j: exit 0"
	grep -q '"error".*403' "$WORK/out/s3_wrong_secret_json.out" ||
		note "ptls -j: no {\"error\": ..403..}: $(head -c 200 "$WORK/out/s3_wrong_secret_json.out")"
	check "s3_wrong_secret json" "$(head -c 120 "$WORK/out/s3_wrong_secret_json.out")"
	if [ -n "$FUSE" ]; then
		AWS_SECRET_ACCESS_KEY=${PT_S3_SECRET}x
		ptfs_refusal "s3_wrong_secret ptfs" "$Z" 403
		AWS_SECRET_ACCESS_KEY=$PT_S3_SECRET
	fi
fi
if want s3_404; then
	tool s3_404 "$ptls" "s3://$PT_S3_BUCKET/no/such.pt"
	one_line s3_404 "404.*no/such\.pt|no/such\.pt.*404"
fi
if want s3_endpoint_opt; then
	if [ -z "$FUSE" ]; then
		skip s3_endpoint_opt "FUSE cannot be used here"
	else
		unset AWS_ENDPOINT_URL
		if mount_pair s3_endpoint_opt "$Z" "$S/model.pt" \
		    -o "endpoint=$PT_S3_ENDPOINT"; then
			mount_compare s3_endpoint_opt
			unmount_pair
		fi
		AWS_ENDPOINT_URL=$PT_S3_ENDPOINT
		export AWS_ENDPOINT_URL
	fi
fi

hp=${PT_HTTP#http://}
if want http_password; then
	u=http://$PT_HTTP_USER:$PT_HTTP_PASS@$hp/private/model.pt
	tool http_password "$ptls" "$u"
	same_ls http_password "user and password in the URL (basic auth)"
	tool http_password_verify "$ptverify" "$u"
	: >"$DET"
	[ "$RC" = 0 ] || note "ptverify: exit $RC: $(head -n 1 "$WORK/out/http_password_verify.err")"
	grep -q "\*\*\*" "$WORK/out/http_password_verify.out" ||
		note "ptverify's line names no redacted URL: $(head -n 1 "$WORK/out/http_password_verify.out")"
	check "http_password redacted" "$(head -n 1 "$WORK/out/http_password_verify.out")"
	if [ -n "$FUSE" ] && mount_pair http_password_mount "$u" \
	    "$S/model.pt"; then
		mount_compare http_password_mount
		unmount_pair
	fi
fi
if want http_wrong_password; then
	tool http_wrong_password "$ptls" \
		"http://$PT_HTTP_USER:${PT_HTTP_PASS}x@$hp/private/model.pt"
	one_line http_wrong_password "401"
fi
if want http_404; then
	tool http_404 "$ptls" "$PT_HTTP/no/such.pt"
	one_line http_404 "404.*no/such\.pt|no/such\.pt.*404"
	if [ -n "$FUSE" ]; then
		ptfs_refusal "http_404 ptfs" "$PT_HTTP/no/such.pt" 404
	fi
fi
