#!/bin/sh
# install.sh BUILD_DIR SOURCE_DIR - what `cmake --install` and `cpack -G
# DEB` put where: DESTDIR=tmp cmake --install BUILD_DIR, then the programs,
# the mount(8) helper (and that it mounts, when FUSE can be used), every
# man page rendering with `man -l` without a warning, and a Debian package
# with the same files and its Depends.  Prints one line per check and
# "N passed, N failed".
set -u
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'fusermount3 -u "$tmp/mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
[ -n "$prefix" ] || prefix=/usr/local
root=$tmp/root
if DESTDIR=$root cmake --install "$build" >"$tmp/log" 2>&1; then
	ok "DESTDIR=... cmake --install"
else
	bad "cmake --install failed: $(tail -n 3 "$tmp/log")"
	echo "$pass passed, $fail failed"
	exit 1
fi
d=$root$prefix
find "$root" -type f -o -type l | grep -qv "^$d/" &&
	bad "files outside DESTDIR$prefix: $(find "$root" | grep -v "^$d" | head -n 3)" ||
	ok "everything under DESTDIR$prefix"

# ---- programs
progs="ptls ptdump ptverify ptrepack ptdiff"
grep -q '^PT_BUILD_FS:BOOL=ON' "$build/CMakeCache.txt" && progs="$progs ptfs"
for p in $progs; do
	if [ -x "$d/bin/$p" ]; then
		ok "bin/$p installed"
	else
		bad "bin/$p missing"
	fi
done
for p in ptls ptdump ptverify ptrepack; do
	"$d/bin/$p" --version 2>/dev/null | grep -q "^$p [0-9]" &&
		ok "installed $p runs" || bad "installed $p --version fails"
done
"$d/bin/ptverify" -q "$src/tests/data/sample.pt" &&
	ok "installed ptverify checks the sample" || bad "installed ptverify fails"

# ---- shell completion (issue 19.6): bash loads it per command name
for p in ptls ptdump ptverify ptrepack ptdiff ptfs; do
	f=$d/share/bash-completion/completions/$p
	fn=_pt_tools
	[ $p = ptfs ] && fn=_ptfs
	if [ -f "$f" ] && bash -c '. "$1" && complete -p "$2"' sh "$f" "$p" \
	   2>/dev/null | grep -q "^complete -F $fn $p$"; then
		ok "bash completion for $p installed and loads"
	else
		bad "bash completion for $p: missing or does not load"
	fi
done
head -n 1 "$d/share/zsh/site-functions/_ptls" 2>/dev/null |
	grep -q "^#compdef ptls ptdump ptverify ptrepack ptdiff ptfs$" &&
	ok "zsh completion installed (#compdef for the six programs)" ||
	bad "zsh completion share/zsh/site-functions/_ptls missing"

# ---- mount(8) helper
if [ -x "$d/sbin/mount.ptfs" ]; then
	ok "sbin/mount.ptfs installed"
else
	bad "sbin/mount.ptfs missing"
fi
[ "$(readlink "$d/sbin/mount.fuse.ptfs")" = mount.ptfs ] &&
	ok "sbin/mount.fuse.ptfs -> mount.ptfs" || bad "mount.fuse.ptfs link missing"
sh -n "$d/sbin/mount.ptfs" && ok "mount.ptfs is valid sh" || bad "mount.ptfs: syntax"
"$d/sbin/mount.ptfs" >/dev/null 2>"$tmp/err"
[ $? = 1 ] && grep -q "usage: mount.ptfs" "$tmp/err" &&
	ok "mount.ptfs without arguments: usage, exit 1 (mount(8)'s code)" ||
	bad "mount.ptfs without arguments: $(cat "$tmp/err")"
