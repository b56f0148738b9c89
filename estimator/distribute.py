"""tf.distribute strategies given to `RunConfig(train_distribute=..., eval_distribute=...)`.

Programs of 2018-2019 (tensorflow/models' official models, through their
`distribution_utils`) hand tf.estimator's RunConfig a strategy built for the
machine: `OneDeviceStrategy('device:CPU:0')` without GPUs,
`OneDeviceStrategy('device:GPU:0')` with one, `MirroredStrategy(devices=[...])`
with several. slimtrain's Estimator reads where such a strategy puts the
model and builds the same placement with its own means:

    tf.compat.v1.disable_eager_execution()
    strategy = tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1'])
    config = tfe.RunConfig(train_distribute=strategy, eval_distribute=strategy)
    config.num_clones                # 2: what RunConfig(num_clones=2) would train
    tfe.Estimator(model_fn, config=config).train(input_fn, max_steps=1000)

* `OneDeviceStrategy(d)` (and a MirroredStrategy of one device): trained as
  without a strategy, the model_fn's ops placed on `d`.
* `MirroredStrategy` over N devices: `train()` builds N clones of the
  model_fn through `deployment.model_deploy`, as `RunConfig(num_clones=N)`
  does (estimator/replicate.py; the model_fn wraps its optimizer in
  `tfe.TowerOptimizer`), clone i on the strategy's i-th device. Over CPU
  devices (virtual ones, e.g. `ConfigProto(device_count={'CPU': 2})`) the
  clones run on the CPU (`clone_on_cpu`). As tf.estimator did, every clone
  reads its own batch of the input_fn's Dataset (the Dataset's batch is the
  per-replica batch, so one step reads N of them), and the input_fn may
  declare `input_context`, a `tf.distribute.InputContext` with
  `num_replicas_in_sync=N`. An input_fn returning tensors instead of a
  Dataset has its batch split into N slices, as with num_clones.
  GPU devices this machine does not have are refused when training starts:
  soft placement would otherwise put every clone on the CPU unnoticed.
* Evaluation (`eval_distribute`) runs on one device, the strategy's first,
  one batch per step; its input_context says one replica.
* Every other strategy is refused, naming the argument, the strategy's class
  and slimtrain's way to the same end: a ps cluster in TF_CONFIG for
  ParameterServerStrategy, SyncReplicasOptimizer over a ps cluster for
  MultiWorkerMirroredStrategy, `RunConfig(num_clones=N)` for the others.

Differs on purpose from tf.estimator: no strategy object takes part in the
graph (no mirrored variables, no cross-device ops): variables live once on
the variables device and the clones' gradients are averaged by replicate.py.
`MirroredStrategy(num_gpus=N)` of tf.contrib no longer exists (TensorFlow
2.21 raises TypeError on `num_gpus`); write
`MirroredStrategy(devices=['/gpu:%d' % i for i in range(N)])` or
`RunConfig(num_clones=N)`.
"""

import collections
import contextlib

import tensorflow as tf

from core import logs as logging

__all__ = ['Placement', 'placement', 'check_devices', 'device_scope', 'input_context']

_ONE_DEVICE = (tf.distribute.OneDeviceStrategy, tf.compat.v1.distribute.OneDeviceStrategy)
_MIRRORED = (tf.distribute.MirroredStrategy, tf.compat.v1.distribute.MirroredStrategy)
_STRATEGY_TYPES = (tf.distribute.Strategy, tf.compat.v1.distribute.Strategy)

_INSTEAD_OF_PS = (
    "slimtrain trains with parameter servers without a strategy: describe the cluster in "
    "TF_CONFIG with 'ps' and 'worker' tasks (and a 'chief') and leave {arg} None; variables "
    'go round-robin to the ps tasks (add RunConfig(num_clones=N) for several devices per '
    'worker).')
_INSTEAD_OF_MULTI_WORKER = (
    'For synchronous training over several workers use sync replicas: a ps cluster in '
    "TF_CONFIG ('ps' and 'worker' tasks) and the model_fn's optimizer wrapped in "
    'deployment.sync_replicas.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=<number '
    'of workers>) with its make_session_run_hook(is_chief) among the training hooks '
    '(python -m trainer.train: train_config.sync_replicas: true); leave {arg} None. For '
    "several devices of one machine use RunConfig(num_clones=N).")
_INSTEAD_OF_OTHERS = (
    'Leave {arg} None and use RunConfig(num_clones=N) (with clone_on_cpu=True for CPU '
    'clones) for several devices of one machine, or a ps cluster in TF_CONFIG for several '
    'machines.')


class Placement(collections.namedtuple('Placement', ['argument', 'strategy_name', 'devices'])):
  """Where an accepted strategy puts the model.

  Fields:
    argument: the RunConfig argument it came from ('train_distribute' or
      'eval_distribute'), for error messages.
    strategy_name: the strategy's class name.
    devices: tuple of local device strings, e.g. ('/device:GPU:0',).
  """

  @property
  def num_replicas(self):
    """Replicas (clones when training) the strategy asks for."""
    return len(self.devices)

  @property
  def on_cpu(self):
    """Whether every device is a CPU."""
    return all(tf.DeviceSpec.from_string(d).device_type == 'CPU' for d in self.devices)

  @property
  def device(self):
    """The first device: the one a single-device run (and evaluation) uses."""
    return self.devices[0]

  def describe(self):
    """'train_distribute=MirroredStrategy', the words errors start with."""
    return '%s=%s' % (self.argument, self.strategy_name)


