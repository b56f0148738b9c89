"""Device choosers that put variables on parameter servers.

A *device function* maps an op to a device string; TensorFlow calls it for
every op created inside `tf.compat.v1.device(fn)` (plain `tf.device` rejects
functions on TF 2.21). TF-Slim's model_deploy sends an op to a ps task when
its type starts with `Variable`. That matches only reference variables
(`VariableV2`): TF2's resource variables are created by `VarHandleOp`, so
under slim's chooser they silently stay on the worker and every worker trains
its own private model.

`PSDeviceChooser` recognises the variable-creating ops of both kinds (and the
mutable hash tables `tf.compat.v1.train.replica_device_setter` also sends to
the ps) and spreads them over the ps tasks:

* `round_robin` (slim's behaviour): variable k goes to task k % num_tasks.
* `greedy`: each variable goes to the task holding the fewest bytes so far
  (ties: lowest task index), like
  `tf.compat.v1.train.GreedyLoadBalancingStrategy` with a byte-size load.

Everything else created in the scope keeps the device it already has (usually
none). That is the right thing for resource variables: their initialiser,
`IsInitialized` and `Read` ops are pinned to the handle's device by TensorFlow
itself, the initial-value ops carry a colocation constraint with the handle,
and reads made later (`variable.value()`) have no device, so the placer runs
them next to the resource, on the ps, and ships the value to the reader.

Usage:

    chooser = PSDeviceChooser('/job:ps/device:CPU:0', num_tasks=2,
                              strategy='greedy')
    with tf.compat.v1.device(chooser.choose):
      w = tf.compat.v1.get_variable('w', [1000, 10])  # -> /job:ps/task:0
      b = tf.compat.v1.get_variable('b', [10])        # -> /job:ps/task:1
      c = tf.compat.v1.get_variable('c', [10])        # -> /job:ps/task:1
"""

import tensorflow as tf
from tensorflow.core.framework import node_def_pb2

PS_STRATEGIES = ('round_robin', 'greedy')

# Op types whose output is a variable or a mutable table living on a device.
PS_OPS = frozenset([
    'Variable', 'VariableV2', 'AutoReloadVariable', 'VarHandleOp',
    'MutableHashTable', 'MutableHashTableV2', 'MutableHashTableOfTensors',
    'MutableHashTableOfTensorsV2', 'MutableDenseHashTable',
    'MutableDenseHashTableV2',
])


def is_ps_op(op_type):
  """Returns True when ops of type `op_type` belong on a parameter server."""
  return op_type in PS_OPS


def variable_bytes(node_def):
  """Returns the size in bytes of the variable a NodeDef creates (0 if unknown).

  Unknown dimensions count as 1, so a partially-known variable still weighs
  something.

  Args:
    node_def: a `NodeDef` of a variable-creating op.

  Returns:
    An int.
  """
  if 'shape' not in node_def.attr or 'dtype' not in node_def.attr:
    return 0
  shape = node_def.attr['shape'].shape
  if shape.unknown_rank:
    return 0
  elements = 1
  for dim in shape.dim:
    elements *= max(dim.size, 1)
  try:
    item = tf.as_dtype(node_def.attr['dtype'].type).size
  except (TypeError, ValueError):
    item = 1
  return elements * item


class PSDeviceChooser(object):
  """Assigns variable ops to ps tasks; a device function for `tf.compat.v1.device`."""

  def __init__(self, device, tasks, strategy='round_robin'):
    """Creates a chooser.

    Args:
      device: the ps device without task, e.g. '/job:ps/device:CPU:0'.
      tasks: number of ps tasks (> 0).
      strategy: 'round_robin' or 'greedy'.

    Raises:
      ValueError: on a bad `tasks` or `strategy`.
    """
    if tasks < 1:
      raise ValueError('PSDeviceChooser needs tasks >= 1, got %r' % (tasks,))
    if strategy not in PS_STRATEGIES:
      raise ValueError('ps_strategy must be one of %s, got %r' % (
          ', '.join(repr(s) for s in PS_STRATEGIES), strategy))
    spec = tf.DeviceSpec.from_string(device)
    self._job = spec.job
    self._device_type = spec.device_type or 'CPU'
    self._device_index = spec.device_index if spec.device_index is not None else 0
    self._tasks = tasks
    self._strategy = strategy
    self._next_task = 0
    self._bytes = [0] * tasks

  @property
  def bytes_per_task(self):
    """Bytes of variables assigned so far to each task (a list copy)."""
    return list(self._bytes)

  def task_device(self, task):
    """The full device string of ps task `task`."""
    return '/job:%s/task:%d/device:%s:%d' % (
        self._job, task, self._device_type, self._device_index)

  def _pick_task(self, node_def):
    size = variable_bytes(node_def)
    if self._strategy == 'greedy':
      task = min(range(self._tasks), key=lambda t: (self._bytes[t], t))
    else:
      task = self._next_task
      self._next_task = (self._next_task + 1) % self._tasks
    self._bytes[task] += size
    return task

  def choose(self, op):
    """Returns the device for `op` (an `Operation` or a `NodeDef`).

    An op that already has a device keeps it; a variable op without one gets
    the next ps task; any other op keeps its (empty) device.

    Args:
      op: the op being created.

    Returns:
      A device string.
    """
    if op.device:
      return op.device
    node_def = op if isinstance(op, node_def_pb2.NodeDef) else op.node_def
    if is_ps_op(node_def.op):
      return self.task_device(self._pick_task(node_def))
    return op.device
