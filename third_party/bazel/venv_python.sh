#!/usr/bin/env bash
# The Python interpreter of every py_test: the project's virtualenv, found
# from this script's real location (bazel runs it through runfiles symlinks).
here="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
venv_python="$here/../../.venv/bin/python3"
if [ ! -x "$venv_python" ]; then
  echo "venv_python.sh: $venv_python not found; run 'make venv' first" >&2
  exit 2
fi
exec "$venv_python" "$@"
