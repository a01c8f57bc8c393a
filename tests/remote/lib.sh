# lib.sh - the remote tests' shell helpers (tests/remote/run.sh sources
# it after tests/fs/lib/lib.sh; POSIX sh).  Sets S (the fixtures' folder,
# as nginx and S3 serve it) and SRV (the servers' scratch directory).

S=$WORK/srv SRV=$WORK/servers

# gen_fixtures: gen.py gen by the torch under test into $S, gen.py dcp by
# torch 2.x into $S/dcp1 and $S/dcp2
gen_fixtures() {
	mkdir -p "$S" "$gwork/py" && cp "$here/gen.py" "$WORK/py/" &&
		cp "$here/gen.py" "$gwork/py/" || return 1
	if [ "$version" = 1.13 ]; then
		run_limited 300 "$py" "$WORK/py/gen.py" gen "$S" \
			>"$WORK/gen.log" 2>&1
	else
		run_limited 300 chroot "$root" python3 "$inner/py/gen.py" gen \
			"$inner/srv" >"$WORK/gen.log" 2>&1
	fi || {
		fail "generate" "gen.py gen under torch $version" "$WORK/gen.log"
		return 1
	}
	run_limited 300 chroot "$groot" python3 "$ginner/py/gen.py" dcp \
		"$ginner/dcpgen" >"$WORK/gen-dcp.log" 2>&1 || {
		fail "generate" "gen.py dcp under torch 2" "$WORK/gen-dcp.log"
		return 1
	}
	rm -rf "$S/dcp1" "$S/dcp2"
	mv "$gwork/dcpgen/dcp1" "$gwork/dcpgen/dcp2" "$S/" || return 1
	# the changed object of faultproxy.py's change mode: another ETag
	touch -d '2020-01-01 00:00:00' "$S/model.pt.v2"
	pass "generate" "$(grep -h "^ok$TAB" "$WORK/gen.log" \
		"$WORK/gen-dcp.log" | cut -f2 | tr '\n' ' ')"
}

# start_servers: servers.py start, its variables into this shell
start_servers() {
	/usr/bin/python3 "$here/servers.py" start "$SRV" "$S" $$ \
		>"$WORK/servers.env" 2>"$WORK/servers.err"
	_ss=$?
	if [ "$_ss" = 77 ]; then
		cat "$WORK/servers.env"
		exit 77
	fi
	if [ "$_ss" != 0 ]; then
		fail "servers" "$(head -n 1 "$WORK/servers.err")"
		summary
		return 1
	fi
	. "$WORK/servers.env"
	pass "servers" "nginx $PT_HTTP, S3 $PT_S3_ENDPOINT, faults $PT_FAULT"
}

stop_servers() {
	[ -d "$SRV" ] && /usr/bin/python3 "$here/servers.py" stop "$SRV"
}

# fixture FORMAT: sets REL (its path under $S, folders with a trailing
# /), ECON (econ.py's WHAT) and KEY (a tensor for ptdump --values)
fixture() {
	case $1 in
	zip) REL=model.pt ECON=zip:model.pt KEY=steps ;;
	legacy) REL=legacy.pt ECON=any:legacy.pt KEY=steps ;;
	st) REL=model.safetensors ECON=st:model.safetensors KEY=d.int ;;
	hfbin) REL=hf_bin/ ECON=hf:hf_bin:3 KEY=norm.half ;;
	hfst) REL=hf_st/ ECON=hf:hf_st:3 KEY=norm.half ;;
	dcp1) REL=dcp1/ ECON=dcp:dcp1 KEY=model/layers.5.weight ;;
	dcp2) REL=dcp2/ ECON=dcp:dcp2 KEY=model/cols ;;
	esac
	LOCAL=$S/${REL%/}
}

