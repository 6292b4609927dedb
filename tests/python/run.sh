#!/bin/sh
# tests/python: pytest on the Python package, with a Python that has pytest
# (the distribution's python3-pytest, which scripts/setup.sh installs).
# usage: run.sh LIB FAKE_DIR PYTHONPATH
set -u
here=$(dirname "$0")
for py in "${PYTHON:-}" /usr/bin/python3 python3; do
	[ -n "$py" ] || continue
	if "$py" -c 'import pytest' 2>/dev/null; then
		FT_LIB=$1 FT_FAKE_DIR=$2 FT_PYTHONPATH=$3 exec "$py" -m pytest -q -p no:cacheprovider "$here/test_api.py"
	fi
done
echo "tests/python: no python3 with pytest: install python3-pytest (scripts/setup.sh does)" >&2
exit 1
