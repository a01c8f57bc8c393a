#!/bin/sh
# manpages.sh SOURCE_DIR - every man page (docs/*.1, docs/*.5) renders
# cleanly: no groff warning (groff -man -ww -z), no run-together words
# from alternating font macros (".RB a b" sets "ab": a word ending one
# argument and one starting the next), and JSON shown in a page keeps
# its quotes ("status":"ok", not status :"ok": a '"' inside a macro's
# argument ends the argument unless written \(dq).
# Prints one line per check and "N passed, N failed".
set -u
[ $# -eq 1 ] || { echo "usage: sh $0 SOURCE_DIR" >&2; exit 2; }
src=$1
command -v groff >/dev/null || { echo "no groff: skipped"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

for page in "$src"/docs/*.1 "$src"/docs/*.5; do
	n=${page##*/}
	w=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
	[ -z "$w" ] && ok "$n: no groff warnings" ||
		bad "$n: groff warns: $(printf '%s\n' "$w" | head -n 3)"
	# a wide line, no hyphenation, no overstrike: the text as words
	groff -man -Tutf8 -rLL=250n -rHY=0 -P-cbou "$page" 2>/dev/null \
		>"${TMPDIR:-/tmp}/manpages.$$"
	if out=$(python3 - "$page" "${TMPDIR:-/tmp}/manpages.$$" <<'EOF'
import re, sys
src, text = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
bad = []
# alternating font macros: arguments are set without a space between
alt = re.compile(r'\.(BR|RB|IR|RI|BI|IB)\s+(.*)')
suffix = re.compile(r'(s|es|ed|ing|th)\W*$')	# .BR nn.Parameter s,
for no, line in enumerate(open(src, encoding="utf-8"), 1):
    m = alt.match(line)
    if not m:
        continue
    args = re.findall(r'"(?:[^"]|"")*"|\S+', m.group(2))
    args = [a[1:-1] if len(a) > 1 and a[0] == a[-1] == '"' else a
            for a in args]
    for a, b in zip(args, args[1:]):
        a = re.sub(r'\\(\(..|\[[^]]*\]|.)$', '', a)	# a trailing escape
        if (re.search(r'[A-Za-z0-9]$', a) and re.match(r'[A-Za-z0-9]', b)
                and not suffix.match(b)):
            bad.append("line %d: '%s' and '%s' run together: %s" %
                       (no, a, b, line.strip()))
# JSON with quotes: every key quoted, none cut off from its colon
flat = re.sub(r'\s+', ' ', text)
for span in re.findall(r'\{[^{}]*\}', flat):
    if '"' not in span:
        continue	# a python dict in prose, {k: v.to(TYPE)}
    if re.search(r'(^\{|, ?)\s*[A-Za-z_][A-Za-z0-9_]*\s*:', span) or \
            re.search(r'"\s+:', span) or re.search(r'\w\s+"\w', span):
        bad.append("JSON lost its quotes: " + span[:100])
# a page that quotes JSON must show it with its quotes
want = len(re.findall(r'\{(\\\(dq|")', open(src, encoding="utf-8").read()))
got = len(re.findall(r'\{"', flat))
if got < want:
    bad.append("%d JSON objects in the source, %d rendered with quotes" %
               (want, got))
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
	); then
		ok "$n: no run-together words, JSON keeps its quotes"
	else
		bad "$n: $(printf '%s\n' "$out" | head -n 4)"
	fi
done
rm -f "${TMPDIR:-/tmp}/manpages.$$"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
