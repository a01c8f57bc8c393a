# zsh_complete.zsh FUNCDIR LINE... - what zsh's TAB really offers: an
# interactive zsh -f on a pseudo-terminal (zsh/zpty, as zsh's own test
# suite does) runs compinit with FUNCDIR first in $fpath, prints which
# function completes each tool ("0<TAB>tool=function"), then types each
# LINE and TAB; a compadd wrapper prints every match the completion adds,
# as "N<TAB>match" (N counts the LINEs from 1).  For completion.sh.
zmodload zsh/zpty || exit 3
fp=$1
shift
zpty z zsh -f -i
zpty -w z "PS1='' RPROMPT=''; fpath=($fp \$fpath)"
zpty -w z 'autoload -U compinit && compinit -u -D'
zpty -w z 'compadd() {
	local -a __m
	builtin compadd -A __m "$@"
	(( $#__m )) && print -lr -- "<"M">"${^__m}
	builtin compadd "$@"
}'
zpty -w z 'for t in ptls ptdump ptverify ptrepack ptdiff ptfs; do
	print -r -- "<"M">$t=$_comps[$t]"; done'
# TAB completes, then says so: the next keys are typed only after it, so
# that none is pending while a completion runs (zle gives up a listing
# when keys wait, which a loaded machine made happen)
zpty -w z 'ctab() { zle complete-word; print -rn -- "<CO""MPLETED>"; }'
zpty -w z "zle -N ctab; bindkey '^I' ctab; print '<RE''ADY>'"
zpty -r z out '*<READY>*' || exit 4
print -r -- "$out" | tr -d '\r' | grep -o '<M>[^<]*' | sed 's/^<M>/0	/'
n=0
for l in "$@"; do
	n=$((n + 1))
	zpty -w -n z "$l"$'\t'
	zpty -r z out '*<COMPLETED>*' || exit 5
	got=$out
	zpty -w -n z $'\C-u'"print '<DO''NE>'"$'\n'
	zpty -r z out '*<DONE>*' || exit 5
	print -r -- "$got$out" | tr -d '\r' | grep -o '<M>[^<]*' |
		sed "s/^<M>/$n	/" | sort -u
done
zpty -w z exit
zpty -d z
