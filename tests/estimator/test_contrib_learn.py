"""A tf.contrib.learn script ported by changing imports only (issue 26, items 1-3).

The code below is shaped like TF 1.x contrib programs: a model_fn that
branches on `tf.contrib.learn.ModeKeys`, an `experiment_fn(run_config,
params)` building a `tf.contrib.learn.Experiment` with contrib's arguments,
and `learn_runner.run(...)`. Only the imports changed:

    tf.contrib.learn            -> estimator.learn
    tf.contrib.learn.Experiment -> tfe.Experiment (or learn.Experiment)
    learn_runner                -> tfe.learn_runner
"""

import logging as py_logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import experiment as experiment_lib
from estimator import learn
from estimator import learn_runner

tf.compat.v1.disable_eager_execution()

_TRUE_W = np.array([[1.5], [-0.5]], np.float32)


def _input_fn(num_batches=None):
  def input_fn():
    x = np.random.RandomState(1).uniform(-1, 1, [64, 2]).astype(np.float32)
    y = x.dot(_TRUE_W) - 0.25
    dataset = tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(16, drop_remainder=True)
    return dataset.repeat() if num_batches is None else dataset.take(num_batches)
  return input_fn


def _make_model_fn(modes_seen):
  """A contrib-era model_fn: branches with `ModeKeys.INFER` / `TRAIN` / `EVAL`."""

  def model_fn(features, labels, mode, params):
    weights = tf.compat.v1.get_variable('w', [2, 1], initializer=tf.compat.v1.zeros_initializer())
    bias = tf.compat.v1.get_variable('b', [1], initializer=tf.compat.v1.zeros_initializer())
    predictions = tf.matmul(features['x'], weights) + bias
    if mode == learn.ModeKeys.INFER:
      modes_seen.append('INFER')
      return tfe.EstimatorSpec(mode, predictions={'y': predictions})
    loss = tf.reduce_mean(tf.square(predictions - labels))
    if mode == learn.ModeKeys.TRAIN:
      modes_seen.append('TRAIN')
      train_op = tf.compat.v1.train.GradientDescentOptimizer(params['learning_rate']).minimize(
          loss, global_step=tf.compat.v1.train.get_global_step())
      return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)
    if mode == learn.ModeKeys.EVAL:
      modes_seen.append('EVAL')
      return tfe.EstimatorSpec(mode, loss=loss, eval_metric_ops={
          'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})
    raise ValueError('unexpected mode %r' % mode)

  return model_fn


class _CountEvaluations(tf.compat.v1.train.SessionRunHook):
  """An eval hook counting the evaluations an Experiment runs."""

  def __init__(self):
    self.count = 0

  def begin(self):
    self.count += 1


def _receiver_fn():
  x = tf.compat.v1.placeholder(tf.float32, [None, 2], name='x')
  return tfe.export.ServingInputReceiver({'x': x}, {'x': x})


@pytest.fixture(autouse=True)
def _no_tf_config(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)


# -- item 1: experiment_fn's parameters may have any names ------------------------------

def test_experiment_fn_run_config_params(tmp_path):
  modes = []

  def experiment_fn(run_config, params):
    estimator = tfe.Estimator(_make_model_fn(modes), config=run_config, params=params.values())
    return tfe.Experiment(estimator=estimator, train_input_fn=_input_fn(),
                          eval_input_fn=_input_fn(num_batches=2),
                          train_steps=params.train_steps, eval_steps=2)

  hparams = tfe.HParams(learning_rate=0.3, train_steps=30)
  metrics, _ = learn_runner.run(experiment_fn, run_config=tfe.RunConfig(
      model_dir=str(tmp_path / 'model')), schedule='train_and_evaluate', hparams=hparams)
  assert metrics['global_step'] == 30
  assert metrics['loss'] < 0.1


def test_experiment_fn_other_names_and_positional_call(tmp_path):
  seen = {}

  def make_experiment(config, hp):
    seen['config'], seen['hp'] = config, hp
    estimator = tfe.Estimator(_make_model_fn([]), config=config, params={'learning_rate': 0.3})
    return tfe.Experiment(estimator, _input_fn(), _input_fn(num_batches=1), train_steps=3)

  config = tfe.RunConfig(model_dir=str(tmp_path / 'model'))
  learn_runner.run(make_experiment, None, 'train', config, 'my-hparams')
  assert seen['config'] is config and seen['hp'] == 'my-hparams'
  assert tf.train.latest_checkpoint(str(tmp_path / 'model')).endswith('model.ckpt-3')


def test_old_output_dir_form_with_another_parameter_name(tmp_path):
  def experiment_fn(model_dir):
    estimator = tfe.Estimator(_make_model_fn([]), model_dir=model_dir,
                              params={'learning_rate': 0.3})
    return tfe.Experiment(estimator, _input_fn(), _input_fn(num_batches=1), train_steps=2)

  learn_runner.run(experiment_fn, str(tmp_path / 'old'), 'train')
  assert tf.train.latest_checkpoint(str(tmp_path / 'old')).endswith('model.ckpt-2')


# -- item 2: contrib's ModeKeys in a model_fn ------------------------------------------

def test_contrib_mode_keys_match_the_modes_a_model_fn_gets(tmp_path):
  assert (learn.ModeKeys.TRAIN, learn.ModeKeys.EVAL, learn.ModeKeys.INFER) == (
      tfe.ModeKeys.TRAIN, tfe.ModeKeys.EVAL, tfe.ModeKeys.PREDICT)
  modes = []
  estimator = tfe.Estimator(_make_model_fn(modes), model_dir=str(tmp_path / 'model'),
                            params={'learning_rate': 0.3})
  estimator.train(_input_fn(), steps=5)
  estimator.evaluate(_input_fn(num_batches=1))
  x = np.zeros([16, 2], np.float32)
  predictions = list(estimator.predict(
      lambda: tf.data.Dataset.from_tensor_slices({'x': x}).batch(8)))
  assert len(predictions) == 16 and predictions[0]['y'].shape == (1,)
  export_dir = estimator.export_saved_model(str(tmp_path / 'export'), _receiver_fn)
  assert os.path.exists(os.path.join(export_dir, b'saved_model.pb'
                                     if isinstance(export_dir, bytes) else 'saved_model.pb'))
  assert modes == ['TRAIN', 'EVAL', 'INFER', 'INFER']


# -- item 3: every argument of contrib's Experiment.__init__ -------------------------------

def _estimator(tmp_path, modes=None, **config_kwargs):
  config = tfe.RunConfig(model_dir=str(tmp_path / 'model'), **config_kwargs)
  return tfe.Estimator(_make_model_fn([] if modes is None else modes), config=config,
                       params={'learning_rate': 0.3})


def test_contrib_arguments_positionally_in_contribs_order(tmp_path):
  counter = _CountEvaluations()
  # estimator, train_input_fn, eval_input_fn, eval_metrics, train_steps, eval_steps,
  # train_monitors, eval_hooks, local_eval_frequency, eval_delay_secs,
  # continuous_eval_throttle_secs, min_eval_frequency, delay_workers_by_global_step,
  # export_strategies, train_steps_per_iteration, checkpoint_and_export,
  # saving_listeners, check_interval_secs
  experiment = tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(num_batches=2),
                              None, 20, 2, None, [counter], None, 120, 60, 10, False,
                              None, None, False, None, 5)
  metrics, exports = experiment.train_and_evaluate()
  assert metrics['global_step'] == 20 and exports == []
  assert counter.count == 2  # min_eval_frequency=10: at steps 10 and 20.


def test_contrib_keywords_as_a_contrib_script_passes_them(tmp_path):
  experiment = tfe.Experiment(
      estimator=_estimator(tmp_path), train_input_fn=_input_fn(),
      eval_input_fn=_input_fn(num_batches=2), train_steps=20, eval_steps=2,
      local_eval_frequency=10, eval_delay_secs=0, continuous_eval_throttle_secs=0,
      min_eval_frequency=1, delay_workers_by_global_step=True,
      export_strategies=[tfe.FinalExporter('final', _receiver_fn)],
      train_steps_per_iteration=10, checkpoint_and_export=False,
      saving_listeners=[], check_interval_secs=5)
  metrics, exports = experiment.continuous_train_and_eval()
  assert metrics['global_step'] == 20 and len(exports) == 1


def test_checkpoint_and_export_evaluates_and_exports_every_checkpoint(tmp_path):
  counter = _CountEvaluations()
  experiment = tfe.Experiment(
      _estimator(tmp_path, save_checkpoints_steps=10), _input_fn(), _input_fn(num_batches=2),
      train_steps=30, eval_steps=2, eval_hooks=[counter], min_eval_frequency=1000,
      export_strategies=[tfe.LatestExporter('latest', _receiver_fn, exports_to_keep=None)],
      checkpoint_and_export=True)
  metrics, exports = experiment.train_and_evaluate()
  assert metrics['global_step'] == 30
  # min_eval_frequency is ignored: one evaluation and one export per checkpoint (10, 20, 30).
  assert counter.count == 3
  assert len(os.listdir(tmp_path / 'model' / 'export' / 'latest')) == 3
  assert len(exports) == 1


def test_local_run_evaluates_every_local_eval_frequency_steps(tmp_path):
  counter = _CountEvaluations()
  experiment = tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(num_batches=2),
                              train_steps=30, eval_steps=2, eval_hooks=[counter],
                              local_eval_frequency=10)
  metrics, _ = experiment.local_run()
  assert metrics['global_step'] == 30 and counter.count == 3
  # contrib's default local_eval_frequency=None: one evaluation, after training.
  counter_once = _CountEvaluations()
  experiment = tfe.Experiment(_estimator(tmp_path / 'once'), _input_fn(),
                              _input_fn(num_batches=2), train_steps=20, eval_steps=2,
                              eval_hooks=[counter_once])
  metrics, _ = learn_runner.run(lambda run_config, params: experiment,
                                run_config=experiment.estimator.config, schedule='local_run')
  assert metrics['global_step'] == 20 and counter_once.count == 1


