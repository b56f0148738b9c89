r"""ResNet-50 v1 training throughput on one GPU: slimtrain loop vs raw Session loop, clones.

Synthetic, device-resident data (tf_cnn_benchmarks' synthetic mode), fp32,
the tf_slim `resnet_v1_50` through `models.slim_classifier` and
`model_deploy` (one clone on /device:GPU:0). Two measurements:

1. Throughput per (layout, batch): the same graph run by
     slimtrain  `slim.learning.train` with slimtrain's `TrainStepRunner`
                (Supervisor, summary and checkpoint threads), as
                `trainer.train` runs it;
     raw        a bare `Session.run(train_op)` loop;
   layouts: NHWC = the graph as built, grappler's layout optimizer off;
   NCHW = the same graph with the layout optimizer on, which rewrites the
   convolutions and batch norms to NCHW on the GPU (the tf_slim ResNet has no
   native NCHW build: its pooling and global pool are hard-wired to NHWC).
2. Clones on logical GPUs carved from GPU 0 (`benchmarks.clone_scaling` on
   `--device=gpu`): parameter_server and replicated vs the independent
   control.

    python -m benchmarks.gpu_throughput                      # on a GPU machine
    python -m benchmarks.gpu_throughput --batch_sizes=64 --layouts=NHWC
    python -m benchmarks.gpu_throughput --quick              # CPU smoke: tiny, NHWC

Without a GPU only `--quick` (or `--allow_cpu`) runs: `--quick` trains the
backbones' small ResNet on 32x32 images on the CPU, to prove the script works;
its numbers say nothing about GPUs.
"""

import os
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_slim as slim
from tensorflow.core.protobuf import rewriter_config_pb2

from benchmarks import bench_util
from benchmarks import clone_scaling

flags.DEFINE_bool('quick', False, 'CPU smoke run: tiny images, NHWC, few steps.')
flags.DEFINE_bool('allow_cpu', False, 'Run the full benchmark even without a GPU.')
flags.DEFINE_string('net', 'resnet_v1_50', 'Net (a key of models.slim_classifier.NETS).')
flags.DEFINE_integer('image_size', 224, 'Height and width of the synthetic images.')
flags.DEFINE_list('batch_sizes', ['64', '128', '256'], 'Batch sizes of the throughput table.')
flags.DEFINE_list('layouts', ['NHWC', 'NCHW'], 'Layouts of the throughput table.')
flags.DEFINE_list('clones', ['1', '2', '4'], 'Clone counts on logical GPUs (empty: skip).')
flags.DEFINE_integer('clone_batch_size', 64, 'Images per clone in the clone table.')
flags.DEFINE_integer('gpu_memory_mb', 18000, 'Memory of each logical GPU.')
flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
flags.DEFINE_integer('repeats', 3, 'Repeats per variant (>= 3).')
FLAGS = flags.FLAGS

NUM_CLASSES = 1000


def _session_config(device, layout, max_clones, gpu_memory_mb):
  """Session config of the throughput table; layout picks grappler's layout pass."""
  config = clone_scaling.session_config(device, 1, max_clones, gpu_memory_mb)
  config.graph_options.rewrite_options.layout_optimizer = (
      rewriter_config_pb2.RewriterConfig.ON if layout == 'NCHW'
      else rewriter_config_pb2.RewriterConfig.OFF)
  return config


