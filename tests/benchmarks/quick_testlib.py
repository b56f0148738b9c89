"""Runs a benchmark's `--quick` mode and checks that its figures are figures.

Shared by test_benchmarks_quick.py and test_benchmarks_quick_clusters.py.
"""

import math
import os
import re
import subprocess
import sys

from tests import fork_server

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quick_env():
  """The environment of a benchmark run by these tests: no GPU, quiet TF, the repo importable.

  (One environment for every benchmark process, so one fork server forks them all.)
  """
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
  env['PYTHONPATH'] = os.pathsep.join(
      [REPO_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p])
  return env


def run_quick(module, *extra_args, timeout=600):
  """Runs `python -m module --quick`; returns its stdout (fails on a non-zero exit).

  `timeout` only catches a hang: in full-suite runs on 2 cores the netns
  `benchmarks.distributed --quick` took 243 s with nothing else running and
  passed 300 s when other jobs shared the cores.
  """
  result = fork_server.run([sys.executable, '-m', module, '--quick', *extra_args],
                          cwd=REPO_ROOT, env=quick_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
  assert result.returncode == 0, '%s --quick failed:\n%s\n%s' % (
      module, result.stdout[-3000:], result.stderr[-5000:])
  return result.stdout


# 'ratio NAME = V (per repeat r1 r2 ...; ...' and the paired benchmark's
# 'ratio NAME, median burst pair = V (per repeat r1 r2 ...)'.
_RATIO_LINE = re.compile(r'^ratio (?P<name>.+?) = (?P<value>\S+) \(per repeat (?P<repeats>[^;)]*)',
                         re.M)
# bench_util.print_table's rows: | variant | median | min | max | spread % |
_RATE_ROW = re.compile(r'^\| (?P<label>[^|]+) \| (?P<median>[0-9.]+) \| (?P<min>[0-9.]+) \| '
                       r'(?P<max>[0-9.]+) \| [0-9.]+ \|$', re.M)


def assert_figures(stdout, repeats=None):
  """Every ratio line and rate row of `stdout` holds numbers that make sense.

  Args:
    stdout: a benchmark's output.
    repeats: how many per-repeat ratios each ratio line must list (None: any).
  """
  lines = list(_RATIO_LINE.finditer(stdout))
  assert lines, stdout[-3000:]
  for line in lines:
    value = float(line.group('value'))
    per_repeat = [float(r) for r in line.group('repeats').split()]
    assert 0 < value < math.inf, line.group(0)
    assert per_repeat and all(0 < r < math.inf for r in per_repeat), line.group(0)
    if repeats is not None:
      assert len(per_repeat) == repeats, line.group(0)
  for row in _RATE_ROW.finditer(stdout):
    low, middle, high = (float(row.group(k)) for k in ('min', 'median', 'max'))
    assert 0 < low <= middle <= high, row.group(0)
