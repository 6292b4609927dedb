# Sourced by the preload test scripts.
# trace_stat <trace> <counter>: the counter in the trace's last "stats"
# record (nothing when there is none).
trace_stat() {
	sed -n '/"ev":"stats"/h; ${x;p;}' "$1" 2>/dev/null |
		sed -n "s/.*\"$2\":\([0-9][0-9]*\)[,}].*/\1/p"
}
