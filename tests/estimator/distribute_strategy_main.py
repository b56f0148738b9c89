"""A 2019-style Estimator program that hands RunConfig a tf.distribute strategy.

Run by tests/estimator/test_run_config_distribute.py, in a fresh process, to
show the order such programs use works: eager execution is switched off
first, then the strategy is built, then the RunConfig and the Estimator:

    python -m tests.estimator.distribute_strategy_main --model_dir=D \
        --strategy=mirrored_cpu --steps=3

`--strategy` is `one_device_cpu` (OneDeviceStrategy('/cpu:0')),
`mirrored_cpu` (MirroredStrategy over two virtual CPU devices),
`mirrored_default` (MirroredStrategy() over the GPUs, else the one CPU: its
constructor starts TensorFlow's eager context to list them) or `none`.
The last line printed is `RESULT {json}` with the final step, the latest
checkpoint and, for every `clone_<i>/` scope of the saved training graph,
the devices its ops were placed on.

The model is a linear regression trained with plain gradient descent on a
fixed dataset, its optimizer wrapped in `tfe.TowerOptimizer` (what several
clones need, see estimator/replicate.py). The helpers are shared with the
in-process tests.
"""

import argparse
import json
import sys

import numpy as np
import tensorflow as tf

import estimator as tfe

NUM_FEATURES = 3
NUM_EXAMPLES = 64


def make_data():
  """(x float32 [64, 3], y float32 [64, 1]) of a noisy fixed linear function."""
  rng = np.random.RandomState(7)
  x = rng.normal(size=(NUM_EXAMPLES, NUM_FEATURES)).astype(np.float32)
  y = x.dot(np.array([[1.0], [-2.0], [0.5]], np.float32)) + 0.3
  y += rng.normal(scale=0.05, size=y.shape).astype(np.float32)
  return x, y


def input_fn_for(batch_size, seen_contexts=None):
  """An input_fn repeating the data in order, in batches of `batch_size`.

  Args:
    batch_size: examples per batch (per replica under a MirroredStrategy, as
      tf.estimator fed each replica its own batch).
    seen_contexts: optional list receiving the `input_context` each call got.

  Returns:
    `input_fn(input_context=None) -> Dataset of ({'x': x}, y)`.
  """
  x, y = make_data()

  def input_fn(input_context=None):
    if seen_contexts is not None:
      seen_contexts.append(input_context)
    dataset = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
    return dataset.repeat().batch(batch_size, drop_remainder=True)

  return input_fn


def model_fn(features, labels, mode):
  """A linear regression; the loss is the batch's mean squared error."""
  weights = tf.compat.v1.get_variable(
      'weights', [NUM_FEATURES, 1], initializer=tf.compat.v1.zeros_initializer())
  bias = tf.compat.v1.get_variable('bias', [1], initializer=tf.compat.v1.zeros_initializer())
  predictions = tf.matmul(features['x'], weights) + bias
  if mode == tfe.ModeKeys.PREDICT:
    return tfe.EstimatorSpec(mode, predictions={'y': predictions})
  loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
  train_op = None
  if mode == tfe.ModeKeys.TRAIN:
    optimizer = tfe.TowerOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
  metrics = {'mae': tf.compat.v1.metrics.mean_absolute_error(labels, predictions)}
  return tfe.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics,
                           predictions={'y': predictions})


def clone_devices(model_dir):
  """{clone scope: sorted devices of its placed ops} in the latest checkpoint's training graph.

  Ops without a device of their own (variable reads, colocated with their
  variable) are left out.

  Args:
    model_dir: the Estimator's model_dir.

  Returns:
    A dict such as {'clone_0': ['/device:CPU:0'], 'clone_1': ['/device:CPU:1']}.
  """
  meta = tf.compat.v1.MetaGraphDef()
  with tf.io.gfile.GFile(tf.train.latest_checkpoint(model_dir) + '.meta', 'rb') as f:
    meta.ParseFromString(f.read())
  scopes = {}
  for node in meta.graph_def.node:
    scope = node.name.split('/', 1)[0]
    if scope.startswith('clone_') and node.device:
      scopes.setdefault(scope, set()).add(node.device)
  return {scope: sorted(devices) for scope, devices in scopes.items()}


def clone_op_names(model_dir):
  """Names of the ops under `clone_<i>/` scopes of the latest training graph."""
  meta = tf.compat.v1.MetaGraphDef()
  with tf.io.gfile.GFile(tf.train.latest_checkpoint(model_dir) + '.meta', 'rb') as f:
    meta.ParseFromString(f.read())
  return sorted(n.name for n in meta.graph_def.node if n.name.startswith('clone_'))


def two_cpu_session_config():
  """A session config with two virtual CPU devices (/device:CPU:0 and :1)."""
  return tf.compat.v1.ConfigProto(device_count={'CPU': 2}, allow_soft_placement=False)


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
  parser.add_argument('--model_dir', required=True)
  parser.add_argument('--strategy', default='mirrored_cpu',
                      choices=['none', 'one_device_cpu', 'mirrored_cpu', 'mirrored_default'])
  parser.add_argument('--steps', type=int, default=3)
  args = parser.parse_args(argv)

  tf.compat.v1.disable_eager_execution()
  strategy = {
      'none': lambda: None,
      'one_device_cpu': lambda: tf.distribute.OneDeviceStrategy('/cpu:0'),
      'mirrored_cpu': lambda: tf.distribute.MirroredStrategy(devices=['/cpu:0', '/cpu:1']),
      'mirrored_default': tf.distribute.MirroredStrategy,
  }[args.strategy]()
  config = tfe.RunConfig(model_dir=args.model_dir, tf_random_seed=1,
                         save_checkpoints_steps=args.steps,
                         session_config=two_cpu_session_config(),
                         train_distribute=strategy, eval_distribute=strategy)
  estimator = tfe.Estimator(model_fn, config=config)
  estimator.train(input_fn_for(4), max_steps=args.steps)
  metrics = estimator.evaluate(input_fn_for(8), steps=2)
  result = {'global_step': int(estimator.get_variable_value('global_step')),
            'checkpoint': estimator.latest_checkpoint(),
            'clone_devices': clone_devices(args.model_dir),
            'eval_global_step': int(metrics['global_step']),
            'train_distribute': type(config.train_distribute).__name__}
  print('RESULT ' + json.dumps(result))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
