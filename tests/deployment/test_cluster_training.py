"""A real cluster on loopback: 1 ps + 2 workers launched with TF_CONFIG.

Checks that model_deploy puts the (resource) variables on the ps: the graph
says so, the partition graphs TensorFlow actually ran say so, the ps holds
initialised variables under their shared names while the workers hold none,
and both workers train the one shared model.
"""

import json
import sys

import pytest

from tests import cluster_util

_MODULE = 'tests.deployment.cluster_task_main'
_STEPS = 15


@pytest.mark.cluster
@pytest.mark.slow
def test_one_ps_two_workers(tmp_path):
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path)) as group:
    tasks = group.start_cluster(cluster, _MODULE,
                                args=['--steps=%d' % _STEPS, '--timeout=90'])
    assert sorted(tasks) == ['ps0', 'worker0', 'worker1']
    workers = [tasks['worker0'], tasks['worker1']]
    for worker in workers:
      assert group.wait(worker, timeout=240) == 0, group.logs()
    results = [json.loads(group.wait_for_output(w, r'^RESULT (.*)$', timeout=5).group(1))
               for w in workers]
  assert all(p.poll() is not None for p in group.processes)  # all killed

  for i, result in enumerate(results):
    assert result['worker_job_name'] == 'worker/task:%d' % i
    variables = result['variables']
    assert sorted(variables) == ['global_step', 'hidden/biases', 'hidden/weights',
                                 'output/biases', 'output/weights']
    for name, info in variables.items():
      assert info['op'] == 'VarHandleOp', name
      assert info['device'] == '/job:ps/task:0/device:CPU:0', name
    # What ran: every variable and every update on the ps.
    handles = [n for n in result['partition_nodes'] if n['op'] == 'VarHandleOp']
    assert handles, result['partition_nodes']
    for node in result['partition_nodes']:
      assert node['device'].startswith('/job:ps/replica:0/task:0/'), node
    # The worker process holds no copy of any variable; the ps holds them all.
    assert not any(result['initialized_on_worker']), result
    assert all(result['initialized_on_ps']), result
    # Training progressed on this worker, on the shared global step.
    losses = result['losses']
    assert len(losses) == _STEPS
    assert losses[-1] < losses[0]
    assert result['global_steps'] == sorted(result['global_steps'])
    assert result['final_global_step'] == 2 * _STEPS


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
