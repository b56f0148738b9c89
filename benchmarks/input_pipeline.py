r"""Input pipeline throughput: BatchQueue + prefetch vs a plain tf.data pipeline.

Measures examples/sec of decode + augment + batch on the synthetic shapes
dataset through

  (a) the legacy path: `input_reader_builder.build` (per-example tensor_dict)
      -> augmentation in the graph -> `core.batcher.BatchQueue` (queue runners,
      dynamic padding, prefetch queue) -> `dequeue()` (unpadded list);
  (b) the tf.data path: `input_reader_builder.build_dataset` with the same
      augmentation as `transform_input_data_fn` -> `padded_batch` -> prefetch;

and each again with tf.data autotuning kept on (`SLIMTRAIN_TF_DATA_AUTOTUNE=1`
while its graph is built; slimtrain turns it off, core/dataset_teardown.py),
in one process, with the same number of threads for all (decode calls,
augment calls / batch queue threads, session inter/intra-op threads). Each
repeat runs each variant in a fresh session: warm-up steps, then timed
steps; the repeats alternate a, a+, b, b+, ... The goal is (a) >= 0.9 x (b),
called met or missed only when every repeat's a/b agrees
(`benchmarks.bench_util.verdict`, at least 5 repeats), else "not resolved".
What turning autotuning off costs each path is printed as a/a+ and b/b+
(no goal; `--noautotune_pairs` leaves the + variants out).

    python -m benchmarks.input_pipeline --quick          # < 2 minutes
    python -m benchmarks.input_pipeline --num_images=1024 --batch_size=32 \
        --threads=8 --steps=200 --repeats=5
    python -m benchmarks.input_pipeline          # 512 images 128x128, batch 16, 5 repeats

The augmentation is `core.preprocessor.random_horizontal_flip` through
`preprocessor.preprocess` (as the legacy trainer applies it: float image of
shape [1, H, W, 3]); with no `core.preprocessor` it falls back to an
equivalent flip written here.
"""

import contextlib
import os
import statistics
import sys
import tempfile
import time

import tensorflow as tf
from absl import app
from absl import flags

from benchmarks import bench_util
from builders import input_reader_builder
from core import batcher
from core import dataset_teardown
from core import standard_fields as fields
from protos import input_reader_pb2
from tools import create_shapes_tf_record

_FIELDS = fields.InputDataFields

flags.DEFINE_bool('quick', False, 'Small dataset and the minimum steps (finishes < 2 min).')
flags.DEFINE_string('data_dir', None, 'Existing shapes dataset dir; default: write one to a '
                    'temp dir.')
flags.DEFINE_integer('num_images', 512, 'Images in the generated dataset.')
flags.DEFINE_integer('image_size', 128, 'Height and width of the generated images.')
flags.DEFINE_integer('batch_size', 16, 'Examples per batch.')
flags.DEFINE_integer('threads', 4, 'Threads for each variant (decode, augment/batch, session).')
flags.DEFINE_integer('warmup', 10, 'Warm-up steps per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
flags.DEFINE_integer('repeats', 5, 'Repeats per variant (>= 5; --quick runs 3).')
flags.DEFINE_bool('autotune_pairs', True, 'Also time each path with tf.data autotuning on.')
FLAGS = flags.FLAGS

GOAL = 0.9  # BatchQueue >= 0.9 x tf.data


def _augment_fn():
  """Returns (name, tensor_dict -> tensor_dict) doing float cast + random flip."""
  try:
    from core import preprocessor  # noqa: PLC0415  (optional: written in parallel)
    options = [(preprocessor.random_horizontal_flip, {})]
    func_arg_map = preprocessor.get_default_func_arg_map()

    def augment(tensor_dict):
      tensor_dict = dict(tensor_dict)
      tensor_dict[_FIELDS.image] = tf.expand_dims(tf.cast(tensor_dict[_FIELDS.image],
                                                          tf.float32), 0)
      return preprocessor.preprocess(tensor_dict, options, func_arg_map=func_arg_map)
    return 'core.preprocessor.random_horizontal_flip', augment
  except (ImportError, AttributeError):
    def augment(tensor_dict):
      tensor_dict = dict(tensor_dict)
      image = tf.cast(tensor_dict[_FIELDS.image], tf.float32)
      boxes = tensor_dict[_FIELDS.groundtruth_boxes]
      flip = tf.less(tf.random.uniform([]), 0.5)
      image = tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)
      ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
      boxes = tf.cond(flip, lambda: tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], 1),
                      lambda: boxes)
      tensor_dict[_FIELDS.image] = tf.expand_dims(image, 0)
      tensor_dict[_FIELDS.groundtruth_boxes] = boxes
      return tensor_dict
    return 'built-in horizontal flip (core.preprocessor not available)', augment


def _reader_config(pattern, label_map_path, threads):
  config = input_reader_pb2.InputReader()
  config.tf_record_input_reader.input_path.append(pattern)
  config.label_map_path = label_map_path
  config.shuffle = True
  config.shuffle_buffer_size = 256
  config.num_readers = 4
  config.num_parallel_calls = threads
  config.num_prefetch_batches = 2
  return config


def _session_config(threads):
  return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=threads,
                                  device_count={'GPU': 0})


