"""RunConfig: tf.estimator 2.15 defaults, validation errors, replace() and TF_CONFIG."""

import copy
import json
import re
import sys

import pytest
import tensorflow as tf

from deployment import model_deploy
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

CLUSTER = {'chief': ['host0:2222'], 'worker': ['host1:2222', 'host2:2222'],
           'ps': ['host3:2222', 'host4:2222']}


@pytest.fixture(autouse=True)
def no_tf_config(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)


def _set_tf_config(monkeypatch, **tf_config):
  monkeypatch.setenv('TF_CONFIG', json.dumps(tf_config))


def test_defaults():
  config = tfe.RunConfig()
  assert config.model_dir is None and config.tf_random_seed is None
  assert config.save_summary_steps == 100
  assert config.save_checkpoints_secs == 600 and config.save_checkpoints_steps is None
  assert config.keep_checkpoint_max == 5
  assert config.keep_checkpoint_every_n_hours == 10000
  assert config.log_step_count_steps == 100
  assert config.session_config is None
  assert config.session_creation_timeout_secs == 7200
  assert config.checkpoint_save_graph_def is True
  assert config.num_clones == 1 and config.clone_on_cpu is False
  # Local process.
  assert (config.task_type, config.task_id, config.is_chief) == ('worker', 0, True)
  assert (config.num_worker_replicas, config.num_ps_replicas) == (1, 0)
  assert config.master == '' and config.evaluation_master == ''
  assert config.cluster_spec.as_dict() == {}
  assert config.global_id_in_cluster == 0


def test_checkpoint_cadence():
  config = tfe.RunConfig(save_checkpoints_steps=10)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (10, None)
  config = tfe.RunConfig(save_checkpoints_secs=30)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, 30)
  config = tfe.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (None, None)
  with pytest.raises(ValueError, match='^`save_checkpoints_steps` and `save_checkpoints_secs` '
                     'cannot be both set.$'):
    tfe.RunConfig(save_checkpoints_steps=10, save_checkpoints_secs=30)


@pytest.mark.parametrize('kwargs, message', [
    ({'model_dir': ''}, 'model_dir should be non-empty'),
    ({'save_summary_steps': -1}, 'save_summary_steps should be >= 0'),
    ({'save_checkpoints_steps': -1}, 'save_checkpoints_steps should be >= 0'),
    ({'save_checkpoints_secs': -1}, 'save_checkpoints_secs should be >= 0'),
    ({'session_config': {}}, 'session_config must be instance of ConfigProto'),
    ({'keep_checkpoint_max': -1}, 'keep_checkpoint_max should be >= 0'),
    ({'keep_checkpoint_every_n_hours': 0}, 'keep_checkpoint_every_n_hours should be > 0'),
    ({'log_step_count_steps': -1}, 'log_step_count_steps should be >= 0'),
    ({'tf_random_seed': 1.5}, 'tf_random_seed must be integer.'),
    ({'experimental_max_worker_delay_secs': 1.5},
     'experimental_max_worker_delay_secs must be an integer if set.'),
    ({'session_creation_timeout_secs': 0}, 'session_creation_timeout_secs should be > 0'),
    ({'protocol': 'http'}, 'protocol should be grpc or grpc+verbs'),
    ({'device_fn': lambda x: ''}, 'device_fn must be callable with exactly one argument "op".'),
    ({'device_fn': 'cpu'}, 'device_fn must be callable with exactly one argument "op".'),
    ({'num_clones': 0}, 'num_clones must be an integer >= 1, got 0'),
    ({'train_distribute': object()}, 'train_distribute must be a tf.distribute strategy'),
])
def test_validation_errors(kwargs, message):
  with pytest.raises(ValueError, match='^' + re.escape(message)):
    tfe.RunConfig(**kwargs)


def test_device_fn_with_op_argument_is_accepted():
  def device_fn(op):
    return '/cpu:0' if op else ''
  assert tfe.RunConfig(device_fn=device_fn).device_fn is device_fn


def test_replace():
  config = tfe.RunConfig(model_dir='/tmp/a', save_checkpoints_steps=10)
  new = config.replace(model_dir='/tmp/b', keep_checkpoint_max=0)
  assert (new.model_dir, new.keep_checkpoint_max) == ('/tmp/b', 0)
  assert (config.model_dir, config.keep_checkpoint_max) == ('/tmp/a', 5)
  new = config.replace(save_checkpoints_secs=5)
  assert (new.save_checkpoints_steps, new.save_checkpoints_secs) == (None, 5)
  new = new.replace(save_checkpoints_steps=7)
  assert (new.save_checkpoints_steps, new.save_checkpoints_secs) == (7, None)
  with pytest.raises(ValueError, match=r"^Replacing task_type is not supported\. Allowed "
                     r"properties are \['model_dir', 'tf_random_seed'"):
    config.replace(task_type='ps')
  with pytest.raises(ValueError, match='cannot be both set'):
    config.replace(save_checkpoints_steps=1, save_checkpoints_secs=1)
  with pytest.raises(ValueError, match='save_summary_steps should be >= 0'):
    config.replace(save_summary_steps=-5)
  assert config.replace(num_clones=3).num_clones == 3


