#!/bin/sh
# One command for a fresh Debian machine with the CUDA toolkit: installs the
# build and test dependencies, configures and builds into ./build.
# The CUDA toolkit itself (headers only are used) is found at $CUDA_HOME or
# /usr/local/cuda.
set -eu
cd "$(dirname "$0")/.."

pkgs="gcc libc6-dev meson ninja-build pkg-config libelf-dev libcjson-dev \
libinih-dev libcmocka-dev binutils python3"
missing=
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
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
