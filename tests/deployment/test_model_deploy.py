"""TF-Slim's model_deploy test cases, rewritten for TF 2.21 + resource variables.

Variables are resource variables here: `v.device` is the `VarHandleOp`'s
device, reads made with `v.value()` carry no device (the placer runs them next
to the resource), and the initializer is pinned to the handle's device.
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy

tf.compat.v1.disable_eager_execution()

_GRAPH_VARS = tf.compat.v1.GraphKeys


def logistic_classifier(inputs, labels, scope=None, reuse=None):
  with tf.compat.v1.variable_scope(scope, 'LogisticClassifier', [inputs, labels],
                                   reuse=reuse):
    predictions = slim.fully_connected(inputs, 1, activation_fn=tf.sigmoid,
                                       scope='fully_connected')
    slim.losses.log_loss(predictions, labels)
    return predictions


def batch_norm_classifier(inputs, labels, scope=None, reuse=None):
  with tf.compat.v1.variable_scope(scope, 'BatchNormClassifier', [inputs, labels],
                                   reuse=reuse):
    inputs = slim.batch_norm(inputs, decay=0.1, fused=True)
    predictions = slim.fully_connected(inputs, 1, activation_fn=tf.sigmoid,
                                       scope='fully_connected')
    slim.losses.log_loss(predictions, labels)
    return predictions


def _easy_training_set():
  np.random.seed(0)
  inputs = np.zeros((16, 4))
  labels = np.random.randint(0, 2, size=(16, 1)).astype(np.float32)
  for i in range(16):
    j = int(2 * labels[i, 0] + np.random.randint(0, 2))
    inputs[i, j] = 1
  return inputs, labels


class DeploymentConfigTest(tf.test.TestCase):

  def testDefaults(self):
    deploy_config = model_deploy.DeploymentConfig()

    self.assertEqual(slim.get_variables(), [])
    self.assertEqual(deploy_config.caching_device(), None)
    self.assertDeviceEqual(deploy_config.clone_device(0), 'GPU:0')
    self.assertEqual(deploy_config.clone_scope(0), '')
    self.assertDeviceEqual(deploy_config.optimizer_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.variables_device(), 'CPU:0')
    self.assertEqual(deploy_config.variable_update, 'parameter_server')
    self.assertEqual(deploy_config.ps_strategy, 'round_robin')

  def testCPUonly(self):
    deploy_config = model_deploy.DeploymentConfig(clone_on_cpu=True)

    self.assertEqual(deploy_config.caching_device(), None)
    self.assertDeviceEqual(deploy_config.clone_device(0), 'CPU:0')
    self.assertEqual(deploy_config.clone_scope(0), '')
    self.assertDeviceEqual(deploy_config.optimizer_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.variables_device(), 'CPU:0')

  def testMultiGPU(self):
    deploy_config = model_deploy.DeploymentConfig(num_clones=2)

    self.assertEqual(deploy_config.caching_device(), None)
    self.assertDeviceEqual(deploy_config.clone_device(0), 'GPU:0')
    self.assertDeviceEqual(deploy_config.clone_device(1), 'GPU:1')
    self.assertEqual(deploy_config.clone_scope(0), 'clone_0')
    self.assertEqual(deploy_config.clone_scope(1), 'clone_1')
    self.assertDeviceEqual(deploy_config.optimizer_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(), 'CPU:0')
    self.assertDeviceEqual(deploy_config.variables_device(), 'CPU:0')

  def testCloneDevices(self):
    deploy_config = model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'])
    self.assertDeviceEqual(deploy_config.clone_device(1), 'CPU:1')
    deploy_config = model_deploy.DeploymentConfig(
        num_clones=2, num_ps_tasks=1, clone_devices=['/device:CPU:0', '/device:CPU:1'])
    self.assertDeviceEqual(deploy_config.clone_device(1), '/job:worker/device:CPU:1')

  def testPS(self):
    deploy_config = model_deploy.DeploymentConfig(num_clones=1, num_ps_tasks=1)

    self.assertDeviceEqual(deploy_config.clone_device(0),
                           '/job:worker/device:GPU:0')
    self.assertEqual(deploy_config.clone_scope(0), '')
    self.assertDeviceEqual(deploy_config.optimizer_device(),
                           '/job:worker/device:CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(),
                           '/job:worker/device:CPU:0')
    with tf.Graph().as_default():
      with tf.compat.v1.device(deploy_config.variables_device()):
        a = tf.compat.v1.Variable(0)
        b = tf.compat.v1.Variable(0)
        c = tf.no_op()
        d = slim.variable('a', [], caching_device=deploy_config.caching_device())
      self.assertEqual(a.op.type, 'VarHandleOp')
      self.assertDeviceEqual(a.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(a.initializer.device, a.device)
      self.assertDeviceEqual(a.value().device, '')  # the placer colocates reads
      self.assertDeviceEqual(b.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(b.initializer.device, b.device)
      self.assertDeviceEqual(c.device, '')
      self.assertDeviceEqual(d.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(d.value().device, '')

  def testMultiGPUPS(self):
    deploy_config = model_deploy.DeploymentConfig(num_clones=2, num_ps_tasks=1)

    with tf.Graph().as_default():
      self.assertEqual(deploy_config.caching_device()(tf.no_op()), '')
    self.assertDeviceEqual(deploy_config.clone_device(0),
                           '/job:worker/device:GPU:0')
    self.assertDeviceEqual(deploy_config.clone_device(1),
                           '/job:worker/device:GPU:1')
    self.assertEqual(deploy_config.clone_scope(0), 'clone_0')
    self.assertEqual(deploy_config.clone_scope(1), 'clone_1')
    self.assertDeviceEqual(deploy_config.optimizer_device(),
                           '/job:worker/device:CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(),
                           '/job:worker/device:CPU:0')

  def testReplicasPS(self):
    deploy_config = model_deploy.DeploymentConfig(num_replicas=2, num_ps_tasks=2)

    self.assertDeviceEqual(deploy_config.clone_device(0),
                           '/job:worker/device:GPU:0')
    self.assertEqual(deploy_config.clone_scope(0), '')
    self.assertDeviceEqual(deploy_config.optimizer_device(),
                           '/job:worker/device:CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(),
                           '/job:worker/device:CPU:0')

  def testReplicasMultiGPUPS(self):
    deploy_config = model_deploy.DeploymentConfig(num_replicas=2, num_clones=2,
                                                  num_ps_tasks=2)
    self.assertDeviceEqual(deploy_config.clone_device(0),
                           '/job:worker/device:GPU:0')
    self.assertDeviceEqual(deploy_config.clone_device(1),
                           '/job:worker/device:GPU:1')
    self.assertEqual(deploy_config.clone_scope(0), 'clone_0')
    self.assertEqual(deploy_config.clone_scope(1), 'clone_1')
    self.assertDeviceEqual(deploy_config.optimizer_device(),
                           '/job:worker/device:CPU:0')
    self.assertDeviceEqual(deploy_config.inputs_device(),
                           '/job:worker/device:CPU:0')

  def testWorkerJobNameWithTask(self):
    # What deployment.cluster hands over: the job name carries the task.
    deploy_config = model_deploy.DeploymentConfig(
        num_replicas=2, replica_id=1, num_ps_tasks=1, worker_job_name='worker/task:1')
    self.assertDeviceEqual(deploy_config.clone_device(0),
                           '/job:worker/task:1/device:GPU:0')
    self.assertDeviceEqual(deploy_config.optimizer_device(),
                           '/job:worker/task:1/device:CPU:0')

  def testVariablesPS(self):
    deploy_config = model_deploy.DeploymentConfig(num_ps_tasks=2)

    with tf.Graph().as_default():
      with tf.compat.v1.device(deploy_config.variables_device()):
        a = tf.compat.v1.Variable(0)
        b = tf.compat.v1.Variable(0)
        c = tf.no_op()
        d = slim.variable('a', [], caching_device=deploy_config.caching_device())

      self.assertDeviceEqual(a.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(a.device, a.initializer.device)
      self.assertDeviceEqual(b.device, '/job:ps/task:1/device:CPU:0')
      self.assertDeviceEqual(b.device, b.initializer.device)
      self.assertDeviceEqual(c.device, '')
      self.assertDeviceEqual(d.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(d.value().device, '')

  def testVariablesPSGreedy(self):
    deploy_config = model_deploy.DeploymentConfig(num_ps_tasks=2, ps_strategy='greedy')
    with tf.Graph().as_default():
      with tf.compat.v1.device(deploy_config.variables_device()):
        big = tf.compat.v1.get_variable('big', [100, 10])
        small = tf.compat.v1.get_variable('small', [10])
        other = tf.compat.v1.get_variable('other', [20])
        big2 = tf.compat.v1.get_variable('big2', [100, 10])
      self.assertDeviceEqual(big.device, '/job:ps/task:0/device:CPU:0')
      self.assertDeviceEqual(small.device, '/job:ps/task:1/device:CPU:0')
      self.assertDeviceEqual(other.device, '/job:ps/task:1/device:CPU:0')
      self.assertDeviceEqual(big2.device, '/job:ps/task:1/device:CPU:0')

  def testValidationErrors(self):
    cases = [
        (dict(num_replicas=2), 'When using replicas num_ps_tasks must be positive'),
        (dict(num_replicas=2, num_ps_tasks=1, worker_job_name=''),
         'Must specify worker_job_name when using replicas'),
        (dict(num_ps_tasks=1, ps_job_name=''),
         'Must specify ps_job_name when using parameter server'),
        (dict(replica_id=1), 'replica_id must be less than num_replicas'),
        (dict(variable_update='mirrored'), "variable_update must be one of"),
        (dict(variable_update='replicated', num_ps_tasks=1), 'cannot use ps tasks'),
        (dict(ps_strategy='random'), 'ps_strategy must be one of'),
        (dict(all_reduce='ring'), 'all_reduce must be one of'),
        (dict(num_clones=2, clone_devices=['/device:CPU:0']), 'clone_devices must list'),
    ]
    for kwargs, message in cases:
      with self.assertRaisesRegex(ValueError, message, msg=str(kwargs)):
        model_deploy.DeploymentConfig(**kwargs)
    config = model_deploy.DeploymentConfig(num_clones=2)
    with self.assertRaisesRegex(ValueError, 'clone_index must be less than num_clones'):
      config.clone_device(2)
    with self.assertRaisesRegex(ValueError, 'clone_index must be less than num_clones'):
      config.clone_scope(2)

  def testMoreGpuClonesThanVisibleGpusIsAnError(self):
    visible = len(tf.config.list_physical_devices('GPU'))
    too_many = model_deploy.DeploymentConfig(num_clones=visible + 2)
    with self.assertRaisesRegex(ValueError, r'num_clones=%d needs one GPU per clone, but %d '
                                r'GPU\(s\) are visible' % (visible + 2, visible)):
      model_deploy.check_clone_devices(too_many)
    with self.assertRaisesRegex(ValueError, r'num_clones=4 .* but 2 GPU'):
      model_deploy.check_clone_devices(model_deploy.DeploymentConfig(num_clones=4), num_gpus=2)

  def testClonesThatGetTheirOwnDeviceAreAccepted(self):
    for config in (model_deploy.DeploymentConfig(num_clones=1),
                   model_deploy.DeploymentConfig(num_clones=4, clone_on_cpu=True),
                   model_deploy.DeploymentConfig(
                       num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'])):
      model_deploy.check_clone_devices(config, num_gpus=0)
    model_deploy.check_clone_devices(model_deploy.DeploymentConfig(num_clones=2), num_gpus=2)


class CreatecloneTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self._inputs, self._labels = _easy_training_set()

  def _clones(self, model_fn, **config_kwargs):
    tf.compat.v1.set_random_seed(0)
    tf_inputs = tf.constant(self._inputs, dtype=tf.float32)
    tf_labels = tf.constant(self._labels, dtype=tf.float32)
    deploy_config = model_deploy.DeploymentConfig(**config_kwargs)
    self.assertEqual(slim.get_variables(), [])
    return model_deploy.create_clones(deploy_config, model_fn, (tf_inputs, tf_labels))

  def testCreateLogisticClassifier(self):
    with tf.Graph().as_default():
      clones = self._clones(logistic_classifier, num_clones=1)
      clone = clones[0]
      self.assertEqual(len(slim.get_variables()), 2)
      for v in slim.get_variables():
        self.assertDeviceEqual(v.device, 'CPU:0')
        self.assertDeviceEqual(v.initializer.device, 'CPU:0')
      self.assertEqual(clone.outputs.op.name,
                       'LogisticClassifier/fully_connected/Sigmoid')
      self.assertEqual(clone.scope, '')
      self.assertDeviceEqual(clone.device, 'GPU:0')
      self.assertEqual(len(slim.losses.get_losses()), 1)
      update_ops = tf.compat.v1.get_collection(_GRAPH_VARS.UPDATE_OPS)
      self.assertEqual(update_ops, [])

  def testCreateSingleclone(self):
    with tf.Graph().as_default():
      clones = self._clones(batch_norm_classifier, num_clones=1)
      clone = clones[0]
      self.assertEqual(len(slim.get_variables()), 5)
      for v in slim.get_variables():
        self.assertDeviceEqual(v.device, 'CPU:0')
        self.assertDeviceEqual(v.initializer.device, 'CPU:0')
      self.assertEqual(clone.outputs.op.name,
                       'BatchNormClassifier/fully_connected/Sigmoid')
      self.assertEqual(clone.scope, '')
      self.assertDeviceEqual(clone.device, 'GPU:0')
      self.assertEqual(len(slim.losses.get_losses()), 1)
      update_ops = tf.compat.v1.get_collection(_GRAPH_VARS.UPDATE_OPS)
      self.assertEqual(len(update_ops), 2)

  def testCreateMulticlone(self):
    with tf.Graph().as_default():
      num_clones = 4
      clones = self._clones(batch_norm_classifier, num_clones=num_clones)
      self.assertEqual(len(slim.get_variables()), 5)
      for v in slim.get_variables():
        self.assertDeviceEqual(v.device, 'CPU:0')
        self.assertDeviceEqual(v.initializer.device, 'CPU:0')
      self.assertEqual(len(clones), num_clones)
      for i, clone in enumerate(clones):
        self.assertEqual(
            clone.outputs.op.name,
            'clone_%d/BatchNormClassifier/fully_connected/Sigmoid' % i)
        update_ops = tf.compat.v1.get_collection(_GRAPH_VARS.UPDATE_OPS, clone.scope)
        self.assertEqual(len(update_ops), 2)
        self.assertEqual(clone.scope, 'clone_%d/' % i)
        self.assertDeviceEqual(clone.device, 'GPU:%d' % i)
      # One loss per clone, each in its own scope.
      for clone in clones:
        self.assertEqual(len(tf.compat.v1.get_collection(_GRAPH_VARS.LOSSES, clone.scope)), 1)

  def testCreateOnecloneWithPS(self):
    with tf.Graph().as_default():
      clones = self._clones(batch_norm_classifier, num_clones=1, num_ps_tasks=1)
      self.assertEqual(len(clones), 1)
      clone = clones[0]
      self.assertEqual(clone.outputs.op.name,
                       'BatchNormClassifier/fully_connected/Sigmoid')
      self.assertDeviceEqual(clone.device, '/job:worker/device:GPU:0')
      self.assertEqual(clone.scope, '')
      self.assertEqual(len(slim.get_variables()), 5)
      for v in slim.get_variables():
        self.assertEqual(v.op.type, 'VarHandleOp')
        self.assertDeviceEqual(v.device, '/job:ps/task:0/CPU:0')
        self.assertDeviceEqual(v.device, v.initializer.device)

  def testCreateMulticloneWithPS(self):
    with tf.Graph().as_default():
      clones = self._clones(batch_norm_classifier, num_clones=2, num_ps_tasks=2)
      self.assertEqual(len(slim.get_variables()), 5)
      for i, v in enumerate(slim.get_variables()):
        t = i % 2
        self.assertDeviceEqual(v.device, '/job:ps/task:%d/device:CPU:0' % t)
        self.assertDeviceEqual(v.device, v.initializer.device)
      self.assertEqual(len(clones), 2)
      for i, clone in enumerate(clones):
        self.assertEqual(
            clone.outputs.op.name,
            'clone_%d/BatchNormClassifier/fully_connected/Sigmoid' % i)
        self.assertEqual(clone.scope, 'clone_%d/' % i)
        self.assertDeviceEqual(clone.device, '/job:worker/device:GPU:%d' % i)

  def testNonSlimVariablesGoToPS(self):
    # tf.compat.v1.get_variable outside slim (e.g. Keras legacy layers) too.
    def model_fn():
      w = tf.compat.v1.get_variable('w', [3, 2])
      tf.compat.v1.losses.add_loss(tf.reduce_sum(w))
    with tf.Graph().as_default():
      config = model_deploy.DeploymentConfig(num_clones=2, num_ps_tasks=2)
      model_deploy.create_clones(config, model_fn)
      (w,) = tf.compat.v1.global_variables()
      self.assertDeviceEqual(w.device, '/job:ps/task:0/device:CPU:0')

  def testCreateMulticloneReplicated(self):
    with tf.Graph().as_default():
      clones = self._clones(batch_norm_classifier, num_clones=4,
                            variable_update='replicated')
      # Global (saved) variables are unchanged; copies are local variables.
      self.assertEqual(len(slim.get_variables()), 5)
      copies = model_deploy.variable_copies(clones)
      self.assertEqual(sorted(v.op.name for v in copies), [
          'BatchNormClassifier/BatchNorm/beta',
          'BatchNormClassifier/fully_connected/biases',
          'BatchNormClassifier/fully_connected/weights'])
      for original, var_copies in copies.items():
        self.assertIs(var_copies[0], original)
        self.assertDeviceEqual(original.device, 'GPU:0')
        for i, copy in enumerate(var_copies[1:], 1):
          self.assertEqual(copy.op.name, 'copy_%d/%s' % (i, original.op.name))
          self.assertDeviceEqual(copy.device, 'GPU:%d' % i)
          self.assertIn(copy, tf.compat.v1.local_variables())
      for v in slim.get_variables_by_name('moving_'):
        self.assertDeviceEqual(v.device, 'CPU:0')
      for i, clone in enumerate(clones):
        self.assertEqual(
            clone.outputs.op.name,
            'clone_%d/BatchNormClassifier/fully_connected/Sigmoid' % i)


class OptimizeclonesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self._inputs, self._labels = _easy_training_set()

  def _optimize(self, model_fn, num_variables, num_update_ops, **config_kwargs):
    tf.compat.v1.set_random_seed(0)
    tf_inputs = tf.constant(self._inputs, dtype=tf.float32)
    tf_labels = tf.constant(self._labels, dtype=tf.float32)
    deploy_config = model_deploy.DeploymentConfig(**config_kwargs)
    self.assertEqual(slim.get_variables(), [])
    clones = model_deploy.create_clones(deploy_config, model_fn, (tf_inputs, tf_labels))
    self.assertEqual(len(slim.get_variables()), num_variables)
    update_ops = tf.compat.v1.get_collection(_GRAPH_VARS.UPDATE_OPS)
    self.assertEqual(len(update_ops), num_update_ops)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=1.0)
    total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
    self.assertEqual(len(grads_and_vars), len(tf.compat.v1.trainable_variables()))
    self.assertEqual(total_loss.op.name, 'total_loss')
    return grads_and_vars

  def testCreateLogisticClassifier(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(logistic_classifier, 2, 0, num_clones=1)
      for g, v in grads_and_vars:
        self.assertDeviceEqual(g.device, 'GPU:0')
        self.assertDeviceEqual(v.device, 'CPU:0')

  def testCreateSingleclone(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(batch_norm_classifier, 5, 2, num_clones=1)
      for g, v in grads_and_vars:
        self.assertDeviceEqual(g.device, 'GPU:0')
        self.assertDeviceEqual(v.device, 'CPU:0')

  def testCreateMulticlone(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(batch_norm_classifier, 5, 8, num_clones=4)
      for g, v in grads_and_vars:
        self.assertDeviceEqual(g.device, '')
        self.assertDeviceEqual(v.device, 'CPU:0')
        self.assertEqual(g.op.name, v.op.name + '/sum_grads')

  def testCreateMulticloneCPU(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(batch_norm_classifier, 5, 8, num_clones=4,
                                      clone_on_cpu=True)
      for g, v in grads_and_vars:
        self.assertDeviceEqual(g.device, '')
        self.assertDeviceEqual(v.device, 'CPU:0')

  def testCreateOnecloneWithPS(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(batch_norm_classifier, 5, 2, num_clones=1,
                                      num_ps_tasks=1)
      for g, v in grads_and_vars:
        self.assertDeviceEqual(g.device, '/job:worker/device:GPU:0')
        self.assertDeviceEqual(v.device, '/job:ps/task:0/CPU:0')

  def testCreateMulticloneReplicated(self):
    with tf.Graph().as_default():
      grads_and_vars = self._optimize(batch_norm_classifier, 5, 8, num_clones=4,
                                      variable_update='replicated', all_reduce='add_n')
      for g, v in grads_and_vars:
        # The all-reduced gradient of copy 0 lives with copy 0, on clone 0.
        self.assertDeviceEqual(g.device, 'GPU:0')
        self.assertDeviceEqual(v.device, 'GPU:0')
        self.assertEqual(g.op.name, v.op.name + '/sum_grads')

  def testRegularizationOnlyOnFirstClone(self):
    def model_fn():
      w = slim.model_variable('w', [2], initializer=tf.compat.v1.ones_initializer(),
                              regularizer=slim.l2_regularizer(1.0))
      tf.compat.v1.losses.add_loss(tf.reduce_sum(w))
    with tf.Graph().as_default():
      config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
      clones = model_deploy.create_clones(config, model_fn)
      optimizer = tf.compat.v1.train.GradientDescentOptimizer(1.0)
      total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
      no_reg_loss, _ = model_deploy.optimize_clones(clones, optimizer,
                                                    regularization_losses=[])
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        # clone losses 2/2 + 2/2, plus l2 (0.5 * 2) once.
        self.assertAllClose(sess.run(total_loss), 3.0)
        self.assertAllClose(sess.run(no_reg_loss), 2.0)
        self.assertAllClose(sess.run(grads_and_vars[0][0]), [2.0, 2.0])


class DeployTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self._inputs, self._labels = _easy_training_set()

  def _addBesselsCorrection(self, sample_size, expected_var):
    correction_factor = sample_size / (sample_size - 1)
    expected_var *= correction_factor
    return expected_var

  def _check_local_train_op(self, **config_kwargs):
    g = tf.Graph()
    with g.as_default():
      tf.compat.v1.set_random_seed(0)
      tf_inputs = tf.constant(self._inputs, dtype=tf.float32)
      tf_labels = tf.constant(self._labels, dtype=tf.float32)

      deploy_config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                                    **config_kwargs)
      optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=1.0)

      self.assertEqual(slim.get_variables(), [])
      model = model_deploy.deploy(deploy_config, batch_norm_classifier,
                                  (tf_inputs, tf_labels), optimizer=optimizer)

      update_ops = tf.compat.v1.get_collection(_GRAPH_VARS.UPDATE_OPS)
      self.assertEqual(len(update_ops), 4)
      self.assertEqual(len(model.clones), 2)
      self.assertEqual(model.total_loss.op.name, 'total_loss')
      self.assertEqual(model.summary_op.op.name, 'summary_op/summary_op')
      self.assertEqual(model.train_op.op.name, 'train_op')

      with tf.compat.v1.Session(graph=g) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(tf.compat.v1.local_variables_initializer())
        moving_mean = slim.get_variables_by_name('moving_mean')[0]
        moving_variance = slim.get_variables_by_name('moving_variance')[0]
        initial_loss = sess.run(model.total_loss)
        initial_mean, initial_variance = sess.run([moving_mean, moving_variance])
        self.assertAllClose(initial_mean, [0.0, 0.0, 0.0, 0.0])
        self.assertAllClose(initial_variance, [1.0, 1.0, 1.0, 1.0])
        for _ in range(10):
          sess.run(model.train_op)
        final_loss = sess.run(model.total_loss)
        self.assertLess(final_loss, initial_loss / 5.0)

        final_mean, final_variance = sess.run([moving_mean, moving_variance])
        expected_mean = np.array([0.125, 0.25, 0.375, 0.25])
        expected_var = np.array([0.109375, 0.1875, 0.234375, 0.1875])
        expected_var = self._addBesselsCorrection(16, expected_var)
        self.assertAllClose(final_mean, expected_mean)
        self.assertAllClose(final_variance, expected_var)
        self.assertEqual(sess.run(tf.compat.v1.train.get_global_step()), 10)
        sess.run(model.summary_op)

  def testLocalTrainOp(self):
    self._check_local_train_op()

  def testLocalTrainOpReplicated(self):
    self._check_local_train_op(variable_update='replicated')

  def testNoSummariesOnGPU(self):
    with tf.Graph().as_default():
      deploy_config = model_deploy.DeploymentConfig(num_clones=2)

      # clone function creates a fully_connected layer with a regularizer loss.
      def model_fn():
        inputs = tf.constant(1.0, shape=(10, 20), dtype=tf.float32)
        reg = slim.l2_regularizer(0.001)
        slim.fully_connected(inputs, 30, weights_regularizer=reg)

      model = model_deploy.deploy(
          deploy_config, model_fn,
          optimizer=tf.compat.v1.train.GradientDescentOptimizer(1.0))
      # The model summary op should have a few summary inputs and all of them
      # should be on the CPU.
      self.assertTrue(model.summary_op.op.inputs)
      for inp in model.summary_op.op.inputs:
        self.assertEqual('/device:CPU:0', inp.device)

  def testNoSummariesOnGPUForEvals(self):
    with tf.Graph().as_default():
      deploy_config = model_deploy.DeploymentConfig(num_clones=2)

      # clone function creates a fully_connected layer with a regularizer loss.
      def model_fn():
        inputs = tf.constant(1.0, shape=(10, 20), dtype=tf.float32)
        reg = slim.l2_regularizer(0.001)
        slim.fully_connected(inputs, 30, weights_regularizer=reg)

      # No optimizer here, it's an eval.
      model = model_deploy.deploy(deploy_config, model_fn)
      self.assertIsNone(model.train_op)
      # The model summary op should have a few summary inputs and all of them
      # should be on the CPU.
      self.assertTrue(model.summary_op.op.inputs)
      for inp in model.summary_op.op.inputs:
        self.assertEqual('/device:CPU:0', inp.device)

  def testSummarizeGradients(self):
    with tf.Graph().as_default():
      config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
      model = model_deploy.deploy(
          config, logistic_classifier,
          (tf.constant(self._inputs, tf.float32), tf.constant(self._labels)),
          optimizer=tf.compat.v1.train.GradientDescentOptimizer(1.0),
          summarize_gradients=True)
      names = [t.op.name for t in model.summary_op.op.inputs]
      self.assertTrue(any(':gradient_norm' in n or 'gradient_norm' in n for n in names),
                      names)


if __name__ == '__main__':
  tf.test.main()
