"""Every tf_slim function slimtrain calls, run for real on TF 2.21 through core.compat.

Each test builds a real graph and runs it in a real session (training writes
real checkpoints into a temp dir), so a TF or tf-slim upgrade that breaks a
call slimtrain makes fails here. Run the file with `SLIMTRAIN_DISABLE_COMPAT=1`
to see which calls still need the compat layer; core/COMPAT.md lists the
tests that fail that way today.

    .venv/bin/python -m pytest tests/compat/test_compat.py -q
    SLIMTRAIN_DISABLE_COMPAT=1 .venv/bin/python -m pytest tests/compat/test_compat.py -q
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

from core import compat
import tf_slim as slim
from tf_slim.data import prefetch_queue
from tf_slim.data import tfexample_decoder
from tf_slim.nets import inception_v3
from tf_slim.nets import resnet_v1
from tf_slim.nets import resnet_v2
from tf_slim.nets import vgg

tf.compat.v1.disable_eager_execution()

tf1 = tf.compat.v1
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _session_config():
  """A small-footprint session config: the test machines have two cores.

  Returns:
    A `ConfigProto` with one intra-op and two inter-op threads.
  """
  return tf1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)


def _logistic_regression_data(seed=0):
  """A tiny separable data set.

  Args:
    seed: numpy seed.

  Returns:
    (inputs [16, 4] float32, labels [16, 1] float32).
  """
  rng = np.random.RandomState(seed)
  labels = rng.randint(0, 2, size=(16, 1)).astype(np.float32)
  inputs = np.zeros((16, 4), np.float32)
  for i in range(16):
    inputs[i, int(2 * labels[i, 0] + rng.randint(0, 2))] = 1
  return inputs, labels


def _logistic_loss(inputs, labels):
  """A one-layer logistic model on constant data.

  Args:
    inputs: [N, 4] numpy array.
    labels: [N, 1] numpy array.

  Returns:
    The scalar total loss (tf1.losses collection included).
  """
  predictions = slim.fully_connected(tf.constant(inputs), 1, activation_fn=tf.sigmoid,
                                     scope='logits')
  tf1.losses.log_loss(tf.constant(labels), predictions)
  return tf1.losses.get_total_loss()


def _encode_image(image, fmt):
  """Encodes a uint8 HWC numpy image as jpeg/png bytes (graph-mode TF ops).

  Args:
    image: uint8 numpy array [H, W, C].
    fmt: 'jpeg' or 'png'.

  Returns:
    The encoded bytes.
  """
  with tf.Graph().as_default(), tf1.Session(config=_session_config()) as sess:
    if fmt == 'jpeg':
      encoded = tf.image.encode_jpeg(tf.constant(image), quality=100)
    else:
      encoded = tf.image.encode_png(tf.constant(image))
    return sess.run(encoded)


def _bytes_feature(values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _int64_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


class CompatLayerTest(tf.test.TestCase):
  """The compat module's own contract: what it restores and the env switch."""

  def test_every_needed_fix_is_applied(self):
    if os.environ.get(compat.DISABLE_ENV):
      self.skipTest('compat disabled by %s' % compat.DISABLE_ENV)
    self.assertCountEqual(compat.needed_fixes(), compat.applied_fixes())
    for fix in compat.FIXES:
      self.assertIs(getattr(fix.module, fix.name), fix.value)
    self.assertIs(tf1.cond, compat.FIXES[2].value)
    __import__('tf_keras.legacy_tf_layers.normalization')
    if compat.ASSIGN_FROM_CHECKPOINT_FIX in compat.needed_fixes():
      self.assertIs(slim.assign_from_checkpoint, compat._assign_from_checkpoint)

  def test_apply_is_idempotent(self):
    self.assertEqual(compat.apply(), [])

  def test_disable_switch(self):
    # Runs in a fresh process: the switch is read when core.compat is imported.
    script = '\n'.join([
        'import os',
        'from core import compat',
        'assert compat.applied_fixes() == [], compat.applied_fixes()',
        'needed = compat.needed_fixes()',
        'for fix in compat.FIXES:',
        '  assert hasattr(fix.module, fix.name) == (fix.fix_id not in needed), fix',
        'os.environ[compat.DISABLE_ENV] = "array_ops.stack,tf_keras.legacy_tf_layers"',
        'applied = compat.apply()',
        'assert "array_ops.stack" not in applied, applied',
        'assert "tf_keras.legacy_tf_layers" not in applied, applied',
        'assert set(applied) == set(needed) - {"array_ops.stack",',
        '                                      "tf_keras.legacy_tf_layers"}, applied',
        'print("OK")',
    ])
    env = dict(os.environ, SLIMTRAIN_DISABLE_COMPAT='1', TF_CPP_MIN_LOG_LEVEL='2',
               PYTHONPATH=_REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    result = subprocess.run([sys.executable, '-c', script], env=env, cwd=_REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn('OK', result.stdout)


  def test_learning_train_under_tf2_behaviour(self):
    # A user script that never disables eager execution: the Supervisor's
    # step-counter thread starts eagerly and, without the fix, kills training
    # with "global_step:0 ... is out of scope".
    script = '\n'.join([
        'import sys, tempfile',
        'from core import compat',
        'import tensorflow as tf',
        'import tf_slim as slim',
        'assert tf.executing_eagerly()',
        'with tf.Graph().as_default():',
        '  x = tf.constant([[1.0, 2.0]])',
        '  w = tf.compat.v1.get_variable("w", [2, 1])',
        '  loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - 1.0))',
        '  step = tf.compat.v1.train.get_or_create_global_step()',
        '  opt = tf.compat.v1.train.GradientDescentOptimizer(0.01)',
        '  train_op = slim.learning.create_train_op(loss, opt, global_step=step)',
        '  slim.learning.train(train_op, tempfile.mkdtemp(), number_of_steps=3,',
        '                      save_summaries_secs=1)',
        'print("OK", sys.argv[1] in compat.applied_fixes())',
    ])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
               PYTHONPATH=_REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    env.pop(compat.DISABLE_ENV, None)
    result = subprocess.run([sys.executable, '-c', script, compat.SUPERVISOR_THREADS_FIX],
                            env=env, cwd=_REPO_ROOT, capture_output=True, text=True,
                            timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn('OK True', result.stdout)


  def test_tf_compat_v1_layers_in_a_user_script(self):
    # User model_fns call tf.compat.v1.layers; with Keras 3 they raise
    # "`dense` is not available with Keras 3".
    script = '\n'.join([
        'import sys',
        'import tensorflow as tf',
        'from core import compat',
        'tf.compat.v1.disable_eager_execution()',
        'x = tf.compat.v1.placeholder(tf.float32, [None, 3])',
        'y = tf.compat.v1.layers.dense(x, 2)',
        'y = tf.compat.v1.layers.conv2d(tf.reshape(y, [-1, 1, 1, 2]), 4, 1)',
        'print("OK", sys.argv[1] in compat.applied_fixes())',
    ])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2',
               PYTHONPATH=_REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    for name in (compat.DISABLE_ENV, 'TF_USE_LEGACY_KERAS'):
      env.pop(name, None)
    result = subprocess.run([sys.executable, '-c', script, compat.LEGACY_KERAS_FIX],
                            env=env, cwd=_REPO_ROOT, capture_output=True, text=True,
                            timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn('OK True', result.stdout)


class LayersTest(tf.test.TestCase):
  """slim layers as slimtrain's models and feature extractors use them."""

  def test_conv_pool_fc_dropout_flatten_with_arg_scope_and_l2(self):
    with tf.Graph().as_default():
      tf1.set_random_seed(1)
      images = tf.constant(np.random.RandomState(0).rand(2, 16, 16, 3).astype(np.float32))
      with slim.arg_scope([slim.conv2d, slim.fully_connected],
                          weights_regularizer=slim.l2_regularizer(0.01),
                          weights_initializer=slim.variance_scaling_initializer()):
        net = slim.conv2d(images, 8, [3, 3], scope='conv1')
        net = slim.max_pool2d(net, [2, 2], scope='pool1')
        net = slim.conv2d(net, 8, [3, 3], stride=2, padding='VALID', scope='conv2')
        net = slim.avg_pool2d(net, [3, 3], scope='pool2')
        net = slim.flatten(net)
        net = slim.dropout(net, 0.5, is_training=False)
        logits = slim.fully_connected(net, 5, activation_fn=None, scope='fc')
      self.assertEqual(logits.shape.as_list(), [2, 5])
      reg_losses = tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES)
      self.assertEqual(len(reg_losses), 3)
      self.assertEqual(len(slim.get_model_variables()), 6)
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        out, reg = sess.run([logits, tf.add_n(reg_losses)])
      self.assertEqual(out.shape, (2, 5))
      self.assertGreater(reg, 0.0)

  def test_dropout_with_is_training_tensor(self):
    with tf.Graph().as_default():
      is_training = tf1.placeholder(tf.bool, [])
      inputs = tf.ones([4, 100])
      outputs = slim.dropout(inputs, 0.5, is_training=is_training, seed=3)
      with tf1.Session(config=_session_config()) as sess:
        train_out = sess.run(outputs, {is_training: True})
        eval_out = sess.run(outputs, {is_training: False})
      self.assertAllEqual(eval_out, np.ones([4, 100]))
      self.assertTrue(np.any(train_out == 0.0))

  def _batch_norm_graph(self, is_training):
    """Builds conv + batch_norm; returns (images, outputs, moving_mean)."""
    images = tf1.placeholder(tf.float32, [4, 5, 5, 2])
    net = slim.conv2d(images, 3, [1, 1], normalizer_fn=slim.batch_norm,
                      normalizer_params={'is_training': is_training, 'decay': 0.5},
                      scope='conv')
    moving_mean = [v for v in slim.get_variables('conv/BatchNorm')
                   if 'moving_mean' in v.op.name][0]
    return images, net, moving_mean

  def test_batch_norm_training_runs_update_ops(self):
    with tf.Graph().as_default():
      tf1.set_random_seed(2)
      images, net, moving_mean = self._batch_norm_graph(is_training=True)
      update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
      self.assertEqual(len(update_ops), 2)  # moving mean and moving variance
      data = np.random.RandomState(0).rand(4, 5, 5, 2).astype(np.float32) + 3.0
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        out = sess.run(net, {images: data})
        self.assertAllClose(sess.run(moving_mean), np.zeros(3))
        sess.run(update_ops, {images: data})
        self.assertNotAllClose(sess.run(moving_mean), np.zeros(3))
      # Training mode normalises with batch statistics: per-channel mean ~0
      # before the ReLU, so about half the activations are zero.
      self.assertGreater(np.mean(out == 0.0), 0.2)

  def test_batch_norm_inference_uses_moving_statistics(self):
    with tf.Graph().as_default():
      images, net, _ = self._batch_norm_graph(is_training=False)
      self.assertEqual(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS), [])
      data = np.random.RandomState(0).rand(4, 5, 5, 2).astype(np.float32)
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        out = sess.run(net, {images: data})
      self.assertEqual(out.shape, (4, 5, 5, 3))

  def test_batch_norm_with_is_training_placeholder(self):
    with tf.Graph().as_default():
      is_training = tf1.placeholder_with_default(True, [])
      images, net, moving_mean = self._batch_norm_graph(is_training=is_training)
      update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
      data = np.random.RandomState(1).rand(4, 5, 5, 2).astype(np.float32) + 1.0
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run([net] + update_ops, {images: data, is_training: False})
        self.assertAllClose(sess.run(moving_mean), np.zeros(3))
        sess.run([net] + update_ops, {images: data, is_training: True})
        self.assertNotAllClose(sess.run(moving_mean), np.zeros(3))

  def test_batch_norm_in_place_updates_and_rank_2(self):
    # updates_collections=None (update inside the op) and 2-D inputs (after
    # fully_connected) take tf_slim's own _fused_batch_norm, which goes
    # through layers.utils.constant_value / smart_cond.
    with tf.Graph().as_default():
      is_training = tf1.placeholder_with_default(True, [])
      images = tf1.placeholder(tf.float32, [4, 5, 5, 2])
      net = slim.batch_norm(images, decay=0.5, updates_collections=None,
                            is_training=True, scope='in_place')
      features = slim.fully_connected(slim.flatten(images), 3, activation_fn=None,
                                      normalizer_fn=slim.batch_norm,
                                      normalizer_params={'is_training': is_training},
                                      scope='fc')
      self.assertEqual(features.shape.as_list(), [4, 3])
      moving_mean = [v for v in tf1.global_variables()
                     if v.op.name == 'in_place/moving_mean'][0]
      data = np.random.RandomState(2).rand(4, 5, 5, 2).astype(np.float32) + 1.0
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run(net, {images: data})
        self.assertNotAllClose(sess.run(moving_mean), np.zeros(2))
        out = sess.run(features, {images: data, is_training: False})
      self.assertEqual(out.shape, (4, 3))

  def test_separable_conv2d(self):
    with tf.Graph().as_default():
      images = tf.ones([1, 8, 8, 4])
      pointwise = slim.separable_conv2d(images, 6, [3, 3], depth_multiplier=1, scope='sep')
      depthwise = slim.separable_conv2d(images, None, [3, 3], depth_multiplier=2,
                                        scope='dw')
      self.assertEqual(pointwise.shape.as_list(), [1, 8, 8, 6])
      self.assertEqual(depthwise.shape.as_list(), [1, 8, 8, 8])
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        self.assertEqual(sess.run(pointwise).shape, (1, 8, 8, 6))


class ArgScopeTest(tf.test.TestCase):

  def test_nested_arg_scope_and_add_arg_scope(self):

    @slim.add_arg_scope
    def scaled(x, factor=1.0):
      return x * factor

    with tf.Graph().as_default():
      with slim.arg_scope([scaled], factor=2.0):
        with slim.arg_scope([slim.conv2d], padding='VALID', activation_fn=None) as sc:
          net = slim.conv2d(tf.ones([1, 5, 5, 1]), 1, [3, 3], scope='c')
          doubled = scaled(tf.constant(3.0))
          self.assertTrue(slim.has_arg_scope(scaled))
      with slim.arg_scope(sc):
        net2 = slim.conv2d(tf.ones([1, 5, 5, 1]), 1, [3, 3], scope='c2')
      self.assertEqual(net.shape.as_list(), [1, 3, 3, 1])
      self.assertEqual(net2.shape.as_list(), [1, 3, 3, 1])
      with tf1.Session(config=_session_config()) as sess:
        self.assertEqual(sess.run(doubled), 6.0)


class VariablesTest(tf.test.TestCase):

  def test_model_variable_variable_and_collections(self):
    with tf.Graph().as_default():
      with slim.arg_scope([slim.model_variable, slim.variable], device='/cpu:0'):
        weights = slim.model_variable('weights', shape=[2, 3],
                                      initializer=tf1.truncated_normal_initializer(seed=1),
                                      regularizer=slim.l2_regularizer(0.1))
        other = slim.variable('other', shape=[1], initializer=tf1.zeros_initializer())
      self.assertEqual(slim.get_model_variables(), [weights])
      self.assertIn(other, slim.get_variables())
      self.assertNotIn(other, slim.get_model_variables())
      self.assertEqual(weights.device, '/device:CPU:0')
      self.assertEqual(len(tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES)), 1)
      self.assertEqual(slim.get_variables_to_restore(exclude=['other']), [weights])

  def test_global_step_creation(self):
    with tf.Graph().as_default():
      self.assertIsNone(tf1.train.get_global_step())
      step = slim.create_global_step()
      self.assertIs(slim.get_or_create_global_step(), step)
      with self.assertRaises(ValueError):
        slim.create_global_step()
    with tf.Graph().as_default():
      step = slim.get_or_create_global_step()
      self.assertEqual(step.op.name, 'global_step')

  def test_local_and_global_variable(self):
    with tf.Graph().as_default():
      local = slim.local_variable([1.0, 2.0], name='local')
      global_var = slim.global_variable(3.0, name='glob')
      self.assertIn(local, tf1.local_variables())
      self.assertIn(global_var, tf1.global_variables())
      self.assertNotIn(global_var, tf1.trainable_variables())
      with tf1.Session(config=_session_config()) as sess:
        sess.run([tf1.local_variables_initializer(), tf1.global_variables_initializer()])
        self.assertAllEqual(sess.run(local), [1.0, 2.0])

  def test_assign_from_checkpoint_partitioned_and_plain(self):
    ckpt = os.path.join(self.get_temp_dir(), 'partitioned', 'model.ckpt')
    value = np.arange(12, dtype=np.float32).reshape(6, 2)
    with tf.Graph().as_default():
      tf1.get_variable('table', initializer=tf.constant(value),
                       partitioner=tf1.fixed_size_partitioner(3))
      slim.variable('bias', initializer=tf.constant([5.0]))
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        tf1.train.Saver().save(sess, ckpt)
    with tf.Graph().as_default():
      table = tf1.get_variable('table', shape=[6, 2], initializer=tf1.zeros_initializer(),
                               partitioner=tf1.fixed_size_partitioner(3))
      bias = slim.variable('bias', shape=[1], initializer=tf1.zeros_initializer())
      missing = slim.variable('missing', shape=[1], initializer=tf1.zeros_initializer())
      parts = list(table)
      self.assertEqual(len(parts), 3)
      assign_op, feed_dict = slim.assign_from_checkpoint(ckpt, parts + [bias])
      with self.assertRaisesRegex(ValueError, 'missing'):
        slim.assign_from_checkpoint(ckpt, [missing])
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run(assign_op, feed_dict)
        self.assertAllEqual(sess.run(table.as_tensor()), value)
        self.assertAllEqual(sess.run(bias), [5.0])

  def test_assign_from_checkpoint_fn(self):
    ckpt = os.path.join(self.get_temp_dir(), 'assign', 'model.ckpt')
    with tf.Graph().as_default():
      var0 = slim.model_variable('var0', initializer=tf.constant([1.0, 2.0]))
      var1 = slim.variable('var1', initializer=tf.constant(7.0))
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        tf1.train.Saver().save(sess, ckpt)
    with tf.Graph().as_default():
      var0 = slim.model_variable('var0', shape=[2], initializer=tf1.zeros_initializer())
      extra = slim.variable('extra', shape=[], initializer=tf1.zeros_initializer())
      init_fn = slim.assign_from_checkpoint_fn(ckpt, [var0, extra],
                                               ignore_missing_vars=True)
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        init_fn(sess)
        self.assertAllEqual(sess.run(var0), [1.0, 2.0])
      del var1


class NetsTest(tf.test.TestCase):
  """Graph construction of the tf_slim.nets slimtrain's classifier offers."""

  def test_resnet_v1_50_builds_and_runs(self):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      images = tf.ones([1, 64, 64, 3])
      with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        logits, end_points = resnet_v1.resnet_v1_50(images, num_classes=4, is_training=True,
                                                    global_pool=True)
      self.assertEqual(logits.shape.as_list(), [1, 1, 1, 4])
      self.assertIn('predictions', end_points)
      self.assertGreater(len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)), 50)
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        self.assertEqual(sess.run(logits).shape, (1, 1, 1, 4))

  def test_resnet_v2_50_builds(self):
    with tf.Graph().as_default():
      with slim.arg_scope(resnet_v2.resnet_arg_scope()):
        logits, end_points = resnet_v2.resnet_v2_50(tf.ones([2, 64, 64, 3]), num_classes=3,
                                                    is_training=False)
      self.assertEqual(logits.shape.as_list(), [2, 1, 1, 3])
      self.assertIn('predictions', end_points)

  def test_inception_v3_builds(self):
    with tf.Graph().as_default():
      with slim.arg_scope(inception_v3.inception_v3_arg_scope()):
        logits, end_points = inception_v3.inception_v3(tf.ones([1, 80, 80, 3]),
                                                       num_classes=3, is_training=True,
                                                       create_aux_logits=False)
      self.assertEqual(logits.shape.as_list(), [1, 3])
      self.assertIn('Mixed_7c', end_points)

  def test_vgg_16_builds(self):
    with tf.Graph().as_default():
      with slim.arg_scope(vgg.vgg_arg_scope()):
        # fc6 is a 7x7 VALID convolution, so 224x224 is the smallest input.
        logits, _ = vgg.vgg_16(tf.ones([1, 224, 224, 3]), num_classes=3, is_training=True)
      self.assertEqual(logits.shape.as_list(), [1, 3])


