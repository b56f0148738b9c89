r"""What the snapshots of the ps shards cost: a copy round, and the training steps beside it.

`deployment.shard_snapshots` copies each ps shard onto the next ps every
`snapshot_interval_secs`, from a thread of the chief, while training goes on.
Two figures decide that interval:

* how long one round of copies takes (`copy s`): a lost shard is at most
  `interval + 2 x copy s` old when its ps dies, which the goal wants within
  10 s;
* how much the copies slow the training steps that run beside them: steps/sec
  with the copy thread running at the interval (`on`) over steps/sec without
  it (`off`), the two alternating in each repeat (goal >= 0.98: issue 28 allows
  the copies 2 % of steps/sec).

One process holds a worker and two ps servers (loopback gRPC). A model of
`--size_mb` float32 values is spread over four variables on the two ps; one
step updates every value on its ps (the memory traffic of an SGD step) and the
global step. Each variant runs steps for `--window` intervals, so the
`on` runs hold about that many copy rounds.

    python -m benchmarks.shard_snapshots --quick      # about 30 s on 2 cores
    python -m benchmarks.shard_snapshots              # 4, 40 and 200 MB, 5 repeats
    python -m benchmarks.shard_snapshots --sizes_mb=40 --interval=1
"""

import sys
import time

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import bench_util
from deployment import ports
from deployment import shard_restore

flags.DEFINE_bool('quick', False, 'One 4 MB model, 1 s interval, 2 repeats (< 1 min).')
flags.DEFINE_list('sizes_mb', ['4', '40', '200'], 'Model sizes, in MB of float32.')
flags.DEFINE_float('interval', 5.0, 'snapshot_interval_secs of the `on` variant.')
flags.DEFINE_float('window', 2.0, 'Each run lasts this many intervals.')
flags.DEFINE_integer('repeats', 5, 'Repeats per variant (--quick runs 2).')
FLAGS = flags.FLAGS

GOAL = 0.98  # on >= 0.98 x off steps/sec (at most 2 % slower)
AGE_GOAL_SECS = 10.0


def _cluster():
  """A worker and two ps in this process: (worker target, ClusterSpec, servers)."""
  worker, ps0, ps1 = ports.pick_unused_ports(3)
  spec = tf.train.ClusterSpec({'worker': ['localhost:%d' % worker],
                               'ps': ['localhost:%d' % ps0, 'localhost:%d' % ps1]})
  servers = [tf.distribute.Server(spec, job_name=job, task_index=index, start=True)
             for job, index in (('worker', 0), ('ps', 0), ('ps', 1))]
  return servers[0].target, spec, servers


def _graph(spec, size_mb, interval):
  """The model, its step and the snapshots of its two shards, in the default graph."""
  setter = tf.compat.v1.train.replica_device_setter(
      ps_tasks=2, worker_device='/job:worker/task:0', cluster=spec)
  values_per_variable = max(1, int(size_mb * 1e6 / 4 / 4))
  with tf.compat.v1.device(setter):
    global_step = tf.compat.v1.train.get_or_create_global_step()
    variables = [tf.compat.v1.get_variable('w%d' % i, [values_per_variable],
                                           initializer=tf.zeros_initializer())
                 for i in range(4)]
  updates = []
  for variable in variables:
    with tf.compat.v1.device(variable.device):  # As an optimizer's update runs on the ps.
      updates.append(variable.assign_add(0.001 * variable.read_value() + 1.0,
                                         read_value=False))
  step = tf.group(*updates, global_step.assign_add(1, read_value=False))
  restore = shard_restore.ShardRestore(tf.compat.v1.global_variables(),
                                       snapshot_interval_secs=interval)
  return step, restore.snapshots


def _steps_per_sec(sess, step, seconds):
  """Runs `step` for `seconds` (after 2 untimed steps); returns steps/sec."""
  for _ in range(2):
    sess.run(step)
  count, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    sess.run(step)
    count += 1
  return count / (time.perf_counter() - start)


def _measure(size_mb, interval, window, repeats):
  """Prints the copy round time and the on/off table and ratio for one model size."""
  target, spec, servers = _cluster()
  with tf.Graph().as_default():
    step, snapshots = _graph(spec, size_mb, interval)
    with tf.compat.v1.Session(target) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      copies = []
      for _ in range(3):
        start = time.perf_counter()
        snapshots.copy(sess)
        copies.append(time.perf_counter() - start)

      def off():
        return _steps_per_sec(sess, step, window * interval)

      def on():
        snapshots.start(sess)
        try:
          return _steps_per_sec(sess, step, window * interval)
        finally:
          snapshots.stop()

      rates = bench_util.repeat_variants({'off': off, 'on': on}, repeats)
  del servers  # Kept alive until here.
  copy_secs = bench_util.median(copies)
  bench_util.print_table('%g MB model, snapshot_interval_secs=%g: steps/sec' % (
      size_mb, interval), rates, 'steps/s')
  print('copy round: median %.3f s (min %.3f, max %.3f); oldest restored shard about '
        '%g + 2 x %.3f = %.1f s (goal <= %g s)' % (
            copy_secs, min(copies), max(copies), interval, copy_secs,
            interval + 2 * copy_secs, AGE_GOAL_SECS))
  print(bench_util.ratio_line('on/off steps/sec (%g MB)' % size_mb, rates['on'],
                              rates['off'], goal=GOAL))
  sys.stdout.flush()


def main(argv):
  del argv
  sizes = [4.0] if FLAGS.quick else [float(s) for s in FLAGS.sizes_mb]
  interval = 1.0 if FLAGS.quick else FLAGS.interval
  repeats = 2 if FLAGS.quick else FLAGS.repeats
  for size_mb in sizes:
    _measure(size_mb, interval, FLAGS.window, repeats)


if __name__ == '__main__':
  tf.compat.v1.disable_eager_execution()
  app.run(main)