# transport T: sets URLB (the URL of $S/), LOG, LOGKIND and PREFIX for
# econ.py
transport() {
	case $1 in
	http) URLB=$PT_HTTP/ LOG=$PT_HTTP_LOG LOGKIND=nginx PREFIX=/ ;;
	s3) URLB=s3://$PT_S3_BUCKET/ LOG=$PT_S3_LOG LOGKIND=s3
		PREFIX=/$PT_S3_BUCKET/ ;;
	esac
}

# tool NAME CMD...: CMD's stdout and stderr in $WORK/out/NAME.out and
# .err, its status in RC (180 s at most)
tool() {
	_tn=$1
	shift
	run_limited 180 "$@" >"$WORK/out/$_tn.out" 2>"$WORK/out/$_tn.err"
	RC=$?
}

# mark LOG: its size now (econ.py's OFFSET), once the server has written
# the lines of what came before (no growth for 0.3 s, 3 s at most)
mark() {
	_m_i=0 _m_a=-1
	_m_b=$(wc -c <"$1")
	while [ "$_m_a" != "$_m_b" ] && [ $_m_i -lt 10 ]; do
		sleep 0.3
		_m_a=$_m_b
		_m_b=$(wc -c <"$1")
		_m_i=$((_m_i + 1))
	done
	echo "$_m_b"
}

# econ LABEL OFFSET WHAT: econ.py on $LOG since OFFSET; a result
econ() {
	mark "$LOG" >/dev/null
	_e=$(/usr/bin/python3 "$here/econ.py" "$LOGKIND" "$LOG" "$2" "$3" \
		"$S/econ.json" "$PREFIX")
	case $_e in
	"ok$TAB"*) pass "$1" "${_e#ok"$TAB"}" ;;
	*) fail "$1" "${_e#FAIL"$TAB"}" ;;
	esac
	printf '%s\t%s\n' "$1" "$_e" >>"$WORK/out/figures"
}

# literal FILE FROM TO: FILE with every FROM replaced by TO, on stdout
literal() {
	awk -v f="$2" -v t="$3" '{
		o = ""
		while ((i = index($0, f)) > 0) {
			o = o substr($0, 1, i - 1) t
			$0 = substr($0, i + length(f))
		}
		print o $0 }' "$1"
}

# one_line LABEL PATTERN OKMSG: the last tool failed (RC), with exactly
# one line on stderr matching the extended regex PATTERN, nothing on
# stdout; a result
one_line() {
	_ol=$WORK/out/$_tn.err
	: >"$DET"
	[ "$RC" -ne 0 ] || note "exit 0"
	[ "$(wc -l <"$_ol")" -eq 1 ] ||
		note "$(wc -l <"$_ol") lines on stderr, not 1: $(head -n 3 "$_ol" | tr '\n' '|')"
	grep -Eq "$2" "$_ol" ||
		note "stderr '$(head -n 1 "$_ol")' does not match /$2/"
	[ ! -s "$WORK/out/$_tn.out" ] ||
		note "stdout: $(head -c 200 "$WORK/out/$_tn.out")"
	check "$1" "exit $RC: $(head -n 1 "$_ol")"
}

# tree DIR: every path below DIR but .ptfs/files/ (which names the
# member files: paths or URLs), with its type, sorted
tree() {
	(cd "$1" && find . -path ./.ptfs/files -prune -o -printf '%y %p\n' |
		sort)
}

# mount_pair LABEL URL LOCAL [OPTION...]: URL mounted (no -o ro) at
# $WORK/mnt/LABEL and LOCAL with -o ro at $WORK/mnt/LABEL.local; 0 when
# both are (else a result says why).  Leaves them mounted.
mount_pair() {
	_mp=$1 _mu=$2 _ml=$3
	shift 3
	RM=$WORK/mnt/$_mp LM=$WORK/mnt/$_mp.local
	if ! start_daemon "$_mu" "$RM" "$WORK/$_mp.err" "$@"; then
		fail "$_mp" "ptfs $_mu: $(head -n 1 "$WORK/$_mp.err")"
		return 1
	fi
	RPID=$DPID
	if ! start_daemon "$_ml" "$LM" "$WORK/$_mp.local.err" -o ro; then
		fail "$_mp" "ptfs -o ro $_ml: $(head -n 1 "$WORK/$_mp.local.err")"
		DPID=$RPID
		stop_daemon "$RM"
		return 1
	fi
	LPID=$DPID
	return 0
}

