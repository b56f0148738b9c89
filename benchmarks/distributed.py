r"""Distributed training: 1 and 2 workers with 1 ps, sync and async, on loopback or netns.

Real processes: one `tf.distribute.Server` per task, a ps task holding the
variables (placed there by `model_deploy` with `num_ps_tasks=1`) and worker
tasks training the same small model on device-resident synthetic data,
through `tf.compat.v1.train.MonitoredTrainingSession`:

  async   every worker applies its own gradients to the ps variables;
  sync    `SyncReplicasOptimizer`, replicas_to_aggregate = number of workers;

against single-process training of the same graph (no server, no gRPC) with
the same threads per worker.

How a cluster is timed: every worker logs, after each of its steps, the wall
time and the global step it saw. Once every worker has done its warm-up, the
launcher takes the global step G0 that all of them have passed and times the
global-step range G0..G1 (G1 = G0 + steps x workers async, + steps sync) on
the one clock the processes share: rate = global steps in the range x
examples per global step / seconds the range took. Every worker is running
through the whole range (the launcher checks that each one stepped inside
it), so a worker that starts late (a non-chief waits up to 30 s for the chief)
can no longer leave the chief's window unshared.

The ratio "1 worker + ps / single process" is the cost of going through the ps
over gRPC; "N workers / (N x single process)" is the scaling. On a 2-core
machine the ps and the workers share the cores, so 2 workers can at best
match, not double, one.

`--netns` also runs every cluster configuration with each task in its own
network namespace and address (deployment/netns.py; needs root and `ip`), so
the gRPC traffic crosses veth links and a bridge as between machines; the
loopback and netns variants alternate inside each repeat and a ratio line
compares them.

    python -m benchmarks.distributed --quick
    python -m benchmarks.distributed --steps=100 --repeats=3 [--netns]

The same file is the task program (`--role=ps|worker`, started by the
launcher; never needed by hand).

Differs on purpose from the first version of this benchmark: the rate is no
longer a sum of per-worker windows that did not overlap in time.
"""

import json
import os
import re
import signal
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
from deployment import ports as deployment_ports

flags.DEFINE_bool('quick', False, 'Tiny sizes and few steps (a smoke run).')
flags.DEFINE_bool('netns', False, 'Also run every cluster configuration with each task in its '
                  'own network namespace (deployment/netns.py; needs root and `ip`).')
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
flags.DEFINE_integer('warmup', 10, 'Untimed warm-up steps per worker per repeat (>= 10).')
flags.DEFINE_integer('steps', 100, 'Timed steps per worker per repeat (>= 100).')
flags.DEFINE_integer('repeats', 3, 'Repeats per configuration (>= 3).')
flags.DEFINE_integer('timeout', 300, 'Seconds one configuration may take before its tasks '
                     'are killed.')
FLAGS = flags.FLAGS

NUM_CLASSES = 10
# Worker log lines: after each step 'TICK <unix time> <global step>'; once, after its
# warm-up, 'WARM <global step>'.
_TICK = re.compile(r'^TICK ([0-9.]+) (\d+)$', re.M)
_WARM = re.compile(r'^WARM (\d+)$', re.M)


def _model_fn():
  return bench_util.make_classifier(FLAGS.net, FLAGS.image_size, NUM_CLASSES)


def build_train_op(num_workers, task, sync, num_ps=1, ps_strategy='round_robin'):
  """The model_deploy graph of worker `task`.

  Args:
    num_workers: worker replicas (0: one process, no ps).
    task: this worker's index.
    sync: use a SyncReplicasOptimizer over all workers.
    num_ps: ps tasks the variables are placed on (when distributed).
    ps_strategy: how variables are spread over them (model_deploy's `ps_strategy`).

  Returns:
    (train_op, global_step_after, sync_optimizer): the step (its value is the
    loss), the global step read after this step's update, and the
    SyncReplicasOptimizer (None for async).
  """
  from deployment import model_deploy  # noqa: PLC0415
  distributed = num_workers > 0
  config = model_deploy.DeploymentConfig(
      num_clones=1, clone_on_cpu=True, replica_id=task if distributed else 0,
      num_replicas=max(num_workers, 1), num_ps_tasks=num_ps if distributed else 0,
      worker_job_name='worker/task:%d' % task, ps_strategy=ps_strategy)
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
      global_step_after = tf.identity(global_step.read_value(), name='global_step_after')
  return train_op, global_step_after, sync_optimizer


def single_process_rate(warmup, steps):
  """Examples/sec of the same graph in one process, plain Session."""
  graph = tf.Graph()
  with graph.as_default():
    train_op, _, _ = build_train_op(0, 0, sync=False)
    init = tf.group(tf.compat.v1.global_variables_initializer(),
                    tf.compat.v1.local_variables_initializer())
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  with tf.compat.v1.Session(graph=graph, config=config) as sess:
    sess.run(init)
    return bench_util.timed_steps(sess.make_callable(train_op), warmup, steps) * FLAGS.batch_size


