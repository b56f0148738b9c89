"""`RunConfig(train_distribute=..., eval_distribute=...)` with tf.distribute strategies.

OneDeviceStrategy trains like no strategy with the model on its device;
MirroredStrategy trains one clone per device through model_deploy (what
`RunConfig(num_clones=N)` builds), each clone fed its own batch of the
input_fn's dataset as tf.estimator fed each replica; CPU devices give clones
on CPU. Evaluation under either strategy runs on one device. Every other
strategy is refused with an error naming the argument, the strategy's class
and what to use instead. The strategies are built after eager execution was
switched off, the order of 2019 programs (one of them runs in a fresh
process: tests/estimator/distribute_strategy_main.py).
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import estimator as tfe
from deployment import model_deploy
from tests.estimator import distribute_strategy_main as program

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TWO_CPUS = ['/cpu:0', '/cpu:1']


def _train(model_dir, steps=3, batch_size=4, input_fn=None, **config_kwargs):
  config = tfe.RunConfig(model_dir=str(model_dir), tf_random_seed=1,
                         save_checkpoints_steps=steps,
                         session_config=program.two_cpu_session_config(), **config_kwargs)
  est = tfe.Estimator(program.model_fn, config=config)
  est.train(input_fn or program.input_fn_for(batch_size), max_steps=steps)
  return est


def _variables(est):
  return {name: est.get_variable_value(name) for name in ('weights', 'bias')}


def test_properties_return_the_strategies_given():
  train = tf.distribute.MirroredStrategy(devices=_TWO_CPUS)
  evaluation = tf.distribute.OneDeviceStrategy('/cpu:0')
  config = tfe.RunConfig(train_distribute=train, eval_distribute=evaluation)
  assert config.train_distribute is train
  assert config.eval_distribute is evaluation
  assert config.num_clones == 2 and config.clone_on_cpu
  replaced = config.replace(train_distribute=evaluation)
  assert replaced.train_distribute is evaluation and replaced.num_clones == 1
  assert config.replace(train_distribute=None).train_distribute is None


def test_one_device_strategy_trains_like_no_strategy_on_its_device(tmp_path):
  plain = _train(tmp_path / 'plain')
  one = _train(tmp_path / 'one', train_distribute=tf.distribute.OneDeviceStrategy('/cpu:1'))
  assert one.get_variable_value('global_step') == 3
  assert os.path.exists(one.latest_checkpoint() + '.index')
  for name, value in _variables(plain).items():
    np.testing.assert_allclose(_variables(one)[name], value, rtol=1e-6, err_msg=name)
  # No clones; the model_fn's ops sit on the strategy's device.
  meta = tf.compat.v1.MetaGraphDef()
  with tf.io.gfile.GFile(one.latest_checkpoint() + '.meta', 'rb') as f:
    meta.ParseFromString(f.read())
  devices = {n.name: n.device for n in meta.graph_def.node}
  assert not any(name.startswith('clone_') for name in devices)
  assert devices['weights'] == '/device:CPU:1'
  assert devices['MatMul'] == '/device:CPU:1'


def _plain_optimizer_model_fn(features, labels, mode):
  """A model_fn whose optimizer is not wrapped in TowerOptimizer."""
  predictions = tf.compat.v1.layers.dense(features['x'], 1)
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_one_device_strategy_needs_no_tower_optimizer(tmp_path):
  config = tfe.RunConfig(train_distribute=tf.compat.v1.distribute.OneDeviceStrategy('/cpu:0'))
  est = tfe.Estimator(_plain_optimizer_model_fn, model_dir=str(tmp_path), config=config)
  est.train(program.input_fn_for(4), max_steps=2)
  assert est.get_variable_value('global_step') == 2


def test_mirrored_over_two_cpus_builds_two_clones_like_num_clones(tmp_path):
  contexts = []
  mirrored = _train(tmp_path / 'mirrored', input_fn=program.input_fn_for(4, contexts),
                    train_distribute=tf.distribute.MirroredStrategy(devices=_TWO_CPUS))
  assert mirrored.get_variable_value('global_step') == 3
  assert os.path.exists(mirrored.latest_checkpoint() + '.index')
  assert program.clone_devices(str(tmp_path / 'mirrored')) == {
      'clone_0': ['/device:CPU:0'], 'clone_1': ['/device:CPU:1']}
  # The input_fn is told how many replicas read it (tf.estimator's InputContext).
  assert [(c.num_replicas_in_sync, c.num_input_pipelines, c.input_pipeline_id)
          for c in contexts] == [(2, 1, 0)]
  # The same clones as RunConfig(num_clones=2, clone_on_cpu=True) builds.
  cloned = _train(tmp_path / 'cloned', batch_size=8, num_clones=2, clone_on_cpu=True)
  assert program.clone_op_names(str(tmp_path / 'cloned')) == program.clone_op_names(
      str(tmp_path / 'mirrored'))
  # Each clone read its own batch of 4: two clones train like one on batches of 8.
  single = _train(tmp_path / 'single', batch_size=8)
  for name, value in _variables(single).items():
    np.testing.assert_allclose(_variables(mirrored)[name], value, rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(_variables(cloned)[name], value, rtol=1e-5, err_msg=name)


def test_mirrored_with_one_device_trains_without_clones(tmp_path):
  est = _train(tmp_path, train_distribute=tf.distribute.MirroredStrategy(devices=['/cpu:0']))
  assert est.get_variable_value('global_step') == 3
  assert program.clone_devices(str(tmp_path)) == {}


def test_mirrored_clones_need_a_tower_optimizer(tmp_path):
  config = tfe.RunConfig(session_config=program.two_cpu_session_config(),
                         train_distribute=tf.distribute.MirroredStrategy(devices=_TWO_CPUS))
  est = tfe.Estimator(_plain_optimizer_model_fn, model_dir=str(tmp_path), config=config)
  with pytest.raises(ValueError, match=r'^Estimator with train_distribute=MirroredStrategy: '
                     'the model_fn built its train_op without TowerOptimizer'):
    est.train(program.input_fn_for(4), max_steps=1)


def test_strategies_on_a_missing_gpu_train_and_evaluate_on_the_cpu(tmp_path):
  """One device (training) or the first device (evaluation): soft placement, no error."""
  if tf.config.list_physical_devices('GPU'):
    pytest.skip('this machine has a GPU')
  config = tfe.RunConfig(
      train_distribute=tf.distribute.OneDeviceStrategy('device:GPU:0'),
      eval_distribute=tf.distribute.MirroredStrategy(devices=['device:GPU:0', 'device:GPU:1']))
  est = tfe.Estimator(program.model_fn, model_dir=str(tmp_path), config=config)
  est.train(program.input_fn_for(4), max_steps=2)
  assert est.evaluate(program.input_fn_for(4), steps=1)['global_step'] == 2


def test_mirrored_over_missing_gpus_is_refused_when_training(tmp_path):
  if len(tf.config.list_physical_devices('GPU')) >= 2:
    pytest.skip('this machine has the GPUs')
  strategy = tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1'])
  config = tfe.RunConfig(train_distribute=strategy)  # Accepted: the check is at train time.
  est = tfe.Estimator(program.model_fn, model_dir=str(tmp_path), config=config)
  with pytest.raises(ValueError, match=r"^train_distribute=MirroredStrategy over "
                     r"\['/device:GPU:0', '/device:GPU:1'\] needs those GPUs, but \d GPU\(s\) "
                     r"are visible.*clone_on_cpu=True"):
    est.train(program.input_fn_for(4), max_steps=1)


def test_eval_distribute_evaluates_on_one_device(tmp_path):
  est = _train(tmp_path)
  expected = est.evaluate(program.input_fn_for(8), steps=2)
  for strategy in (tf.distribute.OneDeviceStrategy('/cpu:1'),
                   tf.distribute.MirroredStrategy(devices=_TWO_CPUS)):
    config = est.config.replace(eval_distribute=strategy)
    metrics = tfe.Estimator(program.model_fn, config=config).evaluate(
        program.input_fn_for(8), steps=2)
    assert metrics['global_step'] == 3
    for key in ('loss', 'mae'):
      np.testing.assert_allclose(metrics[key], expected[key], rtol=1e-6, err_msg=key)


@pytest.mark.parametrize('argument', ['train_distribute', 'eval_distribute'])
@pytest.mark.parametrize('make, class_name, advice', [
    (lambda: tf.compat.v1.distribute.experimental.ParameterServerStrategy(),
     'ParameterServerStrategyV1', "TF_CONFIG with 'ps' and 'worker' tasks"),
    (lambda: tf.distribute.MultiWorkerMirroredStrategy(),
     'CollectiveAllReduceStrategy (MultiWorkerMirroredStrategy)',
     'deployment.sync_replicas.SyncReplicasOptimizer'),
    (lambda: tf.distribute.experimental.CentralStorageStrategy(),
     'CentralStorageStrategy', 'RunConfig(num_clones=N)'),
    (lambda: tf.distribute.get_strategy(),
     '_DefaultDistributionStrategy', 'RunConfig(num_clones=N)'),
])
def test_other_strategies_are_refused(argument, make, class_name, advice):
  message = '^' + re.escape('%s=%s is not supported' % (argument, class_name))
  with pytest.raises(ValueError, match=message) as error:
    tfe.RunConfig(**{argument: make()})
  assert advice in str(error.value)


def test_values_that_are_not_strategies_are_refused():
  with pytest.raises(ValueError, match='^eval_distribute must be a tf.distribute strategy '
                     r'\(OneDeviceStrategy or MirroredStrategy\) or None, got 4'):
    tfe.RunConfig(eval_distribute=4)


def test_a_strategy_and_clone_settings_are_refused_together():
  mirrored = tf.distribute.MirroredStrategy(devices=_TWO_CPUS)
  with pytest.raises(ValueError, match=re.escape(
      'train_distribute=MirroredStrategy and num_clones=2 both choose the training devices')):
    tfe.RunConfig(train_distribute=mirrored, num_clones=2)
  with pytest.raises(ValueError, match='^train_distribute=OneDeviceStrategy and '
                     'deployment_config both choose'):
    tfe.RunConfig(train_distribute=tf.distribute.OneDeviceStrategy('/cpu:0'),
                  deployment_config=model_deploy.DeploymentConfig(num_clones=2,
                                                                  clone_on_cpu=True))


@pytest.mark.parametrize('strategy, clones', [
    ('mirrored_cpu', {'clone_0': ['/device:CPU:0'], 'clone_1': ['/device:CPU:1']}),
    # MirroredStrategy() lists the devices (starting the eager context): one CPU, no clones.
    ('mirrored_default', {}),
])
def test_a_2019_program_trains_with_mirrored_strategy_in_a_fresh_process(
    tmp_path, strategy, clones):
  """Eager off, then the strategy, the RunConfig and the Estimator, in a new process."""
  model_dir = tmp_path / 'model'
  result = subprocess.run(
      [sys.executable, '-m', 'tests.estimator.distribute_strategy_main',
       '--model_dir=%s' % model_dir, '--strategy=%s' % strategy, '--steps=3'],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=240,
      env=dict(os.environ, PYTHONPATH=REPO_ROOT, CUDA_VISIBLE_DEVICES='',
               TF_CPP_MIN_LOG_LEVEL='2'))
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.rsplit('RESULT ', 1)[1])
  assert out['global_step'] == 3 and out['eval_global_step'] == 3
  assert out['train_distribute'] == 'MirroredStrategy'
  assert os.path.exists(out['checkpoint'] + '.index')
  assert out['clone_devices'] == clones


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
