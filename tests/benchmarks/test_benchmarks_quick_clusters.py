"""Smoke test of the benchmarks that start clusters: `--quick` on loopback and netns.

The distributed benchmark and the scaling model's checks, split from
test_benchmarks_quick.py (same helpers, same rules: figures are checked to be
figures, never timed) so that their clusters run beside the single-process
benchmarks (one file is one unit of `make test`'s workers, one bazel target).
"""

import re
import sys

import pytest

from tests.benchmarks.quick_testlib import assert_figures, run_quick


@pytest.mark.slow
def test_distributed_quick_on_loopback_completes_and_prints_a_ratio():
  assert_figures(run_quick('benchmarks.distributed'))


@pytest.mark.slow
def test_scaling_model_prints_tables_and_checks_a_loopback_cluster():
  stdout = run_quick('benchmarks.scaling_model')
  for name in ('ResNet-50 v1', 'shapes SSD'):
    assert name in stdout, stdout[-3000:]
  assert 'smallest M with step <= 110 % of compute' in stdout, stdout[-3000:]
  assert 'replicated all-reduce on one machine' in stdout, stdout[-3000:]
  # 1 worker + 1 ps calibrated the per-step cost of a distributed step; 1 worker +
  # 2 ps ran and was compared with its prediction.
  assert re.search(r'^\| 1 \| 1 \| async \| loopback \| .* \| calibration \|$', stdout,
                   re.M), stdout[-3000:]
  assert re.search(r'calibrated on 1 worker \+ 1 ps async: loopback [0-9.]+ ms', stdout), (
      stdout[-3000:])
  assert '| 1 | 2 | async |' in stdout, stdout[-3000:]
  assert 'ratio predicted/measured within +-20 %' in stdout, stdout[-3000:]
  # Each checked row: predicted/measured is the predicted rate over the median
  # of the measured ones, which lies inside their printed range.
  rows = re.findall(r'^\| \d+ \| \d+ \| (?:a?sync) \| \w+ \| ([0-9.]+) \| .*? \| '
                    r'([0-9.]+) \(([0-9.]+)\.\.([0-9.]+)\) \| ([0-9.]+) \|', stdout, re.M)
  assert rows, stdout[-3000:]
  for predicted, measured, low, high, ratio in (map(float, row) for row in rows):
    assert 0 < low <= measured <= high, stdout[-3000:]
    assert ratio == pytest.approx(predicted / measured, abs=0.006), stdout[-3000:]


@pytest.mark.slow
@pytest.mark.cluster
def test_distributed_quick_on_network_namespaces():
  from tests import netns_fixture  # noqa: PLC0415  (imports TensorFlow)
  netns_fixture.skip_unless_available()
  stdout = run_quick('benchmarks.distributed', '--netns')
  for workers in ('1 worker + 1 ps, async', '2 workers + 1 ps, async', '2 workers + 1 ps, sync'):
    assert 'ratio %s, netns / loopback' % workers in stdout, stdout[-3000:]
  assert 'steps per worker inside' in stdout, stdout[-3000:]


@pytest.mark.slow
@pytest.mark.cluster
def test_scaling_model_quick_checks_a_cluster_across_network_namespaces():
  from tests import netns_fixture  # noqa: PLC0415  (imports TensorFlow)
  netns_fixture.skip_unless_available()
  stdout = run_quick('benchmarks.scaling_model', '--netns')
  # The link between two namespaces was measured, and the same cluster ran on
  # loopback and across namespaces, each compared with its own prediction.
  assert re.search(r'^netns: [0-9.]+ GB/s, [0-9]+ us round trip', stdout, re.M), stdout[-3000:]
  assert '| 1 | 2 | async | loopback |' in stdout, stdout[-3000:]
  assert '| 1 | 2 | async | netns |' in stdout, stdout[-3000:]
  assert 'within +-20 %: ' in stdout and 'of 2 configurations' in stdout, stdout[-3000:]
  assert re.search(r'calibrated on 1 worker \+ 1 ps async: loopback [0-9.]+ ms, '
                   r'netns [0-9.]+ ms', stdout), stdout[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
