"""A chief + worker + ps `train_and_evaluate` cluster whose training input ends.

Each worker's dataset has no `.repeat()`: the chief and the worker each stop
when their own input ends (OutOfRange), as in tf.estimator, instead of
crashing after the chief's final checkpoint. Every task must exit 0, the
last checkpoint must hold every step both workers ran, and the ps must be
released by the chief.
"""

import json
import re
import sys

import pytest

from tests import cluster_util

_MODULE = 'tests.estimator.finite_input_task_main'
NUM_BATCHES = 30


def _result(group, task):
  match = group.wait_for_output(task, r'^RESULT (.*)$', timeout=5)
  return json.loads(match.group(1))


@pytest.mark.cluster
@pytest.mark.parametrize('max_steps', [None, 100000])
def test_chief_worker_ps_end_with_their_input(tmp_path, max_steps):
  model_dir = str(tmp_path / 'model')
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  args = ['--model_dir=%s' % model_dir, '--num_batches=%d' % NUM_BATCHES]
  if max_steps is not None:
    args.append('--max_steps=%d' % max_steps)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = group.start_cluster(cluster, _MODULE, args=args)
    for name in ('chief0', 'worker0', 'ps0'):
      assert group.wait(tasks[name], timeout=150) == 0, group.logs()
    chief, worker = (_result(group, tasks[n]) for n in ('chief0', 'worker0'))
    logs = {name: task.output() for name, task in tasks.items()}

  step = int(chief['latest_checkpoint'].rsplit('-', 1)[1])
  # The chief's final checkpoint holds its own 30 steps and whichever of the
  # async worker's 30 ran before it (all of them if the worker started as fast).
  assert NUM_BATCHES <= step <= 2 * NUM_BATCHES, logs['chief0']
  # In a cluster only an evaluator task evaluates, as in tf.estimator.
  assert chief['global_step'] is None and worker['global_step'] is None
  assert worker['task_type'] == 'worker'
  for name in ('chief0', 'worker0'):
    assert 'the input ended; training stops here' in logs[name], logs[name]
    assert 'Traceback' not in logs[name], logs[name]
    # Before the fix the swallowed OutOfRange lost the loss and the step count.
    assert 'made no steps' not in logs[name], logs[name]
    assert re.search(r'Loss for final step: \d', logs[name]), logs[name]
  assert 'every worker finished; exiting' in logs['ps0'], logs['ps0']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