class LearningTest(tf.test.TestCase):
  """slim.learning: gradient helpers, create_train_op, train_step and train."""

  def _grads_and_vars(self):
    """Returns ([(dense_grad, var), (indexed_slices_grad, embedding)], sess-free)."""
    var = tf1.Variable([1.0, 1.0], name='dense')
    embedding = tf1.Variable(np.ones([4, 2], np.float32), name='embedding')
    dense_grad = tf.constant([3.0, 4.0])
    sparse_grad = tf.IndexedSlices(tf.constant([[3.0, 4.0]]), tf.constant([1]),
                                   tf.constant([4, 2]))
    return [(dense_grad, var), (sparse_grad, embedding)]

  def test_clip_gradient_norms_dense_and_indexed_slices(self):
    with tf.Graph().as_default():
      clipped = slim.learning.clip_gradient_norms(self._grads_and_vars(), 1.0)
      self.assertIsInstance(clipped[1][0], tf.IndexedSlices)
      with tf1.Session(config=_session_config()) as sess:
        dense, sparse_values = sess.run([clipped[0][0], clipped[1][0].values])
      self.assertAllClose(dense, [0.6, 0.8])
      self.assertAllClose(sparse_values, [[0.6, 0.8]])

  def test_multiply_gradients_dense_indexed_slices_and_tensor(self):
    with tf.Graph().as_default():
      grads_and_vars = self._grads_and_vars()
      multipliers = {grads_and_vars[0][1]: 2.0, grads_and_vars[1][1]: tf.constant(0.5)}
      scaled = slim.learning.multiply_gradients(grads_and_vars, multipliers)
      self.assertIsInstance(scaled[1][0], tf.IndexedSlices)
      with tf1.Session(config=_session_config()) as sess:
        dense, sparse_values = sess.run([scaled[0][0], scaled[1][0].values])
      self.assertAllClose(dense, [6.0, 8.0])
      self.assertAllClose(sparse_values, [[1.5, 2.0]])
      with self.assertRaisesRegex(ValueError, 'empty'):
        slim.learning.multiply_gradients(grads_and_vars, {})

  def test_create_train_op_with_all_gradient_transforms(self):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      global_step = slim.get_or_create_global_step()
      embedding = slim.variable('embedding', shape=[10, 3],
                                initializer=tf1.random_normal_initializer(seed=1))
      looked_up = tf.nn.embedding_lookup(embedding, tf.constant([1, 4, 4]))
      weights = slim.model_variable('w', shape=[3, 1], initializer=tf1.ones_initializer())
      loss = tf.reduce_sum(tf.square(tf.matmul(looked_up, weights) - 1.0))
      grads = tf1.train.GradientDescentOptimizer(1.0).compute_gradients(loss)
      self.assertIsInstance(dict((v.op.name, g) for g, v in grads)['embedding'],
                            tf.IndexedSlices)
      train_op = slim.learning.create_train_op(
          loss, tf1.train.GradientDescentOptimizer(0.01), global_step=global_step,
          clip_gradient_norm=1.0, summarize_gradients=True,
          gradient_multipliers={weights: 0.0, 'embedding': 2.0})
      summaries = tf1.get_collection(tf1.GraphKeys.SUMMARIES)
      self.assertTrue(any('embedding' in s.op.name and 'gradient' in s.op.name
                          for s in summaries))
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        before = sess.run(embedding)
        loss_before = sess.run(train_op)
        after = sess.run(embedding)
        self.assertEqual(sess.run(global_step), 1)
        self.assertAllClose(sess.run(weights), np.ones([3, 1]))  # multiplier 0
        self.assertLess(sess.run(loss), loss_before)
      changed_rows = np.where(np.any(before != after, axis=1))[0]
      self.assertAllEqual(changed_rows, [1, 4])
      # tf_slim multiplies first, then clips the IndexedSlices values to norm 1;
      # row 4 is looked up twice, so its two clipped slices add up: <= 2 * lr.
      self.assertLessEqual(np.linalg.norm(after - before), 2 * 0.01 + 1e-6)

  def test_create_train_op_runs_update_ops(self):
    with tf.Graph().as_default():
      slim.get_or_create_global_step()
      images = tf.constant(np.random.RandomState(0).rand(4, 3, 3, 2).astype(np.float32))
      net = slim.conv2d(images, 2, [1, 1], normalizer_fn=slim.batch_norm,
                        normalizer_params={'is_training': True})
      loss = tf.reduce_mean(tf.square(net))
      train_op = slim.learning.create_train_op(loss, tf1.train.GradientDescentOptimizer(0.1))
      moving_mean = [v for v in tf1.global_variables() if 'moving_mean' in v.op.name][0]
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run(train_op)
        self.assertNotAllClose(sess.run(moving_mean), np.zeros(2))

  def test_train_with_init_fn_and_number_of_steps(self):
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    inputs, labels = _logistic_regression_data()
    init_calls = []
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      total_loss = _logistic_loss(inputs, labels)
      train_op = slim.learning.create_train_op(total_loss,
                                               tf1.train.GradientDescentOptimizer(1.0))

      def init_fn(sess):
        init_calls.append(sess)

      def train_step_fn(sess, op, global_step, kwargs):
        return slim.learning.train_step(sess, op, global_step, kwargs)

      final_loss = slim.learning.train(train_op, logdir, number_of_steps=30,
                                       init_fn=init_fn, train_step_fn=train_step_fn,
                                       log_every_n_steps=10, save_summaries_secs=600,
                                       session_config=_session_config())
    self.assertEqual(len(init_calls), 1)
    self.assertLess(final_loss, 0.4)
    self.assertEqual(tf.train.latest_checkpoint(logdir), os.path.join(logdir, 'model.ckpt-30'))

  def test_train_resumes_from_checkpoint(self):
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    inputs, labels = _logistic_regression_data()
    for steps, steps_run in ((5, 5), (12, 7)):
      with tf.Graph().as_default():
        total_loss = _logistic_loss(inputs, labels)
        train_op = slim.learning.create_train_op(total_loss,
                                                 tf1.train.GradientDescentOptimizer(1.0))
        calls = []

        def counting_train_step(*args, **kwargs):
          calls.append(1)
          return slim.learning.train_step(*args, **kwargs)

        # save_interval_secs=0: the Supervisor's checkpoint thread saves as
        # soon as it starts, and a slow first save that ends after the final
        # one would leave `checkpoint` pointing at the older step.
        slim.learning.train(train_op, logdir, number_of_steps=steps, log_every_n_steps=100,
                            train_step_fn=counting_train_step, save_interval_secs=0,
                            session_config=_session_config())
      self.assertEqual(tf.train.latest_checkpoint(logdir),
                       os.path.join(logdir, 'model.ckpt-%d' % steps))
      self.assertLen(calls, steps_run)  # the second run resumed at step 5

  def _sync_replicas_train_op(self):
    """Builds the logistic model with a one-replica SyncReplicasOptimizer.

    Returns:
      (train_op, optimizer).
    """
    inputs, labels = _logistic_regression_data()
    total_loss = _logistic_loss(inputs, labels)
    optimizer = tf1.train.SyncReplicasOptimizer(
        tf1.train.GradientDescentOptimizer(1.0), replicas_to_aggregate=1,
        total_num_replicas=1)
    return slim.learning.create_train_op(total_loss, optimizer), optimizer

  def test_sync_replicas_chief_steps_with_train_step(self):
    # What slim.learning.train does on the chief with a sync_optimizer, step
    # by step, so the blocked chief queue runner is cancelled by closing the
    # session (learning.train itself waits out the Supervisor's 120 s grace
    # period there, see test_train_with_sync_replicas_optimizer below).
    with tf.Graph().as_default():
      train_op, optimizer = self._sync_replicas_train_op()
      global_step = tf1.train.get_global_step()
      init_tokens_op = optimizer.get_init_tokens_op()
      chief_queue_runner = optimizer.get_chief_queue_runner()
      train_step_kwargs = {'should_stop': tf.constant(False),
                           'should_log': tf.constant(False)}
      sess = tf1.Session(config=_session_config())
      coord = tf1.train.Coordinator()
      try:
        sess.run(tf1.global_variables_initializer())
        sess.run([tf1.local_variables_initializer(), optimizer.chief_init_op])
        self.assertEqual(len(sess.run(optimizer.ready_for_local_init_op)), 0)
        threads = chief_queue_runner.create_threads(sess, coord=coord, start=True)
        sess.run(init_tokens_op)
        losses = []
        for _ in range(5):
          loss, should_stop = slim.learning.train_step(sess, train_op, global_step,
                                                       train_step_kwargs)
          self.assertFalse(should_stop)
          losses.append(loss)
        # The init op hands out one token up front, so the first step does not
        # wait for the chief's update; the fifth update may still be running.
        self.assertIn(sess.run(global_step), (4, 5))
        self.assertLess(losses[-1], losses[0])
      finally:
        coord.request_stop()
        sess.close()
      coord.join(threads, stop_grace_period_secs=30)

  def test_train_with_sync_replicas_optimizer(self):
    # Ran only with SLIMTRAIN_COMPAT_SLOW=1 while it idled 120 s; since compat fix
    # learning.sync_replicas_stop it ends at once, so it always runs.
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      train_op, optimizer = self._sync_replicas_train_op()
      # Without compat fix learning.sync_replicas_stop the chief queue runner
      # stays blocked in the gradient accumulator after the last step, so
      # Supervisor.stop waits its 120 s grace period and then raises
      # "Coordinator stopped with threads still running" (TF1 behaviour too,
      # tensorflow/models#6566). With it the call returns at once.
      final_loss = slim.learning.train(train_op, logdir, number_of_steps=10,
                                       sync_optimizer=optimizer, log_every_n_steps=100,
                                       session_config=_session_config())
    self.assertLess(final_loss, 0.7)
    self.assertEqual(tf.train.latest_checkpoint(logdir), os.path.join(logdir, 'model.ckpt-10'))


