# bash completion for the ptfs tools: ptls, ptdump, ptverify, ptrepack,
# ptdiff, and ptfs itself.  Installed as
# share/bash-completion/completions/<tool> (one copy per tool name, which
# bash-completion loads on first use), or source it.  Options come from
# the table below (docs/user-guide.md has the same); file arguments
# complete checkpoints (*.pt *.pth *.bin *.ckpt *.tar *.safetensors, an
# index.json or .metadata, and directories; a sharded folder or a DCP
# directory completes as one checkpoint, with a blank after it); after a
# checkpoint, ptls and ptdump --values complete key paths read from
# `ptls -v`, one level at a time.  ptfs completes its commands
# (umount, status, revert) and their options, -o's options, a checkpoint
# and a mount point.

_pt_tools_opts()
{
	local common="--json --quiet --help --version -j -q -h -V
		--insecure --endpoint --cache --connections"

	case $1 in
	ptls) echo "$common --tensors --tree --depth --human-readable --totals
		--stats --check --verbose -t -T -L -H -s -S -c -v" ;;
	ptdump) echo "$common --pickle --annotate --records --no-crc --values
		--head --start --count --stride -p -a -r -n" ;;
	ptverify) echo "$common --no-crc -n" ;;
	ptrepack) echo "$common --repickle --drop-unused --clone --align
		--dtype --only --torch --dequant --quant --format --drop-values
		--max-shard-size --ranks --no-crc --verbose -P -d -C -A -n -v
		$(_pt_writer_opts)" ;;
	ptdiff) echo "$common --atol --rtol --rel-l2 --nan-differ --ignore-layout
		--ignore-dtype --count --sort --verbose -v" ;;
	# ptfs's own (--discard is its umount's, named in its synopsis; the
	# subcommands' options are offered after them, in _ptfs)
	ptfs) echo "--help --version --discard -h -V -f -d -s -o" ;;
	esac
}

# The formats with writers of their own (gguf) and those writers'
# options (--gguf-type ...), as ptrepack --help lists them: a format's
# writer brings its own.
_pt_writers()
{
	"${PTREPACK:-ptrepack}" --help 2>/dev/null |
		sed -n "s/^ *or \([a-z0-9]*\) (.*its writer's options:.*/\1/p"
}
_pt_writer_opts()
{
	"${PTREPACK:-ptrepack}" --help 2>/dev/null |
		sed -n "s/.*its writer's options:\(.*\) VALUE .*/\1/p"
}

# Key paths of checkpoint $1 that extend $2 by one level (a container
# ends in "/"), the way a shell completes one directory at a time.
_pt_tools_keys()
{
	local flag=$3
	# shellcheck disable=SC2086 # flag is one word or none
	command "${PTLS:-ptls}" -v $flag -- "$1" 2>/dev/null |
		awk -v cur="$2" '!/^#/ && NF { p = $1; print p
			while (sub(/\/[^\/]*$/, "", p)) print p "/" }' |
		awk -v cur="$2" 'index($0, cur) == 1 &&
			substr($0, length(cur) + 1) ~ /^[^\/]*\/?$/' |
		sort -u
}

# Is $1 a checkpoint: a file, or a directory that ptls reads as one (a
# sharded folder with its index, a DCP directory with its .metadata)?
_pt_tools_is_ckpt()
{
	local f
	[[ -f $1 ]] && return 0
	[[ -d $1 ]] || return 1
	for f in "$1"/.metadata "$1"/__0.metadata "$1"/*.index.json; do
		[[ -f $f ]] && return 0
	done
	return 1
}

# File arguments into COMPREPLY (appended): checkpoint files and
# directories; a checkpoint directory that $1 names (with its "/", or as
# the one name it begins) is offered alone, followed by a blank, rather
# than opened (its files are its parts).
_pt_tools_files()
{
	if [[ -n $1 && -d ${1%/} ]] && _pt_tools_is_ckpt "${1%/}" &&
	    { [[ $1 == */ ]] || (($(compgen -f -- "$1" | wc -l) == 1)); }; then
		COMPREPLY+=("${1%/}/")
		return 0
	fi
	mapfile -t -O ${#COMPREPLY[@]} COMPREPLY < <(compgen -f -X \
		'!*.@(pt|pth|bin|ckpt|tar|zip|ptl|safetensors|index.json|metadata|PT|PTH|BIN)' \
		-- "$1"
		compgen -d -- "$1")
	compopt -o filenames 2>/dev/null
}