unmount_pair() {
	DPID=$LPID
	stop_daemon "$LM"
	DPID=$RPID
	stop_daemon "$RM"
}

# mount_compare LABEL: the mounts of mount_pair: the same tree, every
# file byte for byte, read-only, EROFS for cp; xattrs and ptfs status
# kept for secrets_check.  A result.
mount_compare() {
	: >"$DET"
	case ,$(mount_opts "$RM"), in
	*,ro,*) ;;
	*) note "mount options '$(mount_opts "$RM")' lack ro" ;;
	esac
	tree "$RM" >"$WORK/out/$1.tree"
	tree "$LM" >"$WORK/out/$1.local.tree"
	cmp -s "$WORK/out/$1.tree" "$WORK/out/$1.local.tree" ||
		note "the trees differ: $(diff "$WORK/out/$1.local.tree" \
			"$WORK/out/$1.tree" | grep '^[<>]' | head -n 4 | tr '\n' ' ')"
	_n=0 _bad=0
	while read -r _ty _p; do
		[ "$_ty" = f ] || continue
		[ -f "$LM/$_p" ] || continue
		_n=$((_n + 1))
		if ! cmp -s "$RM/$_p" "$LM/$_p"; then
			_bad=$((_bad + 1))
			[ $_bad -le 3 ] && note "$_p: $(cmp "$RM/$_p" "$LM/$_p" 2>&1 | head -n 1)"
		fi
	done <"$WORK/out/$1.local.tree"
	# .ptfs/as/ (not listed): the computed safetensors file, read through
	# the block cache, byte for byte the local mount's
	if [ -f "$LM/.ptfs/as/model.safetensors" ]; then
		_n=$((_n + 1))
		cmp -s "$RM/.ptfs/as/model.safetensors" \
			"$LM/.ptfs/as/model.safetensors" ||
			note ".ptfs/as/model.safetensors: $(cmp \
				"$RM/.ptfs/as/model.safetensors" \
				"$LM/.ptfs/as/model.safetensors" 2>&1 | head -n 1)"
	fi
	[ "$_n" -gt 0 ] || note "no file compared"
	_w=$(cp "$S/econ.json" "$RM/new_file" 2>&1)
	case $_w in
	*"Read-only file system"*) ;;
	*) note "cp into the mount: '${_w:-it worked}'" ;;
	esac
	getfattr -R -d -m - "$RM" >"$WORK/out/$1.xattrs" 2>&1
	run_limited 30 "$PTFS" status "$RM" >"$WORK/out/$1.status" 2>&1
	grep -F "$RM" /proc/mounts >"$WORK/out/$1.mounts"
	check "$1" "$_n files byte for byte, read-only, EROFS for cp"
	_el=$(grep -vc '^ptfs: ' "$WORK/$1.err")
	if [ "$(wc -l <"$WORK/$1.err")" -le 1 ] && [ "$_el" = 0 ]; then
		pass "$1 stderr" "$(wc -l <"$WORK/$1.err") line(s) $(head -n 1 "$WORK/$1.err")"
	else
		fail "$1 stderr" "$(wc -l <"$WORK/$1.err") lines" "$WORK/$1.err"
	fi
}


# same_lines LOCAL_OUT URL_OUT PREFIX: the lines of URL_OUT, the URL ($_u)
# written as the local path, must be those of LOCAL_OUT ($LOCAL's); a
# note (PREFIX first) says how they differ
same_lines() {
	literal "$1" "$LOCAL" @ >"$DET.a"
	literal "$2" "$_u" @ >"$DET.c"
	literal "$DET.c" "${_u%/}" @ >"$DET.b"
	cmp -s "$DET.a" "$DET.b" ||
		note "$3not the local file's lines: $(diff "$DET.a" "$DET.b" | grep '^[<>]' | head -n 2 | tr '\n' ' ')"
}

