"""A lost ps costs only its own shard on the Estimator path too (issue 28 item 1).

Chief, worker and two ps as real processes on loopback ports
(tests/estimator/fault_task_main.py). ps 1, which does not hold the global
step, is killed -9 and restarted on its address: the chief restores only
ps 1's variables (from its snapshot on ps 0 or the checkpoint, whichever
is younger), ps 0 keeps its current values, so the
global step does not roll back, and training reaches max_steps.
"""

import os
import re
import signal
import sys

import pytest

from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster]

_MODULE = 'tests.estimator.fault_task_main'
_START_SECS = 150
_EXIT_SECS = 90
# One LoggingTensorHook line of the chief (log_step_count_steps=1): the step just run.
_STEP_RE = r'loss = [0-9.naif]+, step = (\d+)'


def _start(group, cluster, job, index, model_dir, name, max_steps):
  return group.start(name, cluster_util.tf_config(cluster, job, index), module=_MODULE,
                     args=['--model_dir=%s' % model_dir, '--max_steps=%d' % max_steps,
                           '--recovery_timeout_secs=180'])


def _chief_steps(chief):
  return [int(s) for s in re.findall(_STEP_RE, chief.output())]


def test_ps_without_the_global_step_killed_and_restarted_only_its_shard_is_restored(tmp_path):
  model_dir = str(tmp_path / 'model')
  max_steps = 1200
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=2, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = {}
    for job, index in (('ps', 0), ('ps', 1), ('chief', 0), ('worker', 0)):
      name = '%s%d' % (job, index)
      tasks[name] = _start(group, cluster, job, index, model_dir, name, max_steps)
    chief = tasks['chief0']
    lib.wait_until(lambda: any(s >= 100 for s in lib.checkpoint_steps(model_dir)), _START_SECS,
                   group, 'a checkpoint at step >= 100')
    lib.wait_until(lambda: 'step = ' in tasks['worker0'].output() or _chief_steps(chief),
                   _START_SECS, group, 'steps')
    os.killpg(tasks['ps1'].pid, signal.SIGKILL)
    group.wait(tasks['ps1'], timeout=30)
    remaining = {n: t for n, t in tasks.items() if n != 'ps1'}
    remaining['ps1_restarted'] = _start(group, cluster, 'ps', 1, model_dir, 'ps1_restarted',
                                        max_steps)
    codes = lib.wait_all(group, remaining, timeout=180 + _EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    output = chief.output()
    # From its snapshot on ps 0 (every 5 s by default) or from the checkpoint
    # (every 2 s here), whichever is of the later global step.
    assert re.search(r'restored the \d+ variables of /job:ps/task:1 from (?:its snapshot on '
                     r'/job:ps/task:0 \(global step \d+: [0-9.]+ s, \d+ steps old\)|'
                     r'\S*model\.ckpt-\d+(?: \(its snapshot on /job:ps/task:0 is of global '
                     r'step \d+, older\))?); kept the current values of /job:ps/task:0 '
                     r'\(\d+ variables\)', output), group.logs()
    match = re.search(r'recovered from a lost peer: restored global step (\d+), (\d+) step\(s\) '
                      r'lost \((?:[^()]+) was lost at global step (\d+)\)', output)
    assert match, group.logs()
    restored, steps_lost, lost_at = (int(g) for g in match.groups())
    # ps 0 kept the global step: nothing rolled back.
    assert steps_lost == 0 and restored >= lost_at, (restored, steps_lost, lost_at)
    steps = _chief_steps(chief)
    assert steps == sorted(steps), 'the global step went back: %s' % steps
  # README: max_steps .. max_steps + 2W - 1 on the Estimator path (W = 2; 1202 seen).
  assert max_steps <= lib.latest_checkpoint_step(model_dir) <= max_steps + 3


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
