"""Smoke test of the benchmarks that start clusters: `--quick` on loopback and netns.

The distributed benchmark and the scaling model's calibration + validation, split from
test_benchmarks_quick.py (same helpers, same rules: figures are checked to be
figures, never timed) so that their clusters run beside the single-process
benchmarks (one file is one unit of `make test`'s workers, one bazel target).
"""

import re
import sys

import pytest

from tests.benchmarks.quick_testlib import assert_figures, run_quick


@pytest.mark.slow
@pytest.mark.cluster
def test_distributed_quick_on_loopback_and_network_namespaces():
  # With --netns every configuration runs on loopback too (the ratios are netns /
  # loopback): one run covers both; where namespaces cannot be made, loopback alone.
  from deployment import netns  # noqa: PLC0415  (imports TensorFlow)
  reason = netns.unavailable_reason()
  if reason:
    print('distributed --quick on loopback only: %s' % reason, file=sys.stderr)
  stdout = run_quick('benchmarks.distributed', *([] if reason else ['--netns']))
  assert_figures(stdout)
  for count, workers in ((2, '2 workers + 1 ps, async'), (2, '2 workers + 1 ps, sync')):
    assert 'ratio %s / (%d x single process)' % (workers, count) in stdout, stdout[-3000:]
    if not reason:
      assert 'ratio %s, netns / loopback' % workers in stdout, stdout[-3000:]
  assert 'steps per worker inside' in stdout, stdout[-3000:]


# A validation row: | workers | ps | mode | network | predicted | limited by |
# measured per repeat | measured / predicted per repeat | verdict |
_VALIDATION_ROW = re.compile(
    r'^\| (\d+) \| (\d+) \| (a?sync) \| ([a-z]+(?: tc [0-9.]+ Mbit)?) \| ([0-9.]+) \| '
    r'(links|shared cores) \| ([0-9. ]+) \| ([0-9. ]+) \| (met|missed|not resolved) \|$', re.M)
_COUNT = re.compile(r'^within \+-20 %: (\d+) of (\d+) configurations \(every repeat\)$', re.M)
# '  1 worker + 2 ps, async, netns, tc 200 Mbit: 123.4 ex/s (links)'
_FROZEN = re.compile(r'^  (\d+) workers? \+ (\d+) ps, (a?sync), ([a-z]+)(?:, tc ([0-9.]+) Mbit)?: '
                     r'([0-9.]+) ex/s \((links|shared cores)\)$', re.M)
_CALIBRATED = r'^%s: [0-9.]+ GB/s, [0-9]+ us round trip, [0-9.]+ us per tensor, [0-9]+ us per ' \
              r'extra ps task; per-step cost [0-9.]+ ms; CPU of both ends: ([0-9]+) us per round ' \
              r'trip, [0-9.]+ us per tensor, ([0-9.]+) ms per MB$'


def _calibration_runs(stdout):
  """Names of what ran before the parameter file was written (the progress lines)."""
  before = stdout.split('\nwrote ', 1)[0]
  return re.findall(r'^  repeat 1 (.+?) +[0-9.]+$', before, re.M)


def _assert_cpu_measured(calibrated, stdout):
  """The link's calibration line is there, with CPU time both per round trip and per MB."""
  assert calibrated, stdout[-3000:]
  assert float(calibrated.group(1)) > 0 and float(calibrated.group(2)) > 0, calibrated.group(0)


def _assert_validation(stdout, expected):
  """The frozen predictions and the validation rows of a quick run agree with each other.

  Args:
    stdout: `scaling_model --quick`'s output.
    expected: [(workers, ps, mode, network label)] the rows must be, in order.
  """
  from benchmarks import scaling_validate  # noqa: PLC0415  (imports TensorFlow)
  frozen = [(int(w), int(m), mode, net + (' tc %s Mbit' % tc if tc else ''), float(rate))
            for w, m, mode, net, tc, rate, _ in _FROZEN.findall(stdout)]
  rows = _VALIDATION_ROW.findall(stdout)
  assert [row[:4] for row in rows] == [tuple(map(str, e)) for e in expected], stdout[-3000:]
  assert [f[:4] for f in frozen] == [tuple(e) for e in expected], stdout[-3000:]
  for row, (_, _, _, _, frozen_rate) in zip(rows, frozen):
    predicted = float(row[4])
    measured = [float(v) for v in row[6].split()]
    ratios = [float(v) for v in row[7].split()]
    # The prediction is the one frozen before the run; one repeat in --quick.
    assert predicted == pytest.approx(frozen_rate, abs=0.051), stdout[-3000:]
    assert len(measured) == len(ratios) == 1 and all(m > 0 for m in measured), stdout[-3000:]
    for value, ratio in zip(measured, ratios):
      assert ratio == pytest.approx(value / predicted, rel=2e-3, abs=1e-3), stdout[-3000:]
    assert row[8] == scaling_validate.band_verdict(ratios) == 'not resolved', stdout[-3000:]
  count = _COUNT.search(stdout)
  assert count, stdout[-3000:]
  met = sum(row[8] == 'met' for row in rows)
  assert (int(count.group(1)), int(count.group(2))) == (met, len(rows)), stdout[-3000:]


@pytest.mark.slow
def test_scaling_model_quick_calibrates_then_validates_a_loopback_cluster():
  stdout = run_quick('benchmarks.scaling_model')
  for name in ('ResNet-50 v1', 'shapes SSD'):
    assert name in stdout, stdout[-3000:]
  assert 'smallest M with step <= 110 % of compute' in stdout, stdout[-3000:]
  assert 'replicated all-reduce on one machine' in stdout, stdout[-3000:]
  assert re.search(r'^tables: assumed link figures .* not the calibrated ', stdout, re.M), (
      stdout[-3000:])
  # Calibration: the link probe, compute alone and 1 worker + 1 ps, then the file.
  assert _calibration_runs(stdout) == [
      'link probe, loopback (MB/s)', 'compute, 1 at once', '1 worker + 1 ps, async, loopback'], (
          stdout[-3000:])
  _assert_cpu_measured(re.search(_CALIBRATED % 'loopback', stdout, re.M), stdout)
  assert re.search(r'^wrote \S+scaling_params.json \(model version \d+\)$', stdout, re.M), (
      stdout[-3000:])
  _assert_validation(stdout, [(1, 2, 'async', 'loopback')])


@pytest.mark.slow
@pytest.mark.cluster
def test_scaling_model_quick_validates_across_namespaces_and_a_tc_limited_link():
  from tests import netns_fixture  # noqa: PLC0415  (imports TensorFlow)
  netns_fixture.skip_unless_available()
  stdout = run_quick('benchmarks.scaling_model', '--netns')
  # The namespaces calibrated (link probe and 1 worker + 1 ps; loopback is the other
  # test's); the rows are the namespace cluster with and without a 200 Mbit token
  # bucket on every link.
  assert _calibration_runs(stdout) == [
      'link probe, netns (MB/s)', 'compute, 1 at once', '1 worker + 1 ps, async, netns'], (
          stdout[-3000:])
  _assert_cpu_measured(re.search(_CALIBRATED % 'netns', stdout, re.M), stdout)
  _assert_validation(stdout, [(1, 2, 'async', 'netns'), (1, 2, 'async', 'netns tc 200 Mbit')])
  rates = {row[3]: float(row[4]) for row in _VALIDATION_ROW.findall(stdout)}
  # 200 Mbit is far below a veth link's rate: the limited link predicts less.
  assert rates['netns tc 200 Mbit'] < rates['netns'], stdout[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
