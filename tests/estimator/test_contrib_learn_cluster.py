"""contrib's `delay_workers_by_global_step` on a real cluster: chief + 2 workers + ps.

Each task runs tests/estimator/contrib_learn_task_main.py (a contrib script
with its imports changed) under its own TF_CONFIG. Worker i waits for global
step int(8000 ln(i + 1)), at most train_steps (60): worker 0 starts at once;
worker 1 waits for step 60, when training is over, so it trains at most one
step, and neither waits a number of seconds. Every task exits 0.
"""

import json
import sys

import pytest

from tests import cluster_util

pytestmark = [pytest.mark.cluster]

_MODULE = 'tests.estimator.contrib_learn_task_main'


def _result(group, task):
  match = group.wait_for_output(task, r'^RESULT (.*)$', timeout=5)
  return json.loads(match.group(1))


@pytest.mark.slow
def test_workers_wait_for_their_global_step(tmp_path):
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1, chief=True)
  args = ['--model_dir=%s' % (tmp_path / 'model'), '--train_steps=60']
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = group.start_cluster(cluster, _MODULE, args=args)
    for name in ('chief0', 'worker0', 'worker1', 'ps0'):
      assert group.wait(tasks[name], timeout=240) == 0, group.logs()
    results = {name: _result(group, tasks[name]) for name in ('chief0', 'worker0', 'worker1')}
    logs = {name: task.output() for name, task in tasks.items()}
  assert 'worker 0 starts at global step 0' in logs['worker0'], logs['worker0']
  assert 'worker 1 starts at global step 60' in logs['worker1'], logs['worker1']
  for name in ('worker0', 'worker1'):
    assert 'secs before starting training' not in logs[name], logs[name]
  assert results['worker1']['steps'] <= 1, results
  assert results['chief0']['steps'] + results['worker0']['steps'] >= 59, results


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