# fmt_cases T F: the ls, verify, diff, repack and mount cases of format F
# over transport T
fmt_cases() {
	fixture "$2"
	transport "$1"
	_u=$URLB$REL _c=${1}_$2
	if want "${_c}_ls"; then
		tool "$2.local.ls" "$ptls" "$LOCAL"
		_o=$(mark "$LOG")
		tool "${_c}_ls" "$ptls" "$_u"
		: >"$DET"
		[ "$RC" = 0 ] || note "ptls $_u: exit $RC: $(head -n 1 "$WORK/out/${_c}_ls.err")"
		cmp -s "$WORK/out/$2.local.ls.out" "$WORK/out/${_c}_ls.out" ||
			note "not ptls $LOCAL's: $(diff "$WORK/out/$2.local.ls.out" \
				"$WORK/out/${_c}_ls.out" | grep '^[<>]' | head -n 2 | tr '\n' ' ')"
		_r=$RC
		check "${_c}_ls" "ptls $_u: $(wc -l <"$WORK/out/${_c}_ls.out") lines as the local file's"
		[ "$_r" != 0 ] || econ "${_c}_ls economy" "$_o" "$ECON"
	fi
	if want "${_c}_verify"; then
		tool "$2.local.verify" "$ptverify" "$LOCAL"
		_lrc=$RC
		tool "${_c}_verify" "$ptverify" "$_u"
		: >"$DET"
		[ "$RC" = 0 ] && [ "$_lrc" = 0 ] ||
			note "ptverify: exit $RC ($_lrc for the local file): $(head -n 1 "$WORK/out/${_c}_verify.err")"
		same_lines "$WORK/out/$2.local.verify.out" \
			"$WORK/out/${_c}_verify.out" ""
		check "${_c}_verify" "$(head -n 1 "$WORK/out/${_c}_verify.out")"
	fi
	if want "${_c}_dump"; then
		: >"$DET"
		for _a in "" "--values $KEY"; do
			# shellcheck disable=SC2086
			tool "$2.local.dump" "$ptdump" $_a "$LOCAL"
			_lrc=$RC
			# shellcheck disable=SC2086
			tool "${_c}_dump" "$ptdump" $_a "$_u"
			[ "$RC" = 0 ] && [ "$_lrc" = 0 ] ||
				note "ptdump $_a: exit $RC ($_lrc for the local file): $(head -n 1 "$WORK/out/${_c}_dump.err")"
			same_lines "$WORK/out/$2.local.dump.out" \
				"$WORK/out/${_c}_dump.out" "ptdump $_a: "
		done
		check "${_c}_dump" "ptdump and ptdump --values $KEY: $(wc -l <"$WORK/out/${_c}_dump.out") lines as the local file's"
	fi
	if want "${_c}_diff"; then
		tool "${_c}_diff" "$ptdiff" "$LOCAL" "$_u"
		: >"$DET"
		[ "$RC" = 0 ] || note "ptdiff: exit $RC: $(head -n 1 "$WORK/out/${_c}_diff.err")"
		grep -q '^# 0 differences' "$WORK/out/${_c}_diff.out" ||
			note "ptdiff: $(tail -n 1 "$WORK/out/${_c}_diff.out")"
		check "${_c}_diff" "$(tail -n 1 "$WORK/out/${_c}_diff.out")"
	fi
	if want "${_c}_repack"; then
		: >"$DET"
		_exts=pt
		[ "$2" = st ] || [ "$2" = hfst ] && _exts="pt safetensors"
		# OUT/: a DCP directory, from a folder
		case $2 in hf*|dcp*) _exts="$_exts dcp/" ;; esac
		for _x in $_exts; do
			_lo=$WORK/out/$2.local.$_x _ro=$WORK/out/${_c}.$_x
			rm -rf "$_lo" "$_ro"
			tool "$2.local.repack" "$ptrepack" "$LOCAL" "$_lo"
			[ "$RC" = 0 ] || note "ptrepack $LOCAL $_x: exit $RC: $(head -n 1 "$WORK/out/$2.local.repack.err")"
			tool "${_c}_repack" "$ptrepack" "$_u" "$_ro"
			[ "$RC" = 0 ] || note "ptrepack $_u $_x: exit $RC: $(head -n 1 "$WORK/out/${_c}_repack.err")"
			[ -e "$_lo" ] && [ -e "$_ro" ] && ! diff -r "$_lo" "$_ro" >/dev/null 2>&1 &&
				note "out.$_x differs from the local file's: $(diff -r "$_lo" "$_ro" 2>&1 | head -n 1)"
			rm -rf "$_lo" "$_ro"
		done
		check "${_c}_repack" "ptrepack into $(echo "$_exts" | sed 's/\([a-z/]*\)/.\1/g'): the local file's bytes"
	fi
	if want "${_c}_mount"; then
		if [ -z "$FUSE" ]; then
			skip "${_c}_mount" "FUSE cannot be used here"
		elif mount_pair "${_c}_mount" "$_u" "$LOCAL"; then
			mount_compare "${_c}_mount"
			unmount_pair
		fi
	fi
}

