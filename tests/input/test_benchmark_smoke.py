"""Smoke test: benchmarks/input_pipeline.py --quick completes and prints a ratio."""

import os
import re
import sys

import pytest

from tests import fork_server

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_input_pipeline_benchmark_quick_runs():
  result = fork_server.run(
      [sys.executable, '-m', 'benchmarks.input_pipeline', '--quick', '--threads=2'],
      cwd=_REPO, capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES=''))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert re.search(r'ratio a/b = \d+\.\d+', result.stdout), result.stdout


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
