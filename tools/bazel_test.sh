#!/usr/bin/env bash
# Runs `bazel test //...` after making sure the protos are compiled (their
# *_pb2.py modules are generated, not committed, and bazel globs them).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python3 ]; then
  echo "bazel_test.sh: .venv not found; run 'make venv' first" >&2
  exit 2
fi
.venv/bin/python3 protos/compile_protos.py >/dev/null
exec bazel test //... "$@"