class DataTest(tf.test.TestCase):
  """slim.prefetch_queue and slim.tfexample_decoder."""

  def test_prefetch_queue(self):
    with tf.Graph().as_default():
      counter = tf1.train.range_input_producer(100, shuffle=False).dequeue()
      batch = tf1.train.batch({'n': counter, 'sq': counter * counter}, batch_size=4)
      queue = prefetch_queue.prefetch_queue(batch, capacity=2, num_threads=1)
      dequeued = queue.dequeue()
      with tf1.Session(config=_session_config()) as sess:
        coord = tf1.train.Coordinator()
        threads = tf1.train.start_queue_runners(sess=sess, coord=coord)
        first = sess.run(dequeued)
        second = sess.run(dequeued)
        coord.request_stop()
        coord.join(threads)
      self.assertAllEqual(first['n'], [0, 1, 2, 3])
      self.assertAllEqual(second['sq'], [16, 25, 36, 49])

  def _decode(self, example, keys_to_features, items_to_handlers):
    """Decodes one serialized example with TFExampleDecoder.

    Returns:
      A dict item name -> numpy value.
    """
    with tf.Graph().as_default():
      serialized = tf.constant(example.SerializeToString())
      decoder = tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
      items = sorted(items_to_handlers)
      self.assertCountEqual(decoder.list_items(), items)
      tensors = decoder.decode(serialized, items)
      with tf1.Session(config=_session_config()) as sess:
        return dict(zip(items, sess.run(tensors)))

  def _image_example(self, image, fmt):
    if fmt == 'raw':
      encoded = image.tobytes()
    else:
      encoded = _encode_image(image, fmt)
    return tf.train.Example(features=tf.train.Features(feature={
        'image/encoded': _bytes_feature([encoded]),
        'image/format': _bytes_feature([fmt.encode()]),
    }))

  def _image_handlers(self, shape=None):
    keys_to_features = {
        'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
        'image/format': tf.io.FixedLenFeature((), tf.string, default_value='jpeg'),
    }
    items_to_handlers = {'image': tfexample_decoder.Image(shape=shape, channels=3)}
    return keys_to_features, items_to_handlers

  def test_image_jpeg_png_raw(self):
    image = np.random.RandomState(0).randint(0, 255, size=(6, 5, 3)).astype(np.uint8)
    smooth = np.tile(np.arange(6, dtype=np.uint8)[:, None, None] * 40, (1, 5, 3))
    for fmt, source, exact in (('png', image, True), ('raw', image, True),
                               ('jpeg', smooth, False)):
      keys_to_features, handlers = self._image_handlers(
          shape=(6, 5, 3) if fmt == 'raw' else None)
      decoded = self._decode(self._image_example(source, fmt), keys_to_features,
                             handlers)['image']
      self.assertEqual(decoded.shape, (6, 5, 3), fmt)
      if exact:
        self.assertAllEqual(decoded, source, fmt)
      else:
        self.assertAllClose(decoded, source, atol=8, msg=fmt)

  def test_tensor_boundingbox_shape_keys_and_callback(self):
    example = tf.train.Example(features=tf.train.Features(feature={
        'label': _int64_feature([3]),
        'bbox/ymin': _float_feature([0.1, 0.5]),
        'bbox/xmin': _float_feature([0.2, 0.6]),
        'bbox/ymax': _float_feature([0.3, 0.7]),
        'bbox/xmax': _float_feature([0.4, 0.8]),
        'mask': _float_feature([1, 2, 3, 4, 5, 6]),
        'mask/shape': _int64_feature([2, 3]),
    }))
    keys_to_features = {
        'label': tf.io.FixedLenFeature([], tf.int64),
        'missing': tf.io.VarLenFeature(tf.int64),
        'bbox/ymin': tf.io.VarLenFeature(tf.float32),
        'bbox/xmin': tf.io.VarLenFeature(tf.float32),
        'bbox/ymax': tf.io.VarLenFeature(tf.float32),
        'bbox/xmax': tf.io.VarLenFeature(tf.float32),
        'mask': tf.io.VarLenFeature(tf.float32),
        'mask/shape': tf.io.FixedLenFeature([2], tf.int64),
    }
    handlers = {
        'label': tfexample_decoder.Tensor('label'),
        'missing': tfexample_decoder.Tensor('missing', default_value=-1),
        'boxes': tfexample_decoder.BoundingBox(['ymin', 'xmin', 'ymax', 'xmax'], 'bbox/'),
        'mask': tfexample_decoder.Tensor('mask', shape_keys='mask/shape'),
        'num_boxes': tfexample_decoder.ItemHandlerCallback(
            ['bbox/ymin'], lambda tensors: tf.size(tensors['bbox/ymin'].values)),
    }
    decoded = self._decode(example, keys_to_features, handlers)
    self.assertEqual(decoded['label'], 3)
    self.assertAllEqual(decoded['missing'], [])
    self.assertAllClose(decoded['boxes'], [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]])
    self.assertAllEqual(decoded['mask'], [[1, 2, 3], [4, 5, 6]])
    self.assertEqual(decoded['num_boxes'], 2)

  def test_tfexample_decoder_end_to_end_from_tfrecord(self):
    path = os.path.join(self.get_temp_dir(), 'decoder.tfrecord')
    image = np.random.RandomState(1).randint(0, 255, size=(4, 4, 3)).astype(np.uint8)
    with tf.io.TFRecordWriter(path) as writer:
      for label in range(3):
        example = self._image_example(image, 'png')
        example.features.feature['label'].CopyFrom(_int64_feature([label]))
        writer.write(example.SerializeToString())
    keys_to_features, handlers = self._image_handlers()
    keys_to_features['label'] = tf.io.FixedLenFeature([], tf.int64)
    handlers['label'] = tfexample_decoder.Tensor('label')
    with tf.Graph().as_default():
      reader = tf1.TFRecordReader()
      filename_queue = tf1.train.string_input_producer([path], num_epochs=1, shuffle=False)
      _, serialized = reader.read(filename_queue)
      decoder = tfexample_decoder.TFExampleDecoder(keys_to_features, handlers)
      decoded_image, label = decoder.decode(serialized, ['image', 'label'])
      labels = []
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.local_variables_initializer())
        coord = tf1.train.Coordinator()
        threads = tf1.train.start_queue_runners(sess=sess, coord=coord)
        try:
          while True:
            img, lab = sess.run([decoded_image, label])
            self.assertAllEqual(img, image)
            labels.append(lab)
        except tf.errors.OutOfRangeError:
          pass
        coord.request_stop()
        coord.join(threads)
    self.assertEqual(labels, [0, 1, 2])


