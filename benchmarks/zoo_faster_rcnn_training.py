r"""Training speed of the zoo's faster_rcnn_resnet50: 2 clones vs 1, side by side.

The model is the one `configs/zoo/faster_rcnn_resnet50_coco.config` builds
(the zoo checkpoint's architecture: ResNet-50 v1 blocks 1-3 under the RPN,
block 4 on each proposal's 14x14 crop; 3 classes), with one change: the
config's keep_aspect_ratio_resizer (600..1024 px, one image per clone) is
replaced by a fixed_shape_resizer of `--image_size` square (default 320), so
that a clone can take more than one image and a CPU run stays affordable.
The rates are therefore those of 320x320 inputs, not of the zoo's ~600x1000.

Each step trains on a batch of `--batch_size` examples: one clone takes all
of them, or two clones on two virtual CPU devices take half each
(`model_deploy`, gradients summed on the variables device). Input is
synthetic and device-resident (random images, two groundtruth boxes each),
so the rates are the model's and the aggregation's, not the input
pipeline's. The variants alternate inside each repeat
(`bench_util.repeat_variants`) and the ratio is reported per repeat.

    python -m benchmarks.zoo_faster_rcnn_training --steps=5 --repeats=3
    python -m benchmarks.zoo_faster_rcnn_training --quick     # a smoke run

Prints examples/sec (the repeats) and steps/sec per variant and the 2-clone
/ 1-clone ratio (no goal: on virtual devices the clones share the machine's
cores), in the same format as benchmarks/zoo_ssd_training.py.
"""

import collections
import functools
import os
import sys

from absl import app
from absl import flags
import tensorflow as tf
import tf_slim as slim

from benchmarks import bench_util
from builders import model_builder
from core import config_util
from deployment import model_deploy

FLAGS = flags.FLAGS
_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       'configs', 'zoo', 'faster_rcnn_resnet50_coco.config')


def model_config_at(image_size):
  """The zoo config's model with its resizer replaced by a fixed square one.

  Args:
    image_size: side in pixels of the resized (and trained) images.

  Returns:
    a `DetectionModel` proto whose faster_rcnn.image_resizer is a
    fixed_shape_resizer of image_size x image_size.
  """
  model_config = config_util.get_configs_from_pipeline_file(_CONFIG)['model']
  # Setting a field of the oneof's other member clears keep_aspect_ratio_resizer.
  resizer = model_config.faster_rcnn.image_resizer.fixed_shape_resizer
  resizer.height = resizer.width = image_size
  return model_config


def _clone_fn(model_config, batch_size, image_size):
  """One clone: a synthetic batch through both stages to their losses (GraphKeys.LOSSES)."""
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


def measure(model_config, num_clones, batch_size, image_size, warmup, steps):
  """Builds the deployment in a fresh graph; returns examples/sec."""
  devices = ['/device:CPU:%d' % i for i in range(num_clones)]
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_devices=devices)
    with tf.compat.v1.device(config.variables_device()):
      global_step = slim.create_global_step()
    clones = model_deploy.create_clones(
        config, _clone_fn, [model_config, batch_size // num_clones, image_size])
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS,
                                             clones[0].scope)
    # The zoo config's optimizer (momentum 0.9); its rate does not change the speed.
    optimizer = tf.compat.v1.train.MomentumOptimizer(0.0003, 0.9)
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


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  if FLAGS.quick:
    FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps, FLAGS.repeats = (
        64, 2, 1, 1, 2)
  if FLAGS.batch_size < 2 or FLAGS.batch_size % 2:
    raise ValueError('--batch_size must be even and >= 2 (two clones take half each), '
                     'got %d' % FLAGS.batch_size)
  model_config = model_config_at(FLAGS.image_size)
  variants = collections.OrderedDict(
      (('1 clone x %d' % FLAGS.batch_size, 1),
       ('2 clones x %d' % (FLAGS.batch_size // 2), 2)))
  print('faster_rcnn_resnet50 %dx%d (fixed_shape_resizer), batch %d per step, '
        '%d warm-up + %d timed steps, %d repeats'
        % (FLAGS.image_size, FLAGS.image_size, FLAGS.batch_size, FLAGS.warmup, FLAGS.steps,
           FLAGS.repeats), flush=True)
  examples_per_sec = bench_util.repeat_variants(collections.OrderedDict(
      (name, functools.partial(measure, model_config, clones, FLAGS.batch_size,
                               FLAGS.image_size, FLAGS.warmup, FLAGS.steps))
      for name, clones in variants.items()), FLAGS.repeats)
  bench_util.print_table('Training examples/sec', examples_per_sec, 'examples/sec')
  bench_util.print_table('Training steps/sec', {
      name: [rate / FLAGS.batch_size for rate in rates]
      for name, rates in examples_per_sec.items()}, 'steps/sec')
  one, two = list(examples_per_sec.values())
  print(bench_util.ratio_line('2 clones / 1 clone', two, one))
  return 0


def define_flags():
  flags.DEFINE_integer('image_size', 320, 'Side of the fixed square resize (the zoo config '
                       'keeps the aspect ratio at 600..1024 px; smaller keeps CPU runs short).')
  flags.DEFINE_integer('batch_size', 2, 'Examples per step, split over the clones (even).')
  flags.DEFINE_integer('warmup', 2, 'Untimed steps first.')
  flags.DEFINE_integer('steps', 5, 'Timed steps per measurement.')
  flags.DEFINE_integer('repeats', 3, 'Measurements per variant, alternating.')
  flags.DEFINE_bool('quick', False, 'A smoke run: 64x64, batch 2, 1 warm-up + 1 timed step, '
                    '2 repeats.')


if __name__ == '__main__':
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))
