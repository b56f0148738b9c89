"""Smoke test: every benchmark's `--quick` mode runs to the end and prints its figures.

How fast anything is stays unchecked (a timed unit test on a shared machine
would only be flaky; the benchmarks are measured by hand and recorded in
benchmarks/RESULTS.md). What is checked is that the printed figures are
figures: every ratio line carries a positive finite ratio and one positive
ratio per repeat, every rate table's min <= median <= max, and the scaling
check's predicted/measured column is its predicted rate over its measured
median. Each script runs in its own process, as a user runs it.
"""

import re
import subprocess
import sys

import pytest

from tests import fork_server
from tests.benchmarks import quick_testlib

REPO_ROOT = quick_testlib.REPO_ROOT
run_quick = quick_testlib.run_quick
assert_figures = quick_testlib.assert_figures


@pytest.mark.slow
@pytest.mark.parametrize('module', [
    'benchmarks.input_pipeline',
    'benchmarks.input_fn_feeding',
    'benchmarks.overhead',
    'benchmarks.overhead_paired',
    'benchmarks.clone_scaling',
    'benchmarks.shard_snapshots',
])
def test_quick_mode_completes_and_prints_a_ratio(module):
  stdout = run_quick(module)
  assert_figures(stdout)


@pytest.mark.slow
def test_gpu_throughput_quick_runs_fp32_mixed_precision_and_xla():
  stdout = run_quick('benchmarks.gpu_throughput')
  for variant in ('fp32', 'mixed', 'xla'):
    assert re.search(r'^\| %s \| NHWC \| 2 \| [0-9.]+ \| [0-9.]+ \|' % variant, stdout,
                     re.M), stdout[-3000:]
    assert 'ratio slimtrain/raw %s NHWC batch 2 = ' % variant in stdout, stdout[-3000:]
  for variant in ('mixed', 'xla'):
    assert 'ratio raw %s/fp32 NHWC batch 2 [speed-up] = ' % variant in stdout, stdout[-3000:]
  assert 'replicated' in stdout, stdout[-3000:]
  assert_figures(stdout)


@pytest.mark.slow
def test_overhead_profile_traces_every_graph_variant():
  stdout = run_quick('benchmarks.overhead', '--profile')
  for label in ('(a) trainer.train', '(c) Session loop, BatchQueue', '(b) Estimator.train',
                "(c') Session loop, tf.data"):
    assert label in stdout, stdout[-3000:]
  assert 'op types run per step by (a) beyond (c):' in stdout, stdout[-3000:]
  # (a) checks the loss and the global gradient norm for NaN/Inf every step; the bare loop
  # checks neither.
  assert 'CheckNumerics x2' in stdout, stdout[-3000:]
  assert '(a) numerics checks' in stdout, stdout[-3000:]


@pytest.mark.slow
def test_overhead_splits_the_trainer_gap_into_graph_and_runtime():
  stdout = run_quick('benchmarks.overhead', '--variants=a_nocheck,c_graph,c',
                      '--models=small_cnn')
  assert "(g) Session loop over (a')'s graph" in stdout, stdout[-3000:]
  assert "ratio (a')/(g) [the trainer's runtime" in stdout, stdout[-3000:]
  assert "ratio (g)/(c) [the trainer's graph beyond the bare one]" in stdout, stdout[-3000:]
  assert_figures(stdout)


@pytest.mark.slow
def test_clone_scaling_profile_reports_the_aggregation_time():
  stdout = run_quick('benchmarks.clone_scaling', '--profile')
  assert 'aggregation time per step' in stdout, stdout[-3000:]
  assert '| parameter_server | 2 |' in stdout, stdout[-3000:]


@pytest.mark.parametrize('module', [
    'benchmarks.overhead', 'benchmarks.clone_scaling', 'benchmarks.distributed',
    'benchmarks.gpu_throughput', 'benchmarks.scaling_model'])
def test_help_describes_quick(module):
  result = fork_server.run([sys.executable, '-m', module, '--helpfull'], cwd=REPO_ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120, check=False, env=quick_testlib.quick_env())
  # absl exits 1 after printing the help, so only the text is checked.
  assert '--quick' in result.stdout, result.stderr[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
