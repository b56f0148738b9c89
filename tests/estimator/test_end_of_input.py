"""Training ends normally when its input ends, as in tf.estimator.

An epoch-based program trains on a dataset without `.repeat()` (or
`numpy_input_fn(num_epochs=1)`) and `steps=None`: `train` must return the
estimator once the input raises OutOfRange, with the last checkpoint at the
last step, and `train_and_evaluate` must go on to evaluate. These run in
process; the cluster case (chief + worker + ps) is in
test_end_of_input_cluster.py.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.estimator import mnist_testlib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

BATCH_SIZE = 16
NUM_BATCHES = 10


def _finite_input_fn():
  """Ten batches, once: the dataset ends after step 10."""
  return mnist_testlib.eval_input_fn(batch_size=BATCH_SIZE,
                                     num_examples=BATCH_SIZE * NUM_BATCHES, seed=3)


def _estimator(model_dir, **config_kwargs):
  config = tfe.RunConfig(tf_random_seed=1, log_step_count_steps=None, **config_kwargs)
  return tfe.Estimator(mnist_testlib.model_fn, model_dir=model_dir, config=config,
                       params=dict(mnist_testlib.DEFAULT_PARAMS))


def _checkpoint_step(estimator):
  latest = estimator.latest_checkpoint()
  assert latest is not None, 'no checkpoint in %s' % estimator.model_dir
  return int(latest.rsplit('-', 1)[1])


@pytest.mark.parametrize('max_steps', [None, 1000])
def test_train_returns_at_the_end_of_a_dataset(tmp_path, max_steps):
  estimator = _estimator(str(tmp_path))
  returned = estimator.train(_finite_input_fn(), max_steps=max_steps)
  assert returned is estimator
  assert _checkpoint_step(estimator) == NUM_BATCHES
  assert estimator.get_variable_value('global_step') == NUM_BATCHES


def test_train_with_steps_stops_at_the_end_of_input_first(tmp_path):
  estimator = _estimator(str(tmp_path))
  estimator.train(_finite_input_fn(), steps=NUM_BATCHES + 5)
  assert _checkpoint_step(estimator) == NUM_BATCHES
  # A second call continues from the checkpoint and ends with its input again.
  estimator.train(_finite_input_fn())
  assert _checkpoint_step(estimator) == 2 * NUM_BATCHES


def test_numpy_input_fn_of_one_epoch_trains_every_batch(tmp_path):
  images, labels = mnist_testlib.make_data(100, seed=5)
  input_fn = tfe.inputs.numpy_input_fn(x={'images': images}, y=labels, batch_size=32,
                                       num_epochs=1, shuffle=False)
  estimator = _estimator(str(tmp_path))
  assert estimator.train(input_fn) is estimator
  # 100 examples in batches of 32: three full batches and a last one of 4.
  assert _checkpoint_step(estimator) == 4


def test_train_and_evaluate_evaluates_after_the_input_ends(tmp_path):
  estimator = _estimator(str(tmp_path))
  train_spec = tfe.TrainSpec(_finite_input_fn(), max_steps=None)
  eval_spec = tfe.EvalSpec(mnist_testlib.eval_input_fn(), steps=None, throttle_secs=0,
                           start_delay_secs=0)
  metrics, _ = tfe.train_and_evaluate(estimator, train_spec, eval_spec)
  assert metrics['global_step'] == NUM_BATCHES
  assert np.isfinite(metrics['loss'])
  assert os.path.isdir(estimator.eval_dir())


def test_two_clones_end_with_their_input(tmp_path):
  estimator = _estimator(str(tmp_path), num_clones=2, clone_on_cpu=True)
  assert estimator.train(_finite_input_fn()) is estimator
  assert _checkpoint_step(estimator) == NUM_BATCHES


def test_keras_model_to_estimator_trains_one_epoch(tmp_path):
  tf_keras.utils.set_random_seed(2)
  inputs = tf_keras.Input((4,), name='x')
  outputs = tf_keras.layers.Dense(1, name='out')(inputs)
  model = tf_keras.Model(inputs, outputs)
  model.compile(optimizer=tf_keras.optimizers.legacy.SGD(0.05), loss='mse')
  x = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
  y = x.sum(axis=1, keepdims=True)

  def input_fn():
    return tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(8)
  estimator = tfe.keras.model_to_estimator(keras_model=model, model_dir=str(tmp_path))
  assert estimator.train(input_fn) is estimator
  assert _checkpoint_step(estimator) == 5


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
