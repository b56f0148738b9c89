r"""A scaling model for parameter-server and all-reduce training, checked on loopback.

Given how many bytes of variables each ps task holds (placed exactly as
`model_deploy` places them, by `deployment.device_setters.PSDeviceChooser`
with the chosen `ps_strategy`), the compute time of one worker step, and a
link's bandwidth and latency, it predicts steps/sec and scaling efficiency
(compute time / predicted step time) for N workers x M ps and for replicated
all-reduce on one machine:

  per step a worker pulls every trainable variable (D bytes) and pushes one
  gradient per trainable variable plus the batch-norm statistics (U bytes);
  ps task j serves d_j of the D and u_j of the U bytes, and n_j of the n
  tensors, of every worker; each tensor costs o (an RPC's fixed CPU work).

  async  T = max(t_c + (D + U) / B + n o + 2 L,
                 N * max_j (max(d_j, u_j) / B + n_j o))
         (a worker's own transfers; or ps task j, shared by N workers whose
         transfers interleave, full duplex)
  sync   T = t_c + N * ((max_j u_j + max_j d_j) / B + max_j n_j o) + 4 L
         (SyncReplicasOptimizer: all N push at once, the chief applies, all
         N pull at once; pushing and pulling do not overlap)
  all-reduce on K devices (ring):  T = t_c + 2 (K - 1) / K * G / B + 2 (K - 1) L

  steps/sec (all workers) = N / T,  efficiency = t_c / T.

B is the usable bandwidth (line rate x `--link_efficiency`), L a round-trip
latency, o `--tensor_overhead_us`. Both phases of a worker are counted as not
overlapping compute: TF's ps graphs read variables before the forward pass and
send gradients after the backward pass.

Check (`--check`): on this machine's loopback, real processes (one
`tf.distribute.Server` per task, the ps/worker task programs of this file,
timing and ports as in `benchmarks.distributed`) train the model for
1-3 workers x 1-2 ps, async and sync; the prediction uses B, L and o measured
on loopback with TF's own gRPC runtime and, because all tasks share this
machine's cores (and its other users' load), the compute time per step of N
single-process trainers running at the same time (`--compute_only` task
processes), measured alternating with the clusters. With `--netns` every configuration
also runs with each task in its own network namespace on a bridge (the
multi-host harness of `deployment.netns`; veth links instead of loopback),
predicted from B, L and o measured between two namespaces. Reported:
predicted vs measured examples/sec and whether they agree within +-20 %.

Tables: ResNet-50 v1 (ImageNet, 1000 classes) and the shapes SSD
(configs/ssd_shapes.config) at 8/32/128 workers on 10/25/100 Gbit links, and
the smallest ps count that keeps a worker's step below 110 % of its compute.

    python -m benchmarks.scaling_model --quick          # smoke run, ~1 min
    python -m benchmarks.scaling_model                  # tables only
    python -m benchmarks.scaling_model --check          # + loopback check
    python -m benchmarks.scaling_model --check --netns  # + the same across namespaces
    python -m benchmarks.scaling_model --resnet_compute_ms=120 --link_gbps=25

The model is first order: no stragglers, no ps-side compute, no
compute/communication overlap, no TCP slow start; sizes are float32 unless the
variables say otherwise.
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
from benchmarks import distributed  # its flags: quick, role, cluster, task, sync, net, ...

flags.DEFINE_integer('num_ps', 1, 'Task processes of --check: number of ps tasks.')
flags.DEFINE_bool('check', False, 'Also run the loopback check (real processes); with '
                  '--netns, each configuration also with every task in its own network '
                  'namespace (deployment/netns.py; needs root and `ip`).')
flags.DEFINE_bool('measure_link', False, 'Task process of --check --netns: measure the link '
                  'to the ps of --cluster, print LINK <bytes/s> <round trip s> <per tensor s>.')
flags.DEFINE_list('link_gbps', ['10', '25', '100'], 'Link line rates of the tables (Gbit/s).')
flags.DEFINE_list('table_workers', ['8', '32', '128'], 'Worker counts of the tables.')
flags.DEFINE_list('table_ps', ['1', '2', '4', '8', '16', '32'], 'ps counts of the tables.')
flags.DEFINE_float('link_efficiency', 0.8, 'Share of the line rate gRPC reaches (tables).')
flags.DEFINE_float('latency_us', 50.0, 'Round-trip latency of the tables (microseconds).')
flags.DEFINE_float('tensor_overhead_us', 20.0, 'Fixed cost of moving one tensor between '
                   'tasks in the tables (microseconds; --check measures it on loopback).')
flags.DEFINE_bool('compute_only', False, 'Task process of --check: print the single-process '
                  'rate (RATE <examples/sec>) and exit.')
flags.DEFINE_float('resnet_compute_ms', 173.0,
                   'ResNet-50 compute time per worker step: default = batch 64 fp32 at '
                   '~370 img/s (a V100-class GPU, tf_cnn_benchmarks); set your own.')
flags.DEFINE_float('ssd_compute_ms', 50.0, 'shapes SSD compute time per worker step.')
flags.DEFINE_float('allreduce_gbps', 100.0, 'Device-to-device bandwidth of the one-machine '
                   'all-reduce table (Gbit/s, e.g. PCIe 4 x16 ~ 200, NVLink ~ 2400).')
flags.DEFINE_enum('ps_strategy', 'round_robin', ['round_robin', 'greedy'],
                  'How variables are spread over the ps tasks (as model_deploy).')
FLAGS = flags.FLAGS
# The line a task program prints once it has timed its steps.
_RATE = re.compile(r'^RATE ([0-9.]+)$', re.M)
# The line of the netns link probe.
_LINK = re.compile(r'^LINK ([0-9.e+-]+) ([0-9.e+-]+) ([0-9.e+-]+)$', re.M)

STEP_BUDGET = 1.10  # a worker's step may take at most 110 % of its compute
AGREEMENT = 0.20    # predictions within +-20 % of measured
ASYNC_ROUND_TRIPS = 2
SYNC_ROUND_TRIPS = 4


class Shards(object):
  """Bytes a worker pulls (down) and pushes (up), and tensors it moves, per step and ps task."""

  def __init__(self, down, up, tensors=None):
    self.down, self.up = list(down), list(up)
    self.tensors = list(tensors) if tensors is not None else [0] * len(self.down)

  @property
  def total_down(self):
    return sum(self.down)

  @property
  def total_up(self):
    return sum(self.up)


def model_variables(build_model):
  """(NodeDef, bytes, trainable) of every variable `build_model()` creates, in order.

  The global step comes first, as `trainer.train` creates it first under the
  same device function.
  """
  with tf.Graph().as_default() as graph:
    slim.create_global_step()
    build_model()
    trainable = {v.op.name for v in tf.compat.v1.trainable_variables()}
    result = []
    for op in graph.get_operations():
      if op.type in ('VarHandleOp', 'VariableV2'):
        size = _variable_bytes(op.node_def)
        result.append((op.node_def, size, op.name in trainable))
  return result


def _variable_bytes(node_def):
  """Bytes of one variable (device_setters' own measure)."""
  from deployment import device_setters  # noqa: PLC0415
  return device_setters.variable_bytes(node_def)


def shard_traffic(variables, num_ps, strategy='round_robin'):
  """Places `variables` on `num_ps` tasks as model_deploy does; returns Shards.

  Trainable variables are pulled and their gradients pushed; other variables
  (batch-norm moving statistics) only receive an update; the global step is
  noise and counts as an update.
  """
  from deployment import device_setters  # noqa: PLC0415
  chooser = device_setters.PSDeviceChooser('/job:ps/device:CPU:0', num_ps, strategy)
  down, up, tensors = [0] * num_ps, [0] * num_ps, [0] * num_ps
  for node_def, size, trainable in variables:
    blank = type(node_def)()
    blank.CopyFrom(node_def)
    blank.device = ''
    task = tf.DeviceSpec.from_string(chooser.choose(blank)).task
    up[task] += size
    tensors[task] += 1
    if trainable:
      down[task] += size
      tensors[task] += 1
  return Shards(down, up, tensors)


def predict_ps(shards, compute_s, workers, bandwidth, latency_s, sync, tensor_s=0.0):
  """Predicted seconds per worker step for `workers` workers on `shards`.

  Args:
    shards: a Shards for the ps count in question.
    compute_s: one worker's compute time per step (seconds).
    workers: number of workers.
    bandwidth: usable bytes/sec of every link (workers' and ps tasks').
    latency_s: one round trip (seconds).
    sync: SyncReplicasOptimizer (True) or async updates.
    tensor_s: fixed cost of moving one tensor (an RPC's CPU work), seconds.

  Returns:
    seconds per step of one worker.
  """
  busiest_ps = max(n * tensor_s for n in shards.tensors)
  if sync:
    return (compute_s + workers * ((max(shards.up) + max(shards.down)) / bandwidth
                                   + busiest_ps) + SYNC_ROUND_TRIPS * latency_s)
  own = compute_s + (shards.total_down + shards.total_up) / bandwidth + (
      ASYNC_ROUND_TRIPS * latency_s) + sum(shards.tensors) * tensor_s
  ps_link = workers * max(max(d, u) / bandwidth + n * tensor_s
                          for d, u, n in zip(shards.down, shards.up, shards.tensors))
  return max(own, ps_link)


def predict_allreduce(gradient_bytes, compute_s, devices, bandwidth, latency_s):
  """Seconds per step of replicated training with a ring all-reduce over `devices`."""
  if devices <= 1:
    return compute_s
  return (compute_s + 2.0 * (devices - 1) / devices * gradient_bytes / bandwidth
          + 2 * (devices - 1) * latency_s)


def _gbit(gbps):
  return float(gbps) * 1e9 / 8.0


def print_tables(name, variables, compute_s, out=sys.stdout):
  """Prints the N x M tables, the all-reduce line and the ps count for <= 110 %."""
  links = [float(g) for g in FLAGS.link_gbps]
  workers_list = [int(w) for w in FLAGS.table_workers]
  ps_list = [int(p) for p in FLAGS.table_ps]
  shards = {m: shard_traffic(variables, m, FLAGS.ps_strategy) for m in ps_list}
  total = shards[ps_list[0]]
  latency = FLAGS.latency_us * 1e-6
  print('\n%s: %.1f MB pulled + %.1f MB pushed in %d tensors per worker step; compute '
        '%.1f ms/step; links at %.0f %% of line rate, %.0f us round trip, %.0f us per tensor; '
        'ps_strategy %s' % (name, total.total_down / 1e6, total.total_up / 1e6,
                            sum(total.tensors), 1e3 * compute_s, 100 * FLAGS.link_efficiency,
                            FLAGS.latency_us, FLAGS.tensor_overhead_us, FLAGS.ps_strategy),
        file=out)
  print('largest ps task holds (MB) for M = %s: %s' % (
      '/'.join(str(m) for m in ps_list),
      ' / '.join('%.1f' % (max(shards[m].up) / 1e6) for m in ps_list)), file=out)
  print('| link Gbit/s | workers | mode | ' + ' | '.join('eff. M=%d' % m for m in ps_list)
        + ' | smallest M with step <= 110 % of compute |', file=out)
  print('| ---: | ---: | --- |' + ' ---: |' * len(ps_list) + ' --- |', file=out)
  for gbps in links:
    bandwidth = _gbit(gbps) * FLAGS.link_efficiency
    for workers in workers_list:
      for sync in (False, True):
        steps = {m: predict_ps(shards[m], compute_s, workers, bandwidth, latency, sync,
                               FLAGS.tensor_overhead_us * 1e-6) for m in ps_list}
        enough = [m for m in ps_list if steps[m] <= STEP_BUDGET * compute_s]
        print('| %g | %d | %s | %s | %s |' % (
            gbps, workers, 'sync' if sync else 'async',
            ' | '.join('%.2f' % (compute_s / steps[m]) for m in ps_list),
            ('M = %d (%.0f steps/s in all)' % (enough[0], workers / steps[enough[0]])
             if enough else 'none up to M = %d' % ps_list[-1])), file=out)
  gradient_bytes = sum(size for _, size, trainable in variables if trainable)
  bandwidth = _gbit(FLAGS.allreduce_gbps)
  print('replicated all-reduce on one machine (%g Gbit/s between devices): efficiency %s'
        % (FLAGS.allreduce_gbps, ', '.join(
            '%d devices %.2f' % (k, compute_s / predict_allreduce(
                gradient_bytes, compute_s, k, bandwidth, latency)) for k in (2, 4, 8))),
        file=out)
  out.flush()


def resnet_variables():
  from models import slim_classifier  # noqa: PLC0415

  def build():
    model = slim_classifier.SlimClassifier(True, 1000, net='resnet_v1_50', image_height=224,
                                           image_width=224)
    images = tf.zeros([1, 224, 224, 3])
    model.predict(*model.preprocess(images))
  return model_variables(build)


def ssd_variables():
  from builders import model_builder  # noqa: PLC0415
  from core import config_util  # noqa: PLC0415
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'configs', 'ssd_shapes.config')
  model_config = config_util.get_configs_from_pipeline_file(path)['model']

  def build():
    model = model_builder.build(model_config, is_training=True)
    resizer = model_config.ssd.image_resizer.fixed_shape_resizer
    images = tf.zeros([1, resizer.height, resizer.width, 3])
    model.predict(*model.preprocess(images))
  return model_variables(build)


