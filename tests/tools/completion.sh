#!/bin/sh
# completion.sh BINDIR SOURCE_DIR - the bash completion (issue 19.6) run
# in a real bash: complete -p, options per tool, compgen, checkpoint file
# names (.pt, .safetensors; a sharded folder and a DCP directory offered
# as one checkpoint), key paths from ptls after each of them, and that
# every long option each tool's --help lists is offered (and nothing it
# does not have).  Then the zsh file in a real zsh when zsh is installed
# (skipped with a note when not): zsh -n, compinit's registration, TAB's
# matches (options; key paths after a .safetensors, a DCP directory, a
# folder).  "N passed, N failed".
set -u
bin=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
comp=$src/completions/pt-tools.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# complete WORD... : what TAB offers for the last word, one per line
complete_words() {
	(cd "$tmp" && PTLS=$bin/ptls PTREPACK=$bin/ptrepack bash -c '. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		if [ "$1" = ptfs ]; then _ptfs; else _pt_tools; fi
		printf "%s\n" "${COMPREPLY[@]}"' sh "$comp" "$@")
}

out=$(bash -c '. "$1"; complete -p ptls ptdump ptverify ptrepack ptdiff' sh "$comp" 2>&1)
[ "$(echo "$out" | grep -c '^complete -F _pt_tools pt')" = 5 ] &&
	ok "complete -p: the five tools" || bad "complete -p: $out"
out=$(bash -c '. "$1"; compgen -W "$(_pt_tools_opts ptdiff)" -- --a' sh "$comp")
[ "$out" = "--atol" ] && ok "compgen over ptdiff's options: --a -> --atol" ||
	bad "compgen --a: $out"

# every long option of --help is offered, and nothing else (ptfs's too,
# when it was built)
tools="ptls ptdump ptverify ptrepack ptdiff"
[ -x "$bin/ptfs" ] && tools="$tools ptfs"
for t in $tools; do
	"$bin/$t" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmp/help"
	complete_words "$t" -- | grep -- '^--' | sort -u >"$tmp/comp"
	if [ -s "$tmp/help" ] && cmp -s "$tmp/help" "$tmp/comp"; then
		ok "$t: completion offers exactly --help's $(wc -l <"$tmp/help") long options"
	else
		bad "$t: --help vs completion: $(diff "$tmp/help" "$tmp/comp" | grep '^[<>]' | tr '\n' ' ')"
	fi
done
[ "$(complete_words ptls --de)" = "--depth" ] && ok "ptls --de -> --depth" ||
	bad "ptls --de: $(complete_words ptls --de)"
[ "$(complete_words ptrepack -)" != "" ] &&
	complete_words ptrepack - | grep -qx -- "-P" &&
	! complete_words ptrepack - | grep -qx -- "-p" &&
	ok "ptrepack -: -P (repickle), no -p" || bad "ptrepack -: $(complete_words ptrepack - | tr '\n' ' ')"

# ptfs: its commands, their options, -o's options
out=$(bash -c '. "$1"; complete -p ptfs' sh "$comp" 2>&1)
[ "$out" = "complete -F _ptfs ptfs" ] && ok "complete -p ptfs" ||
	bad "complete -p ptfs: $out"
[ "$(complete_words ptfs u)" = umount ] && ok "ptfs u -> umount" ||
	bad "ptfs u: $(complete_words ptfs u | tr '\n' ' ')"
[ "$(complete_words ptfs umount --d)" = --discard ] &&
	ok "ptfs umount --d -> --discard" ||
	bad "ptfs umount --d: $(complete_words ptfs umount --d | tr '\n' ' ')"
[ "$(complete_words ptfs status - | sort | tr '\n' ' ')" = "--json --quiet -j -q " ] &&
	ok "ptfs status -: -j --json -q --quiet" ||
	bad "ptfs status -: $(complete_words ptfs status - | tr '\n' ' ')"
[ "$(complete_words ptfs umount -v | tr '\n' ' ')" = "-v " ] &&
	ok "ptfs umount -v" ||
	bad "ptfs umount -v: $(complete_words ptfs umount -v | tr '\n' ' ')"
[ "$(complete_words ptfs revert - | sort | tr '\n' ' ')" = "--quiet -q " ] &&
	ok "ptfs revert -: -q --quiet" ||
	bad "ptfs revert -: $(complete_words ptfs revert - | tr '\n' ' ')"
[ "$(complete_words ptfs -o ov)" = overlay= ] && ok "ptfs -o ov -> overlay=" ||
	bad "ptfs -o ov: $(complete_words ptfs -o ov)"

# file names: checkpoints and directories, not other files
mkdir "$tmp/sub"
: >"$tmp/a.pt"; : >"$tmp/b.pth"; : >"$tmp/notes.txt"
got=$(complete_words ptls "" | sort | tr '\n' ' ')
[ "$got" = "a.pt b.pth sub " ] && ok "file names: a.pt b.pth sub" ||
	bad "file names: '$got'"

# key paths after a checkpoint (ptls) and for --values (ptdump)
cp "$src/tests/data/sample.pt" "$tmp/s.pt"
got=$(complete_words ptls s.pt optimizer/st | tr '\n' ' ')
[ "$got" = "optimizer/state/ " ] && ok "ptls s.pt optimizer/st -> optimizer/state/" ||
	bad "key path: '$got'"
got=$(complete_words ptls s.pt model/block.0. | tr '\n' ' ')
[ "$got" = "model/block.0.bias model/block.0.weight " ] &&
	ok "ptls s.pt model/block.0. -> its two tensors" || bad "key path 2: '$got'"
got=$(complete_words ptdump s.pt --values model/h | tr '\n' ' ')
[ "$got" = "model/head.weight " ] && ok "ptdump --values model/h -> model/head.weight" ||
	bad "--values: '$got'"
cp "$tmp/s.pt" "$tmp/s2.pt"
got=$(complete_words ptdiff s.pt s2.pt model/h | tr '\n' ' ')
[ "$got" = "model/head.weight " ] && ok "ptdiff s.pt s2.pt model/h -> model/head.weight" ||
	bad "ptdiff key path: '$got'"
got=$(complete_words ptdiff --atol 1e-6 s.pt s2.pt opt | tr '\n' ' ')
[ "$got" = "optimizer/ " ] && ok "ptdiff --atol 1e-6 s.pt s2.pt opt -> optimizer/" ||
	bad "ptdiff key path after --atol: '$got'"
got=$(complete_words ptrepack s.pt new.pt model/h | tr '\n' ' ')
[ "$got" = "model/head.weight " ] && ok "ptrepack s.pt new.pt model/h -> model/head.weight" ||
	bad "ptrepack key path: '$got'"
rm -f "$tmp/s2.pt"
got=$(complete_words ptls s.pt --depth "")
[ -z "$got" ] && ok "after --depth: nothing (a number)" || bad "--depth: $got"

# the other formats: a .safetensors file, a sharded folder (its index and
# the folder) and a DCP directory are offered, and key paths follow them
"$bin/ptrepack" -q --drop-values "$tmp/s.pt" "$tmp/m.safetensors" ||
	bad "ptrepack into m.safetensors"
"$bin/ptrepack" -q "$tmp/s.pt" "$tmp/dcp/" 2>/dev/null ||
	bad "ptrepack into dcp/"
mkdir "$tmp/hf" && cp "$tmp/m.safetensors" "$tmp/hf/model-00001-of-00001.safetensors"
"$bin/ptls" -t "$tmp/m.safetensors" | awk '!/^#/ && NF {
	printf "%s\"%s\": \"model-00001-of-00001.safetensors\"", n++ ? ", " : "", $1 }
	BEGIN { printf "{\"metadata\": {}, \"weight_map\": {" } END { print "}}" }' \
	>"$tmp/hf/model.safetensors.index.json"
