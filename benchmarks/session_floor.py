r"""Benchmark: the least any recovery from a lost ps costs on this machine (issue 28).

    .venv/bin/python -m benchmarks.session_floor --netns      # the failover run's job (root)
    .venv/bin/python -m benchmarks.session_floor --quick      # smoke: loopback, small_cnn

A ps that comes back empty breaks every session that ran a graph on it:
TensorFlow's master cannot re-register a graph on one restarted task, so each
task steps again only in a new session, and a new session's first run sends
its graph, partitions it and registers a partition on every task it touches
before the step itself runs. `benchmarks/ps_failover.py` measures a whole
recovery (ps back -> next global step, goal <= 5 s at p99); this measures that
unavoidable part alone, on the same job and under the same load, with nothing
lost, restored or waited for:

  the snapshots phase's job (chief, 2 workers, 2 ps; ResNet-50 v1 32x32 batch 4,
  ~94 MB over both ps; snapshots every 5 s; with `--netns` each task its own
  host) trains; a probe process on the chief's host imports the chief's own
  meta graph (its first checkpoint's `.meta`) once, then `--probes` times opens a
  new session on the chief's server, with the chief's device filters, runs the
  local init and starts the input's queue runners as a new session of the
  chief does, and times its first run of the train op (a real step of the
  chief's clone) and a second run, then closes it.

The printed floor is the seconds from the new session to the end of its
first step (p50 / p99 over the probes): a recovery costs at least that after
the ps is back, and more (the shard's restore and the chief's other fetches
are runs of their own). The second run is an ordinary step of the same
session, for scale.

Differs on purpose from a recovery: the probe is a sixth process (one
import of TensorFlow, then idle between runs); its steps are extra steps of
the chief's clone.
"""

import json
import os
import time

from absl import app
from absl import flags

from benchmarks import elastic
from benchmarks import ps_failover
from benchmarks import ps_failover_report

flags.DEFINE_integer('probes', 10, 'New sessions the probe opens, one after another.')
flags.DEFINE_float('probe_gap_secs', 5, 'Seconds between two probes.')
flags.DEFINE_string('probe_target', None, '(the probe process) the chief\'s grpc:// target.')
flags.DEFINE_string('probe_meta', None, '(the probe process) the chief\'s .meta file.')
flags.DEFINE_list('probe_filters', [], '(the probe process) the chief\'s device filters.')
FLAGS = flags.FLAGS

_PROBE_PREFIX = 'PROBE '
_RUN_TIMEOUT_SECS = 120


def probe(target, meta_path, device_filters, count, gap_secs):
  """The probe process: `count` new sessions on `target`, each timed to its first steps.

  Each session does what a task's new session does before its first step: the
  local init (the input iterator's initializer among it), then the input's
  queue runners (a queue or iterator is private to the session that made it).
  """
  import tensorflow as tf  # noqa: PLC0415  (only the probe process needs it)
  graph = tf.Graph()
  with graph.as_default():
    tf.compat.v1.train.import_meta_graph(meta_path, clear_devices=False)
    train_op = graph.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)[0]
    local_init = tf.group(tf.compat.v1.local_variables_initializer(),
                          tf.compat.v1.tables_initializer())
  # As the chief's own sessions (deployment.cluster.ClusterConfig.session_config).
  config = tf.compat.v1.ConfigProto(device_filters=device_filters, allow_soft_placement=True)
  options = tf.compat.v1.RunOptions(timeout_in_ms=_RUN_TIMEOUT_SECS * 1000)
  for number in range(1, count + 1):
    coord = tf.compat.v1.train.Coordinator()
    started = time.time()
    with tf.compat.v1.Session(target, graph=graph, config=config) as sess:
      sess.run(local_init, options=options)
      initialised = time.time()
      with graph.as_default():
        threads = tf.compat.v1.train.start_queue_runners(sess, coord=coord)
      sess.run(train_op, options=options)
      first = time.time()
      sess.run(train_op, options=options)
      second = time.time()
      coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10, ignore_live_threads=True)
    print(_PROBE_PREFIX + json.dumps(dict(
        probe=number, init_secs=initialised - started, first_secs=first - started,
        second_secs=second - first, load=os.getloadavg()[0])), flush=True)
    time.sleep(gap_secs)


def _first_meta(train_dir, deadline):
  """The path of the first `.meta` the chief writes in `train_dir`."""
  while time.time() < deadline:
    metas = sorted(name for name in os.listdir(train_dir) if name.endswith('.meta')) \
        if os.path.isdir(train_dir) else []
    if metas:
      time.sleep(2)  # Written whole: the saver writes the .meta after the data.
      return os.path.join(train_dir, metas[0])
    time.sleep(1)
  raise TimeoutError('the chief wrote no .meta in %s' % train_dir)


def _probe_rows(process, deadline):
  """Waits for the probe process to end; returns its rows."""
  while process.poll() is None and time.time() < deadline:
    time.sleep(1)
  if process.poll() != 0:
    raise RuntimeError('the probe exited with %s:\n%s' % (process.poll(), process.output()[-3000:]))
  return [json.loads(line[len(_PROBE_PREFIX):]) for line in process.output().splitlines()
          if line.startswith(_PROBE_PREFIX)]


def measure(log_dir, data):
  """Starts the job and the probe; returns the probe's rows."""
  config = ps_failover.phase_config(log_dir, data, 'floor', snapshot=True, save_secs=600)
  with elastic.running_job('floor', ps_failover.NUM_WORKERS, config, log_dir) as job:
    job.start(ps_failover.NUM_WORKERS)
    job.wait_training(job.training(), FLAGS.start_secs)
    meta = _first_meta(os.path.join(log_dir, 'floor', 'train'), time.time() + 120)
    chief = 'grpc://' + job.address('chief', 0)
    filters = '/job:ps,/job:chief'
    process = job.start_helper('chief0_probe', 'benchmarks.session_floor', [
        '--probe_target=' + chief, '--probe_meta=' + meta, '--probe_filters=' + filters,
        '--probes=%d' % FLAGS.probes, '--probe_gap_secs=%g' % FLAGS.probe_gap_secs])
    budget = FLAGS.start_secs + FLAGS.probes * (FLAGS.probe_gap_secs + 2 * _RUN_TIMEOUT_SECS)
    rows = _probe_rows(process, time.time() + budget)
    job.update()
    steps = job.step()
  print('the job reached global step %d' % steps, flush=True)
  return rows


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  if FLAGS.probe_target:
    probe(FLAGS.probe_target, FLAGS.probe_meta, FLAGS.probe_filters, FLAGS.probes,
          FLAGS.probe_gap_secs)
    return
  ps_failover.set_model_defaults()
  if FLAGS.quick:
    FLAGS.net, FLAGS.image_size, FLAGS.probes = 'small_cnn', 16, 3
  log_dir, data = ps_failover.prepare_run('session_floor_', '%d probes' % FLAGS.probes)
  ps_failover_report.floor_report(measure(log_dir, data), FLAGS.recovery_goal_secs)


if __name__ == '__main__':
  app.run(main)
