"""The GPU check's --dry-run: every step runs on the CPU and lands in the summary.

The check (benchmarks/gpu_check.py) is meant for the rare minutes of a lent
GPU machine; running it here with tiny sizes on virtual CPU devices keeps
every step's code working between loans. Figures are not judged (a CPU says
nothing about GPUs); that each step ran, passed where a CPU can pass, and
reported its numbers is.
"""

import json
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO_ROOT)

from benchmarks import gpu_check  # noqa: E402


@pytest.mark.slow
def test_dry_run_runs_every_step_and_writes_the_summary(tmp_path):
  out = tmp_path / 'gpu_check'
  result = subprocess.run(
      [os.path.join(REPO_ROOT, 'benchmarks', 'gpu_check.sh'), '--dry-run',
       '--output_dir=%s' % out], cwd=str(tmp_path), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True, timeout=2400, check=False,
      env=dict(os.environ, PYTHON=sys.executable))
  summary = json.loads((out / 'gpu_check.json').read_text())
  steps = summary['steps']
  assert list(steps) == list(gpu_check.STEP_NAMES), result.stdout[-3000:]
  for name, record in steps.items():
    assert record['status'] == 'pass', (name, record, (out / record['log']).read_text()[-3000:])
    assert record['figures'] and (out / record['log']).exists(), name
  assert result.returncode == 0 and summary['passed'], result.stdout[-3000:]

  tests = steps['gpu_tests']['figures']['marked gpu']
  assert tests['skipped'] == 1 and 'no GPU' in tests['skip_reasons'][0], tests
  for mode in ('parameter_server', 'replicated'):
    clones = steps['multi_clone']['figures'][mode]
    assert clones['finite'] and clones['decreasing'], clones
    assert clones['global_step'] == steps['multi_clone']['figures']['steps'], clones
  assert steps['multi_clone']['figures']['replicated']['all_reduce'] == 'add_n'
  assert steps['multi_clone']['figures']['devices'] == ['/device:CPU:0', '/device:CPU:1']
  mixed = steps['mixed_precision']['figures']
  assert mixed['skipped_step']['variables_unchanged'], mixed['skipped_step']
  assert mixed['skipped_step']['loss_scale_after'] < mixed['skipped_step']['loss_scale_before']
  assert mixed['relative_difference'] <= mixed['tolerance'], mixed
  # fp32 leaves out the update of the run mixed precision skipped; on a CPU the
  # float16 rewrite changes nothing, so both runs take the same updates exactly.
  injected = mixed['skipped_step']['injected_at_run']
  assert mixed['fp32_losses'][injected - 1] is None, mixed
  assert mixed['relative_difference'] < 1e-6, mixed
  medians = steps['input_pipeline']['figures']['median_examples_per_sec']
  assert set(medians) == {'queue_fed', 'compute_only', 'dequeue_only'}
  assert all(v > 0 for v in medians.values()), medians
  cells = steps['throughput']['figures']['cells']
  assert [c['variant'] for c in cells] == ['fp32', 'mixed', 'xla', 'mixed_xla'], cells
  for cell in cells:
    assert len(cell['slimtrain_img_per_sec']) == len(cell['raw_img_per_sec']) == 5, cell
    assert cell['slimtrain_median'] > 0 and cell['raw_median'] > 0, cell

  report = (out / 'gpu_check.md').read_text()
  assert report.startswith('# GPU check: dry run on the CPU'), report[:300]
  for name in gpu_check.STEP_NAMES:
    assert '| %s | pass |' % name in report or ('%s | pass |' % name) in report, report
  assert '| mixed_xla | NHWC | 2 |' in report, report


def test_steps_subset_and_bad_step_names():
  args = gpu_check.parse_args(['--steps=env,throughput', '--output_dir=x'])
  assert args.steps == ['env', 'throughput'] and not args.dry_run
  assert gpu_check.parse_args(['--dry-run']).dry_run
  with pytest.raises(SystemExit):
    gpu_check.parse_args(['--steps=env,benchmarks'])


def test_markdown_of_a_failed_and_a_skipped_step():
  summary = {'started_utc': '2026-11-26T08:00:00+00:00', 'dry_run': False,
             'total_budget_s': 540, 'seconds': 12.0, 'passed': False, 'steps': {
                 'env': {'number': None, 'title': 'environment', 'log': 'env.log',
                         'budget_s': 60, 'seconds': 9.0, 'status': 'fail',
                         'figures': {'tensorflow': '2.21.0', 'is_cuda_build': True,
                                     'physical_gpus': [], 'nvidia_smi': None},
                         'notes': 'pass: TensorFlow sees a GPU'},
                 'gpu_tests': {'number': 1, 'title': 'GPU tests', 'log': 'gpu_tests.log',
                               'budget_s': 120, 'status': 'skip',
                               'notes': 'TensorFlow sees no GPU: not run'}}}
  report = gpu_check.markdown(summary)
  assert report.startswith('# GPU check: no GPU found'), report
  assert '| env | fail | 9 / 60 | TF 2.21.0' in report, report
  assert '| 1 gpu_tests | skip | n/a / 120 | TensorFlow sees no GPU' in report, report
  assert 'overall: FAILED' in report


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
