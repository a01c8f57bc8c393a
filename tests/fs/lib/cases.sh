# cases.sh - run one case of a multi-case test by name (POSIX sh; sourced
# first thing, before the script reads its arguments, so that it can take
# them off):
#
#   sh tests/fs/edit/edit.sh -k rename 1.13 build/ptfs build/ptls build/testenv
#   sh tests/fs/edit/edit.sh -k 'replace_*,mkdir' ...  several, by glob
#   sh tests/fs/edit/edit.sh -k list ...               the case names
#
# As pytest's -k, a name matches anywhere in the case's name (rename runs
# open_rename and replace_rename); glob characters work inside it.
#
# A script marks each case `if want NAME; then ... fi`; without -k every
# case runs.  What a case needs from the cases before it (a file it
# edits, a helper) is set up outside the cases, so each runs alone.
# summary (lib.sh) reports how many cases -k chose, and fails when it
# chose none.  PT_CASE in the environment works as -k does.

PT_CASE=${PT_CASE:-}
if [ "${1:-}" = -k ]; then
	[ $# -ge 2 ] || { echo "usage: sh $0 -k NAME[,NAME...] ARG..." >&2; exit 2; }
	PT_CASE=$2
	shift 2
fi
pt_cases_run=0 pt_cases_all=0

# want NAME: true when case NAME is to run (-k list: print it instead)
want() {
	pt_cases_all=$((pt_cases_all + 1))
	if [ "$PT_CASE" = list ]; then
		printf '%s\n' "$1"
		return 1
	fi
	if [ -n "$PT_CASE" ]; then
		_w_ok=
		_w_ifs=$IFS
		IFS=,
		for _w_p in $PT_CASE; do
			# shellcheck disable=SC2254
			case $1 in *$_w_p*) _w_ok=1 ;; esac
		done
		IFS=$_w_ifs
		[ -n "$_w_ok" ] || return 1
	fi
	pt_cases_run=$((pt_cases_run + 1))
	return 0
}

# cases_report: a line saying what -k chose; 1 when it chose nothing
cases_report() {
	[ -n "$PT_CASE" ] || return 0
	[ "$PT_CASE" = list ] && return 0
	echo "-k $PT_CASE: $pt_cases_run of $pt_cases_all cases run"
	[ "$pt_cases_run" -gt 0 ] && return 0
	echo "FAIL -k $PT_CASE: no case of that name (-k list names them)"
	return 1
}
