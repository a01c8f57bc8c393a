# repack.sh - what the ptrepack tests share (POSIX sh; sourced after
# lib.sh, with $ptrepack the binary and $WORK the scratch directory):
#
#   repack LABEL ARG...         ptrepack ARG... must succeed (fail LABEL
#                               with its first line if not); its stdout in
#                               $WORK/rp.out, stderr in $WORK/rp.err
#   refused LABEL WORDS OUT ARG...
#                               ptrepack ARG... must exit 2 with one line
#                               holding WORDS, leaving neither OUT nor a
#                               temporary (*ptfs-new*) beside it

repack() {
	_l=$1
	shift
	run_limited 120 "$ptrepack" "$@" >"$WORK/rp.out" 2>"$WORK/rp.err" && return 0
	fail "$_l" "ptrepack $*: exit $?: $(head -n 1 "$WORK/rp.err")"
	return 1
}

refused() {
	_l=$1 _w=$2 _o=$3
	shift 3
	run_limited 60 "$ptrepack" "$@" >"$WORK/rp.out" 2>"$WORK/rp.err"
	_rc=$?
	_left=$(ls -A "$(dirname "$_o")" | grep -c -e "^$(basename "$_o")\$" \
		-e 'ptfs-new')
	if [ $_rc -eq 2 ] && [ "$(wc -l <"$WORK/rp.err")" -eq 1 ] &&
	   grep -q -- "$_w" "$WORK/rp.err" && [ "$_left" -eq 0 ]; then
		pass "$_l" "exit 2: $(cat "$WORK/rp.err")"
	else
		fail "$_l" "exit $_rc, $_left files left: $(head -n 2 "$WORK/rp.err")"
	fi
}