_pt_tools()
{
	local cur prev cmd i ckpt=""
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	cmd=${COMP_WORDS[0]##*/}
	COMPREPLY=()

	case $prev in
	--depth|-L|--head|--atol|--rtol|--align|-A|--only)
		return 0 ;;	# a number or a pattern: nothing to offer
	--dtype)
		mapfile -t COMPREPLY < <(compgen -W "float64 float32 float16
			bfloat16 float8_e4m3fn float8_e5m2 float8_e4m3fnuz
			float8_e5m2fnuz" -- "$cur")
		return 0 ;;
	--torch)
		mapfile -t COMPREPLY < <(compgen -W "2 1.13" -- "$cur")
		return 0 ;;
	--dequant)
		mapfile -t COMPREPLY < <(compgen -W "bf16 float16 float32" \
			-- "$cur")
		return 0 ;;
	--quant)
		mapfile -t COMPREPLY < <(compgen -W "fp8-block fp8-block:128" \
			-- "$cur")
		return 0 ;;
	--format)
		mapfile -t COMPREPLY < <(compgen -W "pt safetensors dcp hf $(_pt_writers)" -- "$cur")
		return 0 ;;
	--values)
		# the checkpoint may come after: look for one on the line
		for ((i = 1; i < ${#COMP_WORDS[@]}; i++)); do
			[[ $i != "$COMP_CWORD" ]] &&
				_pt_tools_is_ckpt "${COMP_WORDS[i]}" &&
				ckpt=${COMP_WORDS[i]} && break
		done
		[[ -n $ckpt ]] && mapfile -t COMPREPLY < <(compgen -W \
			"$(_pt_tools_keys "$ckpt" "$cur")" -- "$cur")
		return 0 ;;
	esac
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_pt_tools_opts "$cmd")" \
			-- "$cur")
		return 0
	fi
	# ptls CHECKPOINT KEY-PATH...: key paths after the first checkpoint
	if [[ $cmd == ptls ]]; then
		for ((i = 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			-L|--depth) ((i++)) ;;
			-*) ;;
			*) _pt_tools_is_ckpt "${COMP_WORDS[i]}" &&
				ckpt=${COMP_WORDS[i]} ;;
			esac
		done
		if [[ -n $ckpt && ! -e $cur ]]; then
			mapfile -t COMPREPLY < <(compgen -W \
				"$(_pt_tools_keys "$ckpt" "$cur")" -- "$cur")
			((${#COMPREPLY[@]})) && { compopt -o nospace 2>/dev/null
				return 0; }
		fi
	fi
	# ptdiff A B KEY-PATH..., ptrepack IN OUT KEY-PATH...: key paths of
	# the first file once both are on the line (OUT may not exist yet)
	if [[ $cmd == ptdiff || $cmd == ptrepack ]]; then
		local npos=0
		for ((i = 1; i < COMP_CWORD; i++)); do
			case ${COMP_WORDS[i]} in
			--atol|--rtol|--rel-l2|--count|--dtype|--only|--torch|\
			--dequant|--quant|\
			--format|--align|-A|--max-shard-size|--ranks) ((i++)) ;;
			-*) ;;
			*) ((npos++)) || ckpt=${COMP_WORDS[i]} ;;
			esac
		done
		if ((npos >= 2)) && _pt_tools_is_ckpt "$ckpt" && [[ ! -e $cur ]]
		then
			mapfile -t COMPREPLY < <(compgen -W \
				"$(_pt_tools_keys "$ckpt" "$cur")" -- "$cur")
			((${#COMPREPLY[@]})) && { compopt -o nospace 2>/dev/null
				return 0; }
		fi
	fi
	_pt_tools_files "$cur"
	return 0
}

# ptfs CHECKPOINT MOUNTPOINT, or ptfs umount|status|revert ...
_ptfs()
{
	local cur prev cmd=""
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	((COMP_CWORD > 1)) && cmd=${COMP_WORDS[1]}
	COMPREPLY=()
	if [[ $prev == -o ]]; then
		mapfile -t COMPREPLY < <(compgen -W "timeout= overlay= output=
			discard inplace views ro nonempty insecure endpoint= cache=
			connections= allow_other" -- "$cur")
		compopt -o nospace 2>/dev/null
		return 0
	fi
	case $cmd in
	umount|status|revert)
		if [[ $cur == -* ]]; then
			case $cmd in
			umount) mapfile -t COMPREPLY < <(compgen -W "-q --quiet
				-v --verbose --discard" -- "$cur") ;;
			status) mapfile -t COMPREPLY < <(compgen -W "-j --json
				-q --quiet" -- "$cur") ;;
			revert) mapfile -t COMPREPLY < <(compgen -W "-q --quiet" \
				-- "$cur") ;;
			esac
			return 0
		fi
		# umount wants a mount point; status and revert any path in one
		if [[ $cmd == umount ]]; then
			mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		fi
		compopt -o filenames 2>/dev/null
		return 0 ;;
	esac
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_pt_tools_opts ptfs)" \
			-- "$cur")
		return 0
	fi
	((COMP_CWORD == 1)) && mapfile -t COMPREPLY < <(compgen -W "umount
		status revert" -- "$cur")
	_pt_tools_files "$cur"
	return 0
}

shopt -s extglob
complete -F _pt_tools ptls ptdump ptverify ptrepack ptdiff
complete -F _ptfs ptfs