def _local_device(device, argument, strategy):
  """'/device:TYPE:INDEX' for a device of this process; ValueError for any other."""
  spec = tf.DeviceSpec.from_string(device)
  if spec.job not in (None, 'localhost') or spec.replica not in (None, 0) or (
      spec.task not in (None, 0)):
    raise ValueError(
        '%s=%s places replicas on %r, a device of another task; slimtrain\'s Estimator clones '
        'only over the devices of its own process. For several machines describe a ps '
        'cluster in TF_CONFIG and leave %s None.' % (
            argument, type(strategy).__name__, device, argument))
  if spec.device_type is None:
    raise ValueError('%s=%s names device %r without a device type' % (
        argument, type(strategy).__name__, device))
  return '/device:%s:%d' % (spec.device_type.upper(), spec.device_index or 0)


def _class_names(strategy):
  return [cls.__name__ for cls in type(strategy).__mro__]


def _refusal(strategy, argument):
  """The ValueError text for a strategy slimtrain does not run."""
  names = _class_names(strategy)
  label = type(strategy).__name__
  if any(n.startswith('ParameterServerStrategy') for n in names):
    instead = _INSTEAD_OF_PS
  elif any(n.startswith(('CollectiveAllReduceStrategy', 'MultiWorkerMirroredStrategy'))
           for n in names):
    instead = _INSTEAD_OF_MULTI_WORKER
    if not label.startswith('MultiWorkerMirrored'):  # The class behind the public name.
      label += ' (MultiWorkerMirroredStrategy)'
  else:
    instead = _INSTEAD_OF_OTHERS
  return ('%s=%s is not supported: slimtrain\'s Estimator accepts OneDeviceStrategy and '
          'MirroredStrategy (over the devices of this process) only. %s' % (
              argument, label, instead.format(arg=argument)))


def placement(strategy, argument):
  """Reads where `strategy` puts the model; refuses what slimtrain cannot run.

  Building the strategy is the program's business; this only reads its
  devices (`strategy.extended.worker_devices`), which starts nothing.

  Args:
    strategy: the value given as `argument`: None, a OneDeviceStrategy or a
      MirroredStrategy (tf.distribute or tf.compat.v1.distribute).
    argument: 'train_distribute' or 'eval_distribute'.

  Returns:
    A `Placement`, or None for None.

  Raises:
    ValueError: for another strategy or value, naming `argument`, the
      strategy's class and what to use instead; or for devices of another task.
  """
  if strategy is None:
    return None
  if not isinstance(strategy, _STRATEGY_TYPES):
    raise ValueError('%s must be a tf.distribute strategy (OneDeviceStrategy or '
                     'MirroredStrategy) or None, got %r' % (argument, strategy))
  if not isinstance(strategy, _ONE_DEVICE + _MIRRORED):
    raise ValueError(_refusal(strategy, argument))
  devices = tuple(_local_device(d, argument, strategy)
                  for d in strategy.extended.worker_devices)
  return Placement(argument, type(strategy).__name__, devices)


def check_devices(where, num_gpus=None):
  """Raises unless every GPU of a several-device placement is visible.

  One device is not checked: without its GPU, soft placement runs the model
  on the CPU (as `RunConfig(num_clones=1)` does); a warning says so.

  Args:
    where: a `Placement`.
    num_gpus: GPUs this process can use; None counts the visible ones.

  Raises:
    ValueError: naming the argument, the devices and the visible GPUs.
  """
  if num_gpus is None:
    num_gpus = len(tf.config.list_physical_devices('GPU'))
  missing = [d for d in where.devices
             if tf.DeviceSpec.from_string(d).device_type == 'GPU'
             and tf.DeviceSpec.from_string(d).device_index >= num_gpus]
  if not missing:
    return
  if where.num_replicas == 1:
    logging.warning('%s places the model on %s, which this machine does not have; it runs '
                    'where soft placement puts it (the CPU).', where.describe(), where.device)
    return
  raise ValueError(
      '%s over %r needs those GPUs, but %d GPU(s) are visible; the clones would silently share '
      'a device. Use MirroredStrategy over CPU devices (virtual ones: '
      "ConfigProto(device_count={'CPU': %d})) or RunConfig(num_clones=%d, clone_on_cpu=True) "
      'to run the clones on the CPU on purpose, or fewer devices.' % (
          where.describe(), list(where.devices), num_gpus, where.num_replicas,
          where.num_replicas))


@contextlib.contextmanager
def device_scope(where):
  """Places what the block builds on the placement's first device (no-op for None).

  Only that device is used, so only it is checked (a warning if it is a GPU
  this machine lacks).

  Args:
    where: a `Placement` or None.
  """
  if where is None:
    yield
    return
  check_devices(where._replace(devices=where.devices[:1]))
  with tf.compat.v1.device(where.device):
    yield


def input_context(where, num_replicas=None):
  """The `tf.distribute.InputContext` an input_fn gets under `where` (None without one).

  Args:
    where: a `Placement` or None.
    num_replicas: replicas reading the input (default: the placement's).

  Returns:
    An InputContext of one input pipeline, or None.
  """
  if where is None:
    return None
  return tf.distribute.InputContext(
      num_input_pipelines=1, input_pipeline_id=0,
      num_replicas_in_sync=num_replicas or where.num_replicas)
