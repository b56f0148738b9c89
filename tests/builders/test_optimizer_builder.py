"""Tests for builders.optimizer_builder: schedules, optimizers, EMA, scaling."""

import os

import numpy as np
import tensorflow as tf
import tf_slim as slim

from google.protobuf import text_format

from builders import optimizer_builder
from core import moving_averages
from protos import eval_pb2
from protos import optimizer_pb2
from protos import train_pb2

tf.compat.v1.disable_eager_execution()


def _learning_rate(text):
  config = optimizer_pb2.LearningRate()
  text_format.Merge(text, config)
  return config


def _optimizer(text):
  config = optimizer_pb2.Optimizer()
  text_format.Merge(text, config)
  return config


class LearningRateBuilderTest(tf.test.TestCase):

  def _build_and_run(self, text, step=0, scale=1.0):
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      learning_rate = optimizer_builder._create_learning_rate(
          _learning_rate(text), global_step, scale)
      self.assertTrue(learning_rate.op.name.endswith('learning_rate'),
                      learning_rate.op.name)
      self.assertIsInstance(learning_rate, tf.Tensor)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(global_step.assign(step))
        return sess.run(learning_rate)

  def test_build_constant_learning_rate(self):
    value = self._build_and_run(
        'constant_learning_rate { learning_rate: 0.004 }')
    self.assertAlmostEqual(value, 0.004, places=6)

  def test_build_exponential_decay_learning_rate(self):
    text = """
      exponential_decay_learning_rate {
        initial_learning_rate: 0.004
        decay_steps: 99999
        decay_factor: 0.85
        staircase: false
      }
    """
    self.assertAlmostEqual(self._build_and_run(text), 0.004, places=6)
    self.assertAlmostEqual(self._build_and_run(text, step=99999), 0.004 * 0.85,
                           places=6)

  def test_build_manual_step_learning_rate(self):
    text = """
      manual_step_learning_rate {
        initial_learning_rate: 0.002
        schedule { step: 100 learning_rate: 0.006 }
        schedule { step: 90000 learning_rate: 0.00006 }
        warmup: true
      }
    """
    self.assertAlmostEqual(self._build_and_run(text, step=0), 0.002, places=6)
    self.assertAlmostEqual(self._build_and_run(text, step=50), 0.004, places=6)
    self.assertAlmostEqual(self._build_and_run(text, step=100), 0.006,
                           places=6)
    self.assertAlmostEqual(self._build_and_run(text, step=90000), 0.00006,
                           places=7)

  def test_build_cosine_decay_learning_rate(self):
    text = """
      cosine_decay_learning_rate {
        learning_rate_base: 0.002
        total_steps: 20000
        warmup_learning_rate: 0.0001
        warmup_steps: 1000
        hold_base_rate_steps: 2000
      }
    """
    self.assertAlmostEqual(self._build_and_run(text, step=0), 0.0001, places=7)
    self.assertAlmostEqual(self._build_and_run(text, step=2500), 0.002,
                           places=6)
    self.assertAlmostEqual(self._build_and_run(text, step=20001), 0.0)

  def test_raise_error_on_empty_learning_rate(self):
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError,
                                  'Learning_rate None not supported.'):
        optimizer_builder._create_learning_rate(_learning_rate(''))

  def test_raise_error_on_empty_manual_schedule(self):
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, 'Empty learning rate schedule.'):
        optimizer_builder._create_learning_rate(_learning_rate(
            'manual_step_learning_rate { initial_learning_rate: 0.1 }'))


