"""`python -m trainer.train` across network namespaces: every task its own host.

Chief + 1 worker + 2 ps of the tiny classifier config of cluster_testlib, each
task in its own namespace with its own address on a private subnet
(`netns_network` fixture, deployment/netns.py), so every gRPC byte between
tasks crosses a real network stack, as between machines. Sync and async both
train to `num_steps`, every task exits 0, and the chief's final checkpoint is
at `num_steps` (async: at most one step more per training task, which may each
finish the step they were running). Skipped, with the reason, where network
namespaces cannot be created.
"""

import sys
import time

import pytest

from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

_HOSTS = ['chief0', 'worker0', 'ps0', 'ps1']
_STEPS = 30
_EXIT_SECS = 240


@pytest.mark.parametrize('sync', [True, False], ids=['sync', 'async'])
def test_chief_worker_two_ps_each_in_its_own_namespace(tmp_path, netns_network, sync):
  data = lib.write_colour_records(str(tmp_path / 'data'))
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=_STEPS, sync_replicas=sync,
                                     replicas_to_aggregate=2, log_every_n_steps=5)
  network = netns_network(_HOSTS, time_limit_secs=_EXIT_SECS + 60)
  cluster = cluster_util.netns_cluster(network)
  assert sorted(cluster) == ['chief', 'ps', 'worker']
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    assert sorted(tasks) == sorted(_HOSTS)
    deadline = time.time() + _EXIT_SECS
    codes = {name: group.wait(task, timeout=max(deadline - time.time(), 1))
             for name, task in sorted(tasks.items())}
  assert codes == {name: 0 for name in _HOSTS}, group.logs()
  step = lib.latest_checkpoint_step(train_dir)
  if sync:
    assert step == _STEPS, group.logs()
  else:
    # W = 2 training tasks: num_steps .. num_steps + W - 1 (README).
    assert _STEPS <= step <= _STEPS + 1, group.logs()
  # Both ps ended because the training tasks told them so over the subnet.
  for name in ('ps0', 'ps1'):
    assert 'every worker finished' in tasks[name].output(), group.logs()
  for name in ('chief0', 'worker0'):
    assert 'training finished at global step' in tasks[name].output(), group.logs()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
