#!/bin/sh
# Source hygiene the style guide asks for:
#  - getenv only in src/common/options.c
#  - no constructors (LD_PRELOAD reaches every child process)
#  - no call of the public dlsym inside the library (it would recurse
#    through our own override); only ft_real_dlsym
#  - each header compiles alone
#  - every hooks.def symbol is a real libcuda export (CUDA stub library)
# (docs_tables.sh checks the README's options table against the library)
# usage: hygiene.sh <source root> <cc> <cuda include dir>
set -u
src=$1 cc=$2 cuda_inc=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }

hits=$(grep -rnE '\b(secure_)?getenv\b' "$src/src" | grep -v '^[^:]*src/common/options.c:')
[ -z "$hits" ] || bad "getenv outside options.c: $hits"

hits=$(grep -rnE 'attribute__ *\(\( *constructor|\.init_array' "$src/src")
[ -z "$hits" ] || bad "constructor in the library: $hits"

hits=$(grep -rnE '(^|[^_a-z"])dlsym *\(' "$src/src" --include='*.c' |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*/?\*' |
	grep -vE 'void \*dlsym\(void \*restrict handle')
[ -z "$hits" ] || bad "public dlsym called inside the library: $hits"

for h in "$src"/include/flextensor.h "$src"/include/ft/*.h; do
	printf '#include "%s"\n' "$h" |
		"$cc" -fsyntax-only -Wall -Werror -D_GNU_SOURCE -I"$src/include" \
			-isystem "$cuda_inc" -x c - || bad "$h does not compile alone"
done

stub="$cuda_inc/../lib64/stubs/libcuda.so"
if [ -f "$stub" ] && command -v nm >/dev/null; then
	nm -D --defined-only "$stub" | awk '{print $3}' | sort >/tmp/ft-stub.$$
	for s in $(sed -n 's/^FT_\(HOOK\|USE\)(\([A-Za-z0-9_]*\),.*/\2/p' "$src/include/ft/hooks.def"); do
		grep -qx "$s" /tmp/ft-stub.$$ || bad "hooks.def names $s, which libcuda does not export"
	done
	rm -f /tmp/ft-stub.$$
else
	echo "note: no CUDA stub library: driver symbol names not checked"
fi

[ $fail = 0 ] && echo "hygiene: ok"
exit $fail