class OptimizerBuilderTest(tf.test.TestCase):

  def _build(self, text, **kwargs):
    with tf.Graph().as_default():
      return optimizer_builder.build(_optimizer(text), **kwargs)

  def test_build_rms_prop_optimizer(self):
    optimizer, summary_vars = self._build("""
      rms_prop_optimizer {
        learning_rate { exponential_decay_learning_rate {
          initial_learning_rate: 0.004  decay_steps: 800720
          decay_factor: 0.95 } }
        momentum_optimizer_value: 0.8
        decay: 0.7
        epsilon: 1.0
      }
      use_moving_average: false
    """)
    self.assertIsInstance(optimizer, tf.compat.v1.train.RMSPropOptimizer)
    self.assertAlmostEqual(optimizer._momentum, 0.8, places=6)
    self.assertAlmostEqual(optimizer._decay, 0.7, places=6)
    self.assertAlmostEqual(optimizer._epsilon, 1.0)
    self.assertLen(summary_vars, 1)
    self.assertTrue(summary_vars[0].op.name.endswith('learning_rate'))
    self.assertIs(optimizer._learning_rate, summary_vars[0])

  def test_build_momentum_optimizer(self):
    optimizer, _ = self._build("""
      momentum_optimizer {
        learning_rate { constant_learning_rate { learning_rate: 0.001 } }
        momentum_optimizer_value: 0.99
      }
      use_moving_average: false
    """)
    self.assertIsInstance(optimizer, tf.compat.v1.train.MomentumOptimizer)
    self.assertAlmostEqual(optimizer._momentum, 0.99, places=6)

  def test_build_adam_optimizer(self):
    optimizer, _ = self._build("""
      adam_optimizer {
        learning_rate { constant_learning_rate { learning_rate: 0.002 } }
        epsilon: 0.01
        beta1: 0.8
      }
      use_moving_average: false
    """)
    self.assertIsInstance(optimizer, tf.compat.v1.train.AdamOptimizer)
    self.assertAlmostEqual(optimizer._epsilon, 0.01, places=6)
    self.assertAlmostEqual(optimizer._beta1, 0.8, places=6)
    self.assertAlmostEqual(optimizer._beta2, 0.999, places=6)

  def test_build_sgd_optimizer(self):
    optimizer, _ = self._build("""
      sgd_optimizer {
        learning_rate { constant_learning_rate { learning_rate: 0.1 } }
      }
    """)
    self.assertIsInstance(optimizer,
                          tf.compat.v1.train.GradientDescentOptimizer)

  def test_moving_average_is_off_by_default(self):
    config = optimizer_pb2.Optimizer()
    self.assertFalse(config.use_moving_average)

  def test_build_moving_average_optimizer(self):
    optimizer, _ = self._build("""
      adam_optimizer {
        learning_rate { constant_learning_rate { learning_rate: 0.002 } }
      }
      use_moving_average: true
    """)
    self.assertIsInstance(optimizer, optimizer_builder.MovingAverageOptimizer)
    self.assertIsInstance(optimizer, tf.compat.v1.train.Optimizer)
    self.assertIsInstance(optimizer.optimizer, tf.compat.v1.train.AdamOptimizer)
    self.assertAlmostEqual(optimizer.ema._decay, 0.9999, places=6)

  def test_build_moving_average_optimizer_with_non_default_decay(self):
    optimizer, _ = self._build("""
      adam_optimizer {
        learning_rate { constant_learning_rate { learning_rate: 0.002 } }
      }
      use_moving_average: true
      moving_average_decay: 0.2
    """)
    self.assertIsInstance(optimizer, optimizer_builder.MovingAverageOptimizer)
    self.assertAlmostEqual(optimizer.ema._decay, 0.2, places=6)

  def test_build_empty_optimizer(self):
    with self.assertRaisesRegex(ValueError, 'Optimizer None not supported.'):
      self._build('')

  def test_build_optimizer_without_learning_rate(self):
    with self.assertRaisesRegex(ValueError,
                                'Learning_rate None not supported.'):
      self._build('momentum_optimizer { momentum_optimizer_value: 0.9 }')

  def test_uses_given_global_step(self):
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      _, (learning_rate,) = optimizer_builder.build(_optimizer("""
        sgd_optimizer { learning_rate { manual_step_learning_rate {
          initial_learning_rate: 1.0
          schedule { step: 5 learning_rate: 0.5 } } } }
      """), global_step=step)
      self.assertEmpty(tf.compat.v1.global_variables())
      with self.session() as sess:
        self.assertAllClose(sess.run(learning_rate, {step: 4}), 1.0)
        self.assertAllClose(sess.run(learning_rate, {step: 5}), 0.5)


