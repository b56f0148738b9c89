"""What the zoo training benchmarks share: one clone on synthetic input, a timed deployment.

benchmarks/zoo_ssd_training.py and benchmarks/zoo_faster_rcnn_training.py
compare one clone taking a whole batch with two clones on two virtual CPU
devices taking half each (`model_deploy`, gradients summed on the variables
device), on device-resident random images with two groundtruth boxes each:

    rates = zoo_training_lib.compare_clones(model_config, batch_size=8, image_size=300,
                                            warmup=3, steps=10, repeats=3,
                                            learning_rate=0.004)
    # prints the examples/sec and steps/sec tables and the 2-clone / 1-clone ratio
"""

import collections
import functools

import tensorflow as tf
import tf_slim as slim

from benchmarks import bench_util
from builders import model_builder
from deployment import model_deploy


def clone_fn(model_config, batch_size, image_size):
  """One clone: a synthetic batch through the model to its losses (GraphKeys.LOSSES)."""
  model = model_builder.build(model_config, is_training=True, add_summaries=False)
  images = tf.compat.v1.get_local_variable(
      'synthetic_images', initializer=tf.random.uniform(
          [batch_size, image_size, image_size, 3], 0.0, 255.0, seed=1), trainable=False)
  boxes = tf.constant([[0.1, 0.1, 0.5, 0.4], [0.5, 0.5, 0.9, 0.95]])
  classes = tf.one_hot([0, 2], model.num_classes)
  preprocessed, shapes = model.preprocess(images)
  model.provide_groundtruth([boxes] * batch_size, [classes] * batch_size)
  for loss in model.loss(model.predict(preprocessed, shapes), shapes).values():
    tf.compat.v1.losses.add_loss(loss)


def measure(model_config, num_clones, batch_size, image_size, warmup, steps, learning_rate):
  """Builds the deployment in a fresh graph (momentum 0.9); returns examples/sec."""
  devices = ['/device:CPU:%d' % i for i in range(num_clones)]
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_devices=devices)
    with tf.compat.v1.device(config.variables_device()):
      global_step = slim.create_global_step()
    clones = model_deploy.create_clones(
        config, clone_fn, [model_config, batch_size // num_clones, image_size])
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS,
                                             clones[0].scope)
    optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate, 0.9)
    with tf.compat.v1.device(config.optimizer_device()):
      total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
      update_ops.append(model_deploy.apply_gradients(clones, optimizer, grads_and_vars,
                                                     global_step=global_step))
      with tf.control_dependencies([tf.group(*update_ops)]):
        train_op = tf.identity(total_loss, name='train_op')
    inits = [tf.compat.v1.global_variables_initializer(),
             tf.compat.v1.local_variables_initializer()]
  session_config = bench_util.session_config(0, num_clones, num_cpus=num_clones)
  with tf.compat.v1.Session(graph=graph, config=session_config) as sess:
    sess.run(inits)
    return bench_util.timed_steps(sess.make_callable(train_op), warmup, steps) * batch_size


def compare_clones(model_config, batch_size, image_size, warmup, steps, repeats,
                   learning_rate, seconds_per_step=False):
  """Runs 1 clone x batch_size and 2 clones x batch_size/2 alternately; prints the tables.

  Args:
    model_config: the DetectionModel proto to build.
    batch_size: examples per step (even: two clones take half each).
    image_size: side of the synthetic square images.
    warmup: untimed steps first.
    steps: timed steps per measurement.
    repeats: measurements per variant.
    learning_rate: the momentum optimizer's rate (it does not change the speed).
    seconds_per_step: also print a seconds/step table (for models far below
      one step a second, where steps/sec printed with one decimal says little).

  Returns:
    {variant name: [examples/sec per repeat]}.
  """
  variants = collections.OrderedDict(
      (('1 clone x %d' % batch_size, 1), ('2 clones x %d' % (batch_size // 2), 2)))
  examples_per_sec = bench_util.repeat_variants(collections.OrderedDict(
      (name, functools.partial(measure, model_config, clones, batch_size, image_size, warmup,
                               steps, learning_rate))
      for name, clones in variants.items()), repeats)
  bench_util.print_table('Training examples/sec', examples_per_sec, 'examples/sec')
  bench_util.print_table('Training steps/sec', {
      name: [rate / batch_size for rate in rates]
      for name, rates in examples_per_sec.items()}, 'steps/sec')
  if seconds_per_step:
    bench_util.print_table('Training seconds/step', {
        name: [batch_size / rate for rate in rates]
        for name, rates in examples_per_sec.items()}, 'seconds/step')
  one, two = list(examples_per_sec.values())
  print(bench_util.ratio_line('2 clones / 1 clone', two, one))
  return examples_per_sec
