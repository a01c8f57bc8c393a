#!/bin/sh
# ptls_cli.sh PTLS [SHARED_DIR] - ptls's output, messages and exit codes on
# good, broken and hostile files.  Prints "N passed, N failed".
set -u
ptls=$1
here=$(cd "$(dirname "$0")" && pwd)
sample=$here/../data/sample.pt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok $pass${*:+: $*}"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect STATUS PATTERN-ON-STDERR-OR-STDOUT -- ARGS...
expect() {
	want=$1 pat=$2; shift 3
	"$ptls" "$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	if grep -q "Sanitizer\|runtime error:" "$tmp/err"; then
		bad "ptls $*: sanitizer report: $(grep -m 1 "Sanitizer\|runtime error:" "$tmp/err")"
	elif [ "$got" != "$want" ]; then
		bad "ptls $*: exit $got, want $want: $(head -c 300 "$tmp/err")"
	elif [ -n "$pat" ] && ! grep -q -- "$pat" "$tmp/out" "$tmp/err"; then
		bad "ptls $*: no '$pat' in output: $(head -c 300 "$tmp/out" "$tmp/err")"
	else
		ok "ptls $*"
	fi
}

# stderr of a failure is exactly one line naming the file
one_line() {
	"$ptls" "$1" >/dev/null 2>"$tmp/err"
	if [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^ptls: $1: " "$tmp/err"; then
		ok "one-line error for $1"
	else
		bad "error for $1 is not one line naming the file: $(cat "$tmp/err")"
	fi
}

expect 0 "model/embed.weight" -- "$sample"
expect 0 "(16, 8)" -- "$sample"
expect 0 "epoch  *int  *= 12" -- "$sample"
expect 0 "21 tensors, 20 storages" -- "$sample"
expect 0 "" -- --help
expect 0 "ptls 0" -- --version
expect 2 "usage" -- --bogus
expect 2 "usage" --
# the remote options: each refusal names what is wrong with it
expect 2 "cache of 1024 bytes" -- --cache 1K http://127.0.0.1:1/x.pt
expect 2 "not a size" -- --cache 1T http://127.0.0.1:1/x.pt
expect 2 "not a number from 1 to 64" -- --connections 65 http://127.0.0.1:1/x.pt
expect 2 "endpoint 'foo': not an http:// or https:// URL" -- --endpoint foo s3://b/x.pt
expect 2 "No such file" -- "$tmp/missing.pt"

"$ptls" --json "$sample" >"$tmp/j" && python3 -m json.tool "$tmp/j" >/dev/null &&
	ok || bad "--json output is not valid JSON"
grep -q '"keys":\["optimizer","state",0,"exp_avg"\]' "$tmp/j" && ok ||
	bad "--json keys do not carry int keys"
"$ptls" --tensors "$sample" | grep -q "epoch" && bad "--tensors lists values" || ok

# --tree: containers too, indented; --totals: per dtype
expect 0 "^\./  *dict (5)$" -- --tree "$sample"
expect 0 "^  model/  *OrderedDict (6)$" -- --tree "$sample"
expect 0 "^    embed.weight  *float32 (16, 8)  storage 0  512 B$" -- --tree "$sample"
expect 0 "^      0/  *dict (3)$" -- --tree "$sample"
expect 0 "^  epoch  *int = 12$" -- --tree "$sample"
expect 0 "^    dims/  *list (2)$" -- --tree "$sample"
"$ptls" --tree --tensors "$sample" | grep -q "epoch" &&
	bad "--tree --tensors lists values" || ok
expect 0 "^# float32  *21  *3124  *20  *2612$" -- --totals "$sample"
expect 0 "^# all  *21  *3124  *20  *2612$" -- --totals "$sample"
"$ptls" --totals "$sample" | grep -q "^model/embed.weight" && ok ||
	bad "--totals dropped the listing"
"$ptls" --json --tree "$sample" >"$tmp/t" && python3 - "$tmp/t" <<'EOF2' &&
import json, sys
d = json.load(open(sys.argv[1]))
t = d["tree"]
assert t["kind"] == "container" and t["type"] == "dict" and t["key"] is None
m = t["children"][0]
assert m["name"] == "model" and m["type"] == "OrderedDict"
e = m["children"][0]
assert e["kind"] == "tensor" and e["shape"] == [16, 8] and e["key"] == "embed.weight"
s = [c for c in t["children"] if c["name"] == "optimizer"][0]["children"][0]
assert s["children"][0]["key"] == 0
assert d["totals"]["float32"] == {"tensors": 21, "tensor_bytes": 3124,
                                  "storages": 20, "storage_bytes": 2612}
assert "entries" not in d
EOF2
	ok || bad "--json --tree is not the nested tree"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["totals"]["all"]["storages"] == 20' "$tmp/j" &&
	ok || bad "--json lacks the totals"

# -L summaries and key-path footers count each storage byte once: the
# sample's model/head.weight is tied to model/embed.weight (issue 39.21b/c)
expect 0 "^model  *OrderedDict  (6 items, 6 tensors, 864 B; 512 B tied, counted once)$" -- -L 1 "$sample"
expect 0 "^optimizer  *dict  *(2 items, 15 tensors, 1748 B)$" -- -L 1 "$sample"
expect 0 "^\.  *dict  *(5 items, 21 tensors, 2612 B; 512 B tied, counted once)$" -- -L 0 "$sample"
expect 0 "^  model/  *OrderedDict (6) \.\.\. 6 tensors, 864 B; 512 B tied, counted once$" -- --tree -L 1 "$sample"
expect 0 "^# model: 6 tensors, 5 storages, 864 B; 512 B tied, counted once$" -- "$sample" model
expect 0 "^# model/head.weight: 1 tensor, 1 storage, 512 B; 512 B shared with tensors elsewhere$" -- "$sample" model/head.weight
expect 0 "^# optimizer/state/0: 3 tensors, 3 storages, 1028 B$" -- "$sample" optimizer/state/0
grep -q "^# 21 tensors\|zip format" "$tmp/out" && bad "a key path's listing repeats the file's footer" ||
	ok "a key path's listing has its own footer, not the file's"
"$ptls" --json "$sample" model >"$tmp/k" && python3 - "$tmp/k" <<'EOF2' &&
import json, sys
d = json.load(open(sys.argv[1]))
assert d["listed"] == {"path": "model", "tensors": 6, "storages": 5, "bytes": 864,
                       "tied_bytes": 512, "shared_bytes": 0}, d["listed"]
EOF2
	"$ptls" --json "$sample" | python3 -c 'import json, sys; assert json.load(sys.stdin)["listed"] is None' &&
	ok "--json KEY: listed says what the key path holds" || bad "--json KEY: no listed object"

# things people mistake for checkpoints
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n' >"$tmp/lfs.pt"
printf '<!DOCTYPE html>\n<html><body>404</body></html>\n' >"$tmp/page.pt"
: >"$tmp/empty.pt"
head -c 3000 "$sample" >"$tmp/cut.pt"
printf 'hello world\n' >"$tmp/text.pt"
expect 2 "Git LFS pointer" -- "$tmp/lfs.pt"
expect 2 "HTML page" -- "$tmp/page.pt"
expect 2 "empty file" -- "$tmp/empty.pt"
expect 2 "truncated download" -- "$tmp/cut.pt"
expect 2 "not a PyTorch checkpoint" -- "$tmp/text.pt"
for f in lfs page empty cut text; do one_line "$tmp/$f.pt"; done
# other formats' files are named, with a hint, not by their bytes in hex
printf '\223NUMPY\001\000v\000{'"'"'descr'"'"': '"'"'<f4'"'"', }\n' >"$tmp/arr.npy"
printf '{\n  "architectures": ["BertModel"]\n}\n' >"$tmp/config.json"
printf '\211HDF\r\n\032\n\000\000\000\000' >"$tmp/model.h5"
printf 'x' | gzip >"$tmp/model.pt.gz"
printf 'GGUF\003\000\000\000\000\000\000\000' >"$tmp/model.gguf"
expect 2 "arr.npy: offset 0x0: NumPy .npy array, not a checkpoint (numpy.load" -- "$tmp/arr.npy"
expect 2 "config.json: offset 0x0: JSON text, not a checkpoint (a config" -- "$tmp/config.json"
expect 2 "HDF5 file, not a checkpoint (a Keras .h5" -- "$tmp/model.h5"
expect 2 "gzip-compressed file, not a checkpoint (gunzip" -- "$tmp/model.pt.gz"
# (GGUF is a format: a truncated one is refused by its reader)
expect 2 "the GGUF header runs past the end of the file" -- "$tmp/model.gguf"
for f in arr.npy config.json model.h5 model.pt.gz model.gguf; do one_line "$tmp/$f"; done
expect 2 "is a directory" -- "$tmp"

# several files: the good one is listed, the status says one failed
expect 2 "model/embed.weight" -- "$sample" "$tmp/lfs.pt"

# hostile and awkward pickles (plain python3 builds them; no torch needed)
if command -v python3 >/dev/null; then
	python3 "$here/mkzip.py" evil "$tmp/evil.pt"
	python3 "$here/mkzip.py" keys "$tmp/keys.pt"
	python3 "$here/mkzip.py" noprefix "$tmp/noprefix.pt"
	expect 0 "unsafe global posix.system" -- "$tmp/evil.pt"
	expect 0 "^# 1 more unsafe global elsewhere in .*evil.pt" -- "$tmp/evil.pt" n
	expect 0 "unsafe global posix.system.*held by x" -- "$tmp/evil.pt" x
	expect 1 "unsafe global posix.system" -- --check "$tmp/evil.pt"
	expect 0 "" -- --check "$sample"
	[ ! -e pwned ] && ok || bad "something ran"
	"$ptls" --json "$tmp/evil.pt" | grep -q '"module":"posix","name":"system"' &&
		ok || bad "--json lacks unsafe_globals"
	# a jagged nested tensor as torch 2.x pickles it, listed with no
	# torch: its values and offsets tensors, no unsafe global
	python3 "$here/mkzip.py" njt "$tmp/njt.pt"
	python3 "$here/mkzip.py" njt-bad "$tmp/njt-bad.pt"
	expect 0 "^nt/_values  *float32  *(5, 2)  *stride (2, 1)" -- --check "$tmp/njt.pt"
	expect 0 "^nt/_offsets  *int64  *(3,)" -- "$tmp/njt.pt"
	expect 0 "^  nt/  *torch.nested._internal.nested_tensor.NestedTensor" -- --tree "$tmp/njt.pt"
	expect 2 "offset 0x[0-9a-f]*: jagged nested tensor without its values or offsets" -- "$tmp/njt-bad.pt"
	expect 0 "a%2Fb  *int  *= 1" -- "$tmp/keys.pt"
	expect 0 "^%  *int  *= 2" -- "$tmp/keys.pt"
	expect 0 "%2Ex  *int  *= 3" -- "$tmp/keys.pt"
	expect 0 "^0  *int  *= 4" -- "$tmp/keys.pt"
	expect 0 "^0%#4  *int  *= 5" -- "$tmp/keys.pt"
	expect 0 "50%25  *int  *= 6" -- "$tmp/keys.pt"
	expect 2 "not in a folder" -- "$tmp/noprefix.pt"
	# JSON longer than the output buffer, escapes across its edges
	python3 "$here/mkzip.py" long "$tmp/long.pt"
	"$ptls" --json -v "$tmp/long.pt" >"$tmp/long.json" &&
		python3 "$here/mkzip.py" check-long "$tmp/long.json" &&
		ok || bad "--json of long strings and many escapes"
fi

# every shared fixture: listed, or refused in one line
shared=${2:-}
if [ -n "$shared" ] && [ -d "$shared/fixtures" ]; then
	for f in "$shared"/fixtures/torch-1.13/* "$shared"/fixtures/torch-2/* \
		 "$shared"/fixtures/real/*.p* "$shared"/fixtures/real/*.bin; do
		[ -e "$f" ] || continue
		"$ptls" "$f" >/dev/null 2>"$tmp/err"
		st=$?
		if [ $st = 0 ] || { [ $st = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ]; }; then
			ok
		else
			bad "$f: exit $st: $(cat "$tmp/err")"
		fi
	done
else
	echo "shared fixtures not found: skipping the fixture sweep"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
