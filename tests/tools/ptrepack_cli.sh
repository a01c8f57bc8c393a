#!/bin/sh
# ptrepack_cli.sh PTREPACK PTVERIFY PTDUMP [SHARED_DIR] - ptrepack without
# torch: byte-identical repacks of torch's own files, legacy conversion,
# --align, --drop-unused, --repickle and --clone judged by ptverify and
# ptdump --records, and its messages and exit codes (OUT untouched on any
# failure).  tests/tools/ptrepack_torch.sh checks the results with torch.
# Prints one line per check and "N passed, N failed".
set -u
ptrepack=$1 ptverify=$2 ptdump=$3
shared=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
sample=$here/../data/sample.pt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

expect() {
	want=$1 pat=$2; shift 3
	"$ptrepack" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if grep -q "Sanitizer\|runtime error:" "$tmp/err"; then
		bad "ptrepack $*: sanitizer report: $(grep -m 1 "Sanitizer\|runtime error:" "$tmp/err")"
	elif [ "$got" != "$want" ]; then
		bad "ptrepack $*: exit $got, want $want: $(head -c 300 "$tmp/err")"
	elif [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
		bad "ptrepack $*: no '$pat' in: $(head -c 300 "$tmp/out" "$tmp/err")"
	else
		ok "ptrepack $* (exit $got${pat:+, '$pat'})"
	fi
}

clean() {
	if "$ptverify" -q "$1" >"$tmp/v" 2>&1; then
		ok "ptverify finds nothing in ${1##*/}${2:+ ($2)}"
	else
		bad "ptverify ${1##*/}${2:+ ($2)}: $(head -n 3 "$tmp/v")"
	fi
}

# ---- command line
expect 0 "usage: ptrepack" -- --help
expect 0 "^ptrepack 0" -- --version
expect 2 "usage: ptrepack" -- --bogus
expect 2 "expected IN and OUT" -- "$sample"
expect 2 "not a power of two" -- --align 100 "$sample" "$tmp/x.pt"
expect 2 "not a power of two" -- --align 65536 "$sample" "$tmp/x.pt"
expect 2 "not a percentage" -- --clone=0 "$sample" "$tmp/x.pt"
expect 2 "not a percentage" -- --clone=abc "$sample" "$tmp/x.pt"
[ ! -e "$tmp/x.pt" ] && ok "nothing written after a usage error" ||
	bad "OUT written after a usage error"

# ---- failures leave OUT as it was
printf 'precious' >"$tmp/keep.pt"
printf 'version https://git-lfs.github.com/spec/v1\n' >"$tmp/lfs.pt"
expect 2 "Git LFS pointer" -- "$tmp/lfs.pt" "$tmp/keep.pt"
[ "$(cat "$tmp/keep.pt")" = precious ] && ok "OUT untouched when IN is bad" ||
	bad "OUT changed although IN was refused"
expect 2 "cannot create a temporary file" -- "$sample" "$tmp/no/such/dir/o.pt"
[ "$(wc -l <"$tmp/err")" = 1 ] && ok "one line for an unwritable OUT" ||
	bad "not one line: $(cat "$tmp/err")"
ls -a "$tmp" | grep -q 'ptfs-new' && bad "a temporary file was left" ||
	ok "no temporary file left behind"

# ---- broken and hostile input: refused in one line, or copied as data
head -c 3000 "$sample" >"$tmp/cut.pt"
expect 2 "truncated download" -- "$tmp/cut.pt" "$tmp/o.pt"
[ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -e "$tmp/o.pt" ] &&
	ok "truncated IN: one line, nothing written" ||
	bad "truncated IN: $(cat "$tmp/err")"
python3 "$here/mkbad.py" "$sample" extent "$tmp/extent.pt"
expect 2 "tensor reaches element 5 of storage '0'" -- "$tmp/extent.pt" "$tmp/o.pt"
python3 "$here/mkbad.py" "$sample" evil "$tmp/evil.pt"
for o in "" --repickle; do
	expect 0 "" -- $o "$tmp/evil.pt" "$tmp/evil2.pt"
	"$ptverify" "$tmp/evil2.pt" | grep -q "unsafe global posix.system" &&
		ok "ptrepack $o keeps the unsafe global for ptverify to see" ||
		bad "ptrepack $o lost the global"
done
[ ! -e pwned ] && ok "nothing in the pickle ran" || bad "something ran"

# ---- a damaged record is refused, not copied under a fresh CRC
# (--dtype, --clone, safetensors output would launder it; ptrepack_in.c)
python3 "$here/mkbad.py" "$sample" flipcrc "$tmp/flip.pt"
for o in "" --repickle "--dtype float16" --clone=100 "--format safetensors --drop-values"; do
	rm -f "$tmp/o.pt"
	expect 2 "record 'sample/data/0': CRC-32 of the data is [0-9a-f]*, the archive says [0-9a-f]*: damaged, nothing written" -- $o "$tmp/flip.pt" "$tmp/o.pt"
	[ "$(wc -l <"$tmp/err")" = 1 ] && [ ! -e "$tmp/o.pt" ] &&
		ok "damaged CRC ($o): one line, nothing written" ||
		bad "damaged CRC ($o): $(cat "$tmp/err"), $(ls "$tmp/o.pt" 2>&1)"
done
# the same, checked while OUT is written (ptrepack_in.h): OUT and its
# directory as they were
export PT_CRC_OVERLAP_BYTES=0
for o in "" "--dtype float16" "--format safetensors --drop-values"; do
	rm -f "$tmp/o.pt"
	before=$(ls -a "$tmp")
	expect 2 "record 'sample/data/0': CRC-32 of the data is [0-9a-f]*, the archive says [0-9a-f]*: damaged, nothing written" -- $o "$tmp/flip.pt" "$tmp/o.pt"
	[ "$(wc -l <"$tmp/err")" = 1 ] && [ "$(ls -a "$tmp")" = "$before" ] &&
		ok "damaged CRC, checked while writing ($o): one line, nothing left" ||
		bad "damaged CRC, checked while writing ($o): $(cat "$tmp/err"), $(ls -a "$tmp")"
done
expect 0 "" -- "$sample" "$tmp/o.pt"
cmp -s "$sample" "$tmp/o.pt" &&
	ok "checked while writing: an intact file, byte for byte" ||
	bad "checked while writing: the repack of an intact file differs"
unset PT_CRC_OVERLAP_BYTES
expect 0 "" -- --no-crc "$tmp/flip.pt" "$tmp/o.pt"
"$ptverify" "$tmp/o.pt" | grep -q "record 'sample/data/0': CRC-32 of the data" &&
	ok "--no-crc copies the damage as it is, still visible" ||
	bad "--no-crc: the damage is gone from the copy"
python3 "$here/mkbad.py" "$sample" nocrc "$tmp/nocrc.pt"
expect 0 "" -- "$tmp/nocrc.pt" "$tmp/o.pt"
python3 "$here/mkbad.py" "$sample" flipdata "$tmp/flipdata.pt"
expect 2 "damaged, nothing written" -- "$tmp/flipdata.pt" "$tmp/o2.pt"

# ---- --json: an unreadable input is one JSON object too; --dtype
# converts
expect 2 "" -- --json "$tmp/cut.pt" "$tmp/o.pt"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"] == "unreadable" and d["kind"] == "corrupt" and "truncated" in d["error"], d' "$tmp/out" &&
	ok "--json: an unreadable IN is a JSON object" ||
	bad "--json of an unreadable IN: '$(cat "$tmp/out")'"
expect 2 "" -- --json "$tmp/flip.pt" "$tmp/o.pt"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"] == "unreadable" and d["offset"] > 0, d' "$tmp/out" &&
	ok "--json: a damaged IN is a JSON object" ||
	bad "--json of a damaged IN: '$(cat "$tmp/out")'"
"$ptrepack" --json "$tmp/flip.pt" - >"$tmp/out" 2>"$tmp/err"
[ ! -s "$tmp/out" ] && head -n 1 "$tmp/err" | python3 -c 'import json,sys; assert json.load(sys.stdin)["status"] == "unreadable"' &&
	ok "--json with OUT -: the JSON error on stderr, not in the archive's stream" ||
	bad "--json with OUT -: stdout '$(head -c 100 "$tmp/out")', stderr '$(cat "$tmp/err")'"
"$ptrepack" --json --dtype float16 "$sample" "$tmp/h.pt" >"$tmp/j" &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["converted"] is True and d["dtype"]["to"] == "float16" and d["dtype"]["tensors"] == 21, d' "$tmp/j" &&
	ok "--json --dtype: converted, and to what" ||
	bad "--json --dtype: $(cat "$tmp/j")"
"$ptrepack" --json "$sample" "$tmp/h.pt" >"$tmp/j" &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["converted"] is False and d["dtype"] is None and d["was"] == int(sys.argv[2]), d' "$tmp/j" "$(wc -c <"$sample")" &&
	ok "--json without --dtype: not converted" ||
	bad "--json: $(cat "$tmp/j")"

# ---- "(was N)" of a sharded folder: the index and every shard
mkdir -p "$tmp/hf"
python3 - "$tmp/hf" <<'EOF'
import json, struct, sys
d = sys.argv[1]
wm = {}
for i, names in enumerate((["a", "b"], ["c"]), 1):
    f = "model-%05d-of-00002.safetensors" % i
    hdr, off = {}, 0
    for n in names:
        hdr[n] = {"dtype": "F32", "shape": [256],
                  "data_offsets": [off, off + 1024]}
        off += 1024
        wm[n] = f
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(d + "/" + f, "wb").write(struct.pack("<Q", len(h)) + h +
                                  b"\0" * off)
json.dump({"metadata": {}, "weight_map": wm},
          open(d + "/model.safetensors.index.json", "w"))
EOF
whole=$(cat "$tmp"/hf/*.json "$tmp"/hf/*.safetensors | wc -c)
expect 0 "" -- --json "$tmp/hf" "$tmp/hf.pt"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["was"] == int(sys.argv[2]), (d, sys.argv[2])' "$tmp/out" "$whole" &&
	ok "a folder's size is its index and shards ($whole bytes)" ||
	bad "a folder's size: $(cat "$tmp/out"), want was $whole"
expect 0 "(was 3.[0-9] KiB)" -- -v "$tmp/hf" "$tmp/hf.pt"
expect 0 "(was 3.[0-9] KiB)" -- -v "$tmp/hf" "$tmp/hf.safetensors"

# ---- a subtree of a safetensors file drops the aliases it no longer has
expect 0 "" -- "$sample" "$tmp/m.safetensors" model
"$ptrepack" "$tmp/m.safetensors" "$tmp/m2.safetensors" block.0.weight block.0.bias &&
	"$ptdump" --json "$tmp/m2.safetensors" >"$tmp/j" 2>&1 &&
	! grep -q "embed.weight" "$tmp/j" &&
	ok "a safetensors subtree: no alias of a tensor left out" ||
	bad "a safetensors subtree kept a stale alias: $(grep -o '.metadata.[^}]*' "$tmp/j" | head -c 200)"

# ---- torch's own files come back byte for byte
expect 0 "" -- "$sample" "$tmp/same.pt"
cmp -s "$sample" "$tmp/same.pt" && ok "sample repacked byte-identical" ||
	bad "sample repack differs"
[ ! -s "$tmp/out" ] && [ ! -s "$tmp/err" ] &&
	ok "silent without --verbose, and no progress off a terminal" ||
	bad "output without --verbose: $(cat "$tmp/out" "$tmp/err")"
expect 0 "same.pt: 22 records, 20 storages" -- -v "$sample" "$tmp/same.pt"
"$ptrepack" --json "$sample" "$tmp/same.pt" >"$tmp/j" &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["records"] == 22 and d["storages"] == 20 and not d["repickled"] and d["size"] > 0' "$tmp/j" &&
	ok "--json summary" || bad "--json summary: $(cat "$tmp/j")"
if [ -n "$shared" ] && [ -d "$shared/fixtures/torch-1.13" ]; then
	for f in "$shared"/fixtures/torch-1.13/*.pt "$shared"/fixtures/torch-2/*.pt; do
		case ${f##*/} in legacy*|script.pt) continue ;; esac
		"$ptrepack" "$f" "$tmp/r.pt" 2>"$tmp/err" && cmp -s "$f" "$tmp/r.pt" &&
			ok "${f#$shared/fixtures/} repacked byte-identical" ||
			bad "${f#$shared/fixtures/}: not byte-identical: $(cat "$tmp/err")"
	done
