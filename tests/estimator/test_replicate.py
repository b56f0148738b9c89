"""num_clones with a model_fn that trains through two optimizers (replicate.py).

The model_fn is written like a wide-and-deep user model: a hidden layer
trained by Momentum and a linear part trained by Adagrad, both wrapped in
`tfe.TowerOptimizer`, and the global step incremented by the model_fn after
both updates. With two clones on two virtual CPU devices every recorded
optimizer is applied to its clones' averaged gradients, the global step
moves once per step, and the variables end exactly as with one clone.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy
from tests import test_util
from tests.estimator import mnist_testlib as mnist
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()


def _two_optimizer_model_fn(features, labels, mode):
  images = tf.reshape(features['images'], [-1, 64])
  with tf.compat.v1.variable_scope('deep') as deep:
    hidden = slim.fully_connected(images, 16, scope='hidden',
                                  weights_initializer=tf.compat.v1.glorot_uniform_initializer(
                                      seed=1))
    deep_logits = slim.fully_connected(hidden, 10, activation_fn=None, scope='logits',
                                       weights_initializer=tf.compat.v1.glorot_uniform_initializer(
                                           seed=2))
  with tf.compat.v1.variable_scope('wide') as wide:
    wide_logits = slim.fully_connected(images, 10, activation_fn=None, scope='logits',
                                       weights_initializer=tf.compat.v1.zeros_initializer())
  logits = deep_logits + wide_logits
  loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = None
  if mode == tfe.ModeKeys.TRAIN:
    trainable = tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES
    deep_opt = tfe.TowerOptimizer(tf.compat.v1.train.MomentumOptimizer(0.05, 0.9))
    wide_opt = tfe.TowerOptimizer(tf.compat.v1.train.AdagradOptimizer(0.1))
    updates = [
        deep_opt.minimize(loss, var_list=tf.compat.v1.get_collection(trainable, deep.name)),
        wide_opt.minimize(loss, var_list=tf.compat.v1.get_collection(trainable, wide.name))]
    with tf.control_dependencies(updates):
      train_op = tf.compat.v1.assign_add(tf.compat.v1.train.get_global_step(), 1).op
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op,
                           predictions={'logits': logits})


def _train(model_dir, num_clones, steps=12):
  deploy = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_devices=['/device:CPU:%d' % i for i in range(num_clones)])
  config = tfe.RunConfig(tf_random_seed=3, save_checkpoints_steps=steps,
                         session_config=test_util.session_config(num_cpus=2),
                         deployment_config=deploy)
  est = tfe.Estimator(_two_optimizer_model_fn, model_dir=str(model_dir), config=config)
  est.train(mnist.train_input_fn(batch_size=32, shuffle=False), max_steps=steps)
  return est


def test_two_clones_apply_both_optimizers_like_one_clone(tmp_path):
  one = _train(tmp_path / 'one', 1)
  two = _train(tmp_path / 'two', 2)
  names = one.get_variable_names()
  assert names == two.get_variable_names()
  # Both optimizers' slots exist once (clone 0's optimizers), without clone scopes.
  assert any(n.startswith('deep/hidden/weights/Momentum') for n in names), names
  assert any(n.startswith('wide/logits/weights/Adagrad') for n in names), names
  assert not any(n.startswith('clone_') for n in names), names
  # Incremented once per step, not once per optimizer or per clone.
  assert two.get_variable_value('global_step') == 12
  for name in names:
    np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-4, atol=1e-6, err_msg=name)
  # Both parts moved from their initial values.
  assert np.abs(two.get_variable_value('wide/logits/weights')).max() > 1e-3


def test_clones_must_apply_gradients_the_same_number_of_times(tmp_path):
  calls = []

  def model_fn(features, labels, mode):
    calls.append(1)
    logits = slim.fully_connected(tf.reshape(features['images'], [-1, 64]), 10,
                                  activation_fn=None, scope='logits')
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.compat.v1.train.get_global_step()
    ops = [tfe.TowerOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1)).minimize(
        loss, step)]
    if len(calls) == 2:  # The second clone applies a second time.
      ops.append(tfe.TowerOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1)).minimize(
          loss))
    return tfe.EstimatorSpec(mode, loss=loss, train_op=tf.group(*ops))

  config = tfe.RunConfig(session_config=test_util.session_config(num_cpus=2),
                         deployment_config=model_deploy.DeploymentConfig(
                             num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1']))
  est = tfe.Estimator(model_fn, model_dir=str(tmp_path), config=config)
  with pytest.raises(ValueError, match='clone 1 applied gradients 2 times but clone 0 1 times'):
    est.train(mnist.train_input_fn(), steps=1)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
