"""Restart policies, replica spec checks, operator-shaped TF_CONFIG (deployment/replicas.py)."""

import json
import sys

import pytest

from deployment import cluster as cluster_lib
from deployment import ports
from deployment import replicas


@pytest.mark.parametrize('policy, restarted_codes', [
    ('Never', []),
    ('OnFailure', [1, 2, 127, 128, 129, 137, 143, 255, -9]),
    ('ExitCode', [128, 129, 137, 255, -9]),
    ('Always', [0, 1, 2, 127, 128, 129, 137, 143, 255, -9]),
])
def test_should_restart_follows_the_tfjob_policies(policy, restarted_codes):
  for code in (0, 1, 2, 127, 128, 129, 137, 143, 255, -9):
    assert replicas.should_restart(policy, code) == (code in restarted_codes), (policy, code)


def _spec(replica_type, count=1, **kwargs):
  return replicas.ReplicaSpec(replica_type, count, ['prog'], **kwargs)


@pytest.mark.parametrize('specs, message', [
    ([_spec('ps')], 'needs at least one chief, master or worker'),
    ([_spec('chief'), _spec('master')], 'chief or a master, not both'),
    ([_spec('chief', 2)], r"'chief': replicas must be 0 or 1, got 2"),
    ([_spec('evaluator', 2), _spec('worker')], r"'evaluator': replicas must be 0 or 1"),
    ([_spec('worker', -1)], 'replicas must be an integer >= 0, got -1'),
    ([_spec('worker', True)], 'replicas must be an integer >= 0, got True'),
    ([_spec('worker'), _spec('worker')], "'worker' is given twice"),
    ([_spec('trainer')], "'trainer' is unknown"),
    ([_spec('worker', restart_policy='Sometimes')], "restart policy must be one of Never, "
     "OnFailure, ExitCode, Always, got 'Sometimes'"),
    ([replicas.ReplicaSpec('worker', 1, [])], "'worker' has no command"),
])
def test_check_specs_names_the_problem(specs, message):
  with pytest.raises(ValueError, match=message):
    replicas.check_specs(specs, source='job.yaml')


def test_success_task_is_the_chief_or_worker_0():
  assert replicas.success_task([_spec('worker', 2), _spec('chief')]) == ('chief', 0)
  assert replicas.success_task([_spec('master'), _spec('worker', 2)]) == ('master', 0)
  assert replicas.success_task([_spec('worker', 2), _spec('ps')]) == ('worker', 0)
  assert replicas.success_task([_spec('chief', 0), _spec('worker', 1)]) == ('worker', 0)


def test_tf_config_has_the_operator_shape_and_cluster_config_accepts_it():
  specs = [_spec('chief'), _spec('worker', 2), _spec('ps'), _spec('evaluator')]
  assert replicas.num_cluster_tasks(specs) == 5
  addresses = ports.loopback_addresses(replicas.num_cluster_tasks(specs))
  assert len(set(addresses)) == 5
  cluster = replicas.local_cluster(specs, iter(addresses))
  # The evaluator is listed too, as the training operator lists it.
  assert cluster == {'chief': addresses[:1], 'worker': addresses[1:3], 'ps': addresses[3:4],
                     'evaluator': addresses[4:]}
  expected_chief = {'chief': True, 'worker': False, 'ps': False, 'evaluator': False}
  for task_type, count in (('chief', 1), ('worker', 2), ('ps', 1), ('evaluator', 1)):
    for index in range(count):
      text = replicas.tf_config(cluster, task_type, index)
      assert json.loads(text) == {'cluster': cluster,
                                  'task': {'type': task_type, 'index': index},
                                  'environment': 'cloud'}
      config = cluster_lib.ClusterConfig.from_tf_config({'TF_CONFIG': text})
      assert (config.task_type, config.task_index) == (task_type, index)
      assert config.is_chief == (expected_chief[task_type] and index == 0)
      assert config.is_evaluator == (task_type == 'evaluator')
      if task_type != 'evaluator':
        assert config.num_worker_replicas == 3 and config.num_ps_tasks == 1
        assert config.task_address == cluster[task_type][index]
        assert sorted(config.cluster_spec.jobs) == ['chief', 'ps', 'worker']


def test_cluster_config_accepts_operator_service_names():
  # What the training operator injects on Kubernetes (replica types lowercased).
  cluster = {'chief': ['shapes-chief-0.ml.svc:2222'],
             'worker': ['shapes-worker-0.ml.svc:2222', 'shapes-worker-1.ml.svc:2222'],
             'ps': ['shapes-ps-0.ml.svc:2222']}
  text = json.dumps({'cluster': cluster, 'task': {'type': 'worker', 'index': 1},
                     'environment': 'cloud'})
  config = cluster_lib.ClusterConfig.from_tf_config({'TF_CONFIG': text})
  assert config.master == 'grpc://shapes-worker-1.ml.svc:2222'
  assert config.worker_job_name == 'worker/task:1'
  evaluator = cluster_lib.ClusterConfig.from_tf_config({'TF_CONFIG': json.dumps(
      {'cluster': cluster, 'task': {'type': 'evaluator', 'index': 0},
       'environment': 'cloud'})})
  assert evaluator.is_evaluator and evaluator.master == ''


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
