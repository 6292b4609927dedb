#!/bin/sh
# scripts/setup.sh decides how to install missing packages: as root with
# apt-get, as another user through sudo, and (issue 20) as a user without
# sudo it stops with status 1 and prints the apt-get command to run as root,
# instead of failing with "sudo: not found".  It runs here against stub
# commands on a PATH of their own (id, dpkg, apt-get, sudo, meson, ninja), so
# nothing is installed or built; CUDA_HOME names no toolkit, so every run
# that gets past the packages stops at the CUDA check.
# usage: setup_script.sh <scripts/setup.sh>
set -u
setup=$1
fail=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

check() { # check <description> <condition command...>
	desc=$1
	shift
	if "$@"; then echo "ok: $desc"; else echo "FAIL: $desc"; fail=1; fi
}

# stub <name> <body>: a command that runs body (a shell script) and logs
# its name and arguments to $tmp/log.
stub() {
	printf '#!/bin/sh\necho "%s $*" >>"%s/log"\n%s\n' "$1" "$tmp" "$2" >"$tmp/bin/$1"
	chmod +x "$tmp/bin/$1"
}
mkdir "$tmp/bin"
ln -s "$(command -v dirname)" "$tmp/bin/dirname"
stub id 'echo "$STUB_UID"'
# dpkg -s PACKAGE: installed unless named in STUB_MISSING
stub dpkg 'case " $STUB_MISSING " in *" $2 "*) exit 1 ;; esac'
stub apt-get 'exit 0'
stub meson 'exit 1'
stub ninja 'exit 1'

# run <uid> <missing packages>: setup.sh under the stubs; status in $st,
# stderr in $tmp/err, the stubs' calls in $tmp/log.
run() {
	: >"$tmp/log"
	STUB_UID=$1 STUB_MISSING=$2 CUDA_HOME=$tmp/no-cuda PATH=$tmp/bin \
		/bin/sh "$setup" >"$tmp/out" 2>"$tmp/err"
	st=$?
}
logged() { grep -qx -- "$1" "$tmp/log"; }
lacks() { ! grep -q -- "$1" "$2"; }

run 1000 "libcmocka-dev python3"
check "no sudo, not root: exit 1" [ "$st" = 1 ]
check "no sudo, not root: says why" grep -q "you are not root and sudo is not installed" "$tmp/err"
check "no sudo, not root: prints what to run as root" \
	grep -qx "    apt-get update && apt-get install -y --no-install-recommends libcmocka-dev python3" "$tmp/err"
check "no sudo, not root: apt-get not run" lacks "apt-get" "$tmp/log"
check "no sudo, not root: no 'not found'" lacks "not found" "$tmp/err"

run 0 "libcmocka-dev python3"
check "root: apt-get installs the missing packages" \
	logged "apt-get install -y -q --no-install-recommends libcmocka-dev python3"
check "root: then stops at the CUDA check" grep -q "cuda.h not found" "$tmp/err"

stub sudo 'exec "$@"'
run 1000 "libcmocka-dev"
check "sudo, not root: sudo runs apt-get" logged "sudo apt-get install -y -q --no-install-recommends libcmocka-dev"
check "sudo, not root: apt-get installs" logged "apt-get install -y -q --no-install-recommends libcmocka-dev"

run 1000 ""
check "nothing missing: apt-get not run" lacks "apt-get" "$tmp/log"
check "nothing missing: reaches the CUDA check" grep -q "cuda.h not found" "$tmp/err"

rm "$tmp/bin/apt-get"
run 0 "python3"
check "no apt-get: exit 1" [ "$st" = 1 ]
check "no apt-get: names the packages" grep -q "missing: python3; apt-get is not here" "$tmp/err"

[ $fail = 0 ] && echo "setup script: ok"
exit $fail