class LinearScalingTest(tf.test.TestCase):

  def _rate(self, text, global_batch_size, step=0):
    with tf.Graph().as_default():
      step_tensor = tf.constant(step, tf.int64)
      _, (learning_rate,) = optimizer_builder.build(
          _optimizer(text), global_step=step_tensor,
          global_batch_size=global_batch_size)
      self.assertTrue(learning_rate.op.name.endswith('learning_rate'))
      with self.session() as sess:
        return sess.run(learning_rate)

  def test_linear_scaling_multiplies_constant_rate(self):
    text = """
      momentum_optimizer { learning_rate {
        constant_learning_rate { learning_rate: 0.01 } } }
      learning_rate_scaling: LINEAR
      reference_batch_size: 64
    """
    self.assertAllClose(self._rate(text, 256), 0.04)
    self.assertAllClose(self._rate(text, 64), 0.01)
    self.assertAllClose(self._rate(text, 32), 0.005)

  def test_linear_scaling_scales_whole_schedule(self):
    text = """
      sgd_optimizer { learning_rate { manual_step_learning_rate {
        initial_learning_rate: 0.1
        schedule { step: 10 learning_rate: 0.2 }
        schedule { step: 20 learning_rate: 0.02 }
        warmup: true } } }
      learning_rate_scaling: LINEAR
      reference_batch_size: 32
    """
    rates = [self._rate(text, 128, step) for step in (0, 5, 10, 25)]
    self.assertAllClose(rates, [0.4, 0.6, 0.8, 0.08])
    cosine = """
      sgd_optimizer { learning_rate { cosine_decay_learning_rate {
        learning_rate_base: 0.1  total_steps: 100
        warmup_learning_rate: 0.01  warmup_steps: 10 } } }
      learning_rate_scaling: LINEAR
      reference_batch_size: 10
    """
    self.assertAllClose(self._rate(cosine, 20, 0), 0.02)
    self.assertAllClose(self._rate(cosine, 20, 10), 0.2)
    exponential = """
      sgd_optimizer { learning_rate { exponential_decay_learning_rate {
        initial_learning_rate: 0.1  decay_steps: 10  decay_factor: 0.5
        burnin_learning_rate: 0.01  burnin_steps: 5
        min_learning_rate: 0.04 } } }
      learning_rate_scaling: LINEAR
      reference_batch_size: 10
    """
    self.assertAllClose(self._rate(exponential, 30, 0), 0.12)
    self.assertAllClose(self._rate(exponential, 30, 5), 0.3)
    self.assertAllClose(self._rate(exponential, 30, 35), 0.12)

  def test_no_scaling_ignores_global_batch_size(self):
    text = """
      sgd_optimizer { learning_rate {
        constant_learning_rate { learning_rate: 0.01 } } }
    """
    self.assertAllClose(self._rate(text, 1024), 0.01)
    self.assertAllClose(self._rate(text, None), 0.01)

  def test_linear_scaling_requires_global_batch_size(self):
    config = _optimizer("""
      sgd_optimizer { learning_rate {
        constant_learning_rate { learning_rate: 0.01 } } }
      learning_rate_scaling: LINEAR
    """)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError,
                                  'LINEAR but no global_batch_size'):
        optimizer_builder.build(config)
      with self.assertRaisesRegex(ValueError, 'must be positive'):
        optimizer_builder.build(config, global_batch_size=0)
      config.reference_batch_size = 0
      with self.assertRaisesRegex(ValueError, 'reference_batch_size'):
        optimizer_builder.build(config, global_batch_size=8)