fi

# ---- --align N: every record's data on N, and the record says so
for a in 4096 32768; do
	expect 0 "" -- --align $a "$sample" "$tmp/a$a.pt"
	"$ptdump" --records --json "$tmp/a$a.pt" >"$tmp/r.json"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a=int(sys.argv[2]); sys.exit(0 if all(r["data_offset"] % a == 0 for r in d["records"]) else 1)' "$tmp/r.json" $a &&
		ok "--align $a: every record's data $a-aligned" ||
		bad "--align $a: misaligned data"
	clean "$tmp/a$a.pt" "--align $a"
done
if [ -n "$shared" ] && [ -f "$shared/fixtures/torch-2/state_dict.pt" ]; then
	f=$shared/fixtures/torch-2/state_dict.pt
	expect 0 "" -- --align 4096 "$f" "$tmp/sa.pt"
	python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); n=[x for x in z.namelist() if x.endswith("/.storage_alignment")][0]; sys.exit(0 if z.read(n) == b"4096" else 1)' "$tmp/sa.pt" &&
		ok ".storage_alignment says 4096" ||
		bad ".storage_alignment does not say 4096"
	clean "$tmp/sa.pt" "2.14 --align 4096: torch's computed offsets too"
	expect 0 "" -- "$tmp/sa.pt" "$tmp/sb.pt"
	"$ptdump" --records --json "$tmp/sb.pt" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if all(r["data_offset"] % 4096 == 0 for r in d["records"]) else 1)' &&
		ok "a repack keeps the file's .storage_alignment" ||
		bad "a repack lost the file's alignment"
