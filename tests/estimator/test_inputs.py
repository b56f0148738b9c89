"""tfe.inputs.numpy_input_fn / pandas_input_fn: batches, epochs, shuffling, errors, and a
linear regression trained through an Estimator, as user code would."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _all_batches(input_fn, limit=100):
  """Runs input_fn in a fresh graph; returns its batches until OutOfRange (or `limit`)."""
  batches = []
  with tf.Graph().as_default():
    tensors = input_fn()
    with tf.compat.v1.Session() as session:
      try:
        while len(batches) < limit:
          batches.append(session.run(tensors))
      except tf.errors.OutOfRangeError:
        pass
  return batches


def test_shuffle_must_be_given_as_a_bool():
  for bad in (None, 1, 'yes'):
    with pytest.raises(ValueError, match='shuffle must be provided and explicitly set as '
                       'boolean'):
      tfe.inputs.numpy_input_fn({'a': np.arange(3)}, shuffle=bad)
  with pytest.raises(ValueError, match='shuffle must be provided'):
    tfe.inputs.pandas_input_fn(pd.DataFrame({'a': [1, 2]}))


def test_one_epoch_in_order_keeps_the_last_partial_batch():
  x = {'a': np.arange(10, dtype=np.float32), 'b': np.arange(10, 20)}
  batches = _all_batches(tfe.inputs.numpy_input_fn(x, np.arange(100, 110), batch_size=4,
                                                   num_epochs=1, shuffle=False))
  assert [len(labels) for _, labels in batches] == [4, 4, 2]
  np.testing.assert_array_equal(np.concatenate([f['a'] for f, _ in batches]), x['a'])
  np.testing.assert_array_equal(np.concatenate([f['b'] for f, _ in batches]), x['b'])
  np.testing.assert_array_equal(np.concatenate([y for _, y in batches]), np.arange(100, 110))
  assert batches[0][0]['a'].dtype == np.float32 and batches[0][0]['b'].dtype == np.int64


def test_two_epochs_and_forever():
  x = {'a': np.arange(5)}
  twice = _all_batches(tfe.inputs.numpy_input_fn(x, batch_size=3, num_epochs=2,
                                                 shuffle=False))
  np.testing.assert_array_equal(np.concatenate([f['a'] for f in twice]),
                                np.tile(np.arange(5), 2))
  forever = _all_batches(tfe.inputs.numpy_input_fn(x, batch_size=3, num_epochs=None,
                                                   shuffle=False), limit=7)
  assert len(forever) == 7 and all(len(f['a']) == 3 for f in forever)
  with tf.Graph().as_default():
    features = tfe.inputs.numpy_input_fn(x, batch_size=3, num_epochs=None, shuffle=False)()
    assert features['a'].shape.as_list() == [3]


def test_shuffled_epoch_is_a_permutation_of_every_example():
  x = {'a': np.arange(50)}
  batches = _all_batches(tfe.inputs.numpy_input_fn(x, batch_size=8, num_epochs=1,
                                                   shuffle=True, queue_capacity=50))
  seen = np.concatenate([f['a'] for f in batches])
  assert sorted(seen) == list(range(50))
  assert list(seen) != list(range(50))


def test_dict_labels_single_array_features_and_no_labels():
  batches = _all_batches(tfe.inputs.numpy_input_fn(
      np.arange(6).reshape(3, 2), {'y1': np.arange(3), 'y2': -np.arange(3)}, batch_size=3,
      shuffle=False))
  features, labels = batches[0]
  np.testing.assert_array_equal(features, np.arange(6).reshape(3, 2))
  assert sorted(labels) == ['y1', 'y2']
  np.testing.assert_array_equal(labels['y2'], [0, -1, -2])
  only_features = _all_batches(tfe.inputs.numpy_input_fn({'a': np.arange(2)},
                                                         shuffle=False))
  assert isinstance(only_features[0], dict)


def test_bad_inputs_are_named():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Length of tensors in x and y is mismatched'):
      tfe.inputs.numpy_input_fn({'a': np.arange(3)}, np.arange(4), shuffle=False)()
    with pytest.raises(ValueError, match="1 duplicate keys are found in both x and y: {'a'}"):
      tfe.inputs.numpy_input_fn({'a': np.arange(3)}, {'a': np.arange(3)}, shuffle=False)()
    with pytest.raises(ValueError, match='x cannot be an empty dict'):
      tfe.inputs.numpy_input_fn({}, shuffle=False)()
    with pytest.raises(TypeError, match='x must be a dict or array; got list'):
      tfe.inputs.numpy_input_fn([1, 2], shuffle=False)()
  with pytest.raises(ValueError, match='batch_size must be a positive integer; got 0'):
    tfe.inputs.numpy_input_fn({'a': np.arange(3)}, batch_size=0, shuffle=False)


def test_pandas_series_and_frame_targets():
  frame = pd.DataFrame({'a': np.arange(5, dtype=np.float64), 'c': list('vwxyz')},
                       index=np.arange(10, 15))
  batches = _all_batches(tfe.inputs.pandas_input_fn(
      frame, pd.Series(np.arange(5) * 2, index=frame.index), batch_size=2, shuffle=False))
  assert [len(y) for _, y in batches] == [2, 2, 1]
  features, labels = batches[0]
  assert sorted(features) == ['a', 'c']
  assert list(features['c']) == [b'v', b'w']
  np.testing.assert_array_equal(labels, [0, 2])
  targets = pd.DataFrame({'t1': np.arange(5), 't2': np.arange(5) + 1}, index=frame.index)
  features, labels = _all_batches(tfe.inputs.pandas_input_fn(
      frame, targets, batch_size=5, shuffle=False))[0]
  assert sorted(features) == ['a', 'c'] and sorted(labels) == ['t1', 't2']
  np.testing.assert_array_equal(labels['t2'], np.arange(1, 6))


def test_pandas_errors_name_the_column_and_the_indexes():
  frame = pd.DataFrame({'target': [1, 2]})
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Cannot use name target for target column'):
      tfe.inputs.pandas_input_fn(frame, pd.Series([0, 1]), shuffle=False)()
    with pytest.raises(ValueError, match='Index for x and y are mismatched'):
      tfe.inputs.pandas_input_fn(pd.DataFrame({'a': [1, 2]}), pd.Series([0, 1], index=[5, 6]),
                                 shuffle=False)()


def test_without_pandas_the_error_says_how_to_install_it():
  program = ('import sys; sys.modules["pandas"] = None\n'
             'from estimator import inputs\n'
             'try:\n'
             '  inputs.pandas_input_fn(None, shuffle=False)\n'
             'except ImportError as e:\n'
             '  print("ERROR:", e)\n')
  result = subprocess.run([sys.executable, '-c', program], cwd=REPO_ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180,
                          check=True)
  assert 'ERROR: pandas_input_fn needs pandas' in result.stdout
  assert 'pip install pandas' in result.stdout


def _linear_model_fn(features, labels, mode):
  weight = tf.compat.v1.get_variable('w', [2], initializer=tf.compat.v1.zeros_initializer())
  bias = tf.compat.v1.get_variable('b', [], initializer=tf.compat.v1.zeros_initializer())
  inputs = tf.stack([features['x1'], features['x2']], axis=1)
  predictions = tf.linalg.matvec(inputs, weight) + bias
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops={
      'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)})


def test_an_estimator_learns_a_linear_function_from_numpy_and_pandas(tmp_path):
  rng = np.random.RandomState(0)
  x = {'x1': rng.uniform(-1, 1, 200).astype(np.float32),
       'x2': rng.uniform(-1, 1, 200).astype(np.float32)}
  y = (2 * x['x1'] - 3 * x['x2'] + 0.5).astype(np.float32)
  estimator = tfe.Estimator(_linear_model_fn, model_dir=str(tmp_path / 'model'))
  estimator.train(tfe.inputs.numpy_input_fn(x, y, batch_size=20, num_epochs=None,
                                            shuffle=True), max_steps=400)
  metrics = estimator.evaluate(tfe.inputs.pandas_input_fn(
      pd.DataFrame(x), pd.Series(y), batch_size=64, num_epochs=1, shuffle=False))
  assert metrics['global_step'] == 400
  assert metrics['mae'] < 0.01 and metrics['loss'] < 1e-4
  predictions = list(estimator.predict(tfe.inputs.numpy_input_fn(
      {'x1': np.float32([1.0]), 'x2': np.float32([1.0])}, shuffle=False)))
  assert len(predictions) == 1
  assert predictions[0]['y'] == pytest.approx(-0.5, abs=0.02)


def _wide_model_fn(features, labels, mode):
  """A linear model over 128 inputs, as a user's custom model_fn would be."""
  weight = tf.compat.v1.get_variable('w', [128, 1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.squeeze(tf.matmul(features['x'], weight), 1)
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
      loss, global_step=tf.compat.v1.train.get_global_step())
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _largest(directory, pattern):
  paths = tf.io.gfile.glob(os.path.join(directory, pattern))
  assert paths, 'no %s in %s' % (pattern, directory)
  return max(os.path.getsize(path) for path in paths)


def test_a_16_mb_array_leaves_graph_events_and_meta_files_small(tmp_path):
  # A user's MNIST-sized training set: 16 MB of float32 features. Fed as graph constants
  # these made a graph.pbtxt, events file and every .meta several times the data's size.
  rng = np.random.RandomState(0)
  x = rng.uniform(-1, 1, (32768, 128)).astype(np.float32)
  y = x[:, 0] * 2.0
  model_dir = str(tmp_path / 'model')
  estimator = tfe.Estimator(_wide_model_fn, config=tfe.RunConfig(
      model_dir=model_dir, save_checkpoints_steps=3, save_summary_steps=1))
  train_spec = tfe.TrainSpec(tfe.inputs.numpy_input_fn(
      {'x': x}, y, batch_size=64, num_epochs=None, shuffle=True, queue_capacity=5000),
      max_steps=6)
  eval_spec = tfe.EvalSpec(tfe.inputs.numpy_input_fn(
      {'x': x}, y, batch_size=4096, num_epochs=1, shuffle=False), steps=None,
      throttle_secs=0)
  tfe.train_and_evaluate(estimator, train_spec, eval_spec)
  metrics = estimator.evaluate(tfe.inputs.numpy_input_fn(
      {'x': x[:100]}, y[:100], batch_size=64, num_epochs=1, shuffle=False))
  assert metrics['global_step'] == 6
  limit = 2 << 20  # 2 MB: a few hundred KB of graph, whatever the data size
  assert _largest(model_dir, 'graph.pbtxt') < limit
  assert _largest(model_dir, 'model.ckpt-*.meta') < limit
  assert _largest(model_dir, 'events.out.tfevents.*') < limit
  assert _largest(os.path.join(model_dir, 'eval'), 'events.out.tfevents.*') < limit


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