def run_worker(cluster, task, sync, warmup):
  """Trains until killed, logging 'TICK <time> <global step>' after every step."""
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  config.device_filters.extend(['/job:ps', '/job:worker/task:%d' % task])
  server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=task, config=config)
  num_workers = len(cluster['worker'])
  with tf.Graph().as_default():
    train_op, global_step_after, sync_optimizer = build_train_op(num_workers, task, sync)
    hooks = [sync_optimizer.make_session_run_hook(task == 0)] if sync_optimizer else []
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=task == 0, hooks=hooks, config=config,
        save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None) as sess:
      done = 0
      # Keep training after the window: with sync replicas a stopped worker would
      # block the others.
      while not sess.should_stop():
        _, step = sess.run([train_op, global_step_after])
        done += 1
        print('TICK %.6f %d' % (time.time(), step), flush=True)
        if done == warmup:
          print('WARM %d' % step, flush=True)


def _start(log_dir, name, args, network=None):
  """Starts `python -m benchmarks.distributed args` in its own session (and namespace)."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = os.pathsep.join(
      [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
      [p for p in [os.environ.get('PYTHONPATH')] if p])
  command = [sys.executable, '-u', '-m', 'benchmarks.distributed'] + args
  log_path = os.path.join(log_dir, name + '.log')
  with open(log_path, 'wb') as log:
    kwargs = dict(stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                  start_new_session=True)
    process = (network.popen(name, command, **kwargs) if network
               else subprocess.Popen(command, **kwargs))
  return process, log_path


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def aligned_window_rate(ticks, warm_steps, span, examples_per_global_step):
  """Examples/sec over one global-step range that every worker trained through.

  Args:
    ticks: per worker, its [(unix time, global step seen after its step)].
    warm_steps: per worker, the global step it saw when its warm-up ended.
    span: global steps to time from the first step all workers have warmed up by.
    examples_per_global_step: batch per worker (async), or batch x workers (sync).

  Returns:
    None when the range has not been reached yet; otherwise
    (examples/sec, (first global step, last global step, seconds),
    [steps of each worker inside the range]).

  Raises:
    ValueError: when a worker made no step inside the range (so the range was
      not shared).
  """
  stamps = sorted((t, g) for worker in ticks for t, g in worker)
  start = max(warm_steps)
  first = next(((t, g) for t, g in stamps if g >= start), None)
  if first is None:
    return None
  last = next(((t, g) for t, g in stamps if g >= first[1] + span), None)
  if last is None:
    return None
  (t_first, g_first), (t_last, g_last) = first, last
  per_worker = [sum(1 for t, _ in worker if t_first < t <= t_last) for worker in ticks]
  if not all(per_worker):
    raise ValueError('global steps %d..%d: a worker made no step inside the range (steps '
                     'per worker %s)' % (g_first, g_last, per_worker))
  seconds = t_last - t_first
  rate = (g_last - g_first) * examples_per_global_step / seconds
  return rate, (g_first, g_last, seconds), per_worker


def _window_from_logs(worker_logs, sync, steps):
  """`aligned_window_rate` of the workers' logs so far (None until it is reached)."""
  texts = [_read(path) for path in worker_logs]
  warm = [_WARM.search(text) for text in texts]
  if not all(warm):
    return None
  num_workers = len(worker_logs)
  ticks = [[(float(t), int(g)) for t, g in _TICK.findall(text)] for text in texts]
  span = steps if sync else steps * num_workers
  per_global_step = FLAGS.batch_size * (num_workers if sync else 1)
  return aligned_window_rate(ticks, [int(m.group(1)) for m in warm], span, per_global_step)


def _cluster_addresses(num_workers, network):
  """{'ps': [...], 'worker': [...]}: free loopback ports, or the network's hosts."""
  workers = ['worker%d' % task for task in range(num_workers)]
  if network is not None:
    return network.cluster({'ps': ['ps0'], 'worker': workers})
  ports = deployment_ports.pick_unused_ports(num_workers + 1)
  return {'ps': ['127.0.0.1:%d' % ports[0]],
          'worker': ['127.0.0.1:%d' % p for p in ports[1:]]}


