r"""Distributed training on loopback: 1 and 2 workers with 1 ps, sync and async.

Real processes: one `tf.distribute.Server` per task on 127.0.0.1, a ps task
holding the variables (placed there by `model_deploy` with `num_ps_tasks=1`)
and worker tasks training the same small model on device-resident synthetic
data, through `tf.compat.v1.train.MonitoredTrainingSession`:

  async   every worker applies its own gradients to the ps variables;
  sync    `SyncReplicasOptimizer`, replicas_to_aggregate = number of workers;

against single-process training of the same graph (no server, no gRPC) with
the same threads per worker. Each worker reports the examples/sec of its own
timed window (after its warm-up); the rate of a configuration is the sum over
its workers. The ratio "1 worker + ps / single process" is the cost of going
through the ps over gRPC; "N workers / (N x single process)" is the scaling.
On a 2-core machine the ps and the workers share the cores, so 2 workers can
at best match, not double, one.

    python -m benchmarks.distributed --quick
    python -m benchmarks.distributed --steps=100 --repeats=3

The same file is the task program (`--role=ps|worker`, started by the
launcher; never needed by hand).
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_slim as slim

from benchmarks import bench_util

flags.DEFINE_bool('quick', False, 'Tiny sizes and few steps (a smoke run).')
flags.DEFINE_enum('role', 'launcher', ['launcher', 'ps', 'worker'],
                  'launcher runs the benchmark; ps/worker are the task processes.')
flags.DEFINE_string('cluster', None, 'Task processes: the cluster as JSON.')
flags.DEFINE_integer('task', 0, 'Task processes: task index.')
flags.DEFINE_bool('sync', False, 'Worker processes: SyncReplicasOptimizer.')
flags.DEFINE_string('net', 'small_cnn', 'Net (a key of models.slim_classifier.NETS).')
flags.DEFINE_integer('image_size', 32, 'Height and width of the synthetic images.')
flags.DEFINE_integer('batch_size', 32, 'Examples per worker per step.')
flags.DEFINE_integer('threads', 1, 'intra- and inter-op threads of every worker (and of the '
                     'single-process baseline).')
flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per repeat (>= 100).')
flags.DEFINE_integer('repeats', 3, 'Repeats per configuration (>= 3).')
flags.DEFINE_integer('timeout', 300, 'Seconds one configuration may take before its tasks '
                     'are killed.')
FLAGS = flags.FLAGS

NUM_CLASSES = 10
_RATE = re.compile(r'^RATE ([0-9.]+)$', re.M)


def _model_fn():
  return bench_util.make_classifier(FLAGS.net, FLAGS.image_size, NUM_CLASSES)


def build_train_op(num_workers, task, sync):
  """The model_deploy graph of worker `task`; returns (train_op, sync_optimizer)."""
  from deployment import model_deploy  # noqa: PLC0415
  distributed = num_workers > 0
  config = model_deploy.DeploymentConfig(
      num_clones=1, clone_on_cpu=True, replica_id=task if distributed else 0,
      num_replicas=max(num_workers, 1), num_ps_tasks=1 if distributed else 0,
      worker_job_name='worker/task:%d' % task)
  with tf.compat.v1.device(config.variables_device()):
    global_step = slim.create_global_step()
  clones = model_deploy.create_clones(config, bench_util.clone_loss,
                                      [_model_fn, FLAGS.batch_size, FLAGS.image_size])
  optimizer = tf.compat.v1.train.MomentumOptimizer(0.01, 0.9)
  sync_optimizer = None
  if sync:
    optimizer = sync_optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
        optimizer, replicas_to_aggregate=num_workers, total_num_replicas=num_workers)
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, clones[0].scope)
  with tf.compat.v1.device(config.optimizer_device()):
    total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
    update_ops.append(model_deploy.apply_gradients(clones, optimizer, grads_and_vars,
                                                   global_step=global_step))
    with tf.control_dependencies([tf.group(*update_ops)]):
      train_op = tf.identity(total_loss, name='train_op')
  return train_op, sync_optimizer


def single_process_rate(warmup, steps):
  """Examples/sec of the same graph in one process, plain Session."""
  graph = tf.Graph()
  with graph.as_default():
    train_op, _ = build_train_op(0, 0, sync=False)
    init = tf.group(tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer())
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  with tf.compat.v1.Session(graph=graph, config=config) as sess:
    sess.run(init)
    return bench_util.timed_steps(sess.make_callable(train_op), warmup, steps) * FLAGS.batch_size


def run_worker(cluster, task, sync, warmup, steps):
  """Trains until killed; prints 'RATE <examples/sec>' after warmup + steps."""
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  config.device_filters.extend(['/job:ps', '/job:worker/task:%d' % task])
  server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=task, config=config)
  num_workers = len(cluster['worker'])
  with tf.Graph().as_default():
    train_op, sync_optimizer = build_train_op(num_workers, task, sync)
    hooks = [sync_optimizer.make_session_run_hook(task == 0)] if sync_optimizer else []
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=task == 0, hooks=hooks, config=config,
        save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None) as sess:
      rate = bench_util.timed_steps(lambda: sess.run(train_op), warmup, steps)
      print('RATE %.3f' % (rate * FLAGS.batch_size), flush=True)
      # Keep training: with sync replicas a stopped worker would block the others.
      while not sess.should_stop():
        sess.run(train_op)


def _free_ports(count):
  sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
  try:
    for s in sockets:
      s.bind(('127.0.0.1', 0))
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def _start(log_dir, name, args):
  """Starts `python -m benchmarks.distributed args` in its own session."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = os.pathsep.join(
      [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
      [p for p in [os.environ.get('PYTHONPATH')] if p])
  log_path = os.path.join(log_dir, name + '.log')
  with open(log_path, 'wb') as log:
    process = subprocess.Popen([sys.executable, '-u', '-m', 'benchmarks.distributed'] + args,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env, start_new_session=True)
  return process, log_path


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def cluster_rate(num_workers, sync, warmup, steps, timeout):
  """Starts 1 ps + num_workers workers; returns the summed worker examples/sec.

  Raises:
    RuntimeError: when a task dies or the rates do not arrive within timeout
      (the error carries the task logs).
  """
  ports = _free_ports(num_workers + 1)
  cluster = {'ps': ['127.0.0.1:%d' % ports[0]],
             'worker': ['127.0.0.1:%d' % p for p in ports[1:]]}
  common = ['--cluster=' + json.dumps(cluster), '--net=' + FLAGS.net,
            '--image_size=%d' % FLAGS.image_size, '--batch_size=%d' % FLAGS.batch_size,
            '--threads=%d' % FLAGS.threads, '--warmup=%d' % warmup, '--steps=%d' % steps]
  processes = []
  with tempfile.TemporaryDirectory() as log_dir:
    try:
      processes.append(_start(log_dir, 'ps', common + ['--role=ps']))
      for task in range(num_workers):
        processes.append(_start(log_dir, 'worker%d' % task, common + [
            '--role=worker', '--task=%d' % task, '--sync=%s' % sync]))
      deadline = time.time() + timeout
      while time.time() < deadline:
        rates = [_RATE.findall(_read(path)) for _, path in processes[1:]]
        if all(rates):
          return sum(float(r[0]) for r in rates)
        if any(p.poll() is not None for p, _ in processes):
          break
        time.sleep(0.2)
      logs = '\n'.join('--- %s\n%s' % (path, _read(path)[-3000:]) for _, path in processes)
      raise RuntimeError('cluster (%d workers, sync=%s) gave no rates:\n%s'
                         % (num_workers, sync, logs))
    finally:
      for process, _ in processes:
        if process.poll() is None:
          os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_benchmark(configurations, warmup, steps, repeats, timeout, out=sys.stdout):
  """Measures single-process and every (workers, sync) cluster; prints the table."""
  variants = {'single process': lambda: single_process_rate(warmup, steps)}
  for workers, sync in configurations:
    variants['%d worker%s + 1 ps, %s' % (workers, 's' if workers > 1 else '',
                                         'sync' if sync else 'async')] = (
        lambda workers=workers, sync=sync: cluster_rate(workers, sync, warmup, steps, timeout))
  print('%s %dx%d, batch %d per worker, %d thread(s) per worker, %d warm-up + %d timed steps '
        'x %d repeats' % (FLAGS.net, FLAGS.image_size, FLAGS.image_size, FLAGS.batch_size,
                          FLAGS.threads, warmup, steps, repeats), file=out, flush=True)
  results = bench_util.repeat_variants(variants, repeats, out=out)
  bench_util.print_table('examples/sec (sum over workers)', results, 'ex/s', out=out)
  single = results['single process']
  for name, values in results.items():
    if name == 'single process':
      continue
    workers = int(name.split()[0])
    print(bench_util.ratio_line('%s / (%d x single process)' % (name, workers), values,
                                [workers * v for v in single]), file=out)
  return results


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  tf.compat.v1.disable_eager_execution()
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  if FLAGS.role == 'ps':
    config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
    tf.distribute.Server(tf.train.ClusterSpec(json.loads(FLAGS.cluster)), job_name='ps',
                         task_index=FLAGS.task, config=config).join()
    return
  if FLAGS.role == 'worker':
    run_worker(json.loads(FLAGS.cluster), FLAGS.task, FLAGS.sync, warmup, steps)
    return
  configurations = [(1, False), (1, True), (2, False), (2, True)]
  if FLAGS.quick:
    warmup, steps, repeats = 3, 20, 1
    FLAGS.image_size, FLAGS.batch_size = 16, 8
    configurations = [(1, False), (2, True)]
  elif warmup < 10 or steps < 100 or repeats < 3:
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 3')
  run_benchmark(configurations, warmup, steps, repeats, FLAGS.timeout)


if __name__ == '__main__':
  app.run(main)