# mount through the helper with a PATH that has no ptfs: it must find the
# one installed beside it
if [ -x "$d/bin/ptfs" ] && [ -c /dev/fuse ] && [ "$(id -u)" = 0 ] &&
   { command -v mount.fuse3 >/dev/null 2>&1 || [ -x /sbin/mount.fuse3 ]; }; then
	mkdir "$tmp/mnt"
	cp "$src/tests/data/sample.pt" "$tmp/s.pt"
	if env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$d/sbin/mount.ptfs" \
	   "$tmp/s.pt" "$tmp/mnt" -o ro >"$tmp/mlog" 2>&1; then
		[ "$(cat "$tmp/mnt/epoch" 2>/dev/null)" = 12 ] &&
			ok "mount.ptfs CHECKPOINT DIR -o ro mounts it" ||
			bad "mounted, but epoch reads '$(cat "$tmp/mnt/epoch" 2>&1)'"
		fusermount3 -u "$tmp/mnt" && ok "and it unmounts" ||
			bad "fusermount3 -u failed"
	else
		echo "skip: mount through mount.ptfs: $(tail -n 1 "$tmp/mlog")"
	fi
else
	echo "skip: mounting through mount.ptfs (needs root, /dev/fuse, mount.fuse3)"
fi

# ---- man pages: every one installed, and rendered without a warning
pages="man1/ptls.1 man1/ptdump.1 man1/ptverify.1 man1/ptrepack.1 man1/ptdiff.1 man1/ptfs.1 man5/ptfs.5"
for m in $pages; do
	f=$d/share/man/$m
	if [ ! -f "$f" ]; then
		bad "share/man/$m missing"
		continue
	fi
	if command -v man >/dev/null 2>&1; then
		MANWIDTH=80 man --warnings -l "$f" >"$tmp/page" 2>"$tmp/warn"
		st=$?
		if [ $st = 0 ] && [ ! -s "$tmp/warn" ] && [ -s "$tmp/page" ]; then
			ok "man -l $m renders without warnings"
		else
			bad "man -l $m: exit $st: $(head -n 3 "$tmp/warn")"
		fi
	fi
done
# the check itself must be able to fail
printf '.TH X 1\n.SH NAME\nx \\- y\n.XX bogus\n\\fBunclosed\n.BR\n' >"$tmp/bad.1"
MANWIDTH=80 man --warnings -l "$tmp/bad.1" >/dev/null 2>"$tmp/warn"
[ -s "$tmp/warn" ] && ok "man --warnings does report a broken page" ||
	bad "man --warnings stays quiet on a broken page: the check above is void"

# ---- the Debian package
if command -v cpack >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
	if (cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" \
		-B "$tmp/pkg" >"$tmp/cpack.log" 2>&1); then
		deb=$(ls "$tmp"/pkg/*.deb 2>/dev/null | head -n 1)
		[ -n "$deb" ] && ok "cpack -G DEB built ${deb##*/}" ||
			bad "no .deb in $tmp/pkg"
	else
		deb=
		bad "cpack -G DEB failed: $(tail -n 3 "$tmp/cpack.log")"
	fi
	if [ -n "$deb" ]; then
		dpkg-deb -f "$deb" Depends >"$tmp/dep"
		for p in libfuse3-3 fuse3 libdeflate0; do
			grep -q "$p" "$tmp/dep" && ok "Depends: $p" ||
				bad "Depends lacks $p: $(cat "$tmp/dep")"
		done
		dpkg-deb -c "$deb" >"$tmp/list"
		for f in ./usr/bin/ptls ./usr/bin/ptdump ./usr/bin/ptverify \
			 ./usr/bin/ptrepack ./usr/sbin/mount.ptfs \
			 ./usr/sbin/mount.fuse.ptfs ./usr/share/man/man1/ptdump.1 \
			 ./usr/share/man/man5/ptfs.5; do
			grep -q " $f\( \|$\)" "$tmp/list" && ok "package holds $f" ||
				bad "package lacks $f"
		done
	fi
else
	echo "skip: cpack or dpkg-deb not installed"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
