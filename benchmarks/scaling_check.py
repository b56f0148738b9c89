r"""The scaling model's harness: real clusters, link probes and compute runs on this machine.

What `benchmarks.scaling_validate` runs to calibrate and to validate the
model (`benchmarks.scaling_model --calibrate / --validate`): one process per
task (a `tf.distribute.Server` each, the ps/worker task programs of
`run_task`), on loopback or with every task in its own network namespace on
a bridge (`deployment.netns`, veth links), optionally with every host's link
limited by a `tc` token bucket; the link probe (`measure_link`: bandwidth,
round trip, per-tensor cost and per-ps-task cost of TF's own gRPC runtime);
and the compute time per step of N single-process trainers running at once
(`--compute_only` task processes).

    rate = scaling_check.cluster_rate(2, 2, sync=False, warmup=10, steps=100,
                                      timeout=600, ps_strategy='round_robin',
                                      use_netns=True, tc_mbit=200)

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
from benchmarks import scaling_equations
from deployment import ports as deployment_ports

flags.DEFINE_bool('measure_link', False, 'Task process of a netns link probe: measure the link '
                  'to the two ps tasks of --cluster, print LINK and the figures of '
                  'scaling_equations.LinkFigures in order.')
flags.DEFINE_list('cpu_pids', [], 'Task process of a netns link probe: the processes of '
                  'the ps tasks it calls, whose CPU time counts with its own.')
flags.DEFINE_bool('compute_only', False, 'Task process of a calibration: print the '
                  'single-process rate (RATE <examples/sec>) and exit.')
FLAGS = flags.FLAGS
# The line a task program prints once it has timed its steps.
_RATE = re.compile(r'^RATE ([0-9.]+)$', re.M)
# The line of the netns link probe.
_LINK = re.compile(r'^LINK' + r' ([0-9.e+-]+)' * len(scaling_equations.LinkFigures._fields)
                   + '$', re.M)
# The token bucket of a `tc`-limited link: burst and queueing bound of every veth end.
TC_BURST = '64kb'
TC_LATENCY = '50ms'


# Rounds of the link probe before it gives up on figures no link can give.
LINK_ATTEMPTS = 3
# The order of one round of the link probe's fetches.
_PROBE_ORDER = ('ping', 'ping_many', 'pull', 'push', 'one_task', 'two_tasks')
# Calls of each fetch in the probe's CPU series: enough that the CPU time of the ps
# processes, read in clock ticks of 10 ms, is known to a few percent.
_CPU_CALLS = (('ping', 400), ('ping_many', 100), ('pull', 16), ('push', 16))


def measure_link(megabytes=16, repeats=10, many=64, cluster=None, cpu_pids=()):
  """Link figures of TF's gRPC runtime between a worker and two ps tasks.

  The worker's session pulls a `megabytes` variable from ps 0 and pushes a
  tensor of that size back (assign), reads one scalar, reads `many` scalars
  in one step, and reads two scalars of ps 0, then one of each ps, in one
  step. It runs them in `repeats` interleaved rounds (one of each per round)
  and takes each one's median, so that a burst of load from other processes
  lands on one round of all of them rather than on every timing of one. The
  per-tensor cost is the extra time of the `many` reads over the one, divided
  by `many - 1`; the per-ps-task cost is the extra time of the step that
  reaches both ps tasks over the one that reaches ps 0 alone with as many
  tensors (one more graph partition and its calls per step).

  Then it runs the scalar read, the `many` reads, the pull and the push
  again in series (`_CPU_CALLS`) and takes the CPU seconds of this process
  and of `cpu_pids` (both ends of every call) per call of each: CPU time is
  what tasks sharing a machine's cores compete for, where a round trip's wall
  time is mostly waiting.

  Args:
    megabytes, repeats, many: the sizes above.
    cluster: None: all three tasks are servers of this process on loopback.
      Else {'ps': [address, address], 'worker': [address]}: the ps tasks run
      elsewhere (other network namespaces) and this process is the worker.
    cpu_pids: the process of ps 0 when it runs elsewhere (the CPU series
      calls no other).

  Returns:
    a scaling_equations.LinkFigures.

  Raises:
    RuntimeError: `LINK_ATTEMPTS` probes in a row gave figures no link can
      give (`implausible_link`), as when the machine is swamped.
  """
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  if cluster is None:
    ports = deployment_ports.pick_unused_ports(3)
    cluster = {'ps': ['127.0.0.1:%d' % p for p in ports[:2]],
               'worker': ['127.0.0.1:%d' % ports[2]]}
    for task in range(2):
      tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='ps', task_index=task,
                           config=config)
  worker = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=0, config=config)
  transfer_bytes = megabytes * 1024 * 1024
  with tf.Graph().as_default():
    fetches = _probe_graph(transfer_bytes // 4, many)
    init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(worker.target, config=config) as sess:
      sess.run(init)
      problems = []
      for _ in range(LINK_ATTEMPTS):
        secs = _interleaved_median_secs(sess, fetches, repeats)
        problem = implausible_link(secs, megabytes)
        if problem is None:
          return link_figures(secs, _cpu_secs_per_call(sess, fetches, cpu_pids),
                              transfer_bytes, many)
        problems.append(problem)
  raise RuntimeError('the link probe gave impossible figures %d times in a row (is the '
                     'machine swamped?): %s' % (LINK_ATTEMPTS, '; '.join(problems)))


def _interleaved_median_secs(sess, fetches, repeats):
  """{name: median seconds of `sess.run(fetches[name])`} over `repeats` interleaved rounds."""
  times = {name: [] for name in _PROBE_ORDER}
  for round_index in range(repeats + 1):
    for name in _PROBE_ORDER:
      start = time.perf_counter()
      sess.run(fetches[name])
      if round_index:  # the first round sets up every call
        times[name].append(time.perf_counter() - start)
  return {name: bench_util.median(values) for name, values in times.items()}


def _cpu_secs_per_call(sess, fetches, pids):
  """{name: CPU seconds of this process and `pids` per `sess.run(fetches[name])`}."""
  per_call = {}
  for name, calls in _CPU_CALLS:
    before = _cpu_secs(pids)
    for _ in range(calls):
      sess.run(fetches[name])
    per_call[name] = (_cpu_secs(pids) - before) / calls
  return per_call


def _cpu_secs(pids):
  """CPU seconds (user and system, every thread) of this process plus those of `pids`."""
  total = time.process_time()
  ticks_per_sec = os.sysconf('SC_CLK_TCK')
  for pid in pids:
    with open('/proc/%d/stat' % int(pid)) as stat:
      # The fields after the command name in parentheses; utime and stime are 14 and 15.
      fields = stat.read().rsplit(')', 1)[1].split()
    total += (int(fields[11]) + int(fields[12])) / ticks_per_sec
  return total


def implausible_link(secs, megabytes):
  """Why the link probe's median times cannot be a link's, or None when they can.

  Moving `megabytes` each way must take longer than reading one scalar over
  the same link; when it does not, other processes' load distorted the
  scalar reads and every figure of that probe is unusable.

  Args:
    secs: {'ping', 'pull', 'push', ...: median seconds}, as the probe times them.
    megabytes: the size of the pull and the push.

  Returns:
    a sentence naming the times, or None.
  """
  for name in ('pull', 'push'):
    if secs[name] <= secs['ping']:
      return ('a %s of %d MB took %.2f ms, no longer than a scalar read (%.2f ms)'
              % (name, megabytes, secs[name] * 1e3, secs['ping'] * 1e3))
  return None


def link_figures(secs, cpu_secs, transfer_bytes, many):
  """The LinkFigures of the probe's median times `secs` and CPU seconds per call `cpu_secs`."""
  latency = secs['ping']
  transfer = (secs['pull'] + secs['push']) / 2.0 - latency
  transfer_cpu = (cpu_secs['pull'] + cpu_secs['push']) / 2.0 - cpu_secs['ping']
  return scaling_equations.LinkFigures(
      bandwidth_bytes_per_s=transfer_bytes / transfer, round_trip_s=latency,
      per_tensor_s=max(secs['ping_many'] - latency, 0.0) / (many - 1),
      per_extra_ps_s=max(secs['two_tasks'] - secs['one_task'], 0.0),
      cpu_round_trip_s=cpu_secs['ping'],
      cpu_per_tensor_s=max(cpu_secs['ping_many'] - cpu_secs['ping'], 0.0) / (many - 1),
      cpu_per_byte_s=max(transfer_cpu, 0.0) / transfer_bytes)


