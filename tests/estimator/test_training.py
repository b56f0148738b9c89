"""Tests for tfe.TrainSpec / EvalSpec / train_and_evaluate in local mode.

The model is an MNIST-like classifier (8x8 "digits" of 10 classes made from
noisy prototypes) written as users write a `model_fn`: mode-conditional
optimizer, eval metric ops, export_outputs and a raw-placeholder serving
receiver. Its learning rate turns negative after step 30, so the evaluation
loss falls and then rises: early stopping and BestExporter have something
real to do, deterministically.
"""

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from trainer import estimator as tfe
from estimator import early_stopping
from estimator import exporter as exporter_lib

tf.compat.v1.disable_eager_execution()

_NUM_CLASSES = 10
_SIZE = 8
_TURN_STEP = 30


def _digits(num, seed):
  """Noisy copies of 10 fixed prototype images: (images [n, 8, 8, 1], labels [n])."""
  prototypes = np.random.RandomState(0).uniform(0, 1, [_NUM_CLASSES, _SIZE, _SIZE, 1])
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, _NUM_CLASSES, num).astype(np.int64)
  images = prototypes[labels] + rng.normal(0, 0.6, [num, _SIZE, _SIZE, 1])
  return images.astype(np.float32), labels


def _train_input_fn():
  images, labels = _digits(512, seed=1)
  dataset = tf.data.Dataset.from_tensor_slices(({'image': images}, labels))
  return dataset.shuffle(512, seed=3).repeat().batch(32)


def _eval_input_fn():
  images, labels = _digits(200, seed=2)
  return tf.data.Dataset.from_tensor_slices(({'image': images}, labels)).batch(100)


def _model_fn(features, labels, mode, params):
  net = slim.flatten(features['image'])
  net = slim.fully_connected(net, 32, scope='hidden')
  logits = slim.fully_connected(net, _NUM_CLASSES, activation_fn=None, scope='logits')
  classes = tf.argmax(logits, axis=1)
  predictions = {'classes': classes, 'probabilities': tf.nn.softmax(logits)}
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions=predictions, export_outputs={
        'serving_default': tfe.export.PredictOutput(predictions)})
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == tfe.ModeKeys.EVAL:
    return tfe.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'accuracy': tf.compat.v1.metrics.accuracy(labels, classes)})
  global_step = tf.compat.v1.train.get_global_step()
  # Gradient ascent after _TURN_STEP: the model gets worse on purpose.
  learning_rate = tf.where(global_step < _TURN_STEP, params['learning_rate'],
                           -params['learning_rate'])
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
  train_op = optimizer.minimize(loss, global_step=global_step)
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _serving_input_receiver_fn():
  image = tf.compat.v1.placeholder(tf.float32, [None, _SIZE, _SIZE, 1], name='image')
  return tfe.export.ServingInputReceiver({'image': image}, {'image': image})


def _estimator(model_dir, save_checkpoints_steps=10):
  config = tfe.RunConfig(save_checkpoints_steps=save_checkpoints_steps, keep_checkpoint_max=50,
                         tf_random_seed=7, log_step_count_steps=None)
  return tfe.Estimator(_model_fn, model_dir=model_dir, config=config,
                       params={'learning_rate': 0.3})


def _step_of(checkpoint_path):
  return int(checkpoint_path.rsplit('-', 1)[1])


def _export_variables(export_dir):
  reader = tf.train.load_checkpoint(os.path.join(export_dir, 'variables', 'variables'))
  return reader.get_tensor('logits/weights')


def _checkpoint_variables(model_dir, step):
  return tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-%d' % step)).get_tensor(
      'logits/weights')


def _best_exports(model_dir):
  return [p for _, p in exporter_lib.list_exports(os.path.join(model_dir, 'export', 'best'))]


