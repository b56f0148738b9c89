"""Tests for trainer.numerics: the gradient-norm check, the NaN-loss injector and the
mixed precision check."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import numerics

tf.compat.v1.disable_eager_execution()


def _sgd_step(gradient_scale):
  """A variable, a finite loss, and a train op whose gradient is scaled by `gradient_scale`."""
  var = tf.compat.v1.get_variable('w', initializer=tf.constant([1.0, 2.0]))
  loss = tf.reduce_sum(var)
  grads_and_vars = [(tf.ones_like(var) * gradient_scale, var)]
  train_op = tf.compat.v1.train.GradientDescentOptimizer(1.0).apply_gradients(
      numerics.check_gradient_norm(grads_and_vars))
  return var, loss, train_op


@pytest.mark.parametrize('bad_value', [np.nan, np.inf, -np.inf])
def test_non_finite_gradient_fails_and_leaves_the_variable(bad_value):
  with tf.Graph().as_default():
    var, loss, train_op = _sgd_step(bad_value)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      assert np.isfinite(sess.run(loss))
      with pytest.raises(tf.errors.InvalidArgumentError, match=numerics.GRADIENT_NORM_MESSAGE):
        sess.run(train_op)
      np.testing.assert_array_equal(sess.run(var), [1.0, 2.0])


def test_finite_gradient_is_applied_unchanged():
  with tf.Graph().as_default():
    var, _, train_op = _sgd_step(0.5)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(train_op)
      np.testing.assert_array_equal(sess.run(var), [0.5, 1.5])


def test_sparse_and_missing_gradients_are_checked_and_kept():
  with tf.Graph().as_default():
    table = tf.compat.v1.get_variable('table', initializer=tf.zeros([4, 2]))
    unused = tf.compat.v1.get_variable('unused', initializer=tf.zeros([1]))
    values = tf.compat.v1.placeholder(tf.float32, [1, 2])
    sparse = tf.IndexedSlices(values, tf.constant([2]), tf.constant([4, 2]))
    checked = numerics.check_gradient_norm([(sparse, table), (None, unused)])
    assert isinstance(checked[0][0], tf.IndexedSlices) and checked[1] == (None, unused)
    with tf.compat.v1.Session() as sess:
      np.testing.assert_array_equal(sess.run(checked[0][0].values, {values: [[3.0, 4.0]]}),
                                    [[3.0, 4.0]])
      with pytest.raises(tf.errors.InvalidArgumentError, match='Gradient global norm'):
        sess.run(checked[0][0].values, {values: [[np.inf, 0.0]]})



def test_a_nan_loss_is_reported_before_its_nan_gradients():
  # One identity per gradient waits for both checks; the norm check runs
  # after the loss check, so a NaN loss never reads as a gradient failure.
  with tf.Graph().as_default():
    var = tf.compat.v1.get_variable('w', initializer=tf.constant([1.0, 2.0]))
    loss = tf.debugging.check_numerics(tf.reduce_sum(var) * np.nan, 'LOSS IS NAN')
    grads_and_vars = numerics.check_gradient_norm(
        tf.compat.v1.train.GradientDescentOptimizer(1.0).compute_gradients(loss),
        also_wait_for=loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(1.0).apply_gradients(grads_and_vars)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(20):
        with pytest.raises(tf.errors.InvalidArgumentError, match='LOSS IS NAN'):
          sess.run(train_op)
      np.testing.assert_array_equal(sess.run(var), [1.0, 2.0])

def test_inject_nan_loss_only_at_the_chosen_step():
  with tf.Graph().as_default():
    step = tf.compat.v1.placeholder(tf.int64, [])
    loss = numerics.inject_nan_loss(tf.constant(2.5), step, at_step=7)
    with tf.compat.v1.Session() as sess:
      assert [sess.run(loss, {step: s}) for s in (6, 8)] == [2.5, 2.5]
      assert np.isnan(sess.run(loss, {step: 7}))


def test_inject_nan_loss_off_returns_the_loss_itself():
  with tf.Graph().as_default():
    loss = tf.constant(1.0)
    assert numerics.inject_nan_loss(loss, tf.constant(3, tf.int64), at_step=0) is loss


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))


@pytest.mark.parametrize('gradient', [1.0, np.inf, np.nan])
def test_mixed_precision_check_says_whether_the_loss_scale_skipped_the_update(gradient):
  with tf.Graph().as_default():
    var = tf.compat.v1.get_variable('w', initializer=tf.constant([1.0, 2.0]))
    optimizer = tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite(
        tf.compat.v1.train.GradientDescentOptimizer(1.0), loss_scale='dynamic')
    try:
      grads_and_vars = [(tf.ones_like(var) * gradient, var)]
      update = optimizer.apply_gradients(grads_and_vars)
      skipped, loss_scale = numerics.mixed_precision_check(grads_and_vars, optimizer, update)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        was_skipped, scale_after = sess.run([skipped, loss_scale])
        after = sess.run(var)
    finally:
      tf.compat.v1.mixed_precision.disable_mixed_precision_graph_rewrite()
  bad = not np.isfinite(gradient)
  assert was_skipped == bad
  # The dynamic scale starts at 2^15 and halves on a skipped step; the read
  # comes after the update.
  assert scale_after == (2.0 ** 14 if bad else 2.0 ** 15)
  np.testing.assert_array_equal(after, [1.0, 2.0] if bad else [0.0, 1.0])