def test_deepcopy_shares_cluster_but_copies_session_config():
  config = tfe.RunConfig(session_config=tf.compat.v1.ConfigProto(log_device_placement=True))
  clone = copy.deepcopy(config)
  assert clone.cluster is config.cluster
  assert clone.session_config == config.session_config
  assert clone.session_config is not config.session_config


def test_chief_worker_ps_evaluator(monkeypatch):
  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'chief', 'index': 0})
  config = tfe.RunConfig()
  assert (config.task_type, config.task_id, config.is_chief) == ('chief', 0, True)
  assert (config.num_worker_replicas, config.num_ps_replicas) == (3, 2)
  assert config.master == 'grpc://host0:2222'
  assert config.cluster_spec.as_dict() == CLUSTER
  assert config.global_id_in_cluster == 0
  assert list(config.session_config.device_filters) == ['/job:ps', '/job:chief']
  assert config.session_config.allow_soft_placement

  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'worker', 'index': 1})
  config = tfe.RunConfig()
  assert (config.task_type, config.task_id, config.is_chief) == ('worker', 1, False)
  assert config.master == 'grpc://host2:2222'
  assert config.global_id_in_cluster == 2
  assert list(config.session_config.device_filters) == ['/job:ps', '/job:worker/task:1']

  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'ps', 'index': 1})
  config = tfe.RunConfig()
  assert (config.task_type, config.is_chief, config.global_id_in_cluster) == ('ps', False, 4)

  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'evaluator', 'index': 0},
                 eval_session_master='grpc://evalhost:1')
  config = tfe.RunConfig()
  assert (config.task_type, config.is_chief) == ('evaluator', False)
  assert config.cluster_spec.as_dict() == {} and config.master == ''
  assert (config.num_worker_replicas, config.num_ps_replicas) == (0, 0)
  assert config.evaluation_master == 'grpc://evalhost:1'
  assert config.session_config is None


def test_operator_tf_config_lists_the_evaluator_in_the_cluster(monkeypatch):
  # The training operator's TF_CONFIG: the evaluator is in every pod's "cluster".
  cluster = dict(CLUSTER, evaluator=['host5:2222'])
  for task_type, index, global_id in (('chief', 0, 0), ('worker', 1, 2), ('ps', 1, 4)):
    _set_tf_config(monkeypatch, cluster=cluster, task={'type': task_type, 'index': index},
                   environment='cloud')
    config = tfe.RunConfig()
    assert config.cluster_spec.as_dict() == CLUSTER   # the training cluster only
    assert (config.num_worker_replicas, config.num_ps_replicas) == (3, 2)
    assert config.global_id_in_cluster == global_id
  _set_tf_config(monkeypatch, cluster=cluster, task={'type': 'evaluator', 'index': 0},
                 environment='cloud')
  config = tfe.RunConfig()
  assert (config.task_type, config.cluster_spec.as_dict(), config.master) == (
      'evaluator', {}, '')


def test_one_node_cluster_and_session_master(monkeypatch):
  _set_tf_config(monkeypatch, cluster={'chief': ['host0:2222']}, task={'type': 'chief',
                                                                     'index': 0})
  config = tfe.RunConfig()
  assert config.master == '' and config.is_chief and config.num_worker_replicas == 1
  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'worker', 'index': 0},
                 session_master='grpc://elsewhere:1')
  assert tfe.RunConfig().master == 'grpc://elsewhere:1'


def test_master_style_cluster(monkeypatch):
  cluster = {'master': ['h0:1'], 'worker': ['h1:1'], 'ps': ['h2:1']}
  _set_tf_config(monkeypatch, cluster=cluster, task={'type': 'master', 'index': 0})
  config = tfe.RunConfig()
  assert config.is_chief and config.num_worker_replicas == 2
  _set_tf_config(monkeypatch, cluster=cluster, task={'type': 'evaluator', 'index': 0})
  with pytest.raises(ValueError, match=r'TF_CONFIG\["task"\]\["type"\] cannot be "evaluator"'):
    tfe.RunConfig()