class EvaluationTest(tf.test.TestCase):
  """slim.evaluation and slim.metrics over a real checkpoint."""

  def _write_checkpoint(self):
    """Trains nothing; saves a logistic model whose predictions are known.

    Returns:
      The checkpoint directory.
    """
    checkpoint_dir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      slim.get_or_create_global_step()
      slim.variable('threshold', initializer=tf.constant(0.5))
      with tf1.Session(config=_session_config()) as sess:
        sess.run(tf1.global_variables_initializer())
        tf1.train.Saver().save(sess, os.path.join(checkpoint_dir, 'model.ckpt'),
                               global_step=0)
    return checkpoint_dir

  def _eval_graph(self):
    """Builds metrics on fixed data: accuracy 0.75, mean 2.5.

    Returns:
      (names_to_values, names_to_updates).
    """
    slim.get_or_create_global_step()
    threshold = slim.variable('threshold', initializer=tf.constant(0.0))
    scores = tf.constant([0.1, 0.9, 0.8, 0.3])
    labels = tf.constant([0, 1, 0, 0], tf.int64)
    predictions = tf.cast(scores > threshold, tf.int64)
    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        'accuracy': slim.metrics.streaming_accuracy(predictions, labels),
        'mean': slim.metrics.streaming_mean(tf.constant([1.0, 2.0, 3.0, 4.0])),
    })
    for name, value in names_to_values.items():
      tf1.summary.scalar(name, value)
    return names_to_values, names_to_updates

  def test_evaluate_once(self):
    checkpoint_dir = self._write_checkpoint()
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      names_to_values, names_to_updates = self._eval_graph()
      results = slim.evaluation.evaluate_once(
          '', tf.train.latest_checkpoint(checkpoint_dir), logdir, num_evals=2,
          eval_op=list(names_to_updates.values()), final_op=names_to_values,
          session_config=_session_config())
    self.assertAllClose(results['accuracy'], 0.75)
    self.assertAllClose(results['mean'], 2.5)
    self.assertTrue(tf1.gfile.Glob(os.path.join(logdir, 'events.out.tfevents.*')))

  def test_evaluation_loop(self):
    checkpoint_dir = self._write_checkpoint()
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      names_to_values, names_to_updates = self._eval_graph()
      results = slim.evaluation.evaluation_loop(
          '', checkpoint_dir, logdir, num_evals=1,
          eval_op=list(names_to_updates.values()), final_op=names_to_values,
          eval_interval_secs=1, max_number_of_evaluations=1, timeout=60,
          session_config=_session_config())
    self.assertAllClose(results['accuracy'], 0.75)
    self.assertAllClose(results['mean'], 2.5)


if __name__ == '__main__':
  tf.test.main()
