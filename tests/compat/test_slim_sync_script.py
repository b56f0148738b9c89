"""A user's slim script with `--sync_replicas` ends on every task (compat fix learning.sync_stop).

`slim_sync_train_script.py` is shaped like research/slim's
`train_image_classifier.py --sync_replicas` on a TF 1 cluster: two worker
replicas (worker 0 the chief) and a ps that runs `server.join()`; it calls
tf_slim's own `slim.learning.train(..., sync_optimizer=opt)` with a plain
`tf.compat.v1.train.SyncReplicasOptimizer` and imports nothing of slimtrain.

Without the fix the chief's sync queue runner stays blocked after the last
step, so the chief's Supervisor waits out its 120 s grace period and the chief
exits 1 ("Coordinator stopped with threads still running"), and the ps serves
forever. With it every task exits 0, the chief within seconds of its last
step.
"""

import os
import re
import sys
import time

import pytest

from tests import cluster_util

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'slim_sync_train_script.py')
_STEPS = 12
# Well under the Supervisor's 120 s grace period that the hang waits out; a
# bound, not a speed measurement.
_END_BOUND_SECS = 30
_STEP_LINE = re.compile(r'global step (\d+):')


def _wait_noting_the_last_step(group, tasks, workers, timeout):
  """Waits for every task to exit.

  Returns:
    {task name: (exit code, seconds from the job's last step line to its exit)};
    the job's last step is the last `global step N` line any worker printed.
  """
  seen_lines, last_step_at, exited_at = {}, None, {}
  deadline = time.monotonic() + timeout
  while len(exited_at) < len(tasks) and time.monotonic() < deadline:
    for name in workers:
      lines = len(_STEP_LINE.findall(tasks[name].output()))
      if lines != seen_lines.get(name):
        seen_lines[name], last_step_at = lines, time.monotonic()
    for name, task in tasks.items():
      if name not in exited_at and task.poll() is not None:
        exited_at[name] = time.monotonic()
    time.sleep(0.1)
  assert len(exited_at) == len(tasks), ('still running after %ss: %s' % (
      timeout, sorted(set(tasks) - set(exited_at))), group.logs())
  assert last_step_at is not None, group.logs()
  return {name: (tasks[name].poll(), exited_at[name] - last_step_at) for name in tasks}


@pytest.mark.cluster
def test_slim_train_with_sync_replicas_ends_on_every_task(tmp_path):
  # A non-chief worker may first wait 30 s (the Supervisor's recovery wait)
  # for the chief to initialise, and the chief may train alone meanwhile: its
  # gradients can fill a whole round. So the bound counts from the job's last
  # step (either worker's), when every task is done training.
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  train_dir = str(tmp_path / 'train')
  with cluster_util.ProcessGroup(log_dir=str(tmp_path / 'logs')) as group:
    tasks = {}
    for job, index in (('ps', 0), ('worker', 1), ('worker', 0)):
      tasks['%s%d' % (job, index)] = group.start(
          '%s%d' % (job, index), cluster_util.tf_config(cluster, job, index), script=_SCRIPT,
          args=['--train_dir=%s' % train_dir, '--max_number_of_steps=%d' % _STEPS])
    ends = _wait_noting_the_last_step(group, tasks, ('worker0', 'worker1'), timeout=240)
    for name, (code, secs_after_last_step) in sorted(ends.items()):
      assert code == 0, (name, group.logs())
      assert secs_after_last_step < _END_BOUND_SECS, (name, secs_after_last_step, group.logs())
    for name in ('worker0', 'worker1'):
      assert 'TRAIN DONE' in tasks[name].output(), group.logs()
  with open(os.path.join(train_dir, 'checkpoint')) as state:
    assert 'model.ckpt-%d"' % _STEPS in state.read()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
