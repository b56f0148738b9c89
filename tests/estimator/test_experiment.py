"""Tests for tfe.Experiment and learn_runner (tf.contrib.learn) on a tiny model."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import learn_runner

tf.compat.v1.disable_eager_execution()

_TRUE_W = np.array([[2.0], [-1.0]], np.float32)


def _input_fn(num_batches=None):
  """y = x . w + 0.5 over a fixed random x; repeats (None) or `num_batches` batches."""
  def input_fn():
    x = np.random.RandomState(0).uniform(-1, 1, [64, 2]).astype(np.float32)
    y = x.dot(_TRUE_W) + 0.5
    dataset = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(16, drop_remainder=True)
    return dataset.repeat() if num_batches is None else dataset.take(num_batches)
  return input_fn


def _model_fn(features, labels, mode, params):
  """A linear regression with the usual mode-conditional pieces."""
  weights = tf.compat.v1.get_variable('linear/weights', [2, 1],
                                      initializer=tf.compat.v1.zeros_initializer())
  bias = tf.compat.v1.get_variable('linear/bias', [1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weights) + bias
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions},
                             export_outputs={'serving_default': tfe.export.PredictOutput(
                                 {'y': predictions})})
  loss = tf.reduce_mean(tf.square(predictions - labels))
  train_op = None
  if mode == tfe.ModeKeys.TRAIN:
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params['learning_rate'])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})


def _receiver_fn():
  x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
  return tfe.export.ServingInputReceiver({'x': x}, {'x': x})


def _experiment_fn(**experiment_kwargs):
  """An experiment_fn(run_config, hparams) as users wrote them."""
  def experiment_fn(run_config, hparams):
    estimator = tfe.Estimator(_model_fn, config=run_config, params=hparams.values())
    kwargs = dict(train_steps=hparams.train_steps, eval_steps=2)
    kwargs.update(experiment_kwargs)
    return tfe.Experiment(estimator, _input_fn(), _input_fn(num_batches=2), **kwargs)
  return experiment_fn


def _run_config(tmp_path, **kwargs):
  return tfe.RunConfig(model_dir=str(tmp_path / 'model'), log_step_count_steps=10, **kwargs)


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)


def test_default_schedule_trains_evaluates_and_exports(tmp_path):
  hparams = tfe.HParams(learning_rate=0.2, train_steps=40)
  metrics, exports = learn_runner.run(
      _experiment_fn(min_eval_frequency=20,
                     export_strategies=[tfe.FinalExporter('final', _receiver_fn)]),
      run_config=_run_config(tmp_path), hparams=hparams)
  assert metrics['global_step'] == 40
  assert metrics['loss'] < 0.5
  model_dir = tmp_path / 'model'
  # Two evaluations (steps 20 and 40) in model_dir/eval, one final export.
  assert len(list((model_dir / 'eval').glob('events.out.tfevents.*'))) >= 1
  export_dir = exports[0].decode() if isinstance(exports[0], bytes) else exports[0]
  assert os.path.exists(os.path.join(export_dir, 'saved_model.pb'))
  assert os.listdir(model_dir / 'export' / 'final') == [os.path.basename(export_dir)]


def test_min_eval_frequency_none_uses_train_and_evaluate(tmp_path):
  hparams = tfe.HParams(learning_rate=0.2, train_steps=10)
  metrics, exports = learn_runner.run(_experiment_fn(), run_config=_run_config(tmp_path),
                                      hparams=hparams)
  assert metrics['global_step'] == 10 and exports == []


def test_schedules_train_evaluate_continuous_eval_and_test(tmp_path):
  config = _run_config(tmp_path, save_checkpoints_steps=5)
  hparams = tfe.HParams(learning_rate=0.2, train_steps=10)
  learn_runner.run(_experiment_fn(), schedule='train', run_config=config, hparams=hparams)
  assert tf.train.latest_checkpoint(str(tmp_path / 'model')).endswith('model.ckpt-10')
  metrics = learn_runner.run(_experiment_fn(), schedule='evaluate', run_config=config,
                             hparams=hparams)
  assert metrics['global_step'] == 10 and 'mae' in metrics
  # Training is over, so continuous_eval evaluates the last checkpoint and returns.
  metrics, _ = learn_runner.run(_experiment_fn(continuous_eval_throttle_secs=0),
                                schedule='continuous_eval', run_config=config,
                                hparams=hparams)
  assert metrics['global_step'] == 10
  metrics = learn_runner.run(_experiment_fn(), schedule='test', run_config=config,
                             hparams=hparams)
  assert metrics['global_step'] == 11
  assert (tmp_path / 'model' / 'eval_one_pass').is_dir()


def test_continuous_train_and_eval_stops_on_predicate(tmp_path):
  hparams = tfe.HParams(learning_rate=0.2, train_steps=100)
  seen = []

  def keep_going(eval_result):
    seen.append(eval_result['global_step'])
    return len(seen) < 2

  experiment = _experiment_fn(train_steps_per_iteration=5)(_run_config(tmp_path), hparams)
  metrics, _ = experiment.continuous_train_and_eval(continuous_eval_predicate_fn=keep_going)
  assert seen == [5, 10] and metrics['global_step'] == 10


def test_unknown_schedule_and_bad_arguments(tmp_path):
  hparams = tfe.HParams(learning_rate=0.2, train_steps=10)
  with pytest.raises(ValueError, match='Schedule references non-existent task trian '
                                       r'\(allowed schedules: .*train_and_evaluate'):
    learn_runner.run(_experiment_fn(), schedule='trian', run_config=_run_config(tmp_path),
                     hparams=hparams)
  with pytest.raises(TypeError, match='is not callable'):
    learn_runner.run('not a function', run_config=_run_config(tmp_path))
  with pytest.raises(TypeError, match='did not return an Experiment instance'):
    learn_runner.run(lambda run_config, hparams: None, run_config=_run_config(tmp_path))
  with pytest.raises(ValueError, match='Cannot provide both `output_dir`'):
    learn_runner.run(_experiment_fn(), output_dir=str(tmp_path), hparams=hparams)
  estimator = tfe.Estimator(_model_fn, config=_run_config(tmp_path), params={})
  with pytest.raises(ValueError, match='eval_metrics is not supported'):
    tfe.Experiment(estimator, _input_fn(), _input_fn(), eval_metrics={'a': None})
  with pytest.raises(ValueError, match='export_strategies must be tfe exporters'):
    tfe.Experiment(estimator, _input_fn(), _input_fn(), export_strategies=['strategy'])
  with pytest.raises(ValueError, match='train_steps must be None or > 0'):
    tfe.Experiment(estimator, _input_fn(), _input_fn(), train_steps=0)


def test_old_output_dir_form(tmp_path):
  def experiment_fn(output_dir):
    config = tfe.RunConfig(model_dir=output_dir)
    return tfe.Experiment(tfe.Estimator(_model_fn, config=config,
                                        params={'learning_rate': 0.1}),
                          _input_fn(), _input_fn(num_batches=1), train_steps=3)
  learn_runner.run(experiment_fn, output_dir=str(tmp_path / 'old'), schedule='train')
  assert tf.train.latest_checkpoint(str(tmp_path / 'old')).endswith('model.ckpt-3')


@pytest.mark.parametrize('task, schedule', [
    ({'type': 'worker', 'index': 0}, 'train'),
    ({'type': 'chief', 'index': 0}, 'train_and_evaluate'),
    ({'type': 'ps', 'index': 0}, 'run_std_server'),
    ({'type': 'evaluator', 'index': 0}, 'continuous_eval'),
])
def test_default_schedule_follows_tf_config(monkeypatch, task, schedule):
  cluster = {'chief': ['localhost:1'], 'worker': ['localhost:2'], 'ps': ['localhost:3']}
  monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster, 'task': task}))
  assert learn_runner._default_schedule(tfe.RunConfig()) == schedule  # pylint: disable=protected-access


def test_default_schedule_local():
  assert learn_runner._default_schedule(tfe.RunConfig()) == 'train_and_evaluate'  # pylint: disable=protected-access


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
