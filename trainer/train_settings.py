"""How and where one task runs the legacy training: `TrainSettings`, one typed object.

The Object Detection API's `train()` takes its run settings as nine loose
arguments (master, task, clones, replicas, ps tasks, ...), and slimtrain added
five more (session config, on_finish, deployment options, startup deadline,
fault handling). `TrainSettings` holds all of them, checked and documented in
one place; `trainer.trainer.train` takes it as `settings=`, and still takes the
OD call shape, positionally or by keyword, with every keyword it ever had:

    from trainer import trainer
    from trainer.train_settings import TrainSettings

    settings = TrainSettings(train_dir='/tmp/train', num_clones=2, clone_on_cpu=True)
    trainer.train(create_tensor_dict_fn, create_model_fn, train_config, settings=settings)

    # The OD API's call, unchanged:
    trainer.train(create_tensor_dict_fn, create_model_fn, train_config, '', 0, 2, 1,
                  True, 0, 'worker', True, '/tmp/train')

    # Both: arguments given to train() override the object's fields.
    trainer.train(create_tensor_dict_fn, create_model_fn, train_config,
                  settings=settings, task=1, is_chief=False)
"""

import dataclasses
import numbers
from typing import Any, Callable, Mapping, Optional

# The OD API's run arguments of train(), in its positional order.
OD_RUN_ARGUMENTS = ('master', 'task', 'num_clones', 'worker_replicas', 'clone_on_cpu',
                    'ps_tasks', 'worker_job_name', 'is_chief', 'train_dir')


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """Where one task of the legacy trainer runs and how it behaves in its cluster.

  Fields:
    master: gRPC target of the TF server ('' for in-process).
    task: this worker's task index (its replica id).
    num_clones: clones per worker; -1 = one per visible GPU.
    worker_replicas: number of worker replicas (chief included).
    clone_on_cpu: put the clones on the CPU.
    ps_tasks: number of parameter-server tasks.
    worker_job_name: job name of the workers (e.g. 'worker').
    is_chief: whether this task initialises, checkpoints and summarises.
    train_dir: checkpoints and summaries go here (required).
    session_config_override: optional ConfigProto replacing the default
      (soft placement) one, e.g. with virtual CPU devices; `use_xla` still
      applies to it.
    on_finish: optional callable(sess, step) run by this task when training
      ends (the cluster layer uses it to tell parameter servers to exit).
    deployment_options: optional dict of extra `DeploymentConfig` arguments
      (`variable_update`, `ps_strategy`, `clone_devices`, ...).
    startup_timeout_secs: how long a non-chief task of a cluster waits for
      the chief to initialise the model.
    faults: optional `deployment.fault_runtime.TaskFaults` (termination
      grace, sync replica watch, recovery deadline).
  """
  master: str = ''
  task: int = 0
  num_clones: int = 1
  worker_replicas: int = 1
  clone_on_cpu: bool = False
  ps_tasks: int = 0
  worker_job_name: str = 'worker'
  is_chief: bool = True
  train_dir: str = ''
  session_config_override: Optional[Any] = None
  on_finish: Optional[Callable[[Any, int], None]] = None
  deployment_options: Optional[Mapping[str, Any]] = None
  startup_timeout_secs: float = 600
  faults: Optional[Any] = None

  def __post_init__(self):
    for name in ('task', 'num_clones', 'worker_replicas', 'ps_tasks'):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError('TrainSettings.%s must be an int, got %r' % (name, value))
    if self.task < 0 or self.worker_replicas < 1 or self.ps_tasks < 0:
      raise ValueError('TrainSettings: need task >= 0, worker_replicas >= 1 and ps_tasks >= 0, '
                       'got task=%d, worker_replicas=%d, ps_tasks=%d'
                       % (self.task, self.worker_replicas, self.ps_tasks))
    if self.num_clones == 0 or self.num_clones < -1:
      raise ValueError('TrainSettings.num_clones must be positive or -1 (one per GPU), got %d'
                       % self.num_clones)
    if self.startup_timeout_secs <= 0:
      raise ValueError('TrainSettings.startup_timeout_secs must be positive, got %r'
                       % (self.startup_timeout_secs,))


_FIELDS = frozenset(field.name for field in dataclasses.fields(TrainSettings))


def resolve(settings=None, more_settings=None, **od_arguments):
  """The settings one `train()` call asks for.

  Args:
    settings: a `TrainSettings`, or None (all defaults).
    more_settings: dict of `TrainSettings` fields given to `train()` by
      keyword beyond the OD arguments (`faults=`, `on_finish=` ...).
    **od_arguments: the OD run arguments as `train()` got them; None means
      "not given" (none of them takes None as a value).

  Returns:
    A `TrainSettings`: `settings` with every given argument put in.

  Raises:
    TypeError: for a keyword that is no `TrainSettings` field, or a
      `settings` of another type.
    ValueError: without a train_dir, or for a bad field value (named).
  """
  if settings is None:
    settings = TrainSettings()
  elif not isinstance(settings, TrainSettings):
    raise TypeError('train(settings=...) must be a trainer.train_settings.TrainSettings, '
                    'got %r' % (settings,))
  changes = {name: value for name, value in od_arguments.items() if value is not None}
  for name, value in (more_settings or {}).items():
    if name not in _FIELDS:
      raise TypeError("train() got an unexpected keyword argument '%s'" % name)
    changes[name] = value
  settings = dataclasses.replace(settings, **changes)
  if not settings.train_dir:
    raise ValueError('train() needs a train_dir (the argument or TrainSettings.train_dir)')
  return settings
