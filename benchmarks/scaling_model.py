r"""A scaling model for parameter-server and all-reduce training, checked on real clusters.

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

Check (`--check`, benchmarks/scaling_check.py): real clusters of 1-3 workers
x 1-2 ps, async and sync, run on this machine (loopback, and with `--netns`
also with every task in its own network namespace); each is predicted from
B, L and o measured with TF's own gRPC runtime on the same kind of network and
from the compute time per step of N trainers running at once. Two terms apply
to the check only:

  d   the per-step cost of a distributed step that B, L and o miss (the
      master's per-step work, a graph partition run per task), calibrated on
      1 worker + 1 ps as its measured step minus its prediction, added to
      every worker step (t_c + d);
  all tasks share this machine's C cores, so a step is also at least

      N (t_1 + d + 2 ((D + U) / B + n o + R L)) / C

      with t_1 one trainer's compute alone, 2 for both ends of a transfer and
      R = 2 M round trips (a pull and a push to each of the M ps tasks), 2
      more for sync (the token and the step).

Reported: predicted vs measured examples/sec, which bound set the prediction,
and whether they agree within +-20 % (the calibration cluster not counted).
The tables (separate machines) use neither term.

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

import os
import sys

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_slim as slim

from benchmarks import distributed  # its flags: quick, role, cluster, task, sync, net, ...
from benchmarks import scaling_check

flags.DEFINE_bool('check', False, 'Also run the loopback check (real processes); with '
                  '--netns, each configuration also with every task in its own network '
                  'namespace (deployment/netns.py; needs root and `ip`).')
flags.DEFINE_list('link_gbps', ['10', '25', '100'], 'Link line rates of the tables (Gbit/s).')
flags.DEFINE_list('table_workers', ['8', '32', '128'], 'Worker counts of the tables.')
flags.DEFINE_list('table_ps', ['1', '2', '4', '8', '16', '32'], 'ps counts of the tables.')
flags.DEFINE_float('link_efficiency', 0.8, 'Share of the line rate gRPC reaches (tables).')
flags.DEFINE_float('latency_us', 50.0, 'Round-trip latency of the tables (microseconds).')
flags.DEFINE_float('tensor_overhead_us', 20.0, 'Fixed cost of moving one tensor between '
                   'tasks in the tables (microseconds; --check measures it on loopback).')
flags.DEFINE_float('resnet_compute_ms', 173.0,
                   'ResNet-50 compute time per worker step: default = batch 64 fp32 at '
                   '~370 img/s (a V100-class GPU, tf_cnn_benchmarks); set your own.')
flags.DEFINE_float('ssd_compute_ms', 50.0, 'shapes SSD compute time per worker step.')
flags.DEFINE_float('allreduce_gbps', 100.0, 'Device-to-device bandwidth of the one-machine '
                   'all-reduce table (Gbit/s, e.g. PCIe 4 x16 ~ 200, NVLink ~ 2400).')
flags.DEFINE_enum('ps_strategy', 'round_robin', ['round_robin', 'greedy'],
                  'How variables are spread over the ps tasks (as model_deploy).')
FLAGS = flags.FLAGS

STEP_BUDGET = 1.10  # a worker's step may take at most 110 % of its compute
ASYNC_ROUND_TRIPS = 2
SYNC_ROUND_TRIPS = 4
TRANSFER_ENDS = 2   # on one machine a transfer keeps the sender's and the receiver's CPU busy


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


def shared_cores_step(shards, compute_s, workers, bandwidth, latency_s, sync, tensor_s, cores):
  """Lowest possible seconds per worker step when every task shares one machine's `cores`.

  Only for clusters on one machine (the check): a round of N worker steps
  needs N compute times (`compute_s`: one trainer alone, one thread) plus, per
  worker step, its transfers, which keep the CPUs of both ends busy; each
  pull and push is a call to every ps task, sync's token and step reads a call
  to one. That CPU work cannot finish in less than its share of `cores`.

  Args:
    shards: a Shards for the ps count in question.
    compute_s: one trainer's compute time per step running alone (seconds).
    workers, bandwidth, latency_s, sync, tensor_s: as `predict_ps`.
    cores: CPU cores of the machine.

  Returns:
    seconds per step of one worker.
  """
  round_trips = ASYNC_ROUND_TRIPS * len(shards.down) + (
      SYNC_ROUND_TRIPS - ASYNC_ROUND_TRIPS if sync else 0)
  transfer = ((shards.total_down + shards.total_up) / bandwidth + sum(shards.tensors) * tensor_s
              + round_trips * latency_s)
  return workers * (compute_s + TRANSFER_ENDS * transfer) / cores


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


def check_predictor(variables, ps_strategy, cores):
  """The prediction `scaling_check.check_clusters` compares with its measurements.

  A worker step is `predict_ps` plus the calibrated per-step cost of a
  distributed step (worker CPU work), and, because the clusters of the check
  share this machine's `cores`, at least `shared_cores_step`.
  """
  def predict(workers, num_ps, sync, compute_s, link, overhead_s):
    bandwidth, latency, per_tensor = link
    shards = shard_traffic(variables, num_ps, ps_strategy)
    step = overhead_s + predict_ps(shards, compute_s[workers], workers, bandwidth, latency,
                                   sync, per_tensor)
    floor = shared_cores_step(shards, compute_s[1] + overhead_s, workers, bandwidth, latency,
                              sync, per_tensor, cores)
    return (step, 'links') if step >= floor else (floor, 'shared cores')
  return predict


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  tf.get_logger().setLevel('ERROR')
  tf.compat.v1.disable_eager_execution()
  if scaling_check.run_task(FLAGS.ps_strategy):
    return
  warmup, steps, repeats = FLAGS.warmup, FLAGS.steps, FLAGS.repeats
  configurations = [(1, 1, False), (2, 1, False), (3, 1, False), (1, 2, False),
                    (2, 2, False), (2, 1, True), (2, 2, True)]
  if FLAGS.quick:
    warmup, steps, repeats = 3, 20, 1
    FLAGS.image_size, FLAGS.batch_size = 16, 8
    FLAGS.link_gbps, FLAGS.table_workers, FLAGS.table_ps = ['10'], ['8'], ['1', '2']
    configurations = [(1, 1, False), (1, 2, False)]
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
    predict = check_predictor(
        net_variables(FLAGS.net, FLAGS.image_size, distributed.NUM_CLASSES),
        FLAGS.ps_strategy, os.cpu_count() or 1)
    scaling_check.check_clusters(configurations, predict, warmup, steps, repeats,
                                 FLAGS.timeout, FLAGS.ps_strategy, use_netns=FLAGS.netns)


if __name__ == '__main__':
  app.run(main)
