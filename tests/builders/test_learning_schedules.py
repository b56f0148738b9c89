"""Tests for utils.learning_schedules: OD API values, names and errors."""

import numpy as np
import tensorflow as tf

from utils import learning_schedules

tf.compat.v1.disable_eager_execution()


class LearningSchedulesTest(tf.test.TestCase):

  def _rates(self, build_fn, steps):
    """Builds the schedule on an int64 placeholder step and evaluates it."""
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, shape=[])
      learning_rate = build_fn(step)
      self.assertTrue(learning_rate.op.name.endswith('learning_rate'),
                      learning_rate.op.name)
      self.assertEqual(learning_rate.dtype, tf.float32)
      with self.session() as sess:
        return [sess.run(learning_rate, {step: np.int64(s)}) for s in steps]

  def test_exponential_decay_with_burnin(self):
    rates = self._rates(
        lambda step: learning_schedules.exponential_decay_with_burnin(
            step, learning_rate_base=1.0, learning_rate_decay_steps=3,
            learning_rate_decay_factor=.1, burnin_learning_rate=.5,
            burnin_steps=2, min_learning_rate=.05), range(9))
    self.assertAllClose(rates, [.5, .5, 1, 1, 1, .1, .1, .1, .05], rtol=1e-4)

  def test_exponential_decay_burnin_rate_zero_means_base(self):
    rates = self._rates(
        lambda step: learning_schedules.exponential_decay_with_burnin(
            step, 1.0, 3, .1, burnin_learning_rate=0.0, burnin_steps=2),
        range(6))
    self.assertAllClose(rates, [1, 1, 1, 1, 1, .1], rtol=1e-4)

  def test_exponential_decay_without_staircase(self):
    rates = self._rates(
        lambda step: learning_schedules.exponential_decay_with_burnin(
            step, 1.0, 2, .25, staircase=False), [0, 1, 2])
    self.assertAllClose(rates, [1.0, .5, .25], rtol=1e-4)

  def test_exponential_decay_with_warmup(self):
    rates = self._rates(
        lambda step: learning_schedules.exponential_decay_with_warmup(
            step, learning_rate_base=1.0, learning_rate_decay_steps=3,
            learning_rate_decay_factor=.1, warmup_learning_rate=.5,
            warmup_steps=2, min_learning_rate=.05), range(9))
    self.assertAllClose(rates, [.5, .75, 1, 1, 1, .1, .1, .1, .05], rtol=1e-4)

  def test_exponential_decay_with_warmup_rejects_base_below_warmup(self):
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, 'learning_rate_base must be'):
        learning_schedules.exponential_decay_with_warmup(
            tf.constant(0, tf.int64), 0.1, 3, .1, warmup_learning_rate=.5,
            warmup_steps=2)

  def test_cosine_decay_with_warmup(self):
    rates = self._rates(
        lambda step: learning_schedules.cosine_decay_with_warmup(
            step, learning_rate_base=1.0, total_steps=100,
            warmup_learning_rate=0.1, warmup_steps=9), [0, 4, 8, 9, 100])
    self.assertAllClose(rates, [0.1, 0.5, 0.9, 1.0, 0], rtol=1e-4, atol=1e-6)

  def test_cosine_decay_after_total_steps(self):
    rates = self._rates(
        lambda step: learning_schedules.cosine_decay_with_warmup(
            step, 1.0, 100, 0.1, 9), [101, 1000])
    self.assertAllClose(rates, [0, 0])

  def test_cosine_decay_with_hold_base_learning_rate_steps(self):
    rates = self._rates(
        lambda step: learning_schedules.cosine_decay_with_warmup(
            step, learning_rate_base=1.0, total_steps=120,
            warmup_learning_rate=0.1, warmup_steps=9,
            hold_base_rate_steps=20), [0, 1, 5, 9, 10, 29, 30, 50, 120])
    self.assertAllClose(
        rates, [0.1, 0.2, 0.6, 1.0, 1.0, 1.0, 0.999702, 0.874255, 0.0],
        rtol=1e-4, atol=1e-6)

  def test_cosine_decay_errors(self):
    with tf.Graph().as_default():
      step = tf.constant(0, tf.int64)
      with self.assertRaisesRegex(
          ValueError, 'total_steps must be larger or equal to warmup_steps.'):
        learning_schedules.cosine_decay_with_warmup(step, 1.0, 10, 0.1, 11)
      with self.assertRaisesRegex(
          ValueError,
          'learning_rate_base must be larger or equal to warmup_learning_rate'):
        learning_schedules.cosine_decay_with_warmup(step, 0.1, 100, 1.0, 10)

  def test_manual_stepping(self):
    rates = self._rates(
        lambda step: learning_schedules.manual_stepping(
            step, boundaries=[2, 3, 7], rates=[1.0, 2.0, 3.0, 4.0]),
        range(10))
    self.assertAllClose(rates, [1, 1, 2, 3, 3, 3, 3, 4, 4, 4])

  def test_manual_stepping_with_zero_boundaries(self):
    rates = self._rates(
        lambda step: learning_schedules.manual_stepping(step, [], [.01]),
        range(4))
    self.assertAllClose(rates, [.01] * 4)

  def test_manual_stepping_with_warmup(self):
    rates = self._rates(
        lambda step: learning_schedules.manual_stepping(
            step, boundaries=[4, 6, 8], rates=[.02, .10, .01, .001],
            warmup=True), range(9))
    self.assertAllClose(rates, [.02, .04, .06, .08, .10, .10, .01, .01, .001])

  def test_manual_stepping_errors(self):
    with tf.Graph().as_default():
      step = tf.constant(0, tf.int64)
      cases = [
          (([-1, 3], [1.0, 2.0, 3.0]),
           'boundaries must be a list of positive integers'),
          (([1.5, 3], [1.0, 2.0, 3.0]),
           'boundaries must be a list of positive integers'),
          (([3, 3], [1.0, 2.0, 3.0]),
           'Entries in boundaries must be strictly increasing.'),
          (([2, 3], [1.0, 2, 3.0]), 'Learning rates must be floats'),
          (([2, 3], [1.0, 2.0]),
           'Number of provided learning rates must exceed number of boundary '
           'points by exactly 1.'),
          (([0, 3], [1.0, 2.0, 3.0]), 'First step cannot be zero.'),
      ]
      for (boundaries, rates), message in cases:
        with self.assertRaisesRegex(ValueError, message):
          learning_schedules.manual_stepping(step, boundaries, rates)

  def test_schedule_reads_global_step_variable(self):
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      learning_rate = learning_schedules.manual_stepping(
          global_step, [2], [1.0, 0.5])
      advance = tf.compat.v1.assign_add(global_step, 1)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        values = []
        for _ in range(4):
          values.append(sess.run(learning_rate))
          sess.run(advance)
    self.assertAllClose(values, [1.0, 1.0, 0.5, 0.5])


if __name__ == '__main__':
  tf.test.main()