def test_train_steps_per_iteration_defaults_to_a_tenth_of_train_steps(tmp_path):
  seen = []
  experiment = tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(num_batches=1),
                              train_steps=40, eval_steps=1)
  experiment.continuous_train_and_eval(
      continuous_eval_predicate_fn=lambda result: seen.append(result['global_step']) or True)
  assert seen == [4, 8, 12, 16, 20, 24, 28, 32, 36]


def test_delay_workers_by_global_step_waits_for_contribs_step(tmp_path):
  # contrib: worker i waits for global step int(8000 * ln(i + 1)).
  assert [experiment_lib._worker_wait_steps(i) for i in range(4)] == [0, 5545, 8788, 11090]  # pylint: disable=protected-access


def test_check_interval_secs_warns_once_that_it_has_no_effect(tmp_path, caplog):
  with caplog.at_level(py_logging.WARNING):
    tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(), check_interval_secs=5)
  assert not [r for r in caplog.records if 'check_interval_secs' in r.getMessage()]
  with caplog.at_level(py_logging.WARNING):
    tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(), check_interval_secs=30)
  warnings = [r for r in caplog.records if 'check_interval_secs' in r.getMessage()]
  assert len(warnings) == 1 and 'no effect' in warnings[0].getMessage()


def test_contrib_run_config_arguments(tmp_path):
  # tf.contrib.learn.RunConfig(master, num_cores, log_device_placement, gpu_memory_fraction, ...)
  config = learn.RunConfig(None, 2, False, 0.5, model_dir=str(tmp_path / 'model'),
                           save_checkpoints_steps=4)
  assert isinstance(config, tfe.RunConfig)
  assert (config.save_checkpoints_steps, config.save_checkpoints_secs) == (4, None)
  assert config.session_config.intra_op_parallelism_threads == 2
  assert config.session_config.gpu_options.per_process_gpu_memory_fraction == 0.5
  assert config.tf_config.inter_op_parallelism_threads == 2
  assert learn.RunConfig().save_checkpoints_secs == 600
  assert learn.RunConfig().session_config is None

  def experiment_fn(run_config, params):
    estimator = tfe.Estimator(_make_model_fn([]), config=run_config, params=params)
    return learn.Experiment(estimator, _input_fn(), _input_fn(num_batches=1), train_steps=8)

  learn.learn_runner.run(experiment_fn, run_config=config, schedule='train',
                         hparams={'learning_rate': 0.3})
  state = tf.train.get_checkpoint_state(str(tmp_path / 'model'))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      'model.ckpt-0', 'model.ckpt-4', 'model.ckpt-8']  # save_checkpoints_steps=4 applied


def test_learn_namespace_names(tmp_path):
  assert learn.Experiment is tfe.Experiment
  assert learn.learn_runner.run is learn_runner.run
  with pytest.raises(ValueError, match='train_steps_per_iteration must be an integer'):
    tfe.Experiment(_estimator(tmp_path), _input_fn(), _input_fn(),
                   train_steps_per_iteration=2.5)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
