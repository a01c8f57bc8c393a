#!/bin/sh
# ptdump_cli.sh PTDUMP [SHARED_DIR] - ptdump's output, messages and exit
# codes: the object tree of the sample, --pickle line for line against
# `python3 -m pickletools` on every fixture's data.pkl (extracted with
# Python's zipfile) and on legacy streams, --records against Python's
# zipfile (CRCs, data offsets), and broken and hostile files.
# Prints one line per check and "N passed, N failed".
set -u
ptdump=$1
shared=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
sample=$here/../data/sample.pt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
py=/usr/bin/python3
[ -x "$py" ] || py=python3

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect STATUS PATTERN -- ARGS...: exit status and a line of the output
expect() {
	want=$1 pat=$2; shift 3
	"$ptdump" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if grep -q "Sanitizer\|runtime error:" "$tmp/err"; then
		bad "ptdump $*: sanitizer report: $(grep -m 1 "Sanitizer\|runtime error:" "$tmp/err")"
	elif [ "$got" != "$want" ]; then
		bad "ptdump $*: exit $got, want $want: $(head -c 300 "$tmp/err")"
	elif [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
		bad "ptdump $*: no '$pat' in the output"
	else
		ok "ptdump $* (exit $got${pat:+, '$pat'})"
	fi
}

# an error is one line on stderr naming the file
one_line() {
	"$ptdump" "$@" >/dev/null 2>"$tmp/err"
	f=$(eval echo "\${$#}")
	if [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^ptdump: $f: " "$tmp/err"; then
		ok "one-line error for ptdump $*"
	else
		bad "error of ptdump $* is not one line naming the file: $(cat "$tmp/err")"
	fi
}

json_ok() {
	if "$ptdump" --json "$@" >"$tmp/j" 2>/dev/null &&
	   $py -m json.tool "$tmp/j" >/dev/null 2>&1; then
		ok "ptdump --json $* is valid JSON"
	else
		bad "ptdump --json $* is not valid JSON"
	fi
}

# ---- command line
expect 0 "usage: ptdump" -- --help
expect 0 "^ptdump 0" -- --version
expect 2 "usage: ptdump" -- --bogus
expect 2 "no checkpoint given" --
expect 2 "one at a time" -- --pickle --records "$sample"

# ---- the object tree
expect 0 "^model/embed.weight  *Tensor float32 (16, 8) stride (8, 1) offset 0 storage '0' cpu 512 B" -- "$sample"
expect 0 "^config/name  *str 'tiny'" -- "$sample"
expect 0 "^config/dropout  *NoneType None" -- "$sample"
expect 0 "^optimizer/param_groups/0/lr  *float 0.001" -- "$sample"
expect 0 "^model  *OrderedDict (6 items) state {'_metadata'" -- "$sample"
expect 0 "^storage '0'  float32 x 128 = 512 B  cpu  2 tensors  record sample/data/0  data at 0x" -- "$sample"
expect 0 "^# .*sample.pt: zip archive, prefix 'sample', version 3" -- "$sample"
json_ok "$sample"
if $py - "$tmp/j" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
m = [c for c in d["root"]["children"] if c["name"] == "model"][0]
e = [c for c in m["children"] if c["name"] == "embed.weight"][0]
assert e["kind"] == "tensor" and e["shape"] == [16, 8] and e["storage"] == "0"
assert "_metadata" in m["state"]
n = [c for c in d["root"]["children"] if c["name"] == "config"][0]["children"][0]
assert n["value"] == "tiny" and n["repr"] == "'tiny'", n
assert d["storages"][0]["record"] == "sample/data/0"
EOF
then ok "--json tree: keys, tensor fields, values and state"
else bad "--json tree does not hold what the text shows"; fi

# ---- --pickle against pickletools
cat >"$tmp/dis.py" <<'EOF'
import pickletools, sys, zipfile
path, ann = sys.argv[1], 30 if sys.argv[2] == "a" else 0
with open(path, "rb") as f:
    head = f.read(4)
if head == b"PK\x03\x04":
    z = zipfile.ZipFile(path)
    name = [n for n in z.namelist() if n.endswith("/data.pkl")
            and n.count("/") == 1][0]
    pickletools.dis(z.read(name), annotate=ann)
else:
    # a legacy stream is five pickles: dis() each from the same file, as
    # ptdump does (pickletools itself stops after the first)
    with open(path, "rb") as f:
        n = 5 if head == b"\x80\x02\x8a\x0a" else 1
        for _ in range(n):
            pickletools.dis(f, annotate=ann)
EOF
npk=0
for f in "$here"/../data/values_p*.pkl "$sample" ${shared:+"$shared"/fixtures/torch-1.13/* "$shared"/fixtures/torch-2/* "$shared"/fixtures/real/*.p* "$shared"/fixtures/real/*.bin}; do
	[ -f "$f" ] || continue
	case $f in *legacy_tar.pt) continue ;; esac	# a tar: not a pickle
	for a in p a; do
		$py "$tmp/dis.py" "$f" $a >"$tmp/py" 2>/dev/null || continue
		if [ $a = a ]; then opt=--annotate; else opt=--pickle; fi
		"$ptdump" $opt "$f" >"$tmp/c" 2>"$tmp/err"
		st=$?
		npk=$((npk + 1))
		if [ $st = 0 ] && cmp -s "$tmp/py" "$tmp/c"; then
			ok "ptdump $opt ${f##*/} = pickletools"
		else
			bad "ptdump $opt $f differs from pickletools (exit $st): $(diff "$tmp/py" "$tmp/c" | head -n 4)"
		fi
	done
done
[ $npk -ge 12 ] && ok "$npk listings compared" || bad "only $npk listings compared"
json_ok --pickle "$sample"

# a pickle pickletools refuses: the listing up to there, then one line
$py - "$tmp/broken.pkl" <<'EOF'
import pickle, sys
# PROTO 2, EMPTY_LIST, BINPUT 0, BININT1 1, APPENDS (no MARK), STOP
open(sys.argv[1], "wb").write(b"\x80\x02]q\x00K\x01e.")
EOF
expect 2 "no MARK exists on stack" -- --pickle "$tmp/broken.pkl"
grep -q "PROTO" "$tmp/out" && ok "the listing before the error is printed" ||
	bad "no listing before the error"
one_line --pickle "$tmp/broken.pkl"
printf '\200\002K\001' >"$tmp/nostop.pkl"
expect 2 "pickle exhausted before seeing STOP" -- --pickle "$tmp/nostop.pkl"

# ---- --records against Python's zipfile
expect 0 "sample/data.pkl" -- --records "$sample"
"$ptdump" --records --json "$sample" >"$tmp/r.json" 2>"$tmp/err"
if $py - "$sample" "$tmp/r.json" <<'EOF'
import json, struct, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
d = json.load(open(sys.argv[2]))
raw = open(sys.argv[1], "rb").read()
assert len(d["records"]) == len(z.infolist())
for r, i in zip(d["records"], z.infolist()):
    assert r["name"] == i.filename
    assert r["header_offset"] == i.header_offset
    n, m = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
    assert r["data_offset"] == i.header_offset + 30 + n + m, r
    assert r["crc32"] == i.CRC == r["crc32_computed"] and r["crc_ok"]
    assert r["usize"] == i.file_size and r["csize"] == i.compress_size
    assert r["align_mod64"] == r["data_offset"] % 64 == 0
    assert r["data_offset"] % r["align"] == 0
EOF
then ok "--records: offsets, sizes and CRCs as zipfile sees them"
else bad "--records disagrees with zipfile"; fi
python3 "$here/mkbad.py" "$sample" flipcrc "$tmp/flipcrc.pt"
expect 0 "[0-9a-f]\{8\}! " -- --records "$tmp/flipcrc.pt"
"$ptdump" --records --json "$tmp/flipcrc.pt" | grep -q '"crc_ok":false' &&
	ok "--records --json marks the wrong CRC" || bad "wrong CRC not marked"
python3 "$here/mkbad.py" "$sample" misaligned "$tmp/mis.pt"
"$ptdump" --records --json "$tmp/mis.pt" >"$tmp/m.json"
$py -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if any(r["align_mod64"] for r in d["records"]) else 1)' "$tmp/m.json" &&
	ok "--records shows misaligned data" || bad "--records misses misalignment"
expect 0 "" -- --records --no-crc "$sample"
grep -q "  -  " "$tmp/out" && ok "--no-crc leaves the computed CRC out" ||
	bad "--no-crc still computed CRCs"
if [ -n "$shared" ] && [ -f "$shared/fixtures/torch-1.13/legacy.pt" ]; then
	expect 0 "legacy stream" -- --records "$shared/fixtures/torch-1.13/legacy.pt"
	# the first storage's key: a memory address when torch 1.13 saved it
	key=$(python3 -c '
import pickle, sys
class U(pickle.Unpickler):
    def persistent_load(self, pid): return None
    def find_class(self, mod, name): return lambda *a, **k: None
with open(sys.argv[1], "rb") as f:
    for _ in range(3): pickle.load(f)
    U(f).load()
    print(pickle.load(f)[0])' "$shared/fixtures/torch-1.13/legacy.pt")
	expect 0 "$key" -- --records "$shared/fixtures/torch-1.13/legacy.pt"
	json_ok --records "$shared/fixtures/torch-1.13/legacy.pt"
	expect 0 "^# .*legacy stream" -- "$shared/fixtures/torch-1.13/legacy.pt"
fi

# ---- broken and hostile files
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n' >"$tmp/lfs.pt"
: >"$tmp/empty.pt"
head -c 3000 "$sample" >"$tmp/cut.pt"
expect 2 "Git LFS pointer" -- "$tmp/lfs.pt"
expect 2 "truncated download" -- "$tmp/cut.pt"
expect 2 "truncated download" -- --records "$tmp/cut.pt"
expect 2 "empty file" -- --pickle "$tmp/empty.pt"
expect 2 "is a directory" -- "$tmp"
expect 2 "No such file" -- --records "$tmp/missing.pt"
for a in "" --pickle --records; do
	for f in lfs empty cut; do one_line $a "$tmp/$f.pt"; done
done
python3 "$here/mkbad.py" "$sample" evil "$tmp/evil.pt"
expect 0 "posix.system" -- "$tmp/evil.pt"
expect 0 "GLOBAL     'posix system'" -- --pickle "$tmp/evil.pt"
[ ! -e pwned ] && ok "nothing ran" || bad "something ran"
expect 2 "model/embed.weight" -- "$sample" "$tmp/lfs.pt"

# every shared fixture: dumped in each mode, or refused in one line
if [ -n "$shared" ] && [ -d "$shared/fixtures" ]; then
	for f in "$shared"/fixtures/torch-1.13/* "$shared"/fixtures/torch-2/* \
		 "$shared"/fixtures/real/*.p* "$shared"/fixtures/real/*.bin; do
		[ -e "$f" ] || continue
		for a in "" --records --json; do
			"$ptdump" $a "$f" >/dev/null 2>"$tmp/err"
			st=$?
			if [ $st = 0 ] || { [ $st = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]; }; then
				ok "ptdump $a ${f##*/}: exit $st"
			else
				bad "ptdump $a $f: exit $st: $(cat "$tmp/err")"
			fi
		done
	done
else
	echo "shared fixtures not found: skipping the fixture sweep"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
