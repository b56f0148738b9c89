"""A tiny regression model trained through model_deploy, shared by the tests.

`build(...)` deploys a two-layer MLP (l2-regularized, seeded initializers, so
every graph starts from the same numbers) over `num_clones` clones, each fed
its own slice of one fixed batch, and returns the ops to train it; `train`
runs some steps and returns the per-step losses and the final variables.
`run_equivalence` is the numerical-equivalence check used on virtual CPUs and
on logical GPUs (tests/deployment/gpu_equivalence_main.py).
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy

FEATURES = 6


def make_data(total_batch, seed=0):
  """Returns (x, y) float32 arrays with `total_batch` examples."""
  rng = np.random.RandomState(seed)
  x = rng.randn(total_batch, FEATURES).astype(np.float32)
  y = (x.sum(axis=1, keepdims=True) * 0.5 + 0.1).astype(np.float32)
  return x, y


def mlp_model_fn(batches):
  """A model_fn taking the next (x, y) slice from the iterator `batches`."""
  def model_fn():
    x, y = next(batches)
    hidden = slim.fully_connected(
        tf.constant(x), 8, activation_fn=tf.nn.relu, scope='hidden',
        weights_initializer=tf.compat.v1.glorot_uniform_initializer(seed=1),
        biases_initializer=tf.compat.v1.constant_initializer(0.1),
        weights_regularizer=slim.l2_regularizer(0.01))
    prediction = slim.fully_connected(
        hidden, 1, activation_fn=None, scope='output',
        weights_initializer=tf.compat.v1.glorot_uniform_initializer(seed=2))
    tf.compat.v1.losses.mean_squared_error(tf.constant(y), prediction)
    return prediction
  return model_fn


def build(x, y, num_clones, variable_update='parameter_server', clone_devices=None,
          optimizer='sgd', transform=False, all_reduce='auto'):
  """Builds the training graph in the default graph.

  Args:
    x, y: the whole batch; clone i gets the i-th of `num_clones` equal slices.
    num_clones: number of clones.
    variable_update: 'parameter_server' or 'replicated'.
    clone_devices: devices of the clones (default: all on /device:CPU:0).
    optimizer: 'sgd' or 'momentum'.
    transform: when True, scales bias gradients and clips norms the way the
      legacy trainer does before applying them.
    all_reduce: passed to DeploymentConfig.

  Returns:
    dict with train_op, total_loss, clones.
  """
  config = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_on_cpu=clone_devices is None,
      clone_devices=clone_devices, variable_update=variable_update,
      all_reduce=all_reduce)
  with tf.compat.v1.device(config.variables_device()):
    global_step = tf.compat.v1.train.get_or_create_global_step()
  batches = iter(zip(np.split(x, num_clones), np.split(y, num_clones)))
  clones = model_deploy.create_clones(config, mlp_model_fn(batches))
  with tf.compat.v1.device(config.optimizer_device()):
    if optimizer == 'momentum':
      opt = tf.compat.v1.train.MomentumOptimizer(0.05, momentum=0.9)
    else:
      opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    total_loss, grads_and_vars = model_deploy.optimize_clones(clones, opt)
    if transform:
      grads_and_vars = [(g * 0.5 if v.op.name.endswith('biases') else g, v)
                        for g, v in grads_and_vars]
      grads_and_vars = slim.learning.clip_gradient_norms(grads_and_vars, 1.0)
    update = model_deploy.apply_gradients(clones, opt, grads_and_vars,
                                          global_step=global_step)
    with tf.control_dependencies([update]):
      train_op = tf.identity(total_loss, name='train_op')
  return {'train_op': train_op, 'total_loss': total_loss, 'clones': clones}


def initialize(sess):
  """Global, then local initialisation (what Supervisor/MonitoredSession do)."""
  sess.run(tf.compat.v1.global_variables_initializer())
  sess.run(tf.compat.v1.local_variables_initializer())


def variable_values(sess, variables=None):
  """{op name: value} of `variables` (default: all global variables)."""
  if variables is None:
    variables = tf.compat.v1.global_variables()
  values = sess.run(list(variables))
  return {v.op.name: value for v, value in zip(variables, values)}


def train(sess, ops, steps):
  """Runs `steps` train steps; returns the losses (computed before each update)."""
  return [float(sess.run(ops['train_op'])) for _ in range(steps)]


def copies_identical(sess, clones):
  """True when every replicated copy equals copy 0 bit for bit (also slots)."""
  pairs = []
  for original, copies in model_deploy.variable_copies(clones).items():
    pairs.extend((original, c) for c in copies[1:])
  by_name = {v.op.name: v for v in tf.compat.v1.global_variables()}
  for v in tf.compat.v1.local_variables():
    name = v.op.name
    if name.startswith('copy_') and name.split('/', 1)[1] in by_name:
      pairs.append((by_name[name.split('/', 1)[1]], v))
  if not pairs:
    return True
  values = sess.run([[a, b] for a, b in pairs])
  return all(np.array_equal(a, b) for a, b in values)


def run_equivalence(num_clones, variable_update, clone_devices, session_config,
                    per_clone_batch=4, steps=5, all_reduce='auto', baseline_devices=None):
  """Trains 1 clone on N*B examples and N clones on B each.

  Args:
    num_clones: N.
    variable_update: 'parameter_server' or 'replicated'.
    clone_devices: the N clone devices.
    session_config: ConfigProto for both sessions.
    per_clone_batch: B.
    steps: SGD steps.
    all_reduce: passed to DeploymentConfig.
    baseline_devices: device list of the single clone (default: CPU:0).

  Returns:
    (baseline_losses, baseline_vars, clone_losses, clone_vars, identical)
  """
  x, y = make_data(num_clones * per_clone_batch)
  results = []
  for clones_here, devices in ((1, baseline_devices), (num_clones, clone_devices)):
    graph = tf.Graph()
    with graph.as_default():
      ops = build(x, y, clones_here, variable_update=variable_update,
                  clone_devices=devices, all_reduce=all_reduce)
      with tf.compat.v1.Session(graph=graph, config=session_config) as sess:
        initialize(sess)
        losses = train(sess, ops, steps)
        values = variable_values(sess)
        identical = copies_identical(sess, ops['clones'])
    results.append((losses, values, identical))
  (base_losses, base_vars, _), (losses, values, identical) = results
  return base_losses, base_vars, losses, values, identical
