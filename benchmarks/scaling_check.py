r"""The scaling model's check: predicted vs measured rates of real clusters on this machine.

`benchmarks.scaling_model --check` runs, for 1-3 workers x 1-2 ps, async and
sync, one process per task (a `tf.distribute.Server` each, the ps/worker task
programs of `run_task`, timing and ports as in `benchmarks.distributed`) on
loopback and, with `--netns`, with every task in its own network namespace on
a bridge (`deployment.netns`, veth links). What the prediction is given is
measured here too: the link (bandwidth, round trip and per-tensor cost of TF's
own gRPC runtime between two tasks, `measure_link`; between two namespaces for
the netns rows) and the compute time per step of N single-process trainers
running at once (`--compute_only` task processes), alternating with the
clusters inside each repeat.

    predict = ...  # callable(workers, ps, sync, compute_s, link) -> (step s, limit)
    rows = scaling_check.check_clusters([(2, 1, False)], predict, warmup=10,
                                        steps=100, repeats=3, timeout=600,
                                        ps_strategy='round_robin')

Every task process is `python -m benchmarks.scaling_model` with task flags,
which hands over to `run_task`.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from absl import flags
import tensorflow as tf

from benchmarks import bench_util
from benchmarks import distributed  # its flags: role, cluster, task, sync, net, threads, ...
from deployment import ports as deployment_ports

flags.DEFINE_bool('measure_link', False, 'Task process of --check --netns: measure the link '
                  'to the ps of --cluster, print LINK <bytes/s> <round trip s> <per tensor s>.')
flags.DEFINE_bool('compute_only', False, 'Task process of --check: print the single-process '
                  'rate (RATE <examples/sec>) and exit.')
FLAGS = flags.FLAGS
# The line a task program prints once it has timed its steps.
_RATE = re.compile(r'^RATE ([0-9.]+)$', re.M)
# The line of the netns link probe.
_LINK = re.compile(r'^LINK ([0-9.e+-]+) ([0-9.e+-]+) ([0-9.e+-]+)$', re.M)

AGREEMENT = 0.20    # predictions within +-20 % of measured
# The cluster whose measured rate calibrates the per-step cost of a distributed
# step (workers, ps; async); always run, never counted as checked.
CALIBRATION = (1, 1)


def measure_link(megabytes=16, repeats=10, many=64, cluster=None):
  """Link bandwidth (bytes/sec), round trip (sec) and per-tensor cost (sec), TF gRPC.

  A ps and a worker task: the worker's session pulls a `megabytes` variable
  from the ps and pushes a tensor of that size back (assign), reads one
  scalar, and reads `many` scalars in one step, `repeats` times each; medians.
  The per-tensor cost is the extra time of the `many` reads over the one,
  divided by `many - 1`.

  Args:
    megabytes, repeats, many: the sizes above.
    cluster: None: both tasks are servers of this process on loopback. Else
      {'ps': [address], 'worker': [address]}: the ps runs elsewhere (another
      network namespace) and this process is the worker at its address.
  """
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  if cluster is None:
    ports = deployment_ports.pick_unused_ports(2)
    cluster = {'ps': ['127.0.0.1:%d' % ports[0]], 'worker': ['127.0.0.1:%d' % ports[1]]}
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='ps', task_index=0,
                         config=config)
  worker = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=0, config=config)
  elements = megabytes * 1024 * 1024 // 4
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      big = tf.compat.v1.Variable(tf.zeros([elements]), name='big')
      small = tf.compat.v1.Variable(0.0, name='small')
      scalars = [tf.compat.v1.Variable(0.0, name='scalar_%d' % i) for i in range(many)]
    with tf.compat.v1.device('/job:worker/task:0'):
      pull = tf.reduce_sum(tf.identity(big.read_value()))
      push = big.assign(tf.ones([elements]) * tf.cast(small.read_value(), tf.float32)).op
      ping = tf.identity(small.read_value())
      ping_many = tf.add_n([tf.identity(v.read_value()) for v in scalars])
    init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(worker.target, config=config) as sess:
      sess.run(init)

      def median_secs(fetch):
        times = []
        for _ in range(repeats + 1):
          start = time.perf_counter()
          sess.run(fetch)
          times.append(time.perf_counter() - start)
        return bench_util.median(times[1:])  # the first run sets up the call
      latency = median_secs(ping)
      per_tensor = max(median_secs(ping_many) - latency, 0.0) / (many - 1)
      transfer = (median_secs(pull) + median_secs(push)) / 2.0 - latency
  return elements * 4 / max(transfer, 1e-9), latency, per_tensor


def measure_netns_link(timeout):
  """`measure_link` between two network namespaces (a ps host and a worker host).

  Raises:
    RuntimeError: with the logs, when the probe gives no figures in time.
  """
  from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
  with netns.Network(['ps0', 'worker0']) as network, \
      tempfile.TemporaryDirectory() as log_dir:
    cluster = network.cluster({'ps': ['ps0'], 'worker': ['worker0']})
    processes = [_start(log_dir, 'ps0', ['--role=ps', '--cluster=' + json.dumps(cluster)],
                        network)]
    try:
      processes.append(_start(log_dir, 'worker0', [
          '--measure_link', '--cluster=' + json.dumps(cluster)], network))
      figures = _wait_for_lines(processes, processes[1:], _LINK, timeout)
      if figures is None:
        raise RuntimeError('the netns link probe gave no figures:\n%s' % _logs(processes))
      return tuple(float(f) for f in figures[0][0])
    finally:
      _kill(processes)


def run_worker(cluster, task, sync, warmup, steps, ps_strategy):
  """Task program: trains until killed; prints 'RATE <examples/sec>' once timed.

  Its graph is distributed.py's, with as many ps tasks as `cluster` names.
  """
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  config.device_filters.extend(['/job:ps', '/job:worker/task:%d' % task])
  server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=task, config=config)
  with tf.Graph().as_default():
    train_op, _, sync_optimizer = distributed.build_train_op(
        len(cluster['worker']), task, sync, num_ps=len(cluster['ps']), ps_strategy=ps_strategy)
    hooks = [sync_optimizer.make_session_run_hook(task == 0)] if sync_optimizer else []
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=task == 0, hooks=hooks, config=config,
        save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None) as sess:
      rate = bench_util.timed_steps(lambda: sess.run(train_op), warmup, steps)
      print('RATE %.3f' % (rate * FLAGS.batch_size), flush=True)
      while not sess.should_stop():  # a stopped sync worker would block the others
        sess.run(train_op)


def _start(log_dir, name, args, network=None):
  """Starts `python -m benchmarks.scaling_model args` (a task program) in its own group.

  With a `deployment.netns.Network`, it runs inside the namespace of host `name`.
  """
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2')
  env['PYTHONPATH'] = os.pathsep.join(
      [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
      [p for p in [os.environ.get('PYTHONPATH')] if p])
  argv = [sys.executable, '-u', '-m', 'benchmarks.scaling_model'] + args
  if network is not None:
    argv = network.command(name, argv)
  log_path = os.path.join(log_dir, name + '.log')
  with open(log_path, 'wb') as log:
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=env, start_new_session=True)
  return process, log_path


def _wait_for_lines(processes, reporters, pattern, timeout, fail_on_any_exit=True):
  """Waits until each of `reporters` logged `pattern`; returns their findall lists.

  Returns None when a process exited first (with `fail_on_any_exit`, any of
  `processes`; else only one that failed) or `timeout` passed.
  """
  deadline = time.time() + timeout
  while time.time() < deadline:
    found = [pattern.findall(distributed._read(path))  # pylint: disable=protected-access
             for _, path in reporters]
    if all(found):
      return found
    if any(p.poll() is not None and (fail_on_any_exit or p.returncode)
           for p, _ in processes):
      return None
    time.sleep(0.2)
  return None


def _logs(processes):
  return '\n'.join('--- %s\n%s' % (path, distributed._read(path)[-3000:])  # pylint: disable=protected-access
                   for _, path in processes)


def _kill(processes):
  for process, _ in processes:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def cluster_rate(num_workers, num_ps, sync, warmup, steps, timeout, ps_strategy,
                 use_netns=False):
  """Runs num_ps ps + num_workers worker processes; returns summed examples/sec.

  Args:
    ps_strategy: how the workers place variables on the ps tasks.
    use_netns: each task in its own network namespace (deployment/netns.py)
      instead of all on loopback.

  Raises:
    RuntimeError: with the task logs, when a task dies or no rate arrives in time.
  """
  ps_hosts = ['ps%d' % task for task in range(num_ps)]
  worker_hosts = ['worker%d' % task for task in range(num_workers)]
  if not use_netns:
    ports = deployment_ports.pick_unused_ports(num_workers + num_ps)
    cluster = {'ps': ['127.0.0.1:%d' % p for p in ports[:num_ps]],
               'worker': ['127.0.0.1:%d' % p for p in ports[num_ps:]]}
    return _cluster_rate(cluster, None, sync, warmup, steps, timeout, ps_strategy)
  from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
  with netns.Network(ps_hosts + worker_hosts) as network:
    cluster = network.cluster({'ps': ps_hosts, 'worker': worker_hosts})
    return _cluster_rate(cluster, network, sync, warmup, steps, timeout, ps_strategy)


def _cluster_rate(cluster, network, sync, warmup, steps, timeout, ps_strategy):
  common = ['--cluster=' + json.dumps(cluster), '--net=' + FLAGS.net,
            '--image_size=%d' % FLAGS.image_size, '--batch_size=%d' % FLAGS.batch_size,
            '--threads=%d' % FLAGS.threads, '--warmup=%d' % warmup, '--steps=%d' % steps,
            '--ps_strategy=' + ps_strategy]
  processes = []
  with tempfile.TemporaryDirectory() as log_dir:
    try:
      for task in range(len(cluster['ps'])):
        processes.append(_start(log_dir, 'ps%d' % task,
                                common + ['--role=ps', '--task=%d' % task], network))
      workers = []
      for task in range(len(cluster['worker'])):
        workers.append(_start(log_dir, 'worker%d' % task, common + [
            '--role=worker', '--task=%d' % task, '--sync=%s' % sync], network))
      processes += workers
      rates = _wait_for_lines(processes, workers, _RATE, timeout)
      if rates is None:
        raise RuntimeError('cluster (%d workers, %d ps, sync=%s%s) gave no rates:\n%s' % (
            len(cluster['worker']), len(cluster['ps']), sync,
            ', netns' if network is not None else '', _logs(processes)))
      return sum(float(r[0]) for r in rates)
    finally:
      _kill(processes)


def concurrent_compute_rate(processes, warmup, steps, timeout):
  """Median examples/sec of one of `processes` single-process trainers run at once.

  Raises:
    RuntimeError: with the logs, when a process dies or no rate arrives in time.
  """
  args = ['--compute_only', '--net=' + FLAGS.net, '--image_size=%d' % FLAGS.image_size,
          '--batch_size=%d' % FLAGS.batch_size, '--threads=%d' % FLAGS.threads,
          '--warmup=%d' % warmup, '--steps=%d' % steps]
  running = []
  with tempfile.TemporaryDirectory() as log_dir:
    try:
      running = [_start(log_dir, 'compute%d' % i, args) for i in range(processes)]
      rates = _wait_for_lines(running, running, _RATE, timeout, fail_on_any_exit=False)
      if rates is None:
        raise RuntimeError('%d concurrent trainers gave no rates:\n%s'
                           % (processes, _logs(running)))
      return bench_util.median([float(r[0]) for r in rates])
    finally:
      _kill(running)


def check_clusters(configurations, predict, warmup, steps, repeats, timeout, ps_strategy,
                   use_netns=False, out=sys.stdout):
  """Predicts and measures every (workers, ps, sync); prints the comparison.

  Each configuration runs on loopback and, with `use_netns`, also with every
  task in its own network namespace (alternating inside each repeat); each is
  predicted from the link figures measured on the same kind of network.

  Args:
    configurations: [(workers, ps, sync)].
    predict: callable(workers, ps, sync, compute_s, link, overhead_s) ->
      (seconds per worker step, what limits it), where compute_s maps N to
      the compute time per step of N trainers running at once (N = 1 always
      measured), link is (bytes/sec, round trip s, per tensor s) and
      overhead_s the per-step cost of a distributed step that the link
      figures miss, calibrated on the CALIBRATION cluster (added to the list
      when missing) as its measured step minus its prediction without it.
    ps_strategy: how the workers place variables on the ps tasks.

  Returns:
    list of (workers, ps, sync, network, predicted ex/s, [measured ex/s per repeat]),
    network being 'loopback' or 'netns'.
  """
  links = {'loopback': measure_link()}
  if use_netns:
    links['netns'] = measure_netns_link(timeout)
  for network, (bandwidth, latency, per_tensor) in links.items():
    print('\n%s: %.2f GB/s, %.0f us round trip, %.0f us per tensor (TF gRPC, measured)'
          % (network, bandwidth / 1e9, latency * 1e6, per_tensor * 1e6), file=out)
  print('%d cores; %s %dx%d, batch %d per worker, %d thread(s) per task; %d warm-up + %d '
        'timed steps x %d repeats' % (os.cpu_count() or 1, FLAGS.net, FLAGS.image_size,
                                      FLAGS.image_size, FLAGS.batch_size, FLAGS.threads,
                                      warmup, steps, repeats), file=out, flush=True)
  variants, names = {}, {}
  if CALIBRATION + (False,) not in configurations:
    configurations = [CALIBRATION + (False,)] + list(configurations)
  for count in sorted({1} | {workers for workers, _, _ in configurations}):
    variants['compute, %d at once' % count] = (
        lambda n=count: concurrent_compute_rate(n, warmup, steps, timeout))
  for workers, num_ps, sync in configurations:
    for network in links:
      name = '%d worker(s) + %d ps, %s, %s' % (workers, num_ps, 'sync' if sync else 'async',
                                                network)
      names[name] = (workers, num_ps, sync, network)
      variants[name] = (lambda w=workers, m=num_ps, s=sync, n=network: cluster_rate(
          w, m, s, warmup, steps, timeout, ps_strategy, use_netns=n == 'netns'))
  results = bench_util.repeat_variants(variants, repeats, out=out)
  compute_s = {}
  for name in [n for n in results if n.startswith('compute, ')]:
    count = int(name.split()[1])
    compute_s[count] = FLAGS.batch_size / bench_util.median(results.pop(name))
  print('compute per step, N trainers at once: %s' % ', '.join(
      'N=%d %.2f ms' % (n, 1e3 * t) for n, t in sorted(compute_s.items())), file=out)
  overheads = {}
  for network, link in links.items():
    measured = results['%d worker(s) + %d ps, async, %s' % (CALIBRATION + (network,))]
    step, _ = predict(*CALIBRATION, False, compute_s, link, 0.0)
    overheads[network] = max(0.0, FLAGS.batch_size / bench_util.median(measured) - step)
  print('per-step cost of a distributed step beyond the link figures, calibrated on %d '
        'worker + %d ps async: %s' % (CALIBRATION + (', '.join(
            '%s %.2f ms' % (n, 1e3 * t) for n, t in overheads.items()),)), file=out)
  return _compare(results, names, links, compute_s, overheads, predict, out)


def _compare(results, names, links, compute_s, overheads, predict, out):
  """Prints predicted vs measured per configuration; returns check_clusters' rows."""
  print('| workers | ps | mode | network | predicted ex/s | limited by | measured ex/s '
        '(min..max) | predicted / measured | within +-20 % |', file=out)
  print('| ---: | ---: | --- | --- | ---: | --- | ---: | ---: | --- |', file=out)
  rows, agree = [], 0
  for name, measured in results.items():
    workers, num_ps, sync, network = names[name]
    step, limit = predict(workers, num_ps, sync, compute_s, links[network], overheads[network])
    predicted = workers * FLAGS.batch_size / step
    ratio = predicted / bench_util.median(measured)
    calibration = (workers, num_ps) == CALIBRATION and not sync
    within = abs(ratio - 1.0) <= AGREEMENT
    agree += within and not calibration
    print('| %d | %d | %s | %s | %.1f | %s | %.1f (%.1f..%.1f) | %.2f | %s |' % (
        workers, num_ps, 'sync' if sync else 'async', network, predicted, limit,
        bench_util.median(measured), min(measured), max(measured), ratio,
        'calibration' if calibration else 'yes' if within else 'NO'), file=out)
    rows.append((workers, num_ps, sync, network, predicted, measured))
  checked = len([r for r in rows if (r[0], r[1]) != CALIBRATION or r[2]])
  print('ratio predicted/measured within +-20 %%: %d of %d configurations'
        % (agree, checked), file=out, flush=True)
  return rows


def run_task(ps_strategy):
  """Runs the task program the flags ask for (--role, --measure_link, --compute_only).

  Returns:
    False when the flags name no task program (the parent benchmark run).
  """
  if FLAGS.role == 'ps':
    config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
    tf.distribute.Server(tf.train.ClusterSpec(json.loads(FLAGS.cluster)), job_name='ps',
                         task_index=FLAGS.task, config=config).join()
  elif FLAGS.role == 'worker':
    run_worker(json.loads(FLAGS.cluster), FLAGS.task, FLAGS.sync, FLAGS.warmup, FLAGS.steps,
               ps_strategy)
  elif FLAGS.measure_link:
    print('LINK %r %r %r' % measure_link(cluster=json.loads(FLAGS.cluster)), flush=True)
  elif FLAGS.compute_only:
    print('RATE %.3f' % distributed.single_process_rate(FLAGS.warmup, FLAGS.steps), flush=True)
  else:
    return False
  return True
