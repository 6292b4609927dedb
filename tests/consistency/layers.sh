#!/bin/sh
# The folders of src/ depend on each other one way: interpose -> learn ->
# engine -> profile -> common (tools -> profile, common), never back.  An
# edge is an #include of a header of another folder (include/ft/*.h belong
# to the folder that implements them, below), from a source file or from a
# header of the folder; edges through headers count for their owner.
# Prints the folder graph (with --print, every edge and the files behind
# it) and fails on an edge against the order.
# usage: layers.sh <source root> [--print]
set -u
root=$1
owner() { # the folder a header of include/ft belongs to
	case $1 in
	log.h|options.h|options.def|stats.h|stats.def|real.h|cuda.h|hooks.def|input.h|gate.h|passthrough.h) echo common ;;
	learn.h) echo learn ;;
	offload.h|vmm.h|kernels.h|gpu.h) echo engine ;;
	*) echo profile ;;
	esac
}
rank() {
	case $1 in
	common) echo 0 ;; profile) echo 1 ;; engine) echo 2 ;; learn) echo 3 ;;
	interpose) echo 4 ;; tools) echo 5 ;; *) echo 9 ;;
	esac
}
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
for f in "$root"/src/*/*.c "$root"/src/*/*.h "$root"/include/ft/*.h; do
	case $f in
	*/include/ft/*) from=$(owner "$(basename "$f")") ;;
	*) from=$(basename "$(dirname "$f")") ;;
	esac
	for h in $(sed -n 's/^#include "ft\/\([a-z_]*\.[a-z]*\)".*/\1/p' "$f"); do
		to=$(owner "$h")
		[ "$from" = "$to" ] || echo "$from $to ${f#$root/} ft/$h" >>"$edges"
	done
done
fail=0
echo "folder graph of src/ (an arrow: includes headers of):"
for e in $(awk '{print $1 "->" $2}' "$edges" | sort -u); do
	from=${e%->*} to=${e#*->}
	n=$(awk -v a="$from" -v b="$to" '$1 == a && $2 == b' "$edges" | wc -l)
	if [ "$(rank "$from")" -gt "$(rank "$to")" ]; then
		echo "  $from -> $to ($n includes)"
	else
		echo "  $from -> $to ($n includes): AGAINST interpose -> learn -> engine -> profile -> common"
		awk -v a="$from" -v b="$to" '$1 == a && $2 == b {print "    " $3 ": " $4}' "$edges"
		fail=1
	fi
done
[ "${2:-}" = --print ] && sort -u "$edges"
[ $fail = 0 ] && echo "layers: ok (no loop between folders)"
exit $fail
