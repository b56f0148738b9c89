r"""numpy_input_fn throughput: data fed from Python vs data embedded as graph constants.

`tfe.inputs.numpy_input_fn` hands the arrays to its `tf.data` pipeline through a
Python generator (`Dataset.from_generator`, a chunk of rows per call) so that the
graph, the events file and every `.meta` stay small. Before, the arrays were graph
constants (`Dataset.from_tensor_slices` of the arrays themselves). This benchmark runs
both, alternating in one process, on the same arrays and the same pipeline after the
source (unbatch/repeat/shuffle/batch/prefetch), and prints

  * examples/sec of `session.run(batch)` after warm-up (the steady state), per repeat;
  * the seconds from building the graph to the first batch (what a user waits for at
    the start of every `train`/`evaluate` call, and where constants cost most);
  * the process CPU time per example (all threads), which other programs on a shared
    machine disturb less than the wall-clock rate;
  * the size of the serialized graph of each variant;

with the ratios fed/const. Goal: fed >= 0.9 x const examples/sec.

    python -m benchmarks.input_fn_feeding --quick        # < 1 minute
    python -m benchmarks.input_fn_feeding                # 31 MB array, batch 128, 5 repeats
    python -m benchmarks.input_fn_feeding --rows=60000 --features=784 --batch_size=256
"""

import sys
import time

import numpy as np
import tensorflow as tf
from absl import app
from absl import flags

from benchmarks import bench_util
from estimator import inputs

flags.DEFINE_bool('quick', False, 'A small array and few steps (finishes < 1 min).')
flags.DEFINE_integer('rows', 8000, 'Examples in the array.')
flags.DEFINE_integer('features', 1000, 'float32 values per example (8000 x 1000 = 31 MB).')
flags.DEFINE_integer('batch_size', 128, 'Examples per batch.')
flags.DEFINE_bool('shuffle', True, 'Shuffle (queue_capacity 1000), as for training.')
flags.DEFINE_integer('warmup', 20, 'Untimed batches per repeat.')
flags.DEFINE_integer('steps', 300, 'Timed batches per repeat.')
flags.DEFINE_integer('repeats', 5, 'Repeats per variant (--quick runs 2).')
flags.DEFINE_integer('threads', 2, 'Session intra/inter-op threads for both variants.')
FLAGS = flags.FLAGS

GOAL = 0.9  # fed >= 0.9 x const examples/sec


def _constant_input_fn(x, y, batch_size, shuffle):
  """The former numpy_input_fn: the same pipeline over a constant source."""

  def input_fn():
    columns, feature_keys, target_keys = inputs._columns_and_target_keys(x, y)  # pylint: disable=protected-access
    dataset = tf.data.Dataset.from_tensor_slices(dict(columns)).repeat(None)
    if shuffle:
      dataset = dataset.shuffle(1000)
    dataset = dataset.batch(batch_size, drop_remainder=True).prefetch(1)
    batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
    return inputs._split(batch, feature_keys, target_keys, single_feature=False)  # pylint: disable=protected-access

  return input_fn


def _fed_input_fn(x, y, batch_size, shuffle):
  return inputs.numpy_input_fn(x, y, batch_size=batch_size, num_epochs=None, shuffle=shuffle,
                               queue_capacity=1000)


def _measure(make_input_fn, x, y, sizes, startups, cpu_us):
  """Returns a function measuring one variant: examples/sec; records startup, size and
  the process CPU microseconds per example (all threads: less sensitive than wall time
  to other programs on a shared machine)."""

  def run():
    start = time.perf_counter()
    graph = tf.Graph()
    with graph.as_default():
      tf.compat.v1.set_random_seed(1)
      batch = make_input_fn(x, y, FLAGS.batch_size, FLAGS.shuffle)()
      config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=FLAGS.threads,
                                        inter_op_parallelism_threads=FLAGS.threads,
                                        device_count={'GPU': 0})
      with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(batch)
        startups.append(time.perf_counter() - start)
        sizes.append(graph.as_graph_def().ByteSize())
        cpu_start = time.process_time()
        steps_per_sec = bench_util.timed_steps(lambda: session.run(batch), FLAGS.warmup,
                                               FLAGS.steps)
        cpu_seconds = time.process_time() - cpu_start
    cpu_us.append(1e6 * cpu_seconds / ((FLAGS.warmup + FLAGS.steps) * FLAGS.batch_size))
    return steps_per_sec * FLAGS.batch_size

  return run


def main(argv):
  del argv
  if FLAGS.quick:
    FLAGS.rows, FLAGS.features, FLAGS.steps, FLAGS.warmup, FLAGS.repeats = 2000, 256, 40, 5, 2
  rng = np.random.RandomState(0)
  x = {'x': rng.uniform(-1, 1, (FLAGS.rows, FLAGS.features)).astype(np.float32)}
  y = rng.randint(0, 10, FLAGS.rows).astype(np.int64)
  print('numpy_input_fn feeding: %d x %d float32 (%.1f MB), batch %d, shuffle=%s, '
        '%d warm-up + %d timed batches, %d repeats, %d threads'
        % (FLAGS.rows, FLAGS.features, x['x'].nbytes / 2**20, FLAGS.batch_size,
           FLAGS.shuffle, FLAGS.warmup, FLAGS.steps, FLAGS.repeats, FLAGS.threads),
        flush=True)
  sizes = {'fed': [], 'const': []}
  startups = {'fed': [], 'const': []}
  cpu_us = {'fed': [], 'const': []}
  rates = bench_util.repeat_variants({
      name: _measure(make, x, y, sizes[name], startups[name], cpu_us[name])
      for name, make in (('fed', _fed_input_fn), ('const', _constant_input_fn))
  }, FLAGS.repeats)
  labels = {'fed': 'fed (from_generator, now)', 'const': 'graph constants (before)'}
  bench_util.print_table('examples/sec after warm-up', rates, 'examples/s', labels)
  print('\n| variant | graph bytes | median s to first batch | min | max | '
        'median CPU us/example | min | max |')
  print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for name in ('fed', 'const'):
    print('| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |' % (
        labels[name], sizes[name][0], bench_util.median(startups[name]),
        min(startups[name]), max(startups[name]), bench_util.median(cpu_us[name]),
        min(cpu_us[name]), max(cpu_us[name])))
  print()
  print(bench_util.ratio_line('fed/const examples/sec', rates['fed'], rates['const'],
                              goal=GOAL))
  print('ratio fed/const seconds to first batch = %.3f' % (
      bench_util.median(startups['fed']) / bench_util.median(startups['const'])))
  print('ratio fed/const CPU per example = %.3f (per repeat %s)' % (
      bench_util.median(cpu_us['fed']) / bench_util.median(cpu_us['const']),
      ' '.join('%.3f' % r for r in bench_util.paired_ratios(cpu_us['fed'],
                                                            cpu_us['const']))))
  print('ratio fed/const graph bytes = %.5f' % (sizes['fed'][0] / sizes['const'][0]))
  sys.stdout.flush()


if __name__ == '__main__':
  tf.compat.v1.disable_eager_execution()
  app.run(main)
