#!/bin/sh
# attacks.sh [-v] PTLS PTVERIFY PTFS - checkpoints whose payload a plain
# torch.load may run (attacks.py: one per technique, with controls made by
# the same builders without a payload), and files torch writes itself
# (attacks_torch.py gen, by each torch), measured with real torch and
# then given to ptfs's tools:
#   ground truth   each file loaded by torch 1.13 and by torch 2.x, with
#                  weights_only=False and True, each load in a forked child
#                  with its own PTFS_CANARY marker (attacks_torch.py truth):
#                  the payload ran iff the marker exists
#   the tools      ptls --check, ptverify, ptls, ptdump and a read-only
#                  mount read whole by walk.py (when /dev/fuse works), with
#                  PTFS_CANARY naming a marker of their own: nothing may
#                  run (no marker), every tool ends with 0, 1 or 2 (2: one
#                  line on stderr), a mount mounts or refuses in one line
#   the verdict    a file whose payload runs under either torch: ptls
#                  --check exits 1 and names each global attacks.py lists
#                  as literal (manifest NAMES), ptverify exits 1; a control
#                  or a file torch wrote: ptls --check and ptverify exit 0
# Prints one line per check, the notes where the ground truth differs from
# what attacks.py expects, a table of the failures, then "N passed, N
# failed[, N skipped]"; -v (or PTFS_ATTACKS_TABLE=1) also prints the
# ground truth of every file.  Exit 0, 1, or 77 when neither torch is
# there.  Without torch 2.x (and without PT_NO_TORCH2=1) that is a
# failure, as everywhere in the suite; the 1.13 half still runs.
set -u
verbose=${PTFS_ATTACKS_TABLE:-}
if [ "${1:-}" = -v ]; then
	verbose=1
	shift