def net_variables(net, image_size, num_classes):
  """Variables of a `models.slim_classifier` net (for the loopback check)."""
  from models import slim_classifier  # noqa: PLC0415

  def build():
    model = slim_classifier.SlimClassifier(True, num_classes, net=net, image_height=image_size,
                                           image_width=image_size)
    model.predict(*model.preprocess(tf.zeros([1, image_size, image_size, 3])))
  return model_variables(build)


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


def build_train_op(num_workers, num_ps, task, sync):
  """The worker graph of the check: distributed.py's, with `num_ps` ps tasks."""
  train_op, _, sync_optimizer = distributed.build_train_op(
      num_workers, task, sync, num_ps=num_ps, ps_strategy=FLAGS.ps_strategy)
  return train_op, sync_optimizer


def run_worker(cluster, task, sync, warmup, steps):
  """Task program: trains until killed; prints 'RATE <examples/sec>' once timed."""
  config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
  config.device_filters.extend(['/job:ps', '/job:worker/task:%d' % task])
  server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                task_index=task, config=config)
  with tf.Graph().as_default():
    train_op, sync_optimizer = build_train_op(len(cluster['worker']), len(cluster['ps']),
                                              task, sync)
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
  """Starts `python -m benchmarks.scaling_model args` in its own process group.

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


def cluster_rate(num_workers, num_ps, sync, warmup, steps, timeout, use_netns=False):
  """Runs num_ps ps + num_workers worker processes; returns summed examples/sec.

  Args:
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
    return _cluster_rate(cluster, None, sync, warmup, steps, timeout)
  from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
  with netns.Network(ps_hosts + worker_hosts) as network:
    cluster = network.cluster({'ps': ps_hosts, 'worker': worker_hosts})
    return _cluster_rate(cluster, network, sync, warmup, steps, timeout)


