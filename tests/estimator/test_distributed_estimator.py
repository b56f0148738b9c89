"""A real train_and_evaluate cluster on loopback: chief + worker + ps + evaluator.

Each task is its own process (tests/estimator/distributed_task_main.py) with
its own TF_CONFIG. Training ends by early stopping only (max_steps is huge),
which checks the fixes over tf.estimator: the worker stops through the STOP
variable it polls on the ps, the evaluator exits after evaluating the
checkpoint that carries STOP (and does the final export), and the ps exits
once the chief and every worker told it they finished. All four must
exit 0.
"""

import json
import os
import sys

import pytest

from tests import cluster_util

_MODULE = 'tests.estimator.distributed_task_main'


def _result(group, task):
  match = group.wait_for_output(task, r'^RESULT (.*)$', timeout=5)
  return json.loads(match.group(1))


@pytest.mark.cluster
@pytest.mark.slow
def test_chief_worker_ps_evaluator_all_exit(tmp_path):
  model_dir = str(tmp_path / 'model')
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  args = ['--model_dir=%s' % model_dir, '--stop_after_step=20']
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = group.start_cluster(cluster, _MODULE, args=args)
    # The evaluator is not part of the cluster it reads TF_CONFIG from.
    tasks['evaluator0'] = group.start(
        'evaluator0', cluster_util.tf_config(cluster, 'evaluator', 0), module=_MODULE,
        args=args)
    for name in ('chief0', 'worker0', 'evaluator0', 'ps0'):
      assert group.wait(tasks[name], timeout=150) == 0, group.logs()
    chief, worker, evaluator = (_result(group, tasks[n])
                                for n in ('chief0', 'worker0', 'evaluator0'))
    logs = {name: task.output() for name, task in tasks.items()}

  # Early stopping ended training long before max_steps, with STOP checkpointed.
  final_checkpoint = chief['latest_checkpoint']
  final_step = int(final_checkpoint.rsplit('-', 1)[1])
  assert 20 <= final_step < 100000
  assert chief['stop_flag'] is True
  assert 'Requesting early stopping at global step' in logs['chief0']
  # The worker stopped because it saw the chief's STOP variable on the ps.
  assert 'Early stopping requested, suspending run.' in logs['worker0'], logs['worker0']
  assert worker['task_type'] == 'worker'
  # The evaluator evaluated the final checkpoint, exported it, and returned.
  assert evaluator['global_step'] == final_step
  (export,) = evaluator['exports']
  assert os.path.dirname(export) == os.path.join(model_dir, 'export', 'final')
  assert os.path.isfile(os.path.join(export, 'saved_model.pb'))
  assert 'Exiting evaluation, the final checkpoint' in logs['evaluator0']
  # The ps was released by the chief (not killed).
  assert 'every worker finished; exiting' in logs['ps0'], logs['ps0']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