fi
[ $# -eq 3 ] || { echo "usage: sh $0 [-v] PTLS PTVERIFY PTFS" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=$here/../fs
. "$fs/lib/begin.sh"
PTLS=$1 PTVERIFY=$2 PTFS=$3
fs_progs PTLS PTVERIFY PTFS
PTDUMP=$(dirname "$PTLS")/ptdump
. "$here/../torch/select.sh"
t0=$(date +%s)

# ------------------------------------------------------------ the torches
have1= have2= root= why2=
if _why=$(torch_version /usr/bin/python3); then
	have1=1
else
	echo "torch 1.13 not available: $(printf '%s\n' "$_why" | tail -n 1)"
fi
_log=${TMPDIR:-/tmp}/ptfs-attacks-torch2.$$.log
root=$(torch2_root 2>"$_log")
_st=$?
why2=$(tail -n 1 "$_log")
rm -f "$_log"
if [ "$_st" = 0 ] && [ -n "$root" ] && [ -d "$root/tmp" ]; then
	have2=1
elif [ "$_st" = 77 ]; then
	echo "$why2"
	why2=
else
	why2=${why2:-scripts/torch2-root.sh printed no root}
fi
if [ -z "$have1$have2" ]; then
	echo "neither torch 1.13 nor torch 2.x is available: skipping"
	exit 77
fi

# the scratch directory, inside the torch 2.x root when there is one (so
# that its python sees the same files), 0755 for it
if [ -n "$have2" ]; then
	WORK=$(mktemp -d "$root/tmp/ptfs-attacks.XXXXXX") || exit 1
	inner=/tmp/${WORK##*/}
else
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-attacks.XXXXXX") || exit 1
	inner=$WORK
fi
chmod 755 "$WORK"
. "$fs/lib/lib.sh"
trap 'release_work' EXIT
trap 'exit 1' INT TERM HUP
[ -z "$why2" ] || fail "torch 2.x" "not available: $why2 (PT_NO_TORCH2=1 skips it)"
R=$WORK/res
mkdir -p "$WORK/py" "$R" "$WORK/mnt" "$WORK/ptfs-cwd" "$WORK/marks"
cp "$here/attacks_torch.py" "$WORK/py/" || exit 1

# ---------------------------------------------------------- the files
if ! python3 "$here/attacks.py" "$WORK/corpus" >"$WORK/gen.log" 2>&1; then
	echo "attacks.py failed: $(tail -n 1 "$WORK/gen.log")"
	exit 1
fi
awk -F"$TAB" -v OFS="$TAB" '{ $3 = "corpus/" $3; print }' \
	"$WORK/corpus/manifest.tsv" >"$WORK/all.tsv"
gen_benign() {	# VERSION: files that torch writes, into benign-VERSION
	if [ "$1" = 1.13 ]; then
		/usr/bin/python3 "$WORK/py/attacks_torch.py" gen \
			"$WORK/benign-1.13" >"$WORK/gen-1.13.err" 2>&1
	else
		chroot "$root" python3 "$inner/py/attacks_torch.py" gen \
			"$inner/benign-2" >"$WORK/gen-2.err" 2>&1
	fi
	_r=$?
	if [ $_r -ne 0 ]; then
		fail "torch $1 writes the benign files" \
			"exit $_r: $(grep -v 'UCX\|cpuinfo' "$WORK/gen-$1.err" | tail -n 1)"
		return
	fi
	awk -F"$TAB" -v OFS="$TAB" -v v="$1" \
		'{ $1 = "benign_" v "_" $1; $3 = "benign-" v "/" $3; print }' \
		"$WORK/benign-$1/manifest.tsv" >>"$WORK/all.tsv"
}
[ -z "$have1" ] || gen_benign 1.13
[ -z "$have2" ] || gen_benign 2
echo "# $(grep -c . "$WORK/all.tsv") files: $(grep -c "${TAB}hostile$TAB" "$WORK/all.tsv") hostile, $(grep -c "${TAB}control$TAB" "$WORK/all.tsv") controls, $(grep -c "${TAB}benign$TAB" "$WORK/all.tsv") written by torch"

# ---------------------------------------- the ground truth, in the background
: >"$WORK/truth-1.13.tsv"
: >"$WORK/truth-2.tsv"
pids=
if [ -n "$have1" ]; then
	run_limited 600 /usr/bin/python3 "$WORK/py/attacks_torch.py" truth \
		"$WORK/all.tsv" "$WORK" "$WORK/marks" "$WORK/truth-1.13.tsv" \
		>"$WORK/truth-1.13.err" 2>&1 &
	pids="$pids $!"
fi
if [ -n "$have2" ]; then
	run_limited 600 chroot "$root" python3 "$inner/py/attacks_torch.py" \
		truth "$inner/all.tsv" "$inner" "$inner/marks" \
		"$inner/truth-2.tsv" >"$WORK/truth-2.err" 2>&1 &
	pids="$pids $!"
fi

# ------------------------------------------------------------ the tools
PTFS_CANARY=$WORK/ptfs-marker
export PTFS_CANARY
cd "$WORK/ptfs-cwd" || exit 1
san='ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|SUMMARY: .*Sanitizer'
fuse=
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null 2>&1; then
	if start_daemon "$WORK/corpus/control_zip.pt" "$WORK/mnt/m" \
	    "$WORK/probe.err" -o ro; then
		stop_daemon "$WORK/mnt/m"
		fuse=1
	else
		skip "mounts" "cannot mount here: $(head -n 1 "$WORK/probe.err")"
	fi
else
	skip "mounts" "no /dev/fuse or no fusermount3"
fi

# tool NAME TAG CMD...: CMD's stdout, stderr and status in $R/NAME.TAG.*
tool() {
	_n=$1 _t=$2
	shift 2
	run_cpu_limited 60 "$@" </dev/null >"$R/$_n.$_t.out" 2>"$R/$_n.$_t.err"
	echo $? >"$R/$_n.$_t.rc"
}
# tools_verdict NAME: what went wrong with the tools on NAME, into $DET
tools_verdict() {
	for _t in check verify ls dump; do
		[ -f "$R/$1.$_t.rc" ] || continue
		_rc=$(cat "$R/$1.$_t.rc")
		_nl=$(grep -c . "$R/$1.$_t.err")
		if grep -q "$san" "$R/$1.$_t.err"; then
			note "$_t: $(grep -m 1 "$san" "$R/$1.$_t.err")"
		elif [ "$_rc" -gt 2 ]; then
			note "$_t: exit $_rc$([ "$_rc" -ge 124 ] && echo ' (time limit)'): $(head -n 1 "$R/$1.$_t.err")"
		elif [ "$_rc" -eq 2 ] && [ "$_nl" -ne 1 ]; then
			note "$_t: exit 2 with $_nl lines on stderr"
		fi
	done
}
# tools_worker K N: the tools on every Nth file of all.tsv from the Kth
# (N run at once, each with its mount point): $R/NAME.tools holds the
# verdict line ("ok<TAB>how" or "FAIL<TAB>what"), then the details
tools_worker() {
	DET=$WORK/det.$1
	MNT=$WORK/mnt/w$1
	awk -v k="$1" -v n="$2" '(NR - 1) % n == k' "$WORK/all.tsv" >"$WORK/part.$1"
	while IFS="$TAB" read -r name kind path role expect names source technique; do
		: >"$DET"
		f=$WORK/$path
		tool "$name" check "$PTLS" --check "$f"
		tool "$name" verify "$PTVERIFY" "$f"
		tool "$name" ls "$PTLS" "$f"
		[ ! -x "$PTDUMP" ] || tool "$name" dump "$PTDUMP" "$f"
		tools_verdict "$name"
		how="ptls --check $(cat "$R/$name.check.rc"), ptverify $(cat "$R/$name.verify.rc"), ptls $(cat "$R/$name.ls.rc")"
		[ ! -x "$PTDUMP" ] || how="$how, ptdump $(cat "$R/$name.dump.rc")"
		if [ -n "$fuse" ]; then
			err=$R/$name.mount.err
			if start_daemon "$f" "$MNT" "$err" -o ro; then
				walk=$(run_limited 120 python3 -S "$here/walk.py" "$MNT" </dev/null 2>&1)
				wrc=$?
				[ $wrc -eq 0 ] || note "walk: exit $wrc: $walk"
				stop_daemon "$MNT" || note "still mounted after fusermount3 -u"
				[ "${DRC:-0}" -eq 0 ] || note "the daemon exited $DRC"
				if grep -q "$san" "$err"; then
					note "ptfs: $(grep -m 1 "$san" "$err")"
				elif grep -qv '^ptfs: ' "$err"; then
					note "ptfs printed: $(grep -m 1 -v '^ptfs: ' "$err")"
				fi
				how="$how, mounted (${walk%% (*})"
			else
				[ "$(grep -c . "$err")" -eq 1 ] ||
					note "ptfs refused it with $(grep -c . "$err") lines on stderr"
				how="$how, mount refused"
			fi
		fi
		if [ -s "$DET" ]; then
			{ printf 'FAIL\t%s\n' "$(head -n 1 "$DET")"; sed 1d "$DET"; } \
				>"$R/$name.tools"
		else
			printf 'ok\t%s\n' "$how" >"$R/$name.tools"
		fi
	done <"$WORK/part.$1"
}
jobs=${PTFS_ATTACKS_JOBS:-3}
echo "# the tools on every file ($jobs at once; at $(($(date +%s) - t0)) s)"
k=0 workers=
while [ $k -lt "$jobs" ]; do
	tools_worker $k "$jobs" &
	workers="$workers $!"
	k=$((k + 1))
done
for p in $workers; do
	wait "$p"
done
echo "# the tools done at $(($(date +%s) - t0)) s"
cd "$WORK" || exit 1
while IFS="$TAB" read -r name kind path role expect names source technique; do
	if [ ! -f "$R/$name.tools" ]; then
		fail "tools $name" "no verdict (a worker died?)"
	elif [ "$(head -n 1 "$R/$name.tools" | cut -f 1)" = ok ]; then
		pass "tools $name" "$(head -n 1 "$R/$name.tools" | cut -f 2-)"
	else
		sed 1d "$R/$name.tools" >"$R/$name.tools.more"
		fail "tools $name" "$(head -n 1 "$R/$name.tools" | cut -f 2-)" \
			"$R/$name.tools.more"
	fi
done <"$WORK/all.tsv"

# ------------------------------------------------------ the ground truth
for p in $pids; do
	wait "$p" || echo "# a ground-truth run exited $?: $(grep -v 'UCX\|cpuinfo\|Warning' "$WORK"/truth-*.err | tail -n 3)"
done
cat "$WORK/truth-1.13.tsv" "$WORK/truth-2.tsv" >"$WORK/truth.tsv"
loads=
[ -z "$have1" ] || loads="v1 v1w"
[ -z "$have2" ] || loads="$loads v2 v2w"
# joined.tsv: all.tsv's columns, then the loads the payload ran under
# ("-": none), what attacks.py expected of the loads measured, and what
# each load did (v1 v1w v2 v2w; "-" when not measured: no field is
# empty, as read(1) would join empty fields between tabs)
awk -F"$TAB" -v OFS="$TAB" -v loads="$loads" '
	function f(x) { return x == "" ? "-" : x }
	FILENAME == ARGV[1] {
		o[$1, $2] = $4
		if ($3 == "ran")
			ran[$1] = ran[$1] (ran[$1] == "" ? "" : " ") $2
		next
	}
	{
		n = split(loads, L, " ")
		want = ""
		for (i = 1; i <= n; i++)
			if ((" " $5 " ") ~ (" " L[i] " "))
				want = want (want == "" ? "" : " ") L[i]
		r = ran[$1] == "" ? "-" : ran[$1]
		print $0, r, f(want), f(o[$1, "v1"]), f(o[$1, "v1w"]), f(o[$1, "v2"]),
			f(o[$1, "v2w"])
	}' "$WORK/truth.tsv" "$WORK/all.tsv" >"$WORK/joined.tsv"

# --------------------------------------------------------- the verdicts
echo "# each file against the ground truth (at $(($(date +%s) - t0)) s)"
: >"$WORK/failures"
: >"$WORK/notes"
# named NAME NAMES: the NAMES (each "a|b") ptls --check did not name
named() {
	_miss=
	for _g in $2; do
		[ "$_g" = - ] && continue
		_ok=
		_ifs=$IFS
		IFS='|'
		for _a in $_g; do
			# "NAME (offset ...)" or "NAME in data.pkl (...)"
			grep -qF "# unsafe global $_a " "$R/$1.check.out" && _ok=1
		done
		IFS=$_ifs
		[ -n "$_ok" ] || _miss="$_miss $_g"
	done
	echo "${_miss# }"
}
# failed NAME TECHNIQUE RAN WHAT: a row of the failure table
failed() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "${3:--}" "$4" >>"$WORK/failures"
}
firstline() {	# NAME TAG: the first line the tool printed (stderr first)
	{ grep -m 1 . "$R/$1.$2.err" || grep -m 1 'unsafe\|^ptverify\|problem' "$R/$1.$2.out" ||
		head -n 1 "$R/$1.$2.out"; } 2>/dev/null |
		awk -v w="$WORK/" '{ while ((i = index($0, w)) > 0) $0 = substr($0, 1, i - 1) substr($0, i + length(w)); print substr($0, 1, 160) }'
}
while IFS="$TAB" read -r name kind path role expect names source technique \
    ran want o1 o1w o2 o2w; do
	crc=$(cat "$R/$name.check.rc") vrc=$(cat "$R/$name.verify.rc")
	if [ "$role" = hostile ] && [ "$want" != "$ran" ]; then
		echo "note $name: attacks.py expects it to run under $want, it ran under $ran (v1: $o1; v1w: $o1w; v2: $o2; v2w: $o2w)" |
			cut -c 1-400 | tee -a "$WORK/notes"
	fi
	[ "$ran" != - ] || ran=
	case $role in
	hostile)
		if [ -z "$ran" ]; then
			pass "never runs $name" "under no torch here; ptls --check $crc, ptverify $vrc"
			continue
		fi
		miss=$(named "$name" "$names")
		if [ "$crc" = 1 ] && [ -z "$miss" ]; then
			pass "ptls --check $name" "runs under $ran; exit 1$([ "$names" = - ] || echo ", names $names")"
		else
			why="exit $crc${miss:+, does not name $miss}"
			fail "ptls --check $name" "runs under $ran ($technique); $why: $(firstline "$name" check)"
			failed "$name" "$technique" "$ran" "ptls --check $why: $(firstline "$name" check)"
		fi
		if [ "$vrc" = 1 ]; then
			pass "ptverify $name" "runs under $ran; exit 1"
		else
			fail "ptverify $name" "runs under $ran ($technique); exit $vrc: $(firstline "$name" verify)"
			failed "$name" "$technique" "$ran" "ptverify exit $vrc: $(firstline "$name" verify)"
		fi ;;
	control|benign)
		[ -z "$ran" ] || {
			fail "no payload in $name" "yet a marker appeared under $ran"
			failed "$name" "$technique" "$ran" "a marker without a payload"
		}
		if [ "$role" = benign ]; then
			v=${name#benign_}
			v=${v%%_*}
			o=$o1
			[ "$v" = 1.13 ] || o=$o2
			case $o in
			loaded|read_metadata) pass "torch $v loads $name" "$o" ;;
			*) fail "torch $v loads $name" "$o" ;;
			esac
		fi
		if [ "$crc" = 0 ]; then
			pass "ptls --check $name" "exit 0 ($role)"
		else
			fail "ptls --check $name" "a $role file flagged: exit $crc: $(firstline "$name" check)"
			failed "$name" "$technique" "-" "ptls --check exit $crc on a $role file: $(firstline "$name" check)"
		fi
		if [ "$vrc" = 0 ]; then
			pass "ptverify $name" "exit 0 ($role)"
		else
			fail "ptverify $name" "a $role file: exit $vrc: $(firstline "$name" verify)"
			failed "$name" "$technique" "-" "ptverify exit $vrc on a $role file: $(firstline "$name" verify)"
		fi ;;
	esac