def _build(device, batch_size, image_size):
  """Fresh graph with the one-clone model_deploy train op; returns (graph, train_op)."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)

    def model_fn():
      return bench_util.make_classifier(FLAGS.net, image_size, NUM_CLASSES)
    train_op = clone_scaling.build_deployed(
        'parameter_server', clone_scaling.clone_devices(device, 1), model_fn, batch_size,
        image_size)
  return graph, train_op


def raw_rate(device, layout, batch_size, image_size, warmup, steps, session_kwargs):
  """Images/sec of a bare Session loop."""
  graph, train_op = _build(device, batch_size, image_size)
  with graph.as_default():
    init = tf.group(tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer())
  with tf.compat.v1.Session(graph=graph,
                            config=_session_config(device, layout, **session_kwargs)) as sess:
    sess.run(init)
    return bench_util.timed_steps(sess.make_callable(train_op), warmup, steps) * batch_size


def slimtrain_rate(device, layout, batch_size, image_size, warmup, steps, session_kwargs):
  """Images/sec of slim.learning.train + TrainStepRunner on the same graph."""
  from trainer import training_loop  # noqa: PLC0415
  stamps = []

  class StampedRunner(training_loop.TrainStepRunner):
    def __call__(self, *args):
      result = super().__call__(*args)
      stamps.append(time.perf_counter())
      return result

  graph, train_op = _build(device, batch_size, image_size)
  with graph.as_default(), tempfile.TemporaryDirectory() as train_dir:
    global_step = tf.compat.v1.train.get_global_step()
    with tf.control_dependencies([train_op]):
      step_after_update = tf.identity(global_step.read_value())
    runner = StampedRunner(number_of_steps=warmup + steps, examples_per_step=batch_size,
                           step_after_update=step_after_update)
    slim.learning.train(train_op, logdir=train_dir, train_step_fn=runner,
                        number_of_steps=warmup + steps,
                        session_config=_session_config(device, layout, **session_kwargs))
  return bench_util.rate_from_stamps(stamps, warmup, batch_size)


def run_throughput(device, layouts, batch_sizes, image_size, warmup, steps, repeats,
                   session_kwargs, out=sys.stdout):
  """The (layout, batch) table: slimtrain vs raw; returns {(layout, batch): results}."""
  tables = {}
  for layout in layouts:
    for batch in batch_sizes:
      variants = {
          'slimtrain': lambda b=batch, lay=layout: slimtrain_rate(
              device, lay, b, image_size, warmup, steps, session_kwargs),
          'raw': lambda b=batch, lay=layout: raw_rate(
              device, lay, b, image_size, warmup, steps, session_kwargs),
      }
      print('\n== %s %s %dx%d batch %d on %s' % (FLAGS.net, layout, image_size, image_size,
                                                  batch, device), file=out, flush=True)
      tables[(layout, batch)] = bench_util.repeat_variants(variants, repeats, out=out)
  print('\n%s images/sec, fp32, synthetic, %d warm-up + %d timed steps x %d repeats'
        % (FLAGS.net, warmup, steps, repeats), file=out)
  print('| layout | batch | slimtrain median | raw median | spread slimtrain / raw % | '
        'slimtrain/raw |', file=out)
  print('| --- | ---: | ---: | ---: | ---: | ---: |', file=out)
  for (layout, batch), results in tables.items():
    spreads = ['%.0f' % (100 * (max(v) - min(v)) / bench_util.median(v))
               for v in (results['slimtrain'], results['raw'])]
    print('| %s | %d | %.1f | %.1f | %s | %.3f |' % (
        layout, batch, bench_util.median(results['slimtrain']),
        bench_util.median(results['raw']), ' / '.join(spreads),
        bench_util.ratio(results['slimtrain'], results['raw'])), file=out)
  for (layout, batch), results in tables.items():
    print(bench_util.ratio_line('slimtrain/raw %s batch %d' % (layout, batch),
                                results['slimtrain'], results['raw'], goal=0.95), file=out)
  return tables


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  has_gpu = bool(tf.config.list_physical_devices('GPU'))
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  image_size, layouts = FLAGS.image_size, FLAGS.layouts
  batch_sizes = [int(b) for b in FLAGS.batch_sizes]
  clones = [int(c) for c in FLAGS.clones if c]
  clone_batch, modes = FLAGS.clone_batch_size, list(clone_scaling.MODES)
  if FLAGS.quick:
    # A tiny stand-in for ResNet-50 (the backbones' small ResNet, 32x32).
    FLAGS.net, warmup, steps, repeats, image_size, layouts = 'small_resnet', 2, 10, 1, 32, ['NHWC']
    batch_sizes, clones, clone_batch = [2], [2], 2
    modes = ['replicated', 'independent']
  elif warmup < 10 or steps < 100 or repeats < 3:
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 3')
  elif not has_gpu and not FLAGS.allow_cpu:
    raise app.UsageError('no GPU visible: run with --quick (CPU smoke) or --allow_cpu')
  device = 'gpu' if has_gpu else 'cpu'
  if device == 'cpu':
    layouts = [lay for lay in layouts if lay == 'NHWC'] or ['NHWC']  # CPU kernels: NHWC only
  max_clones = max(clones + [1])
  if device == 'gpu':
    clone_scaling.split_gpu(max_clones, FLAGS.gpu_memory_mb)
  tf.compat.v1.disable_eager_execution()
  print('device: %s; GPU figures %s' % (device, 'measured' if has_gpu else
                                       'are owed (CPU smoke run only)'), flush=True)
  session_kwargs = {'max_clones': max_clones, 'gpu_memory_mb': FLAGS.gpu_memory_mb}
  run_throughput(device, layouts, batch_sizes, image_size, warmup, steps, repeats,
                 session_kwargs)
  if clones:
    print('\n== clones on %s (%d images per clone)' % (
        'logical GPUs of GPU 0' if device == 'gpu' else 'virtual CPU devices', clone_batch))

    def model_fn():
      return bench_util.make_classifier(FLAGS.net, image_size, NUM_CLASSES)
    clone_scaling.run_benchmark(device, clones, modes, model_fn, clone_batch, image_size,
                                warmup, steps, repeats, gpu_memory_mb=FLAGS.gpu_memory_mb)


if __name__ == '__main__':
  app.run(main)