rm -f "$tmp/a.pt" "$tmp/b.pth"
got=$(complete_words ptls "" | sort | tr '\n' ' ')
[ "$got" = "dcp hf m.safetensors s.pt sub " ] &&
	ok "file names: m.safetensors among them" || bad "file names with m.safetensors: '$got'"
got=$(complete_words ptls hf/ | tr '\n' ' ')
[ "$got" = "hf/ " ] && ok "ptls hf/: the folder is the checkpoint" ||
	bad "ptls hf/: '$got'"
got=$(complete_words ptls dcp | tr '\n' ' ')
[ "$got" = "dcp/ " ] && ok "ptls dcp: the DCP directory is the checkpoint" ||
	bad "ptls dcp: '$got'"
got=$(complete_words ptls m.safetensors model.block.0.b | tr '\n' ' ')
[ "$got" = "model.block.0.bias " ] &&
	ok "ptls m.safetensors model.block.0.b -> model.block.0.bias" ||
	bad "key path in a .safetensors: '$got'"
got=$(complete_words ptls hf model.e | tr '\n' ' ')
[ "$got" = "model.embed.weight " ] &&
	ok "ptls hf model.e -> model.embed.weight (a sharded folder)" ||
	bad "key path in a folder: '$got'"
got=$(complete_words ptls dcp/ model/block.0. | tr '\n' ' ')
[ "$got" = "model/block.0.bias model/block.0.weight " ] &&
	ok "ptls dcp/ model/block.0. -> its two tensors (a DCP directory)" ||
	bad "key path in a DCP directory: '$got'"
