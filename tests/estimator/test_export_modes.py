"""TRAIN / EVAL SavedModel exports and the deprecated `export_savedmodel` (issue 26, item 8).

The calls are tf.estimator 2.15 user code with `tf.estimator.` replaced by
`tfe.`: `export_saved_model(..., experimental_mode=ModeKeys.EVAL)` with a
`build_raw_supervised_input_receiver_fn` receiver,
`experimental_export_all_saved_models` with one receiver per mode, and the
old `export_savedmodel(..., strip_default_attrs=True)`. Each export is loaded
back with the SavedModel loader and run.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import test_util
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

X = np.linspace(-1.0, 1.0, 16, dtype=np.float32).reshape([-1, 1])
Y = 3.0 * X + 1.0


def _input_fn():
  return tf.data.Dataset.from_tensor_slices(({'x': X}, Y)).repeat().batch(8)


def model_fn(features, labels, mode):
  weight = tf.compat.v1.get_variable('w', [1, 1], initializer=tf.compat.v1.zeros_initializer())
  bias = tf.compat.v1.get_variable('b', [1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weight) + bias
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions}, export_outputs={
        'serving_default': tfe.export.PredictOutput({'y': predictions})})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions={'y': predictions},
                           eval_metric_ops={'mae': tf.compat.v1.metrics.mean_absolute_error(
                               labels, predictions)})


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp('model'))
  est = tfe.Estimator(model_fn, model_dir=model_dir, config=tfe.RunConfig(
      session_config=test_util.session_config(num_cpus=1)))
  est.train(_input_fn, max_steps=5)
  return est


def _receiver_fn():
  return tfe.experimental.build_raw_supervised_input_receiver_fn(
      {'x': tf.constant(X)}, tf.constant(Y))


def _run_signature(export_dir, tag, signature_key, feed):
  """Loads the MetaGraph of `tag` and runs every output of `signature_key`."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(session, [tag], export_dir)
    signature = meta_graph.signature_def[signature_key]
    fetches = {k: v.name for k, v in signature.outputs.items()}
    feeds = {signature.inputs[k].name: v for k, v in feed.items()}
    return signature.method_name, session.run(fetches, feeds), meta_graph


def _expected_loss(est):
  predictions = X * est.get_variable_value('w')[0, 0] + est.get_variable_value('b')[0]
  return float(np.mean((predictions - Y) ** 2))


def test_export_saved_model_eval_mode(trained, tmp_path):
  export_dir = trained.export_saved_model(str(tmp_path), _receiver_fn(),
                                          experimental_mode=tfe.ModeKeys.EVAL)
  method, outputs, _ = _run_signature(export_dir, 'eval', 'eval', {'x': X, 'label': Y})
  assert method == 'tensorflow/supervised/eval'
  assert set(outputs) == {'loss', 'predictions/y', 'metrics/mae/value', 'metrics/mae/update_op'}
  np.testing.assert_allclose(outputs['loss'], _expected_loss(trained), rtol=1e-5)


def test_export_saved_model_train_mode_keeps_the_train_op(trained, tmp_path):
  export_dir = trained.export_saved_model(str(tmp_path), _receiver_fn(),
                                          experimental_mode=tfe.ModeKeys.TRAIN)
  with tf.Graph().as_default() as g, tf.compat.v1.Session() as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ['train'], export_dir)
    signature = meta_graph.signature_def['train']
    assert signature.method_name == 'tensorflow/supervised/training'
    feeds = {signature.inputs['x'].name: X, signature.inputs['label'].name: Y}
    loss_before = session.run(signature.outputs['loss'].name, feeds)
    (train_op,) = g.get_collection('saved_model_train_op')
    session.run(train_op, feeds)
    assert session.run(signature.outputs['loss'].name, feeds) < loss_before
    assert session.run(tf.compat.v1.train.get_global_step()) == 6
  np.testing.assert_allclose(loss_before, _expected_loss(trained), rtol=1e-5)


def test_experimental_export_all_saved_models(trained, tmp_path):
  serving_fn = tfe.export.build_raw_serving_input_receiver_fn({'x': tf.constant(X)})
  export_dir = trained.experimental_export_all_saved_models(str(tmp_path), {
      tfe.ModeKeys.TRAIN: _receiver_fn(), tfe.ModeKeys.EVAL: _receiver_fn(),
      tfe.ModeKeys.PREDICT: serving_fn})
  _, outputs, _ = _run_signature(export_dir, 'serve', 'serving_default', {'x': X})
  np.testing.assert_allclose(
      outputs['y'], X * trained.get_variable_value('w') + trained.get_variable_value('b'),
      rtol=1e-5)
  for tag in ('train', 'eval'):
    _, outputs, _ = _run_signature(export_dir, tag, tag, {'x': X, 'label': Y})
    np.testing.assert_allclose(outputs['loss'], _expected_loss(trained), rtol=1e-5)


def test_deprecated_export_savedmodel_spelling(trained, tmp_path):
  serving_fn = tfe.export.build_raw_serving_input_receiver_fn({'x': tf.constant(X)})
  export_dir = trained.export_savedmodel(str(tmp_path), serving_fn, strip_default_attrs=True)
  assert os.path.isfile(os.path.join(export_dir, b'saved_model.pb'))
  _, outputs, _ = _run_signature(export_dir, 'serve', 'serving_default', {'x': X})
  assert outputs['y'].shape == (16, 1)


def test_supervised_receiver_keys_must_not_overlap():
  with pytest.raises(ValueError, match='overlapping keys'):
    tfe.export.build_raw_supervised_input_receiver_fn(
        {'label': tf.constant(X)}, tf.constant(Y))


def test_eval_output_flattens_its_outputs():
  with tf.Graph().as_default():
    loss = tf.constant(1.0)
    value, update = tf.compat.v1.metrics.mean(tf.constant([1.0, 2.0]))
    output = tfe.export.EvalOutput(loss={'loss': loss}, predictions={'p': loss},
                                   metrics={'mean': (value, update)})
    assert set(output.outputs) == {'loss/loss', 'predictions/p', 'metrics/mean/value',
                                   'metrics/mean/update_op'}


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