def _probe_graph(elements, many):
  """The link probe's fetches: {'pull', 'push', 'ping', 'ping_many', 'one_task', 'two_tasks'}."""
  with tf.compat.v1.device('/job:ps/task:0'):
    big = tf.compat.v1.Variable(tf.zeros([elements]), name='big')
    small = tf.compat.v1.Variable(0.0, name='small')
    other = tf.compat.v1.Variable(0.0, name='other')
    scalars = [tf.compat.v1.Variable(0.0, name='scalar_%d' % i) for i in range(many)]
  with tf.compat.v1.device('/job:ps/task:1'):
    far = tf.compat.v1.Variable(0.0, name='far')
  with tf.compat.v1.device('/job:worker/task:0'):
    def read(variable):
      return tf.identity(variable.read_value())
    return {
        'pull': tf.reduce_sum(tf.identity(big.read_value())),
        'push': big.assign(tf.ones([elements]) * tf.cast(small.read_value(), tf.float32)).op,
        'ping': read(small),
        'ping_many': tf.add_n([read(v) for v in scalars]),
        'one_task': read(small) + read(other),
        'two_tasks': read(small) + read(far),
    }


def measure_netns_link(timeout):
  """`measure_link` between network namespaces (two ps hosts and a worker host).

  Returns:
    a scaling_equations.LinkFigures.

  Raises:
    RuntimeError: with the logs, when the probe gives no figures in time.
  """
  from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
  with netns.Network(['ps0', 'ps1', 'worker0']) as network, \
      tempfile.TemporaryDirectory() as log_dir:
    cluster = network.cluster({'ps': ['ps0', 'ps1'], 'worker': ['worker0']})
    processes = [_start(log_dir, 'ps%d' % task, [
        '--role=ps', '--task=%d' % task, '--cluster=' + json.dumps(cluster)], network)
                 for task in range(2)]
    try:
      processes.append(_start(log_dir, 'worker0', [
          '--measure_link', '--cluster=' + json.dumps(cluster),
          # Only ps 0 serves the calls of the CPU series.
          '--cpu_pids=%d' % processes[0][0].pid], network))
      figures = _wait_for_lines(processes, processes[2:], _LINK, timeout)
      if figures is None:
        raise RuntimeError('the netns link probe gave no figures:\n%s' % _logs(processes))
      return scaling_equations.LinkFigures(*(float(f) for f in figures[0][0]))
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
                 use_netns=False, tc_mbit=0):
  """Runs num_ps ps + num_workers worker processes; returns summed examples/sec.

  Args:
    num_workers, num_ps: tasks of each job.
    sync: SyncReplicasOptimizer instead of async updates.
    warmup, steps: untimed and timed steps of every worker.
    timeout: seconds before the tasks are killed and RuntimeError raised.
    ps_strategy: how the workers place variables on the ps tasks.
    use_netns: each task in its own network namespace (deployment/netns.py)
      instead of all on loopback.
    tc_mbit: with use_netns, limit every host's link, both directions, to
      this many Mbit/s (`limit_links`); 0: no limit.

  Returns:
    examples/sec of the whole cluster (the workers' rates summed).

  Raises:
    RuntimeError: with the task logs, when a task dies or no rate arrives in time.
    ValueError: for tc_mbit without use_netns.
  """
  if tc_mbit and not use_netns:
    raise ValueError('tc_mbit=%s needs use_netns (loopback has no link to limit)' % tc_mbit)
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
    if tc_mbit:
      limit_links(network, tc_mbit)
    return _cluster_rate(cluster, network, sync, warmup, steps, timeout, ps_strategy)