fi

# ---- unused storage records
python3 "$here/mkbad.py" "$sample" unused "$tmp/unused.pt"
expect 0 "" -- "$tmp/unused.pt" "$tmp/u0.pt"
"$ptverify" "$tmp/u0.pt" | grep -q "data/999" &&
	ok "without options the unused record is kept" ||
	bad "the unused record vanished without --drop-unused"
expect 0 "; 1 unused storage record left out, 40 B saved" -- -v --drop-unused "$tmp/unused.pt" "$tmp/u1.pt"
clean "$tmp/u1.pt" "--drop-unused"
python3 -c 'import sys,zipfile; a=zipfile.ZipFile(sys.argv[1]); b=zipfile.ZipFile(sys.argv[2]); n=[x for x in a.namelist() if x.endswith("data.pkl")][0]; sys.exit(0 if a.read(n) == b.read(n) else 1)' "$tmp/unused.pt" "$tmp/u1.pt" &&
	ok "--drop-unused keeps data.pkl byte for byte" ||
	bad "--drop-unused changed data.pkl"
expect 0 "1 unused storage record left out" -- -v --repickle "$tmp/unused.pt" "$tmp/u2.pt"
clean "$tmp/u2.pt" "--repickle drops unused storages too"

# ---- --repickle and --clone on every fixture: clean, never larger
if [ -n "$shared" ] && [ -d "$shared/fixtures" ]; then
	for f in "$shared"/fixtures/torch-1.13/*.pt "$shared"/fixtures/torch-2/*.pt \
		 "$shared"/fixtures/real/z*.p* "$shared"/fixtures/real/*.bin; do
		[ -e "$f" ] || continue
		"$ptverify" -q "$f" >/dev/null 2>&1 || continue
		# room for a local header, padding and descriptor per record
		nrec=$("$ptdump" --records --no-crc "$f" 2>/dev/null | wc -l)
		most=$(($(wc -c <"$f") + 4096 + 160 * nrec))
		for o in --repickle --clone=100; do
			n=${f#$shared/fixtures/}
			if "$ptrepack" $o "$f" "$tmp/c.pt" 2>"$tmp/err"; then
				clean "$tmp/c.pt" "$o $n"
				[ "$(wc -c <"$tmp/c.pt")" -le $most ] &&
					ok "$o $n: not larger" || bad "$o $n grew"
			elif [ "$(wc -l <"$tmp/err")" = 1 ] &&
			     grep -q "read-only\|not supported" "$tmp/err"; then
				ok "$o $n: refused in one line (not writable)"
			else
				bad "ptrepack $o $n: $(cat "$tmp/err")"
			fi
		done
	done
fi

# ---- legacy (torch < 1.6) files become zip archives
if [ -n "$shared" ] && [ -d "$shared/fixtures/torch-1.13" ]; then
	for f in "$shared"/fixtures/torch-1.13/legacy.pt "$shared"/fixtures/real/legacy_*; do
		[ -e "$f" ] || continue
		n=${f##*/}
		expect 0 "converted from the legacy format" -- -v "$f" "$tmp/$n.zip"
		head -c 4 "$tmp/$n.zip" | od -An -c | grep -q "P   K 003 004" &&
			ok "$n: now a zip archive" || bad "$n: not a zip"
		"$ptverify" "$tmp/$n.zip" >"$tmp/v" 2>&1
		# unsafe globals stay what they were; nothing else may appear
		# (but the summary line: -q prints nothing at all since 15.13)
		if ! grep -v "unsafe global\|: [0-9]* problems\?$\|: ok (" \
		     "$tmp/v" | grep -q .; then
			ok "$n: converted file verifies"
		else
			bad "$n: $(head -n 2 "$tmp/v")"
		fi
		"$ptdump" --json "$f" >"$tmp/a.json" 2>/dev/null
		"$ptdump" --json "$tmp/$n.zip" >"$tmp/b.json" 2>/dev/null
		if python3 - "$tmp/a.json" "$tmp/b.json" <<'EOF'
