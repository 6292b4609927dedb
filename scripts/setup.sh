#!/bin/sh
# One command for a fresh Debian machine with the CUDA toolkit: installs the
# build and test dependencies, configures and builds into ./build.
# The CUDA toolkit itself (headers only are used) is found at $CUDA_HOME or
# /usr/local/cuda.
# Packages are installed with apt-get, as root or through sudo; where neither
# is possible it stops and prints the command to run as root instead.
# tests/consistency/setup_script.sh runs it against stub commands.
set -eu
cd "$(dirname "$0")/.."

pkgs="gcc g++ libc6-dev meson ninja-build pkg-config libelf-dev libcjson-dev \
libinih-dev libcmocka-dev binutils python3 python3-pytest"
missing=
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
	install="apt-get update && apt-get install -y --no-install-recommends$missing"
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "setup: error: these packages (Debian names) are missing:$missing; apt-get is not here to install them: install them with this system's package manager, then run scripts/setup.sh again" >&2
		exit 1
	fi
	sudo=
	if [ "$(id -u)" != 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "setup: error: these packages are missing:$missing; you are not root and sudo is not installed, so they cannot be installed from here. As root, run:" >&2
			echo "    $install" >&2
			echo "then run scripts/setup.sh again." >&2
			exit 1
		fi
		sudo=sudo
	fi
	echo "setup: installing$missing"
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda.h" ]; then
	echo "setup: error: $cuda/include/cuda.h not found: install the CUDA toolkit or set CUDA_HOME" >&2
	exit 1
fi

if [ -d build ]; then
	meson setup --reconfigure build
else
	meson setup build
fi
ninja -C build

# The sanitized builds that tests/sanitize runs (AddressSanitizer with
# UndefinedBehaviorSanitizer; ThreadSanitizer), where the compiler has their
# runtimes.  SETUP_SANITIZERS=0 skips them (the test then skips too).
sanitized() { # <dir> <-Db_sanitize value>
	if ! printf 'int main(void) { return 0; }\n' |
		${CC:-cc} -x c -fsanitize="$2" -o /dev/null - >/dev/null 2>&1; then
		echo "setup: the compiler cannot build with -fsanitize=$2: no $1 (tests/sanitize skips it)"
		return 0
	fi
	if [ -d "$1" ]; then
		meson setup --reconfigure "$1" -Db_sanitize="$2" -Db_lundef=false
	else
		meson setup "$1" -Db_sanitize="$2" -Db_lundef=false
	fi
	ninja -C "$1"
}
if [ "${SETUP_SANITIZERS:-1}" != 0 ]; then
	sanitized build-asan address,undefined
	sanitized build-tsan thread
fi