# mount_meta T: a mount of model.pt over T: ls -lR and every xattr, no
# tensor bytes; then one tensor read (its cost a figure)
mount_meta() {
	transport "$1"
	_l=${1}_zip_mount_meta
	if [ -z "$FUSE" ]; then
		skip "$_l" "FUSE cannot be used here"
		return
	fi
	_o=$(mark "$LOG")
	if ! start_daemon "${URLB}model.pt" "$WORK/mnt/$_l" "$WORK/$_l.err"; then
		fail "$_l" "ptfs: $(head -n 1 "$WORK/$_l.err")"
		return
	fi
	ls -lR "$WORK/mnt/$_l" >"$WORK/out/$_l.ls" 2>&1
	getfattr -R -d -m - "$WORK/mnt/$_l" >"$WORK/out/$_l.xattrs" 2>&1
	econ "$_l" "$_o" meta:model.pt
	_o=$(mark "$LOG")
	if ! cat "$WORK/mnt/$_l/layers.3.weight" >"$WORK/out/$_l.t3" 2>&1
	then
		fail "$_l read" "reading layers.3.weight: $(head -n 1 "$WORK/out/$_l.t3")"
	else
		econ "$_l read one tensor (524288 bytes)" "$_o" any:model.pt
	fi
	stop_daemon "$WORK/mnt/$_l"
}

# secrets_check: no file the test wrote but the servers' own credential
# files holds a secret, the session token or the URL password
secrets_check() {
	: >"$DET"
	for _s in "$PT_S3_SECRET" "$PT_S3_TMP_SECRET" "$PT_S3_TOKEN" \
	    "$PT_HTTP_PASS"; do
		# the check can fail: each is in servers.py's env file
		grep -qF -e "$_s" "$SRV/env" || note "secret not in $SRV/env?"
		grep -rlF --exclude-dir=mnt --exclude-dir=srv -e "$_s" \
		    "$WORK" 2>/dev/null |
			grep -v -e "^$SRV/env\$" -e "^$SRV/sigv4_front.json\$" \
				-e "^$SRV/nginx/htpasswd\$" -e "^$WORK/servers.env\$" \
				-e "^$WORK/home[^/]*/.aws/" -e "^$WORK/mnt/" \
				>>"$WORK/secrets.found"
	done
	if [ -s "$WORK/secrets.found" ]; then
		note "a secret in: $(sort -u "$WORK/secrets.found" | head -n 5 | tr '\n' ' ')"
	fi
	check "secrets" "no secret key, token or URL password in $(find "$WORK" \
	    -path "$WORK/mnt" -prune -o -path "$S" -prune -o -type f -print |
	    wc -l) files (outputs, logs, xattrs, status)"
}