def test_early_stopping_and_best_export_then_restart(tmp_path):
  model_dir = str(tmp_path / 'model')
  estimator = _estimator(model_dir)
  stop_hook = tfe.experimental.stop_if_no_decrease_hook(
      estimator, 'loss', max_steps_without_decrease=20, run_every_secs=None,
      run_every_steps=1)
  best = tfe.BestExporter('best', _serving_input_receiver_fn, exports_to_keep=2)
  metrics, export_results = tfe.train_and_evaluate(
      estimator, tfe.TrainSpec(_train_input_fn, max_steps=400, hooks=[stop_hook]),
      tfe.EvalSpec(_eval_input_fn, steps=None, exporters=[best], throttle_secs=0))

  evals = early_stopping.read_eval_metrics(estimator.eval_dir())
  final_step = _step_of(estimator.latest_checkpoint())
  assert final_step < 100, evals  # stopped early, far before max_steps
  assert metrics['global_step'] == final_step  # the final checkpoint was evaluated
  assert sorted(metrics) == ['accuracy', 'global_step', 'loss']
  assert list(evals)[:-1] == list(range(10, final_step, 10))  # every save, no throttling
  assert list(evals)[-1] == final_step
  best_step = min(evals, key=lambda s: evals[s]['loss'])
  assert 10 < best_step <= _TURN_STEP + 10
  assert evals[best_step]['accuracy'] > 0.5
  # The newest export is the best checkpoint, and older bests were collected.
  exports = _best_exports(model_dir)
  assert 1 <= len(exports) <= 2
  np.testing.assert_array_equal(_export_variables(exports[-1]),
                                _checkpoint_variables(model_dir, best_step))
  assert export_results == [None] or export_results[0].decode() == exports[-1]
  # The STOP flag is in the final checkpoint (what a distributed evaluator reads).
  assert early_stopping.checkpoint_requested_stop(estimator.latest_checkpoint())

  # Restart with a larger max_steps and a new process's BestExporter: the
  # model keeps getting worse, so the best export must stay as it is.
  estimator = _estimator(model_dir)
  restarted = tfe.BestExporter('best', _serving_input_receiver_fn, exports_to_keep=2)
  metrics, export_results = tfe.train_and_evaluate(
      estimator, tfe.TrainSpec(_train_input_fn, max_steps=final_step + 20),
      tfe.EvalSpec(_eval_input_fn, steps=None, exporters=[restarted], throttle_secs=0))
  assert metrics['global_step'] == final_step + 20
  assert metrics['loss'] > evals[best_step]['loss']
  assert export_results == [None]
  assert _best_exports(model_dir) == exports

  # The best export serves in eager TF2.
  images, _ = _digits(4, seed=5)
  script = ('import json, sys, numpy as np, tensorflow as tf\n'
            'model = tf.saved_model.load(sys.argv[1])\n'
            'out = model.signatures["serving_default"](image=tf.constant(\n'
            '    np.array(json.loads(sys.argv[2]), np.float32)))\n'
            'print("CLASSES", json.dumps(out["classes"].numpy().tolist()))\n')
  result = subprocess.run([sys.executable, '-c', script, exports[-1],
                           json.dumps(images.tolist())], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, CUDA_VISIBLE_DEVICES=''))
  assert result.returncode == 0, result.stderr[-3000:]
  classes = json.loads(result.stdout.split('CLASSES', 1)[1])
  assert len(classes) == 4 and all(0 <= c < _NUM_CLASSES for c in classes)


def test_throttle_skips_are_logged_and_final_checkpoint_evaluated(tmp_path, caplog):
  model_dir = str(tmp_path / 'model')
  estimator = _estimator(model_dir, save_checkpoints_steps=5)
  final = tfe.FinalExporter('final', _serving_input_receiver_fn)
  with caplog.at_level(logging.INFO, logger='tensorflow'):
    metrics, export_results = tfe.train_and_evaluate(
        estimator, tfe.TrainSpec(_train_input_fn, max_steps=17),
        tfe.EvalSpec(_eval_input_fn, steps=1, exporters=final, throttle_secs=600))
  skipped = [r for r in caplog.records
             if 'Skip the current checkpoint eval due to throttle secs (600 secs)' in r.message]
  # Steps 10, 15 and 17 (saved at the end) are skipped; 17 is then evaluated
  # as the last checkpoint.
  assert [r.args[1] for r in skipped] == [10, 15, 17]
  assert all(r.levelno == logging.WARNING for r in skipped)
  assert 'throttle_secs=0' in skipped[0].getMessage()
  assert list(early_stopping.read_eval_metrics(estimator.eval_dir())) == [5, 17]
  assert metrics['global_step'] == 17
  (path,) = export_results
  assert os.path.isfile(os.path.join(path.decode(), 'saved_model.pb'))
  assert os.path.dirname(path.decode()) == os.path.join(model_dir, 'export', 'final')

  # Run again once max_steps has been reached: no RuntimeError as upstream
  # ('There was no new checkpoint after the training'); the last checkpoint is
  # evaluated and exported as the final one.
  estimator = _estimator(model_dir, save_checkpoints_steps=5)
  metrics, export_results = tfe.train_and_evaluate(
      estimator, tfe.TrainSpec(_train_input_fn, max_steps=17),
      tfe.EvalSpec(_eval_input_fn, steps=1, exporters=final, throttle_secs=600))
  assert metrics['global_step'] == 17 and export_results[0] is not None


def test_no_checkpoint_at_all_raises(tmp_path):
  class _NoSaveEstimator(tfe.Estimator):
    def latest_checkpoint(self):
      return None

  config = tfe.RunConfig(save_checkpoints_steps=5, log_step_count_steps=None)
  estimator = _NoSaveEstimator(_model_fn, model_dir=str(tmp_path / 'm'), config=config,
                               params={'learning_rate': 0.1})
  with pytest.raises(RuntimeError, match='There was no new checkpoint after the training. '
                     'Eval status: missing checkpoint'):
    tfe.train_and_evaluate(estimator, tfe.TrainSpec(_train_input_fn, max_steps=3),
                           tfe.EvalSpec(_eval_input_fn, steps=1, throttle_secs=0))


class _Hook(tf.compat.v1.train.SessionRunHook):
  pass


def _input_fn():
  return None


