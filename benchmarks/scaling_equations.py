r"""The scaling model's arithmetic: traffic per ps task and predicted step times.

`benchmarks/scaling_model.py`'s docstring states the model; this module holds
its equations so that the tables (`scaling_model`), the frozen parameter file
(`scaling_params`) and the calibration and validation runs
(`scaling_validate`) share one copy:

    shards = shard_traffic(net_variables('small_cnn', 32, 10), num_ps=2)
    step_s = predict_ps(shards, compute_s=0.01, workers=2, bandwidth=1e9,
                        latency_s=7e-4, sync=False, tensor_s=3e-5)

`same_machine_step` is the form the calibration and validation runs use: every
task of the cluster on one machine (loopback or network namespaces), with the
calibrated per-step and per-ps-task costs and the shared-cores bound.
"""

import collections

import tensorflow as tf
import tf_slim as slim

ASYNC_ROUND_TRIPS = 2
SYNC_ROUND_TRIPS = 4

# What the link probe measures (`benchmarks.scaling_check.measure_link`), under the
# parameter file's names: wall-clock figures of one link (bytes/sec; seconds of a round
# trip, of each tensor beyond the first in one step, of each ps task beyond the first in
# one step) and CPU seconds of both ends together (of a round trip, of each tensor beyond
# the first, of each byte moved).
LinkFigures = collections.namedtuple('LinkFigures', (
    'bandwidth_bytes_per_s', 'round_trip_s', 'per_tensor_s', 'per_extra_ps_s',
    'cpu_round_trip_s', 'cpu_per_tensor_s', 'cpu_per_byte_s'))


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


def shared_cores_step(shards, compute_s, workers, sync, cores, link):
  """Lowest possible seconds per worker step when every task shares one machine's `cores`.

  Only for clusters on one machine (the check): a round of N worker steps
  needs N compute times (`compute_s`: one trainer alone, one thread) plus, per
  worker step, the CPU work of its transfers at both ends: its bytes, its
  tensors and its calls (each pull and push is a call to every ps task,
  sync's token and step reads a call to one), as the link probe measured
  that work in CPU seconds. Waiting on the wire costs no CPU: it is not here.
  That CPU work cannot finish in less than its share of `cores`.

  Args:
    shards: a Shards for the ps count in question.
    compute_s: one trainer's compute time per step running alone (seconds).
    workers, sync: as `predict_ps`.
    cores: CPU cores of the machine.
    link: a LinkFigures (its cpu_* figures are used).

  Returns:
    seconds per step of one worker.
  """
  round_trips = ASYNC_ROUND_TRIPS * len(shards.down) + (
      SYNC_ROUND_TRIPS - ASYNC_ROUND_TRIPS if sync else 0)
  transfer_cpu = ((shards.total_down + shards.total_up) * link.cpu_per_byte_s
                  + sum(shards.tensors) * link.cpu_per_tensor_s
                  + round_trips * link.cpu_round_trip_s)
  return workers * (compute_s + transfer_cpu) / cores


def net_variables(net, image_size, num_classes):
  """Variables of a `models.slim_classifier` net (for the loopback check)."""
  from models import slim_classifier  # noqa: PLC0415

  def build():
    model = slim_classifier.SlimClassifier(True, num_classes, net=net, image_height=image_size,
                                           image_width=image_size)
    model.predict(*model.preprocess(tf.zeros([1, image_size, image_size, 3])))
  return model_variables(build)


# Share of an Ethernet frame's bytes that is TCP payload at MTU 1500 with TCP
# timestamps (1448 of 1514 bytes): `tc`'s token bucket counts whole frames.
TC_PAYLOAD_SHARE = 1448.0 / 1514.0


def tc_bandwidth(rate_mbit, payload_share=TC_PAYLOAD_SHARE):
  """Usable bytes/sec of a link that `tc ... tbf rate <rate_mbit>mbit` limits.

  Args:
    rate_mbit: the token bucket's rate in Mbit/s (10^6 bits).
    payload_share: share of the frame bytes that is payload.

  Returns:
    payload bytes/sec.
  """
  return rate_mbit * 1e6 / 8.0 * payload_share


def same_machine_step(shards, compute_s, alone_s, workers, link, per_step_s, sync, cores,
                      wire_bandwidth=None):
  """Predicted seconds per worker step when every task shares this machine.

  The links bound is `predict_ps` plus the per-step cost of a distributed
  step and the cost of each ps task beyond the first; the floor is
  `shared_cores_step` with those costs as worker CPU work.

  Args:
    shards: a Shards for the ps count in question.
    compute_s: compute time per step of `workers` trainers running at once.
    alone_s: compute time per step of one trainer running alone.
    workers: number of workers.
    link: a LinkFigures, as the link probe measures them.
    per_step_s: per-step cost of a distributed step that the link misses.
    sync: SyncReplicasOptimizer (True) or async updates.
    cores: CPU cores of the machine.
    wire_bandwidth: bytes/sec of a `tc`-limited wire (None: no limit); it
      bounds the transfers but not the CPU work of the floor.

  Returns:
    (seconds per worker step, 'links' or 'shared cores': the bound that set it).
  """
  link = LinkFigures(*link)
  extra = per_step_s + (len(shards.down) - 1) * link.per_extra_ps_s
  wire = link.bandwidth_bytes_per_s if wire_bandwidth is None else min(
      link.bandwidth_bytes_per_s, wire_bandwidth)
  step = extra + predict_ps(shards, compute_s, workers, wire, link.round_trip_s, sync,
                            link.per_tensor_s)
  floor = shared_cores_step(shards, alone_s + extra, workers, sync, cores, link)
  return (step, 'links') if step >= floor else (floor, 'shared cores')