def limit_links(network, rate_mbit):
  """Limits every host's link of `network` to `rate_mbit` Mbit/s in each direction.

  A `tc` token bucket (tbf) on both veth ends of each host: `eth0` in the
  host's namespace (what it sends) and its bridge port in the hub namespace
  (what it receives). They go with the namespaces when the network closes.

  Args:
    network: a created `deployment.netns.Network`.
    rate_mbit: the rate (10^6 bits/sec).

  Raises:
    RuntimeError: naming the command, when `tc` fails or is missing.
  """
  for host in network.hosts:
    for namespace, device in ((network.namespace(host), 'eth0'),
                              (network.hub, network.switch_port(host))):
      command = ['tc', '-n', namespace, 'qdisc', 'add', 'dev', device, 'root', 'tbf',
                 'rate', '%gmbit' % rate_mbit, 'burst', TC_BURST, 'latency', TC_LATENCY]
      try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, timeout=30, check=False)
      except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError('`%s` failed: %s' % (' '.join(command), e)) from e
      if result.returncode:
        raise RuntimeError('`%s` exited %d: %s' % (' '.join(command), result.returncode,
                                                   result.stderr.strip()))


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
    figures = measure_link(cluster=json.loads(FLAGS.cluster), cpu_pids=FLAGS.cpu_pids)
    print('LINK ' + ' '.join(repr(float(f)) for f in figures), flush=True)
  elif FLAGS.compute_only:
    print('RATE %.3f' % distributed.single_process_rate(FLAGS.warmup, FLAGS.steps), flush=True)
  else:
    return False
  return True