import json, sys
def leaves(n, out):
    if n["kind"] == "tensor":
        out.append((n["path"], n["dtype"], n["shape"], n["stride"],
                    n["requires_grad"], n["parameter"]))
    elif n["kind"] in ("value", "object"):
        out.append((n["path"], n["repr"]))
    for c in n.get("children", []):
        leaves(c, out)
    return out
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert leaves(a["root"], []) == leaves(b["root"], [])
assert b["format"] == "zip" and b["prefix"] == "archive"
assert [s["key"] for s in b["storages"]] == [str(i) for i in range(len(b["storages"]))]
EOF
		then ok "$n: same tree, keys 0..N-1"
		else bad "$n: the converted tree differs"; fi
	done
fi

# SIGTERM or SIGHUP (and ^C: SIGINT, which sh ignores in a background job)
# while OUT is written: its temporary is removed, OUT
# not made.  The fault injector stops ptrepack at its first write to the
# temporary (tests/fs/lib/faultinj.c, STOP), so the signal comes mid-write.
if ${CC:-cc} -shared -fPIC -O2 -o "$tmp/inj.so" "$here/../fs/lib/faultinj.c" \
    -ldl -lpthread 2>/dev/null; then
	for sig in TERM HUP; do
		rm -f "$tmp/sig.safetensors"
		echo "write .ptfs-new. 1 STOP" >"$tmp/faults"
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		PTFS_FAULTS="$tmp/faults" LD_PRELOAD="$tmp/inj.so" \
			"$ptrepack" -q --drop-values "$sample" "$tmp/sig.safetensors" \
			2>/dev/null &
		pid=$!
		n=0
		while [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' /proc/$pid/status 2>/dev/null)" != T ] &&
		    [ $n -lt 200 ]; do
			sleep 0.05; n=$((n + 1))
		done
		had=$(ls -a "$tmp" | grep -c '^\.sig\.safetensors\.ptfs-new\.')
		kill -$sig $pid; kill -CONT $pid
		wait $pid
		rc=$?
		left=$(ls -a "$tmp" | grep '^\.sig\.safetensors')
		if [ "$had" = 1 ] && [ -z "$left" ] && [ ! -e "$tmp/sig.safetensors" ] &&
		    [ $rc -gt 128 ]; then
			ok "SIG$sig mid-write: exit $rc, the temporary removed, no OUT"
		else
			bad "SIG$sig mid-write: exit $rc, temporary seen $had, left: ${left:-none}"
		fi
		rm -f "$tmp"/.sig.safetensors.ptfs-new.*
	done
else
	echo "skip: SIGTERM mid-write: no cc for the fault injector"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
