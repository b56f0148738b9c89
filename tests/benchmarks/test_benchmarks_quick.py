"""Smoke test: every benchmark's `--quick` mode runs to the end and prints a ratio.

The numbers are not checked (a timed unit test on a shared machine would only
be flaky); the benchmarks are measured by hand and recorded in
benchmarks/RESULTS.md. Each script runs in its own process, as a user runs it.
"""

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_quick(module, *extra_args, timeout=300):
  """Runs `python -m module --quick`; returns its stdout (fails on a non-zero exit)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
  env['PYTHONPATH'] = os.pathsep.join(
      [REPO_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p])
  result = subprocess.run([sys.executable, '-m', module, '--quick', *extra_args],
                          cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
  assert result.returncode == 0, '%s --quick failed:\n%s\n%s' % (
      module, result.stdout[-3000:], result.stderr[-5000:])
  return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize('module', [
    'benchmarks.input_pipeline',
    'benchmarks.overhead',
    'benchmarks.clone_scaling',
    'benchmarks.distributed',
    'benchmarks.gpu_throughput',
])
def test_quick_mode_completes_and_prints_a_ratio(module):
  stdout = _run_quick(module)
  assert 'ratio' in stdout, stdout[-3000:]


@pytest.mark.slow
def test_overhead_profile_traces_every_graph_variant():
  stdout = _run_quick('benchmarks.overhead', '--profile')
  for label in ('(a) trainer.train', '(c) Session loop, BatchQueue', '(b) Estimator.train',
                "(c') Session loop, tf.data"):
    assert label in stdout, stdout[-3000:]
  assert 'op types run per step by (a) beyond (c):' in stdout, stdout[-3000:]
  # (a) checks the loss and the global gradient norm for NaN/Inf every step; the bare loop
  # checks neither.
  assert 'CheckNumerics x2' in stdout, stdout[-3000:]


@pytest.mark.slow
@pytest.mark.cluster
def test_distributed_quick_on_network_namespaces():
  from tests import netns_fixture  # noqa: PLC0415  (imports TensorFlow)
  netns_fixture.skip_unless_available()
  stdout = _run_quick('benchmarks.distributed', '--netns')
  for workers in ('1 worker + 1 ps, async', '2 workers + 1 ps, async', '2 workers + 1 ps, sync'):
    assert 'ratio %s, netns / loopback' % workers in stdout, stdout[-3000:]
  assert 'steps per worker inside' in stdout, stdout[-3000:]


@pytest.mark.parametrize('module', [
    'benchmarks.overhead', 'benchmarks.clone_scaling', 'benchmarks.distributed',
    'benchmarks.gpu_throughput'])
def test_help_describes_quick(module):
  result = subprocess.run([sys.executable, '-m', module, '--helpfull'], cwd=REPO_ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=120, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES=''))
  # absl exits 1 after printing the help, so only the text is checked.
  assert '--quick' in result.stdout, result.stderr[-3000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
