#!/bin/sh
# selftest.sh - the mount tests' own machinery, checked without FUSE or
# torch (ctest testlib): -k case selection (cases.sh), the script server
# (tserve.py through begin.sh's fs_pyrun, fs_pycall and fs_tcall: output,
# exit status, a script that kills its process, the time limit, argv,
# the working directory, state a script leaves behind), and for_others
# (what a second user may run).
#
#   usage: sh tests/fs/lib/selftest.sh
#
# Plain python3 stands in for the torch under test ($py, version 1.13).
# Last line "N passed, N failed"; exit 0 or 1.
set -u
here=$(cd "$(dirname "$0")" && pwd) || exit 1
fs=${here%/*}
. "$here/begin.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptfs-selftest.XXXXXX") || exit 1
trap 'fs_tserve_stop; rm -rf "$WORK"' EXIT
. "$here/lib.sh"
version=1.13 py=python3 inner=$WORK
DET=$WORK/det
: >"$DET"
note() { printf '%s\n' "$*" >>"$DET"; }
check() {
	if [ -s "$DET" ]; then
		fail "$1" "$(head -n 1 "$DET")"
	else
		pass "$1" "$2"
	fi
	: >"$DET"
}

# ---- -k: which cases a script runs, as a script sees it
cat >"$WORK/cases.sh" <<EOF
. "$here/cases.sh"
. "$here/lib.sh"
for c in open_rename replace_rename mkdir rm; do
	want "\$c" && pass "\$c" ran
done
summary
[ "\$nfail" -eq 0 ]
EOF
ran() { sh "$WORK/cases.sh" "$@" 2>&1 | sed -n 's/^ok   \([^:]*\): ran$/\1/p' | tr '\n' ' '; }
[ "$(ran)" = "open_rename replace_rename mkdir rm " ] || note "no -k: $(ran)"
[ "$(ran -k rename)" = "open_rename replace_rename " ] || note "-k rename: $(ran -k rename)"
[ "$(ran -k 'mk*,rm')" = "mkdir rm " ] || note "-k 'mk*,rm': $(ran -k 'mk*,rm')"
[ "$(ran -k '^rm')" = "" ] || note "-k '^rm' is no glob: $(ran -k '^rm')"
out=$(sh "$WORK/cases.sh" -k nosuch 2>&1)
rc=$?
[ $rc = 1 ] || note "-k nosuch: exit $rc"
case $out in *"no case of that name"*) ;; *) note "-k nosuch says: $out" ;; esac
out=$(sh "$WORK/cases.sh" -k list 2>&1)
[ "$(printf '%s\n' "$out" | head -n 4 | tr '\n' ' ')" = "open_rename replace_rename mkdir rm " ] ||
	note "-k list: $out"
out=$(sh "$WORK/cases.sh" -k rename 2>&1 | tail -n 2 | head -n 1)
[ "$out" = "-k rename: 2 of 4 cases run" ] || note "the count line: $out"
check "-k" "by part of a name, globs, commas, list; none matching fails"

# ---- the script server
mkdir -p "$WORK/py" "$WORK/d"
cat >"$WORK/py/s.py" <<'EOF'
import os, sys, time
what = sys.argv[1]
if what == "echo":
    print(" ".join(sys.argv[2:]))
    print("to stderr", file=sys.stderr)
elif what == "exit":
    sys.exit(int(sys.argv[2]))
elif what == "msg":
    sys.exit("a message")
elif what == "raise":
    raise ValueError("boom")
elif what == "kill":
    os._exit(3)
elif what == "cwd":
    print(os.getcwd())
elif what == "fd":
    os.write(1, b"straight to fd 1\n")
elif what == "pid":
    print(os.getpid())
elif what == "sleep":
    time.sleep(float(sys.argv[2]))
elif what == "set":
    globals()["left"] = 1
    print("left" in globals())
EOF
FS_PY=s.py
fs_tserve || note "the server did not start: $(cat "$WORK/tserve.err")"
fs_pyrun r1 echo "a b" "c"
rc=$?
[ $rc = 0 ] || note "echo: exit $rc"
[ "$(cat "$WORK/r1")" = "a b c" ] || note "argv: '$(cat "$WORK/r1")'"
# a tab or a newline cannot be sent: such a call runs as a process
p0=$(fs_pycall s.py pid)
t=$(fs_pycall s.py echo "c	d" 2>/dev/null "e
f")
[ "$t" = "$(printf 'c\td e\nf')" ] || note "an argument with a tab or newline: '$t'"
[ "$(fs_pycall s.py pid "x	y")" != "$p0" ] || note "a tab went to the server"
[ "$(cat "$WORK/r1.err")" = "to stderr" ] || note "stderr: '$(cat "$WORK/r1.err")'"
fs_pyrun r2 exit 7
[ $? = 7 ] || note "sys.exit(7) is not exit 7"
fs_pyrun r3 msg
[ $? = 1 ] && grep -q "a message" "$WORK/r3.err" || note "sys.exit(str): not exit 1 with the message"
fs_pyrun r4 raise
[ $? = 1 ] && grep -q "ValueError: boom" "$WORK/r4.err" || note "an exception: not exit 1 with its traceback"
fs_pyrun r5 fd
[ "$(cat "$WORK/r5")" = "straight to fd 1" ] || note "a write to fd 1 went elsewhere: '$(cat "$WORK/r5")'"
p1=$(fs_pycall s.py pid)
p2=$(fs_pycall s.py pid)
[ -n "$p1" ] && [ "$p1" = "$p2" ] || note "two calls, two processes ($p1, $p2): no server"
[ "$(fs_pycall s.py set)" = True ] && [ "$(fs_pycall s.py set)" = True ] ||
	note "a script's globals"
fs_tcall 1.13 r6 "$WORK/d" "$WORK/py/s.py" cwd
[ "$(cat "$WORK/r6")" = "$WORK/d" ] || note "cwd: $(cat "$WORK/r6")"
fs_pyrun r7 cwd
[ "$(cat "$WORK/r7")" != "$WORK/d" ] || note "the directory of one call stays for the next"
check "the script server" "output, exit statuses, fd 1, one process, the working directory"

fs_pyrun r8 kill
rc=$?
[ $rc != 0 ] || note "a script that kills its process: exit 0"
grep -q "tserve.py died" "$WORK/r8.err" || note "no word that the server died: $(cat "$WORK/r8.err")"
fs_pyrun r9 echo again
[ $? = 0 ] && [ "$(cat "$WORK/r9")" = again ] || note "no server after the one that died"
p3=$(fs_pycall s.py pid)
[ "$p3" != "$p1" ] || note "the dead server still answers"
check "a script that kills the server" "that call fails, the next starts another"

fs_tserve_stop
PT_TSERVE_LIMIT=1
export PT_TSERVE_LIMIT
fs_pyrun r10 sleep 5
rc=$?
[ $rc = 124 ] || note "over the limit: exit $rc, not 124"
fs_pyrun r11 echo after
[ "$(cat "$WORK/r11")" = after ] || note "the server after a call over its limit"
check "the time limit" "exit 124, the server goes on"
fs_tserve_stop
unset PT_TSERVE_LIMIT

PT_NO_TSERVE=1
[ "$(fs_pycall s.py pid)" != "$(fs_pycall s.py pid)" ] || note "PT_NO_TSERVE=1: one process"
PT_NO_TSERVE=0
check "PT_NO_TSERVE=1" "a process per call"

# ---- for_others: a copy any user can run, in the test's own directory
printf '#!/bin/sh\necho hi\n' >"$WORK/tool"
chmod 700 "$WORK/tool"
c=$(for_others "$WORK/tool") || note "for_others failed"
case $c in "$WORK/others/tool") ;; *) note "the copy is at $c" ;; esac
[ "$(stat -c %a "$c")" = 755 ] || note "its mode is $(stat -c %a "$c")"
[ "$(stat -c %a "$WORK/others")" = 755 ] && [ "$(stat -c %a "$WORK")" = 755 ] ||
	note "its directories are not open to others"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	r=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$c" 2>&1)
	[ "$r" = hi ] || note "nobody cannot run it: $r"
fi
check "for_others" "0755 copy a second user runs"

summary
[ "$nfail" -eq 0 ]