done <"$WORK/joined.tsv"

if [ -e "$PTFS_CANARY" ] || [ -e "$WORK/ptfs-cwd/ptfs-canary" ]; then
	fail "nothing ran under ptfs" "a marker exists: $(ls "$PTFS_CANARY" "$WORK/ptfs-cwd/ptfs-canary" 2>/dev/null | tr '\n' ' ')"
else
	pass "nothing ran under ptfs" "no marker after every tool and mount"
fi
if no_mounts_left; then
	pass "no mounts left" "nothing under $WORK/mnt"
else
	fail "no mounts left" "$(awk -v w="$WORK/mnt/" 'index($2, w) == 1 { print $2 }' /proc/mounts | head -n 3 | tr '\n' ' ')"
fi

# ---------------------------------------------------------------- tables
if [ -n "$verbose" ]; then
	echo "# ground truth: RAN = the payload ran; ok = loaded, refused = weights_only refused it, error = the load failed"
	awk -F"$TAB" '
	function brief(l, o, ran) {
		if (o == "-") return ""
		if (o ~ /^(loaded|read_metadata)/) o = "ok"
		else if (o ~ /Weights only load failed|Cannot use ..weights_only=True/) o = "refused"
		else if (o ~ /^n\/a/) o = "n/a"
		else if (o ~ /^error/) o = "error"
		if ((" " ran " ") ~ (" " l " ")) o = "RAN(" o ")"
		return sprintf(" %s=%-11s", l, o)
	}
	{
		printf "%-36s %-7s%s%s%s%s %s; %s\n", $1, $4, brief("v1", $11, $9),
			brief("v1w", $12, $9), brief("v2", $13, $9),
			brief("v2w", $14, $9), $7, $8
	}' "$WORK/joined.tsv"
fi
if [ -s "$WORK/failures" ]; then
	echo "# failures: file | technique | runs under | what the tool did"
	awk -F"$TAB" '{ printf "  %-34s | %s | %s | %s\n", $1, substr($2, 1, 60), $3, $4 }' \
		"$WORK/failures"
fi
echo "# $(grep -c . "$WORK/all.tsv") files in $(($(date +%s) - t0)) s"
summary
[ "$nfail" -eq 0 ]