def build_batch_queue_graph(config, batch_size, threads, augment):
  """Variant (a): returns (graph, fetch) for BatchQueue + prefetch."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    tensor_dict = input_reader_builder.build(config, num_parallel_calls=threads, seed=1)
    tensor_dict = augment(tensor_dict)
    queue = batcher.BatchQueue(tensor_dict, batch_size=batch_size, batch_queue_capacity=150,
                               num_batch_queue_threads=threads, prefetch_queue_capacity=5)
    examples = queue.dequeue()
    fetch = tf.add_n([tf.reduce_mean(e[_FIELDS.image]) +
                      tf.cast(tf.shape(e[_FIELDS.groundtruth_boxes])[0], tf.float32)
                      for e in examples])
  return graph, fetch


def build_dataset_graph(config, batch_size, threads, augment):
  """Variant (b): returns (graph, fetch) for a padded_batch tf.data pipeline."""
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.set_random_seed(1)
    dataset = input_reader_builder.build_dataset(
        config, batch_size, transform_input_data_fn=augment, num_parallel_calls=threads, seed=1)
    iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS,
                                   iterator.initializer)
    batch = iterator.get_next()
    fetch = (tf.reduce_mean(batch[_FIELDS.image]) +
             tf.cast(tf.reduce_sum(batch[_FIELDS.num_groundtruth_boxes]), tf.float32))
  return graph, fetch


@contextlib.contextmanager
def _autotuning_kept():
  """Graphs built inside keep tf.data autotuning on (core/dataset_teardown.py's switch)."""
  before = os.environ.get(dataset_teardown.AUTOTUNE_ENV)
  os.environ[dataset_teardown.AUTOTUNE_ENV] = '1'
  try:
    yield
  finally:
    if before is None:
      del os.environ[dataset_teardown.AUTOTUNE_ENV]
    else:
      os.environ[dataset_teardown.AUTOTUNE_ENV] = before


def time_variant(graph, fetch, threads, warmup, steps):
  """Runs warm-up then timed steps in a fresh session; returns steps/sec."""
  with graph.as_default():
    init = tf.group(tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer(),
                    tf.compat.v1.tables_initializer())
    with tf.compat.v1.Session(config=_session_config(threads)) as sess:
      sess.run(init)
      coord = tf.train.Coordinator()
      runner_threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
      run = sess.make_callable(fetch)
      for _ in range(warmup):
        run()
      start = time.perf_counter()
      for _ in range(steps):
        run()
      elapsed = time.perf_counter() - start
      coord.request_stop()
      sess.close()
      coord.join(runner_threads, stop_grace_period_secs=5, ignore_live_threads=True)
  return steps / elapsed


def run_benchmark(data_dir, batch_size, threads, warmup, steps, repeats, out=sys.stdout,
                  autotune_pairs=False):
  """Runs the variants; prints and returns the results.

  Returns:
    dict with 'a' and 'b' (lists of examples/sec; with `autotune_pairs` also
    'a+' and 'b+', autotuning on) and 'ratio' (median a / median b).
  """
  info_pattern = os.path.join(data_dir, 'train.tfrecord-*')
  label_map = os.path.join(data_dir, 'label_map.pbtxt')
  config = _reader_config(info_pattern, label_map, threads)
  augment_name, augment = _augment_fn()
  builders = {'a': build_batch_queue_graph, 'b': build_dataset_graph}
  graphs = {name: build(config, batch_size, threads, augment)
            for name, build in builders.items()}
  if autotune_pairs:
    with _autotuning_kept():
      graphs.update({name + '+': build(config, batch_size, threads, augment)
                     for name, build in builders.items()})
  order = [name for name in ('a', 'a+', 'b', 'b+') if name in graphs]
  results = {name: [] for name in order}
  for _ in range(repeats):
    for name in order:
      graph, fetch = graphs[name]
      results[name].append(
          time_variant(graph, fetch, threads, warmup, steps) * batch_size)
  labels = {'a': '(a) BatchQueue + prefetch', 'b': '(b) tf.data padded_batch',
            'a+': '(a+) (a), autotuning on', 'b+': '(b+) (b), autotuning on'}
  print('augmentation: %s; batch_size %d; threads %d; %d warm-up + %d timed steps x %d '
        'repeats' % (augment_name, batch_size, threads, warmup, steps, repeats), file=out)
  print('%-28s %12s %12s %12s' % ('variant', 'median ex/s', 'min ex/s', 'max ex/s'), file=out)
  for name in order:
    values = results[name]
    print('%-28s %12.1f %12.1f %12.1f' % (labels[name], statistics.median(values), min(values),
                                          max(values)), file=out)
  ratio = statistics.median(results['a']) / statistics.median(results['b'])
  print(bench_util.ratio_line('a/b', results['a'], results['b'], goal=GOAL), file=out)
  for name in ('a', 'b'):
    if name + '+' in results:
      print(bench_util.ratio_line('%s/%s+' % (name, name), results[name],
                                  results[name + '+']), file=out)
  results['ratio'] = ratio
  return results


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  num_images, image_size = FLAGS.num_images, FLAGS.image_size
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  batch_size = FLAGS.batch_size
  if FLAGS.quick:
    num_images, image_size, batch_size = 64, 64, 4
    warmup, steps, repeats = 10, 100, 3
  elif repeats < bench_util.MIN_REPEATS_TO_RESOLVE:
    raise app.UsageError('--repeats >= %d is required (fewer cannot resolve the goal).'
                         % bench_util.MIN_REPEATS_TO_RESOLVE)
  if warmup < 10 or steps < 100:
    raise app.UsageError('--warmup >= 10 and --steps >= 100 are required.')
  with tempfile.TemporaryDirectory() as tmp:
    data_dir = FLAGS.data_dir
    if not data_dir:
      data_dir = tmp
      create_shapes_tf_record.create_shapes_dataset(
          data_dir, num_train=num_images, num_val=0, height=image_size, width=image_size,
          num_shards=4, seed=0)
    run_benchmark(data_dir, batch_size, FLAGS.threads, warmup, steps, repeats,
                  autotune_pairs=FLAGS.autotune_pairs)


if __name__ == '__main__':
  app.run(main)
