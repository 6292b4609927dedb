#!/bin/sh
# The tables the documentation copies from the library are the library's,
# byte for byte:
#  - README.md's options table is `flextensor-config --markdown`
#  - docs/counters.md's counter table is `flextensor-config --stats` as
#    Markdown (| `name` | meaning |, in the order of stats.def)
# A table starts at its header line and runs while lines start with '|'.
# usage: docs_tables.sh <source root> <flextensor-config> [--update]
# --update rewrites the tables in place from flextensor-config instead of
# checking them (then review the diff).
set -u
src=$1 config=$2 update=${3:-}
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# The table of file $1 that starts at header line $2, to stdout; exit 1
# unless there is exactly one.
table() {
	awk -v head="$2" '
		$0 == head { n++; on = 1 }
		on && !/^\|/ { on = 0 }
		on { print }
		END { exit n == 1 ? 0 : 1 }' "$1"
}

# Replaces the table of file $1 at header $2 by file $3.
replace() {
	awk -v head="$2" -v new="$3" '
		$0 == head { while ((getline l < new) > 0) print l; skip = 1; next }
		skip && /^\|/ { next }
		{ skip = 0; print }' "$1" >"$tmp/replaced" && cat "$tmp/replaced" >"$1"
}

# check FILE HEADER EXPECTED-FILE WHAT
check() {
	file=$src/$1
	if [ "$update" = --update ]; then
		replace "$file" "$2" "$3" && echo "updated $1 ($4)"
		return
	fi
	if ! table "$file" "$2" >"$tmp/have"; then
		bad "$1 must hold exactly one table that starts with the line '$2' ($4)"
		return
	fi
	if ! cmp -s "$tmp/have" "$3"; then
		bad "$1's $4 differs from the library's (- $1, + flextensor-config):"
		diff -u "$tmp/have" "$3" | tail -n +3
		echo "  fix: tests/consistency/docs_tables.sh $src $config --update"
	fi
}

"$config" --markdown >"$tmp/options" || bad "$config --markdown failed"
check README.md '| Variable | Default | Values | Meaning |' "$tmp/options" "options table"

{
	printf '| Counter | Meaning |\n|---|---|\n'
	"$config" --stats | awk '{ name = $1; sub(/^[^ ]+ +/, ""); printf "| `%s` | %s |\n", name, $0 }'
} >"$tmp/counters" || bad "$config --stats failed"
check docs/counters.md '| Counter | Meaning |' "$tmp/counters" "counter table"

[ $fail = 0 ] && echo "docs tables: ok"
exit $fail
