"""Runs a benchmark's `--quick` mode and checks that its figures are figures.

Shared by test_benchmarks_quick.py and test_benchmarks_quick_clusters.py.
"""

import math
import os
import re
import statistics
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


# bench_util.repeat_variants' progress: '  repeat 1 name      123.4'.
_REPEAT_LINE = re.compile(r'^  repeat (?P<repeat>\d+) (?P<name>.+?) +(?P<rate>[0-9.]+)$', re.M)


def ratio_lines(stdout):
  """{name: (value, [per-repeat ratios])} of the ratio lines of `stdout`."""
  return {line.group('name'): (float(line.group('value')),
                               [float(r) for r in line.group('repeats').split()])
          for line in _RATIO_LINE.finditer(stdout)}


def repeat_rates(stdout):
  """{variant: [rate of repeat 1, 2, ...]} from bench_util.repeat_variants' progress lines."""
  rates = {}
  for line in _REPEAT_LINE.finditer(stdout):
    rates.setdefault(line.group('name'), []).append(float(line.group('rate')))
  return rates


def table_medians(stdout):
  """{label: median} of bench_util.print_table's rows."""
  return {row.group('label'): float(row.group('median')) for row in _RATE_ROW.finditer(stdout)}


def _quotient_slack(numerator, denominator, num_places, den_places):
  """How far numerator/denominator may move when both were printed rounded, and the
  quotient itself too (3 places, as every ratio line prints)."""
  quotient = numerator / denominator
  return (quotient * (0.5 * 10 ** -num_places / numerator + 0.5 * 10 ** -den_places / denominator)
          + 0.0005 + 1e-9)


def assert_ratio_is(stdout, name, numerator, denominator, num_places=1, den_places=None,
                    median_of_ratios=False):
  """The ratio line `name` of `stdout` is `numerator` over `denominator`, not the other way.

  A ratio line printed the wrong way round (or of the wrong pair) fails, unless the two
  sides are equal to the printed precision.

  Args:
    stdout: a benchmark's output.
    name: the ratio's name as its line prints it ('a/b' for 'ratio a/b = ...').
    numerator, denominator: the rates the benchmark printed for each side, one per
      repeat in repeat order (then each per-repeat ratio is checked, and the ratio
      against their medians), or a single median each (then only the ratio).
    num_places, den_places: the decimals the rates were printed with (den_places:
      the same as num_places when None).
    median_of_ratios: the line's value is the median of the per-repeat ratios, not
      the ratio of the medians.
  """
  den_places = num_places if den_places is None else den_places
  lines = ratio_lines(stdout)
  assert name in lines, (name, sorted(lines), stdout[-3000:])
  value, per_repeat = lines[name]
  assert len(numerator) == len(denominator), (name, numerator, denominator)
  if len(numerator) > 1:
    assert len(per_repeat) == len(numerator), (name, per_repeat, numerator)
    for ratio, num, den in zip(per_repeat, numerator, denominator):
      assert abs(ratio - num / den) <= _quotient_slack(num, den, num_places, den_places), (
          name, ratio, num, den)
  if median_of_ratios:
    quotients = [num / den for num, den in zip(numerator, denominator)]
    slack = max(_quotient_slack(num, den, num_places, den_places)
                for num, den in zip(numerator, denominator))
    assert abs(value - statistics.median(quotients)) <= slack, (name, value, quotients)
    return
  num, den = statistics.median(numerator), statistics.median(denominator)
  assert abs(value - num / den) <= _quotient_slack(num, den, num_places, den_places), (
      name, value, num, den)
