# faults.sh - run.sh's fault cases (sourced; lib.sh's helpers): ptrepack
# --drop-values of model.pt into a .safetensors through faultproxy.py
# (/fault/SPEC/model.pt, SPEC as its header says): every tensor byte
# read, the result compared with the same of the local file.
#
#   retry   the tool must recover: exit 0, the local bytes
#   either  exit 0 and the local bytes, or one line and a non-zero exit
#   refuse  one line matching PATTERN and a non-zero exit
# Never wrong bytes, never a file left behind by a failed ptrepack, and
# the fault must have been hit (its line in faultproxy.py's log).

FREF=$WORK/out/fault.ref.safetensors

# fault_case NAME SPEC retry|either|refuse [PATTERN]
fault_case() {
	_fn=fault_$1 _spec=$2 _want=$3 _pat=${4:-.}
	[ -f "$FREF" ] || "$ptrepack" --drop-values "$S/model.pt" "$FREF" \
		>/dev/null 2>&1
	curl -s "$PT_FAULT/_reset" >/dev/null
	_fo=$(mark "$PT_FAULT_LOG")
	_out=$WORK/out/$_fn.safetensors
	rm -f "$_out"
	_t0=$(date +%s)
	tool "$_fn" "$ptrepack" --drop-values "$PT_FAULT/fault/$_spec/model.pt" \
		"$_out"
	_secs=$(($(date +%s) - _t0))
	mark "$PT_FAULT_LOG" >/dev/null
	tail -c +$((_fo + 1)) "$PT_FAULT_LOG" >"$WORK/out/$_fn.log"
	_mode=${_spec%%[@x]*}
	_hits=$(awk -F'\t' -v m="$_mode" '$8 == m || index($8, m ",") == 1' \
		"$WORK/out/$_fn.log" | wc -l)
	_reqs=$(wc -l <"$WORK/out/$_fn.log")
	_err=$WORK/out/$_fn.err
	: >"$DET"
	[ "$_hits" -gt 0 ] || note "the fault was never hit ($_reqs requests)"
	_how=
	if [ "$RC" = 0 ]; then
		if [ ! -f "$_out" ]; then
			note "exit 0 and no output file"
		elif ! cmp -s "$_out" "$FREF"; then
			note "WRONG BYTES: exit 0, $(cmp "$_out" "$FREF" 2>&1 | head -n 1)"
		fi
		[ "$_want" != refuse ] || note "exit 0: the fault was not refused"
		_how="recovered, the local bytes"
	else
		[ "$_want" != retry ] ||
			note "not recovered: exit $RC: $(head -n 1 "$_err")"
		[ "$(wc -l <"$_err")" = 1 ] ||
			note "$(wc -l <"$_err") lines on stderr: $(head -n 3 "$_err" | tr '\n' '|')"
		grep -Eq "$_pat" "$_err" ||
			note "stderr '$(head -n 1 "$_err")' does not match /$_pat/"
		[ ! -e "$_out" ] || note "a failed ptrepack left $_out ($(wc -c <"$_out") bytes)"
		_how="exit $RC: $(head -n 1 "$_err")"
	fi
	check "$_fn" "$_spec: $_how ($_reqs requests, $_hits faulted, ${_secs}s)"
}

if want fault_drop_open; then fault_case drop_open drop retry; fi
if want fault_drop_read; then fault_case drop_read drop@3x2 retry; fi
if want fault_e500_open; then fault_case e500_open e500x2 retry; fi
if want fault_e503_read; then fault_case e503_read e503@3 retry; fi
if want fault_e429_read; then
	fault_case e429_read e429@2 retry
	# Retry-After: 1 waited for: the request after the 429 a second on
	_gap=$(awk -F'\t' '$8 == "e429" { t = $9; next }
		t != "" { printf "%.2f", $9 - t; exit }' "$WORK/out/fault_e429_read.log")
	case $_gap in
	"") fail "fault_e429_read Retry-After" "no request after the 429" ;;
	*) if awk -v g="$_gap" 'BEGIN { exit !(g >= 0.95) }'; then
		pass "fault_e429_read Retry-After" "the retry came ${_gap}s after the 429"
	else
		fail "fault_e429_read Retry-After" "the retry came ${_gap}s after the 429 (Retry-After: 1)"
	fi ;;
	esac
fi
if want fault_short_read; then fault_case short_read short@3 either; fi
if want fault_short_open; then fault_case short_open short either; fi
if want fault_norange; then fault_case norange norange either; fi
if want fault_change; then
	fault_case change change@2 refuse "changed|ESTALE|[Ss]tale"
fi
if want fault_403; then fault_case 403 e403x100 refuse 403; fi
if want fault_404; then fault_case 404 e404x100 refuse "404.*model\.pt|model\.pt.*404"; fi
if want fault_500_always; then
	fault_case 500_always e500x100000 refuse "500"
fi

if want fault_mount_flip; then
	if [ -z "$FUSE" ]; then
		skip fault_mount_flip "FUSE cannot be used here"
	else
		curl -s "$PT_FAULT/_reset" >/dev/null
		if mount_pair fault_mount_flip "$PT_FAULT/fault/flip/model.pt" \
		    "$S/model.pt"; then
			: >"$DET"
			cmp -s "$RM/layers.0.weight" "$LM/layers.0.weight" ||
				note "layers.0.weight differs before the change"
			curl -s "$PT_FAULT/_flip" >/dev/null
			ok=0 failed=0
			for t in layers.1.weight layers.5.weight layers.11.weight \
			    norm.half steps embed.weight layers.0.weight; do
				if cat "$RM/$t" >"$WORK/out/flip.$t" 2>"$WORK/out/flip.err"; then
					if cmp -s "$WORK/out/flip.$t" "$LM/$t"; then
						ok=$((ok + 1))
					else
						note "WRONG BYTES: $t read after the change is not the old object's"
					fi
				else
					failed=$((failed + 1))
				fi
			done
			n=$(grep -c 'changed' "$WORK/fault_mount_flip.err")
			[ "$failed" = 0 ] || [ "$n" = 1 ] ||
				note "$failed reads failed; the daemon said 'changed' $n times, not once"
			check fault_mount_flip "after the change: $ok reads of the old bytes, $failed failed ($(grep -m 1 changed "$WORK/fault_mount_flip.err"))"
			unmount_pair
		fi
	fi
fi