@pytest.mark.parametrize('tf_config, match', [
    ({'cluster': CLUSTER, 'task': {'type': 'worker', 'index': 2}},
     r'TF_CONFIG\["task"\]\["index"\] is out of range'),
    ({'cluster': CLUSTER, 'task': {'index': 0}}, r'TF_CONFIG\["task"\] must set "type"'),
    ({'cluster': CLUSTER, 'task': {'type': 'worker'}}, r'TF_CONFIG\["task"\] must set "index"'),
    ({'cluster': CLUSTER, 'task': {'type': 'worker', 'index': -1}}, 'must be >= 0'),
    ({'cluster': CLUSTER, 'task': {'type': 'master', 'index': 0}},
     r'TF_CONFIG\["task"\]\["type"\] is not a job of TF_CONFIG\["cluster"\]'),
    ({'cluster': {'chief': ['a:1', 'b:1']}, 'task': {'type': 'chief', 'index': 0}},
     r'TF_CONFIG\["cluster"\]\["chief"\] must list exactly one address'),
    ({'task': {'type': 'ps', 'index': 0}},
     r'TF_CONFIG\["task"\]\["type"\] must be "worker" or "evaluator"'),
    ({'task': {'type': 'worker', 'index': 1}}, r'TF_CONFIG\["task"\]\["index"\] must be 0'),
    ({'service': 'x'}, 'If "service" is set in TF_CONFIG, it must be a dict. Given x'),
    ({'model_dir': ''}, 'model_dir in TF_CONFIG cannot be empty string.'),
])
def test_tf_config_errors_name_the_key(monkeypatch, tf_config, match):
  _set_tf_config(monkeypatch, **tf_config)
  with pytest.raises(ValueError, match=match):
    tfe.RunConfig()


def test_invalid_json(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', '{not json')
  with pytest.raises(ValueError, match='TF_CONFIG is not valid JSON'):
    tfe.RunConfig()


def test_model_dir_from_tf_config(monkeypatch):
  _set_tf_config(monkeypatch, model_dir='/tmp/from_env')
  assert tfe.RunConfig().model_dir == '/tmp/from_env'
  assert tfe.RunConfig(model_dir='/tmp/from_env').model_dir == '/tmp/from_env'
  with pytest.raises(ValueError, match='`model_dir` provided in RunConfig construct, if set, '
                     'must have the same value as the model_dir in TF_CONFIG'):
    tfe.RunConfig(model_dir='/tmp/other')


def test_deployment_config_from_num_clones(monkeypatch):
  config = tfe.RunConfig(num_clones=2, clone_on_cpu=True)
  deploy = config.deployment_config
  assert (deploy.num_clones, deploy.clone_on_cpu, deploy.num_ps_tasks) == (2, True, 0)
  given = model_deploy.DeploymentConfig(num_clones=3)
  config = tfe.RunConfig(deployment_config=given)
  assert config.deployment_config is given and config.num_clones == 3
  _set_tf_config(monkeypatch, cluster=CLUSTER, task={'type': 'worker', 'index': 1})
  deploy = tfe.RunConfig(num_clones=2).deployment_config
  assert deploy.num_ps_tasks == 2
  assert deploy.clone_device(1) == '/job:worker/task:1/device:GPU:1'


def test_fault_timeouts_default_replace_and_name_the_field():
  config = tfe.RunConfig()
  assert (config.recovery_timeout_secs, config.termination_grace_secs,
          config.chief_timeout_secs) == (300, 25, 300)
  config = config.replace(recovery_timeout_secs=15, termination_grace_secs=5,
                          chief_timeout_secs=20)
  assert (config.recovery_timeout_secs, config.termination_grace_secs,
          config.chief_timeout_secs) == (15, 5, 20)
  for name in ('recovery_timeout_secs', 'termination_grace_secs', 'chief_timeout_secs'):
    for bad in (0, -1, None, True, '30'):
      with pytest.raises(ValueError, match=r'RunConfig\.%s must be a positive number' % name):
        tfe.RunConfig(**{name: bad})


def test_deploy_config_fault_timeouts_apply_unless_set_in_code():
  from protos import pipeline_pb2
  from estimator import faults
  deploy = pipeline_pb2.DeployConfig()
  assert faults.apply_deploy_config_timeouts(tfe.RunConfig(), deploy).recovery_timeout_secs == 300
  deploy.recovery_timeout_secs, deploy.termination_grace_secs = 40, 7
  deploy.chief_timeout_secs = 60
  config = faults.apply_deploy_config_timeouts(tfe.RunConfig(), deploy)
  assert (config.recovery_timeout_secs, config.termination_grace_secs,
          config.chief_timeout_secs) == (40, 7, 60)
  config = faults.apply_deploy_config_timeouts(tfe.RunConfig(recovery_timeout_secs=99), deploy)
  assert (config.recovery_timeout_secs, config.termination_grace_secs) == (99, 7)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
