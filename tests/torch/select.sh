# select.sh - sourced by the torch checks (tests/torch, tests/fs, tests/tools):
# find the torch to check against and make a scratch directory it can see.
#
#   torch_select VERSION SHARED_DIR NAME
#
# VERSION 1.13 sets py=/usr/bin/python3 (Debian's torch); VERSION 2 sets
# root to the Debian unstable root that scripts/torch2-root.sh builds once
# and caches (PT_TORCH2_ROOT, default /var/cache/ptfs/torch2-root).  Both
# set work (the scratch directory NAME.XXXXXX as seen from here) and inner
# (the same directory as that python sees it).  SHARED_DIR is not used for
# torch (kept for the callers' argument lists).
#
# PT_SCRATCH_DIR, when set, is where the scratch directory is made instead
# of ${TMPDIR:-/tmp} (for 2, of the root's /tmp; then it must lie inside
# the root): tests/fs/safety/reflink.sh runs the crash and fault tests on XFS and
# btrfs that way.
#
# Without torch: exit 1 with one line.  The only way to skip instead (77)
# is asking for it: PT_NO_TORCH2=1 skips the torch 2.x checks,
# PT_ALLOW_SKIP_TORCH=1 skips any torch that is missing.

no_torch() {
	echo "torch $1 not available: $2" >&2
	if [ "${PT_ALLOW_SKIP_TORCH:-0}" = 1 ]; then
		echo "PT_ALLOW_SKIP_TORCH=1: skipping"
		exit 77
	fi
	exit 1
}

# torch2_root: the root's path on stdout, or a one-line reason on stderr
# and status 1 (77 when the user opted out with PT_NO_TORCH2=1)
torch2_root() {
	if [ "${PT_NO_TORCH2:-0}" = 1 ]; then
		echo "PT_NO_TORCH2=1: torch 2.x checks skipped" >&2
		return 77
	fi
	# scripts/ of the clone the calling test lies in, however deep
	_d=$(dirname "$(readlink -f "$0")") _t2=
	while [ "$_d" != / ] && [ -z "$_t2" ]; do
		[ -f "$_d/scripts/torch2-root.sh" ] && _t2=$_d/scripts/torch2-root.sh
		_d=$(dirname "$_d")
	done
	[ -n "$_t2" ] || _t2=${PT_SOURCE_DIR:-.}/scripts/torch2-root.sh
	sh "$_t2" | tail -n 1
}

# torch_version PYTHON...: torch's version as its package records it, on
# stdout; status 1 and the reason when PYTHON has no torch or no numpy.
# It finds the modules without importing them: an import of torch costs
# 1 to 2.5 s of CPU, and the suite asks about 150 times (docs/testing.md).
# A torch that is installed but cannot be imported fails the test at its
# first real use, with torch's own message.
torch_version() {
	"$@" -c 'import importlib.util as u, importlib.metadata as m, sys
for n in ("torch", "numpy"):
    if u.find_spec(n) is None:
        sys.exit("No module named %r" % n)
try:
    print(m.version("torch"))
except m.PackageNotFoundError:
    print("unknown")' 2>&1
}

torch_select() {
	if [ "$1" = 1.13 ]; then
		py=/usr/bin/python3
		[ -x "$py" ] || no_torch "$1" "$py not found"
		_why=$(torch_version "$py") ||
			no_torch "$1" "$(printf '%s\n' "$_why" | tail -n 1)"
		work=$(mktemp -d "${PT_SCRATCH_DIR:-${TMPDIR:-/tmp}}/$3.XXXXXX") ||
			exit 1
		inner=$work
		return
	fi
	_log=${TMPDIR:-/tmp}/$3-torch2-root.$$.log
	root=$(torch2_root 2>"$_log")
	_st=$?
	_why=$(tail -n 1 "$_log")
	rm -f "$_log"
	if [ "$_st" = 77 ]; then
		echo "$_why"
		exit 77
	fi
	if [ -z "$root" ] || [ ! -d "$root/tmp" ]; then
		no_torch "$1" "${_why:-scripts/torch2-root.sh printed no root}"
	fi
	if [ -n "${PT_SCRATCH_DIR:-}" ]; then
		case $PT_SCRATCH_DIR in
		"$root"/*) ;;
		*)	echo "PT_SCRATCH_DIR must lie inside $root for torch 2" >&2
			exit 1 ;;
		esac
		work=$(mktemp -d "$PT_SCRATCH_DIR/$3.XXXXXX") || exit 1
		inner=${work#"$root"}
	else
		work=$(mktemp -d "$root/tmp/$3.XXXXXX") || exit 1
		inner=/tmp/${work##*/}
	fi
	chmod 755 "$work"
}

# run_py ARG...: the selected torch's python (after torch_select, with
# $version the VERSION it was given): /usr/bin/python3, or python3 in
# torch 2.x's root, where paths are the root's (use $inner for $work)
run_py() {
	if [ "$version" = 1.13 ]; then
		"$py" "$@"
	else
		chroot "$root" python3 "$@"
	fi
}

# torch_select_writer VERSION SHARED_DIR NAME: torch_select VERSION, and
# torch 2.x as the writer of fixtures only it can make (DCP directories)
# whatever VERSION checks: groot, gwork and ginner are its root and
# scratch directory (NAME-gen.XXXXXX; under 2 the same as work).
torch_select_writer() {
	torch_select 2 "$2" "$3$([ "$1" = 2 ] || echo -gen)"
	groot=$root gwork=$work ginner=$inner
	[ "$1" = 2 ] || torch_select "$1" "$2" "$3"
}

# run_checks SCRIPT MANIFEST: run the python SCRIPT (in $inner) on
# MANIFEST (a file in $work, one case a line), which prints "ok CASE" or
# "FAIL CASE: why" for each; each becomes the caller's ok or bad (its
# own functions), and a count that differs from MANIFEST's lines is one
# bad more.  The script's stderr but torch's start-up noise is shown.
run_checks() {
	run_py "$inner/$1" "$inner/$2" >"$work/check.out" 2>"$work/check.err"
	grep -v "UCX\|cpuinfo\|Warning\|return func" "$work/check.err" |
		tail -n 5
	while read -r _word _rest; do
		case $_word in
		ok) ok "$_rest" ;;
		*) bad "$_rest" ;;
		esac
	done <<EOF
$(grep -E '^(ok|FAIL) ' "$work/check.out")
EOF
	_n=$(grep -cE '^(ok|FAIL) ' "$work/check.out")
	[ "$_n" = "$(grep -c . "$work/$2")" ] ||
		bad "$1 checked $_n of $(grep -c . "$work/$2") cases"
}

# refused WANT OUT CMD ARG...: CMD ARG... OUT must fail as a refusal
# does: exit 2, one line on stderr (a usage error's synopsis and "Try"
# lines aside) whose first line matches WANT, no OUT, no sanitizer
# report; the caller's ok or bad says so.
refused() {
	_want=$1 _out=$2
	shift 2
	rm -rf "$_out"
	"$@" "$_out" >"$work/refused.out" 2>"$work/refused.err"
	_st=$?
	if [ $_st = 2 ] &&
	   [ "$(grep -vc "^usage: \|^Try " "$work/refused.err")" = 1 ] &&
	   head -n 1 "$work/refused.err" | grep -q -- "$_want" &&
	   [ ! -e "$_out" ] &&
	   ! grep -q "Sanitizer\|runtime error" "$work/refused.err"; then
		shift
		ok "refused $*: $(head -n 1 "$work/refused.err")"
	else
		bad "$*: status $_st, stderr: $(cat "$work/refused.err")"
	fi
}