def test_train_spec_validation():
  spec = tfe.TrainSpec(_input_fn, max_steps=3, hooks=[_Hook()])
  assert spec.max_steps == 3 and isinstance(spec.hooks, tuple) and spec.saving_listeners == ()
  assert tfe.TrainSpec(_input_fn).max_steps is None
  with pytest.raises(TypeError, match='`input_fn` must be callable, given: 3'):
    tfe.TrainSpec(3)
  with pytest.raises(ValueError, match='Must specify max_steps > 0, given: 0'):
    tfe.TrainSpec(_input_fn, max_steps=0)
  with pytest.raises(TypeError, match='All hooks must be `SessionRunHook` instances'):
    tfe.TrainSpec(_input_fn, hooks=[object()])
  with pytest.raises(TypeError, match='All saving_listeners must be `CheckpointSaverListener`'):
    tfe.TrainSpec(_input_fn, saving_listeners=[_Hook()])


def test_eval_spec_defaults_and_validation():
  spec = tfe.EvalSpec(_input_fn)
  assert (spec.steps, spec.name, spec.hooks, spec.exporters, spec.start_delay_secs,
          spec.throttle_secs) == (100, None, (), (), 120, 600)
  exporter = tfe.FinalExporter('a', _serving_input_receiver_fn)
  assert tfe.EvalSpec(_input_fn, exporters=exporter).exporters == (exporter,)
  assert tfe.EvalSpec(_input_fn, steps=None).steps is None
  with pytest.raises(TypeError, match='`input_fn` must be callable'):
    tfe.EvalSpec(None)
  with pytest.raises(ValueError, match='Must specify steps > 0, given: 0'):
    tfe.EvalSpec(_input_fn, steps=0)
  with pytest.raises(TypeError, match='`name` must be string, given: 1'):
    tfe.EvalSpec(_input_fn, name=1)
  with pytest.raises(TypeError, match='All hooks must be `SessionRunHook` instances'):
    tfe.EvalSpec(_input_fn, hooks=[1])
  with pytest.raises(ValueError, match='Must specify start_delay_secs >= 0, given: -1'):
    tfe.EvalSpec(_input_fn, start_delay_secs=-1)
  with pytest.raises(ValueError, match='Must specify throttle_secs >= 0, given: -1'):
    tfe.EvalSpec(_input_fn, throttle_secs=-1)
  with pytest.raises(TypeError, match='`exporters` must be an Exporter, an iterable of '
                     'Exporter, or `None`'):
    tfe.EvalSpec(_input_fn, exporters=[exporter, 'b'])
  with pytest.raises(TypeError, match='`exporters` must be an Exporter'):
    tfe.EvalSpec(_input_fn, exporters=3)
  with pytest.raises(ValueError, match='`exporters` must have unique names. Such a name cannot '
                     r"be `None`. a names were given: \['a', 'a'\]"):
    tfe.EvalSpec(_input_fn, exporters=[exporter, tfe.LatestExporter('a', _input_fn)])
  with pytest.raises(ValueError, match='An Exporter cannot have a name that is `None` or empty'):
    tfe.EvalSpec(_input_fn, exporters=[tfe.LatestExporter('', _input_fn)])
  with pytest.raises(ValueError, match='An Exporter must have a string name'):
    tfe.EvalSpec(_input_fn, exporters=[tfe.LatestExporter(7, _input_fn)])


def test_train_and_evaluate_argument_types(tmp_path):
  estimator = _estimator(str(tmp_path / 'm'))
  train_spec = tfe.TrainSpec(_input_fn)
  eval_spec = tfe.EvalSpec(_input_fn)
  with pytest.raises(TypeError, match='`estimator` must have type `tf.estimator.Estimator`'):
    tfe.train_and_evaluate(object(), train_spec, eval_spec)
  with pytest.raises(TypeError, match='`train_spec` must have type `tf.estimator.TrainSpec`'):
    tfe.train_and_evaluate(estimator, eval_spec, eval_spec)
  with pytest.raises(TypeError, match='`eval_spec` must have type `tf.estimator.EvalSpec`'):
    tfe.train_and_evaluate(estimator, train_spec, train_spec)


def test_evaluator_task_returns_after_final_checkpoint(tmp_path, monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'worker': ['127.0.0.1:1'], 'ps': ['127.0.0.1:2']},
      'task': {'type': 'evaluator', 'index': 0}}))
  estimator = _estimator(str(tmp_path / 'm'))
  assert estimator.config.task_type == 'evaluator'
  monkeypatch.delenv('TF_CONFIG')
  # Training reached max_steps before the evaluator started: it evaluates the
  # last checkpoint once and returns (upstream's evaluator did too, but only
  # because max_steps was set; see test_distributed_estimator for the rest).
  _estimator(str(tmp_path / 'm')).train(_train_input_fn, max_steps=3)
  metrics, exports = tfe.train_and_evaluate(
      estimator, tfe.TrainSpec(_train_input_fn, max_steps=3),
      tfe.EvalSpec(_eval_input_fn, steps=1, start_delay_secs=0, throttle_secs=0))
  assert metrics['global_step'] == 3 and exports == []


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