class TrainConfigTest(tf.test.TestCase):
  """The global batch of a TrainConfig and the moving-average decision."""

  def _train_config(self, text):
    return text_format.Parse(text, train_pb2.TrainConfig())

  def test_global_batch_counts_workers_or_aggregated_replicas(self):
    asynchronous = self._train_config('batch_size: 8')
    self.assertEqual(optimizer_builder.global_batch_size(asynchronous, 1), 8)
    self.assertEqual(optimizer_builder.global_batch_size(asynchronous, 4), 32)
    synchronous = self._train_config('batch_size: 8 sync_replicas: true '
                                     'replicas_to_aggregate: 3')
    self.assertEqual(optimizer_builder.global_batch_size(synchronous, 4), 24)

  def test_build_for_training_scales_by_the_global_batch(self):
    config = self._train_config("""
      batch_size: 8
      optimizer { sgd_optimizer { learning_rate {
          constant_learning_rate { learning_rate: 0.1 } } }
        learning_rate_scaling: LINEAR reference_batch_size: 8 }
    """)
    with tf.Graph().as_default():
      _, (rate,) = optimizer_builder.build_for_training(config, 3)
      with self.session() as sess:
        self.assertAllClose(sess.run(rate), 0.3)

  def test_moving_averages_when_either_flag_asks(self):
    train = self._train_config('optimizer { use_moving_average: true }')
    plain = self._train_config('')
    asked = eval_pb2.EvalConfig(use_moving_averages=True)
    self.assertTrue(moving_averages.uses_moving_averages(train, eval_pb2.EvalConfig()))
    self.assertTrue(moving_averages.uses_moving_averages(plain, asked))
    self.assertFalse(moving_averages.uses_moving_averages(plain, eval_pb2.EvalConfig()))
    self.assertIs(optimizer_builder.MovingAverageOptimizer,
                  moving_averages.MovingAverageOptimizer)


