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

# ---- --values with --start/--count/--stride: a hyperslab (issue 39.14)
if [ -n "$shared" ] && [ -f "$shared/fixtures/torch-1.13/views.pt" ]; then
	fx=$shared/fixtures
	views=$fx/torch-1.13/views.pt	# "2" is (4, 3) stride (1, 4): a transpose
	expect 0 "^# slab start (1, 0) count (2, 3) stride (1, 1) of (4, 3)$" -- --values 2 --start 1,0 --count 2 "$views"
	if [ "$(sed -n 1p "$tmp/out")" = "# float32 (2, 3)" ] &&
	   [ "$(sed -n '3,$p' "$tmp/out")" = "$(printf '1 5 9\n2 6 10')" ]; then
		ok "--values --start 1,0 --count 2: the slab's rows, its own shape first"
	else
		bad "--values slab text: $(cat "$tmp/out")"
	fi
	# a Hugging Face folder of two safetensors shards, written by hand
	mkdir "$tmp/hf"
	$py - "$tmp/hf" <<'PY'
import json, struct, sys
d, wm = sys.argv[1], {}
for i, (k, shape) in enumerate((("a.weight", [5, 7]), ("b.weight", [3, 4, 6]))):
    n = 1
    for s in shape:
        n *= s
    name = "model-%05d-of-00002.safetensors" % (i + 1)
    h = json.dumps({k: {"dtype": "F32", "shape": shape,
                        "data_offsets": [0, 4 * n]}}).encode()
    with open("%s/%s" % (d, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.write(struct.pack("<%df" % n, *[j * 0.5 - i for j in range(n)]))
    wm[k] = name
json.dump({"metadata": {}, "weight_map": wm},
          open(d + "/model.safetensors.index.json", "w"))
PY
	# every tensor of every format, against the cut of the whole tensor
	for f in "$tmp/hf" "$fx"/torch-1.13/views.pt "$fx"/torch-1.13/legacy.pt \
		 "$fx"/torch-1.13/legacy_tar.pt "$fx"/torch-1.13/script.pt \
		 "$fx"/torch-1.13/dtypes.pt "$fx"/torch-1.13/misc.pt \
		 "$fx"/torch-2/views.pt "$fx"/torch-2/newdtypes.pt \
		 "$fx"/dcp/rows "$fx"/dcp/grid "$fx"/dcp/plain; do
		[ -e "$f" ] || continue
		if $py "$here/ptdump_slab_check.py" "$ptdump" "$(dirname "$ptdump")/ptls" "$f" >"$tmp/sc" 2>&1; then
			ok "$(cat "$tmp/sc")"
		else
			bad "slabs of $f: $(grep -v '^ok' "$tmp/sc" | head -c 600)"
		fi
	done
	for a in "--start 5,0" "--start 2 --count 3" "--stride 0" "--start 1,1,1" "--count 0,1"; do
		# shellcheck disable=SC2086
		expect 2 "^ptdump: $views: 2: --" -- --values 2 $a "$views"
		[ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -s "$tmp/out" ] &&
			ok "ptdump --values 2 $a: one line, nothing printed" ||
			bad "ptdump --values 2 $a: $(cat "$tmp/out" "$tmp/err")"
	done
	expect 2 "index 5 is past it" -- --values 2 --start 5,0 "$views"
	expect 2 "3 from 2 by 1 go past it (2 fit)" -- --values 2 --start 2 --count 3 "$views"
	expect 2 "not a list of counts" -- --values 2 --start x "$views"
	expect 2 "go with --values" -- --start 1 "$views"

	# it reads the slab's bytes and no others: every pread strace sees
	# inside the data, summed
	if strace -o /dev/null true 2>/dev/null; then
		# data_bytes FILE LO HI ARGS...: bytes read from [LO, HI)
		data_bytes() {
			f=$1 lo=$2 hi=$3; shift 3
			strace -f -e trace=pread64,read -o "$tmp/st" "$ptdump" "$@" "$f" >"$tmp/out" 2>"$tmp/err"
			$py - "$tmp/st" "$lo" "$hi" <<'PY'
import re, sys
lo, hi, n = int(sys.argv[2]), int(sys.argv[3]), 0
for l in open(sys.argv[1]):
    m = re.search(r"pread64\(\d+, .*, (\d+), (\d+)\)\s+=\s+(\d+)$", l)
    if m and lo <= int(m.group(2)) < hi:
        n += int(m.group(3))
print(n)
PY
		}
		# a 4 GiB tensor in a sparse safetensors file, a few values set
		$py - "$tmp/big.safetensors" <<'PY'
import json, struct, sys
rows, cols = 65536, 16384
h = json.dumps({"w": {"dtype": "F32", "shape": [rows, cols],
                      "data_offsets": [0, rows * cols * 4]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    base = 8 + len(h)
    for r in (100, 102, 104):
        for c in range(5, 15):
            f.seek(base + (r * cols + c) * 4)
            f.write(struct.pack("<f", r + c / 4))
    f.truncate(base + rows * cols * 4)
PY
		base=$(head -c 8 "$tmp/big.safetensors" | od -An -tu8 | tr -d ' ')
		base=$((base + 8))
		end=$((base + 65536 * 16384 * 4))
		n=$(data_bytes "$tmp/big.safetensors" "$base" "$end" --values w --start 100,5 --count 3,4 --stride 2,3)
		[ "$n" = 48 ] && grep -qx "101.25 102 102.75 103.5" "$tmp/out" &&
			grep -qx "105.25 106 106.75 107.5" "$tmp/out" &&
			ok "3x4 slab by 2,3 of a 4 GiB tensor: the values, 48 bytes read" ||
			bad "sparse slab: $n bytes read: $(head -c 300 "$tmp/out" "$tmp/err")"
		n=$(data_bytes "$tmp/big.safetensors" "$base" "$end" --values w --start 101 --count 2 --json)
		[ "$n" = 131072 ] && ok "two whole rows: their 128 KiB read, no more" ||
			bad "two rows of the sparse tensor: $n bytes read"
		# a transposed view: elements 1, 5, 9 of its storage
		off=$("$ptdump" --records --json "$views" | $py -c 'import json, sys
print([r["data_offset"] for r in json.load(sys.stdin)["records"] if r["name"].endswith("/data/0")][0])')
		n=$(data_bytes "$views" "$off" $((off + 48)) --values 2 --start 1,0 --count 1,3)
		[ "$n" = 12 ] && grep -qx "1 5 9" "$tmp/out" &&
			ok "a row of a transposed view: its 3 elements read (12 bytes)" ||
			bad "transposed view slab: $n bytes: $(cat "$tmp/out" "$tmp/err")"
	else
		echo "skip: strace cannot trace here: the bytes-read checks"
	fi
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
