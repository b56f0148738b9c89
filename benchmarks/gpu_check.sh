#!/usr/bin/env bash
# The GPU check in one command (see benchmarks/gpu_check.py):
#   benchmarks/gpu_check.sh --output_dir=$OUT             # on the GPU machine, <= 9 minutes
#   benchmarks/gpu_check.sh --dry-run --output_dir=out/gpu_check_dry   # on a CPU
# Uses the repository's .venv when there is one (PYTHON=... to choose another).
# The orchestrator runs as a plain script, so it needs no TensorFlow itself and
# still writes its summary when TensorFlow cannot load.
set -u
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
exec "$PYTHON" "$repo/benchmarks/gpu_check.py" --python="$PYTHON" "$@"