class MovingAverageTest(tf.test.TestCase):
  """Trains `x += 1` per step with decay 0.5, so averages are known exactly.

  The average starts at the initial value 0 and is updated after the
  variable: 0.5, 1.25, 2.125 after steps 1, 2, 3.
  """

  _CONFIG = """
    sgd_optimizer { learning_rate {
      constant_learning_rate { learning_rate: 1.0 } } }
    use_moving_average: true
    moving_average_decay: 0.5
  """

  def _build_training_graph(self, use_slim_train_op=False):
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.compat.v1.get_variable('x', initializer=0.0)
    w = tf.compat.v1.get_variable(
        'w', shape=[4], initializer=tf.compat.v1.zeros_initializer(),
        partitioner=tf.compat.v1.fixed_size_partitioner(2))
    loss = -x - tf.reduce_sum(tf.stack([tf.reduce_sum(p) for p in w]))
    optimizer, _ = optimizer_builder.build(_optimizer(self._CONFIG),
                                           global_step=global_step)
    if use_slim_train_op:
      train_op = slim.learning.create_train_op(loss, optimizer,
                                               global_step=global_step)
    else:
      train_op = optimizer.minimize(loss, global_step=global_step)
    return optimizer, train_op, x, w, global_step

  def _train(self, sess, train_op, steps=3):
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(steps):
      sess.run(train_op)

  def test_swapping_saver_requires_apply_gradients(self):
    with tf.Graph().as_default():
      optimizer, _ = optimizer_builder.build(_optimizer(self._CONFIG))
      with self.assertRaisesRegex(RuntimeError, 'apply_gradients'):
        optimizer.swapping_saver()

  def test_averages_follow_variables_after_each_step(self):
    for use_slim_train_op in (False, True):
      with tf.Graph().as_default():
        optimizer, train_op, x, w, global_step = self._build_training_graph(
            use_slim_train_op)
        x_average = optimizer.ema.average(x)
        self.assertEqual(x_average.op.name, 'x/ExponentialMovingAverage')
        self.assertLen(optimizer.averaged_variables(), 3)
        with self.session() as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          averages = []
          for _ in range(3):
            sess.run(train_op)
            averages.append(sess.run(x_average))
          self.assertAllClose(averages, [0.5, 1.25, 2.125])
          self.assertAllClose(sess.run(x), 3.0)
          self.assertEqual(sess.run(global_step), 3)
          w_averages = [sess.run(optimizer.ema.average(p)) for p in w]
          self.assertAllClose(np.concatenate(w_averages), [2.125] * 4)

  def test_wraps_into_sync_replicas_optimizer(self):
    # Graph construction only: running sync replicas needs the chief queue
    # runner, which the trainer tests exercise.
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      x = tf.compat.v1.get_variable('x', initializer=0.0)
      optimizer, _ = optimizer_builder.build(_optimizer(self._CONFIG),
                                             global_step=global_step)
      sync_optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=2, total_num_replicas=2)
      sync_optimizer.minimize(-x, global_step=global_step)
      average = optimizer.ema.average(x)
      self.assertEqual(average.op.name, 'x/ExponentialMovingAverage')
      self.assertIn(average, sync_optimizer.variables())
      self.assertIsNotNone(sync_optimizer.get_chief_queue_runner())

  def test_swapping_saver_restores_averages_into_variables(self):
    checkpoint = os.path.join(self.get_temp_dir(), 'restore', 'model.ckpt')
    with tf.Graph().as_default():
      optimizer, train_op, x, w, _ = self._build_training_graph()
      saver = tf.compat.v1.train.Saver()
      swapping_saver = optimizer.swapping_saver()
      with self.session() as sess:
        self._train(sess, train_op)
        saver.save(sess, checkpoint)
      with self.session() as sess:
        swapping_saver.restore(sess, checkpoint)
        self.assertAllClose(sess.run(x), 2.125)
        self.assertAllClose(sess.run(w.as_tensor()), [2.125] * 4)
        self.assertAllClose(sess.run(optimizer.ema.average(x)), 3.0)

  def test_swapping_saver_writes_averages_under_model_names(self):
    checkpoint = os.path.join(self.get_temp_dir(), 'swapped', 'model.ckpt')
    with tf.Graph().as_default():
      optimizer, train_op, _, _, _ = self._build_training_graph()
      swapping_saver = optimizer.swapping_saver()
      with self.session() as sess:
        self._train(sess, train_op)
        swapping_saver.save(sess, checkpoint)
    reader = tf.compat.v1.train.NewCheckpointReader(checkpoint)
    self.assertAllClose(reader.get_tensor('x'), 2.125)
    self.assertAllClose(reader.get_tensor('x/ExponentialMovingAverage'), 3.0)
    self.assertAllClose(reader.get_tensor('w'), [2.125] * 4)
    self.assertEqual(reader.get_tensor('global_step'), 3)
    # An export graph without any averages reads it with a plain Saver.
    with tf.Graph().as_default():
      x = tf.compat.v1.get_variable('x', initializer=0.0)
      with self.session() as sess:
        tf.compat.v1.train.Saver([x]).restore(sess, checkpoint)
        self.assertAllClose(sess.run(x), 2.125)

  def test_moving_average_restore_map_for_eval_graph(self):
    checkpoint = os.path.join(self.get_temp_dir(), 'eval', 'model.ckpt')
    with tf.Graph().as_default():
      _, train_op, _, _, _ = self._build_training_graph()
      saver = tf.compat.v1.train.Saver()
      with self.session() as sess:
        self._train(sess, train_op)
        saver.save(sess, checkpoint)
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      x = tf.compat.v1.get_variable('x', initializer=0.0)
      w = tf.compat.v1.get_variable(
          'w', shape=[4], initializer=tf.compat.v1.zeros_initializer(),
          partitioner=tf.compat.v1.fixed_size_partitioner(2))
      not_averaged = tf.compat.v1.get_variable('never_trained',
                                               initializer=5.0)
      restore_map = optimizer_builder.moving_average_restore_map(
          checkpoint_path=os.path.dirname(checkpoint))
      self.assertIn('x/ExponentialMovingAverage', restore_map)
      self.assertIn('w/ExponentialMovingAverage', restore_map)
      self.assertIn('global_step', restore_map)
      self.assertIn('never_trained', restore_map)
      del restore_map['never_trained']
      with self.session() as sess:
        tf.compat.v1.train.Saver(restore_map).restore(sess, checkpoint)
        self.assertAllClose(sess.run(x), 2.125)
        self.assertAllClose(sess.run(w.as_tensor()), [2.125] * 4)
        self.assertEqual(sess.run(global_step), 3)
      self.assertIsNotNone(not_averaged)


if __name__ == '__main__':
  tf.test.main()