def _cluster_rate(cluster, network, sync, warmup, steps, timeout):
  common = ['--cluster=' + json.dumps(cluster), '--net=' + FLAGS.net,
            '--image_size=%d' % FLAGS.image_size, '--batch_size=%d' % FLAGS.batch_size,
            '--threads=%d' % FLAGS.threads, '--warmup=%d' % warmup, '--steps=%d' % steps,
            '--ps_strategy=' + FLAGS.ps_strategy]
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


def check_clusters(configurations, warmup, steps, repeats, timeout, use_netns=False,
                   out=sys.stdout):
  """Predicts and measures every (workers, ps, sync); prints the comparison.

  Each configuration runs on loopback and, with `use_netns`, also with every
  task in its own network namespace (alternating inside each repeat); each is
  predicted from the link figures measured on the same kind of network.

  Returns:
    list of (workers, ps, sync, network, predicted ex/s, [measured ex/s per repeat]),
    network being 'loopback' or 'netns'.
  """
  links = {'loopback': measure_link()}
  if use_netns:
    links['netns'] = measure_netns_link(timeout)
  variables = net_variables(FLAGS.net, FLAGS.image_size, distributed.NUM_CLASSES)
  for network, (bandwidth, latency, per_tensor) in links.items():
    print('\n%s: %.2f GB/s, %.0f us round trip, %.0f us per tensor (TF gRPC, measured)'
          % (network, bandwidth / 1e9, latency * 1e6, per_tensor * 1e6), file=out)
  print('%d cores; %s %dx%d, batch %d per worker, %d thread(s) per task; %d warm-up + %d '
        'timed steps x %d repeats' % (os.cpu_count() or 1, FLAGS.net, FLAGS.image_size,
                                      FLAGS.image_size, FLAGS.batch_size, FLAGS.threads,
                                      warmup, steps, repeats), file=out, flush=True)
  variants, names = {}, {}
  for count in sorted({workers for workers, _, _ in configurations}):
    variants['compute, %d at once' % count] = (
        lambda n=count: concurrent_compute_rate(n, warmup, steps, timeout))
  for workers, num_ps, sync in configurations:
    for network in links:
      name = '%d worker(s) + %d ps, %s, %s' % (workers, num_ps, 'sync' if sync else 'async',
                                                network)
      names[name] = (workers, num_ps, sync, network)
      variants[name] = (lambda w=workers, m=num_ps, s=sync, n=network: cluster_rate(
          w, m, s, warmup, steps, timeout, use_netns=n == 'netns'))
  results = bench_util.repeat_variants(variants, repeats, out=out)
  compute_s = {}
  for name in [n for n in results if n.startswith('compute, ')]:
    count = int(name.split()[1])
    compute_s[count] = FLAGS.batch_size / bench_util.median(results.pop(name))
  print('compute per step, N trainers at once: %s' % ', '.join(
      'N=%d %.2f ms' % (n, 1e3 * t) for n, t in sorted(compute_s.items())), file=out)
  print('| workers | ps | mode | network | predicted ex/s | measured ex/s (min..max) | '
        'predicted / measured | within +-20 % |', file=out)
  print('| ---: | ---: | --- | --- | ---: | ---: | ---: | --- |', file=out)
  rows, agree = [], 0
  for name, measured in results.items():
    workers, num_ps, sync, network = names[name]
    bandwidth, latency, per_tensor = links[network]
    step = predict_ps(shard_traffic(variables, num_ps, FLAGS.ps_strategy), compute_s[workers],
                      workers, bandwidth, latency, sync, per_tensor)
    predicted = workers * FLAGS.batch_size / step
    ratio = predicted / bench_util.median(measured)
    within = abs(ratio - 1.0) <= AGREEMENT
    agree += within
    print('| %d | %d | %s | %s | %.1f | %.1f (%.1f..%.1f) | %.2f | %s |' % (
        workers, num_ps, 'sync' if sync else 'async', network, predicted,
        bench_util.median(measured), min(measured), max(measured), ratio,
        'yes' if within else 'NO'), file=out)
    rows.append((workers, num_ps, sync, network, predicted, measured))
  print('ratio predicted/measured within +-20 %%: %d of %d configurations'
        % (agree, len(rows)), file=out, flush=True)
  return rows


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  tf.compat.v1.disable_eager_execution()
  if FLAGS.role == 'ps':
    config = bench_util.session_config(FLAGS.threads, FLAGS.threads)
    tf.distribute.Server(tf.train.ClusterSpec(json.loads(FLAGS.cluster)), job_name='ps',
                         task_index=FLAGS.task, config=config).join()
    return
  if FLAGS.role == 'worker':
    run_worker(json.loads(FLAGS.cluster), FLAGS.task, FLAGS.sync, FLAGS.warmup, FLAGS.steps)
    return
  if FLAGS.measure_link:
    print('LINK %r %r %r' % measure_link(cluster=json.loads(FLAGS.cluster)), flush=True)
    return
  if FLAGS.compute_only:
    print('RATE %.3f' % distributed.single_process_rate(FLAGS.warmup, FLAGS.steps), flush=True)
    return
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  configurations = [(1, 1, False), (2, 1, False), (3, 1, False), (1, 2, False),
                    (2, 2, False), (2, 1, True), (2, 2, True)]
  if FLAGS.quick:
    warmup, steps, repeats = 3, 20, 1
    FLAGS.image_size, FLAGS.batch_size = 16, 8
    FLAGS.link_gbps, FLAGS.table_workers, FLAGS.table_ps = ['10'], ['8'], ['1', '2']
    configurations = [(1, 2, False)]
  elif warmup < 10 or steps < 100:
    raise app.UsageError('--check needs --warmup >= 10 and --steps >= 100')
  print_tables('ResNet-50 v1 (1000 classes)', resnet_variables(),
               FLAGS.resnet_compute_ms / 1e3)
  print_tables('shapes SSD (configs/ssd_shapes.config)', ssd_variables(),
               FLAGS.ssd_compute_ms / 1e3)
  if FLAGS.check or FLAGS.quick:
    if FLAGS.netns:
      from deployment import netns  # noqa: PLC0415
      reason = netns.unavailable_reason()
      if reason:
        raise app.UsageError('--netns: %s' % reason)
    check_clusters(configurations, warmup, steps, repeats, FLAGS.timeout,
                   use_netns=FLAGS.netns)


if __name__ == '__main__':
  app.run(main)