def _run_cluster(log_dir, num_workers, sync, warmup, steps, timeout, network):
  """Starts 1 ps + the workers, waits for the aligned window; returns its result."""
  cluster = _cluster_addresses(num_workers, network)
  common = ['--cluster=' + json.dumps(cluster), '--net=' + FLAGS.net,
            '--image_size=%d' % FLAGS.image_size, '--batch_size=%d' % FLAGS.batch_size,
            '--threads=%d' % FLAGS.threads, '--warmup=%d' % warmup]
  processes = []
  try:
    processes.append(_start(log_dir, 'ps0', common + ['--role=ps'], network))
    for task in range(num_workers):
      processes.append(_start(log_dir, 'worker%d' % task, common + [
          '--role=worker', '--task=%d' % task, '--sync=%s' % sync], network))
    deadline = time.time() + timeout
    while time.time() < deadline:
      window = _window_from_logs([path for _, path in processes[1:]], sync, steps)
      if window:
        return window
      if any(p.poll() is not None for p, _ in processes):
        break
      time.sleep(0.5)
    logs = '\n'.join('--- %s\n%s' % (path, _read(path)[-3000:]) for _, path in processes)
    raise RuntimeError('cluster (%d workers, sync=%s) gave no rate within %d s:\n%s'
                       % (num_workers, sync, timeout, logs))
  finally:
    for process, _ in processes:
      if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
      process.wait()


def cluster_rate(num_workers, sync, warmup, steps, timeout, use_netns=False, out=sys.stdout):
  """Examples/sec of 1 ps + `num_workers` workers over an aligned global-step range.

  Args:
    num_workers: worker tasks (worker 0 is the chief).
    sync: SyncReplicasOptimizer instead of async updates.
    warmup: untimed steps of each worker before the range starts.
    steps: timed steps per worker (the range is steps x workers global steps
      async, steps sync).
    timeout: seconds before the tasks are killed and RuntimeError raised.
    use_netns: run each task in its own network namespace.
    out: where the range line goes.

  Returns:
    examples/sec of the whole cluster.

  Raises:
    RuntimeError: when a task dies or the range is not reached within timeout
      (the error carries the task logs).
  """
  with tempfile.TemporaryDirectory() as log_dir:
    if use_netns:
      from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
      names = ['ps0'] + ['worker%d' % task for task in range(num_workers)]
      with netns.Network(names) as network:
        rate, (first, last, seconds), per_worker = _run_cluster(
            log_dir, num_workers, sync, warmup, steps, timeout, network)
    else:
      rate, (first, last, seconds), per_worker = _run_cluster(
          log_dir, num_workers, sync, warmup, steps, timeout, None)
  print('    global steps %d..%d in %.2f s; steps per worker inside: %s'
        % (first, last, seconds, per_worker), file=out, flush=True)
  return rate


def _label(workers, sync, use_netns):
  return '%d worker%s + 1 ps, %s%s' % (workers, 's' if workers > 1 else '',
                                        'sync' if sync else 'async',
                                        ', netns' if use_netns else '')


def run_benchmark(configurations, warmup, steps, repeats, timeout, use_netns=False,
                  out=sys.stdout):
  """Measures single-process and every (workers, sync) cluster; prints the table."""
  variants = {'single process': lambda: single_process_rate(warmup, steps)}
  for workers, sync in configurations:
    for netns_variant in ((False, True) if use_netns else (False,)):
      variants[_label(workers, sync, netns_variant)] = (
          lambda workers=workers, sync=sync, n=netns_variant: cluster_rate(
              workers, sync, warmup, steps, timeout, use_netns=n, out=out))
  print('%s %dx%d, batch %d per worker, %d thread(s) per worker, %d warm-up + %d timed steps '
        'per worker x %d repeats' % (FLAGS.net, FLAGS.image_size, FLAGS.image_size,
                                     FLAGS.batch_size, FLAGS.threads, warmup, steps, repeats),
        file=out, flush=True)
  results = bench_util.repeat_variants(variants, repeats, out=out)
  bench_util.print_table('examples/sec (whole cluster, one aligned global-step range)',
                         results, 'ex/s', out=out)
  single = results['single process']
  for workers, sync in configurations:
    name = _label(workers, sync, False)
    print(bench_util.ratio_line('%s / (%d x single process)' % (name, workers),
                                results[name], [workers * v for v in single]), file=out)
    if use_netns:
      print(bench_util.ratio_line('%s / loopback' % _label(workers, sync, True),
                                  results[_label(workers, sync, True)], results[name]),
            file=out)
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
    run_worker(json.loads(FLAGS.cluster), FLAGS.task, FLAGS.sync, warmup)
    return
  configurations = [(1, False), (1, True), (2, False), (2, True)]
  if FLAGS.quick:
    warmup, steps, repeats = 3, 20, 1
    FLAGS.image_size, FLAGS.batch_size = 16, 8
    # A smoke run: 2 workers async and sync take every path the 1-worker rows take.
    configurations = [(2, False), (2, True)]
  elif warmup < 10 or steps < 100 or repeats < 3:
    raise app.UsageError('full mode needs --warmup >= 10, --steps >= 100, --repeats >= 3')
  if FLAGS.netns:
    from deployment import netns  # noqa: PLC0415
    reason = netns.unavailable_reason()
    if reason:
      raise app.UsageError('--netns: %s' % reason)
  run_benchmark(configurations, warmup, steps, repeats, FLAGS.timeout, use_netns=FLAGS.netns)


if __name__ == '__main__':
  app.run(main)