got=$(complete_words ptdump dcp --values model/h | tr '\n' ' ')
[ "$got" = "model/head.weight " ] &&
	ok "ptdump dcp --values model/h -> model/head.weight" ||
	bad "--values in a DCP directory: '$got'"

# zsh: the file parses, compinit registers it for all six programs (from
# its #compdef line, installed as _ptls), and TAB in a real interactive
# zsh offers each tool's options (tests/tools/zsh_complete.zsh)
if command -v zsh >/dev/null 2>&1; then
	zsh -n "$src/completions/_pt-tools" && ok "zsh -n _pt-tools" ||
		bad "zsh: syntax"
	mkdir "$tmp/zfunc" && cp "$src/completions/_pt-tools" "$tmp/zfunc/_ptls"
	lines="ptls --de|ptdiff --a|ptrepack --dt|ptfs umount --d"
	lines="$lines|ptls m.safetensors model.block.0.b|ptls dcp model/h|ptls hf/ model.e"
	set -- ptls ptdump ptverify ptrepack ptdiff
	for t; do lines="$lines|$t --"; done
	(IFS='|'; cd "$tmp" && PTLS=$bin/ptls PTREPACK=$bin/ptrepack zsh -f "$src/tests/tools/zsh_complete.zsh" \
		"$tmp/zfunc" $lines) >"$tmp/zsh.out" 2>&1
	# zoffers N: the matches for LINE N (0: tool=function)
	zoffers() { sed -n "s/^$1	//p" "$tmp/zsh.out"; }
	got=$(zoffers 0 | tr '\n' ' ')
	[ "$got" = "ptls=_ptls ptdump=_ptls ptverify=_ptls ptrepack=_ptls ptdiff=_ptls ptfs=_ptls " ] &&
		ok "zsh compinit: _ptls completes all six programs" ||
		bad "zsh compinit: '$got' $(grep -v '^[0-9]	' "$tmp/zsh.out" | head -n 3)"
	n=0
	# (_multi_parts adds the last part of a key path, and the path)
	for want in --depth --atol --dtype --discard model.block.0.bias \
	    "head.weight model/head.weight" model.embed.weight; do
		n=$((n + 1))
		[ "$(zoffers $n | tr '\n' ' ')" = "$want " ] && ok "zsh: TAB after '$(echo "$lines" |
			cut -d'|' -f$n)' -> $want" ||
			bad "zsh line $n: '$(zoffers $n | tr '\n' ' ')', want $want"
	done
	for t; do
		n=$((n + 1))
		"$bin/$t" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmp/help"
		zoffers $n | grep -- '^--' | sort -u >"$tmp/comp"
		if [ -s "$tmp/help" ] && cmp -s "$tmp/help" "$tmp/comp"; then
			ok "zsh: $t -- offers exactly --help's $(wc -l <"$tmp/help") long options"
		else
			bad "zsh: $t --help vs completion: $(diff "$tmp/help" "$tmp/comp" | grep '^[<>]' | tr '\n' ' ')"
		fi
	done
else
	echo "SKIP zsh checks: zsh is not installed (scripts/setup.sh installs it)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
