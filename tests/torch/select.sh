# select.sh - sourced by tests/torch/run.sh and tests/fs/run.sh: find the
# torch to check against and make a scratch directory it can see.
#
#   torch_select VERSION SHARED_DIR NAME
#
# VERSION 1.13 sets py=/usr/bin/python3 (Debian's torch); VERSION 2 sets
# root to the chroot that SHARED_DIR/tools/torch2-root builds.  Both set
# work (the scratch directory NAME.XXXXXX as seen from here) and inner
# (the same directory as that python sees it).  Without torch: exit 1, or
# 77 (skip) when PT_ALLOW_SKIP_TORCH=1.

no_torch() {
	echo "torch $1 not available: $2" >&2
	if [ "${PT_ALLOW_SKIP_TORCH:-0}" = 1 ]; then
		echo "PT_ALLOW_SKIP_TORCH=1: skipping"
		exit 77
	fi
	exit 1
}

torch_select() {
	if [ "$1" = 1.13 ]; then
		py=/usr/bin/python3
		[ -x "$py" ] || no_torch "$1" "$py not found"
		_why=$("$py" -c 'import torch, numpy' 2>&1) ||
			no_torch "$1" "$(printf '%s\n' "$_why" | grep -v UCX | tail -n 1)"
		work=$(mktemp -d "${TMPDIR:-/tmp}/$3.XXXXXX") || exit 1
		inner=$work
		return
	fi
	_t2=$2/tools/torch2-root
	[ -f "$_t2" ] || no_torch "$1" "$_t2 not found"
	_log=${TMPDIR:-/tmp}/$3-torch2-root.$$.log
	root=$(sh "$_t2" 2>"$_log" | tail -n 1)
	if [ -z "$root" ] || [ ! -d "$root/tmp" ]; then
		_why=$(tail -n 1 "$_log")
		rm -f "$_log"
		no_torch "$1" "torch2-root failed: ${_why:-no root printed}"
	fi
	rm -f "$_log"
	work=$(mktemp -d "$root/tmp/$3.XXXXXX") || exit 1
	chmod 755 "$work"
	inner=/tmp/${work##*/}
}
