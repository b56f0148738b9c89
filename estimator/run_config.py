"""`RunConfig`: where and how an Estimator runs (tf.estimator 2.15 semantics).

A RunConfig holds the checkpoint/summary cadence and this process's place in a
cluster. The cluster part is read from the `TF_CONFIG` environment variable
through `deployment.cluster.ClusterConfig` (chief / master / worker / ps /
evaluator tasks), so a malformed TF_CONFIG fails with a message naming the
offending key:

    TF_CONFIG='{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"],
                            "ps": ["h2:2222"]},
                "task": {"type": "worker", "index": 0}}'
    config = tfe.RunConfig(model_dir='/tmp/m', save_checkpoints_steps=500)
    config.task_type, config.task_id, config.is_chief   # 'worker', 0, False
    config.num_worker_replicas, config.num_ps_replicas  # 2, 1
    config = config.replace(keep_checkpoint_max=10)

Defaults are tf.estimator's: summaries every 100 steps, a checkpoint every 600
seconds when no cadence is given (giving one cadence disables the other),
5 checkpoints kept, a step-rate log line every 100 steps.

slimtrain extension, for several GPUs in one process (what
`tf.contrib.estimator.replicate_model_fn` did): `num_clones=N` (and
`clone_on_cpu`) or a full `deployment.model_deploy.DeploymentConfig` as
`deployment_config` makes `Estimator.train` run N clones of the model_fn via
model_deploy; see estimator/replicate.py.

Differs on purpose from tf.estimator 2.15 (additions only; every name and
default of tf.estimator's RunConfig is kept):

* `num_clones`, `clone_on_cpu`, `deployment_config` (above);
* `train_distribute` / `eval_distribute` take a OneDeviceStrategy (the model
  on its device) or a MirroredStrategy (training: one clone per device, as
  `num_clones`; evaluation: its first device) and refuse every other
  strategy, naming what to use instead (estimator/distribute.py). The
  properties return the strategies given;
* `recovery_timeout_secs` (default 300): a chief or worker of a cluster with
  ps tasks that lost a ps rebuilds its session; past this many seconds
  without a new session it exits 129 (retryable) naming the lost ps.
  tf.estimator retried forever;
* `termination_grace_secs` (default 25): after SIGTERM the chief writes a
  checkpoint at the step reached and every task of such a cluster exits 143;
  a ps keeps serving until the chief's checkpoint is written, at most this
  long, and no task takes longer than this to exit. tf.estimator's tasks died
  mid-step. Keep it below the scheduler's grace period (Kubernetes: 30 s);
* `chief_timeout_secs` (default 300): a worker or ps of such a cluster whose
  chief's port stays closed this long exits 129 (a worker would otherwise
  train on with nobody left to save its work, as tf.estimator's did);
* `snapshot_interval_secs` (default 5, 0: off): in asynchronous training
  with two or more ps, the chief copies each ps's variables onto the next ps
  this often; a lost ps is then restored from that copy (seconds old)
  rather than from the latest checkpoint, unless its holder was lost too.

All four mean what `deploy_config`'s fields of the same names mean for
`python -m trainer.train`: one fault runtime (deployment/fault_runtime.py)
serves both; see docs/fault_tolerance.md.
"""

import copy
import inspect
import json
import os

import tensorflow as tf

from deployment import cluster as cluster_lib
from deployment import fault_runtime
from estimator import distribute

__all__ = ['RunConfig', 'TaskType']

_USE_DEFAULT = object()
_SAVE_CKPT_ERR = (
    '`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.')
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600

_DEFAULT_REPLACEABLE_LIST = [
    'model_dir', 'tf_random_seed', 'save_summary_steps', 'save_checkpoints_steps',
    'save_checkpoints_secs', 'session_config', 'keep_checkpoint_max',
    'keep_checkpoint_every_n_hours', 'log_step_count_steps', 'train_distribute', 'device_fn',
    'protocol', 'eval_distribute', 'experimental_distribute',
    'experimental_max_worker_delay_secs', 'session_creation_timeout_secs',
    'checkpoint_save_graph_def',
    # slimtrain's multi-clone extension.
    'num_clones', 'clone_on_cpu', 'deployment_config',
    # slimtrain's cluster fault settings.
    'recovery_timeout_secs', 'termination_grace_secs', 'chief_timeout_secs',
    'snapshot_interval_secs',
]
_DEFAULT_RECOVERY_TIMEOUT_SECS = 300
_DEFAULT_TERMINATION_GRACE_SECS = 25
_DEFAULT_CHIEF_TIMEOUT_SECS = 300
# The cluster fault settings, which share their names with deploy_config's, and defaults.
FAULT_TIMEOUT_DEFAULTS = {'recovery_timeout_secs': _DEFAULT_RECOVERY_TIMEOUT_SECS,
                          'termination_grace_secs': _DEFAULT_TERMINATION_GRACE_SECS,
                          'chief_timeout_secs': _DEFAULT_CHIEF_TIMEOUT_SECS}
# deploy_config.snapshot_interval_secs's default, which the same RunConfig field shares.
DEFAULT_SNAPSHOT_INTERVAL_SECS = 5.0


class TaskType(object):
  MASTER = 'master'
  PS = 'ps'
  WORKER = 'worker'
  CHIEF = 'chief'
  EVALUATOR = 'evaluator'


def _validate_device_fn(device_fn):
  if device_fn is None:
    return
  if not callable(device_fn):
    raise ValueError('device_fn must be callable with exactly one argument "op".')
  try:
    params = list(inspect.signature(device_fn).parameters)
  except (TypeError, ValueError):
    return
  if params != ['op']:
    raise ValueError('device_fn must be callable with exactly one argument "op".')


def _validate_properties(config):
  """Raises ValueError for out-of-range settings (tf.estimator's messages)."""
  def check(name, is_valid, message):
    value = getattr(config, '_' + name)
    if value is not None and not is_valid(value):
      raise ValueError(message)

  check('model_dir', lambda d: d, 'model_dir should be non-empty')
  check('save_summary_steps', lambda s: s >= 0, 'save_summary_steps should be >= 0')
  check('save_checkpoints_steps', lambda s: s >= 0, 'save_checkpoints_steps should be >= 0')
  check('save_checkpoints_secs', lambda s: s >= 0, 'save_checkpoints_secs should be >= 0')
  check('session_config', lambda sc: isinstance(sc, tf.compat.v1.ConfigProto),
        'session_config must be instance of ConfigProto')
  check('keep_checkpoint_max', lambda k: k >= 0, 'keep_checkpoint_max should be >= 0')
  check('keep_checkpoint_every_n_hours', lambda k: k > 0,
        'keep_checkpoint_every_n_hours should be > 0')
  check('log_step_count_steps', lambda s: s >= 0, 'log_step_count_steps should be >= 0')
  check('tf_random_seed', lambda s: isinstance(s, int) and not isinstance(s, bool),
        'tf_random_seed must be integer.')
  check('experimental_max_worker_delay_secs', lambda s: isinstance(s, int),
        'experimental_max_worker_delay_secs must be an integer if set.')
  check('session_creation_timeout_secs', lambda s: s > 0,
        'session_creation_timeout_secs should be > 0')
  check('protocol', lambda p: p in (None, 'grpc', 'grpc+verbs'),
        'protocol should be grpc or grpc+verbs')
  check('num_clones', lambda n: isinstance(n, int) and n >= 1,
        'num_clones must be an integer >= 1, got {}'.format(config._num_clones))
  for name in FAULT_TIMEOUT_DEFAULTS:
    # No None: every wait of a cluster task is bounded (the fault runtime's check).
    fault_runtime.check_timeout('RunConfig', name, getattr(config, '_' + name))
  fault_runtime.check_interval('RunConfig', 'snapshot_interval_secs',
                               config._snapshot_interval_secs)
  _validate_device_fn(config._device_fn)
  distribute.placement(config._eval_distribute, 'eval_distribute')
  train = distribute.placement(config._train_distribute, 'train_distribute')
  # A strategy chooses the training devices; clone settings would choose them again.
  clash = [name for name, given in [
      ('num_clones=%s' % config._num_clones, config._num_clones != 1),
      ('clone_on_cpu=True', config._clone_on_cpu),
      ('deployment_config', config._deployment_config is not None)] if given]
  if train is not None and clash:
    raise ValueError('%s and %s both choose the training devices; give one of them (a '
                     'MirroredStrategy over N devices trains N clones).' % (
                         train.describe(), ', '.join(clash)))


def _read_tf_config():
  """TF_CONFIG as a dict ({} when unset); ValueError names the bad value."""
  raw = os.environ.get('TF_CONFIG', '') or ''
  if not raw.strip():
    return {}
  try:
    tf_config = json.loads(raw)
  except ValueError as e:
    raise ValueError('TF_CONFIG is not valid JSON (%s), got %r' % (e, raw)) from None
  if not isinstance(tf_config, dict):
    raise ValueError('TF_CONFIG must be a JSON object with "cluster" and "task", got %s' % raw)
  return tf_config


def _model_dir_from_tf_config(tf_config, model_dir):
  """Merges TF_CONFIG["model_dir"] with the constructor's model_dir."""
  if 'model_dir' not in tf_config:
    return model_dir
  from_config = tf_config['model_dir']
  if not from_config:
    raise ValueError('model_dir in TF_CONFIG cannot be empty string.')
  if model_dir and model_dir != from_config:
    raise ValueError(
        '`model_dir` provided in RunConfig construct, if set, must have the same value as '
        'the model_dir in TF_CONFIG. model_dir: {}\nTF_CONFIG["model_dir"]: {}.\n'.format(
            model_dir, from_config))
  return from_config


def _global_id(cluster, task_type, task_id):
  """Index of this task among all tasks: chief 0, other jobs by name, ps last."""
  if task_type == TaskType.EVALUATOR:
    return None
  jobs = cluster.cluster
  if not jobs:
    return 0
  order = [j for j in ('chief', 'master') if j in jobs]
  order += sorted(j for j in jobs if j not in ('chief', 'master', 'ps', 'evaluator'))
  order += ['ps'] if 'ps' in jobs else []
  offset = 0
  for job in order:
    if job == task_type:
      return offset + task_id
    offset += len(jobs[job])
  return None


def _cluster_property(name):
  """A read-only property showing the parsed TF_CONFIG's `name`."""
  return property(lambda self: getattr(self._cluster, name))


class RunConfig(object):
  """Configuration of an Estimator run; tf.estimator.RunConfig's names and defaults."""

  def __init__(self,
               model_dir=None,
               tf_random_seed=None,
               save_summary_steps=100,
               save_checkpoints_steps=_USE_DEFAULT,
               save_checkpoints_secs=_USE_DEFAULT,
               session_config=None,
               keep_checkpoint_max=5,
               keep_checkpoint_every_n_hours=10000,
               log_step_count_steps=100,
               train_distribute=None,
               device_fn=None,
               protocol=None,
               eval_distribute=None,
               experimental_distribute=None,
               experimental_max_worker_delay_secs=None,
               session_creation_timeout_secs=7200,
               checkpoint_save_graph_def=True,
               num_clones=1,
               clone_on_cpu=False,
               deployment_config=None,
               recovery_timeout_secs=_DEFAULT_RECOVERY_TIMEOUT_SECS,
               termination_grace_secs=_DEFAULT_TERMINATION_GRACE_SECS,
               chief_timeout_secs=_DEFAULT_CHIEF_TIMEOUT_SECS,
               snapshot_interval_secs=DEFAULT_SNAPSHOT_INTERVAL_SECS):
    """Constructs a RunConfig; see the module docstring.

    Args:
      model_dir: directory of checkpoints and event files (may come from
        TF_CONFIG["model_dir"]).
      tf_random_seed: graph-level random seed.
      save_summary_steps: write summaries every this many steps (0: never).
      save_checkpoints_steps: checkpoint every this many steps.
      save_checkpoints_secs: checkpoint every this many seconds (600 when
        neither cadence is given).
      session_config: a `tf.compat.v1.ConfigProto`.
      keep_checkpoint_max: checkpoints kept (0 or None: all).
      keep_checkpoint_every_n_hours: additionally keep one per this many hours.
      log_step_count_steps: log loss and steps/sec every this many steps.
      train_distribute: None, or a `tf.distribute.OneDeviceStrategy` (train on
        its device) or `MirroredStrategy` (one clone per device, as
        num_clones); other strategies raise ValueError (estimator/distribute.py).
      device_fn: `fn(op) -> device` for the whole graph.
      protocol: None, 'grpc' or 'grpc+verbs'.
      eval_distribute: None, or a OneDeviceStrategy or MirroredStrategy:
        evaluate() runs on the strategy's first device.
      experimental_distribute: ignored (kept for signature compatibility).
      experimental_max_worker_delay_secs: max start delay of non-chief workers.
      session_creation_timeout_secs: wait for the chief this long.
      checkpoint_save_graph_def: write graph.pbtxt and .meta files.
      num_clones: clones of the model_fn per training step (slimtrain).
      clone_on_cpu: place the clones on the CPU (slimtrain).
      deployment_config: a `model_deploy.DeploymentConfig` used instead of
        num_clones/clone_on_cpu (slimtrain).
      recovery_timeout_secs: a training task of a ps cluster that lost a ps
        exits 129 when it has no new session after this long (slimtrain).
      termination_grace_secs: after SIGTERM, the longest a task of a ps
        cluster takes to exit, and how long a ps serves for the chief's
        final checkpoint (slimtrain).
      chief_timeout_secs: a worker or ps of a ps cluster exits 129 when the
        chief's port stays closed this long (slimtrain).
      snapshot_interval_secs: asynchronous training with 2 or more ps: the
        chief copies each ps's variables onto the next ps this often, and a
        lost ps is restored from that copy (0: off; slimtrain).

    Raises:
      ValueError: on invalid values or a malformed TF_CONFIG.
    """
    if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_steps = None
      save_checkpoints_secs = _DEFAULT_SAVE_CHECKPOINTS_SECS
    elif save_checkpoints_secs is _USE_DEFAULT:
      save_checkpoints_secs = None
    elif save_checkpoints_steps is _USE_DEFAULT:
      save_checkpoints_steps = None
    elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
      raise ValueError(_SAVE_CKPT_ERR)

    tf_config = _read_tf_config()
    if 'service' in tf_config and not isinstance(tf_config['service'], dict):
      raise ValueError('If "service" is set in TF_CONFIG, it must be a dict. Given {}'.format(
          tf_config['service']))
    if hasattr(model_dir, '__fspath__'):
      model_dir = os.fspath(model_dir)
    if isinstance(model_dir, bytes):
      model_dir = model_dir.decode('utf-8')

    self._model_dir = _model_dir_from_tf_config(tf_config, model_dir)
    self._tf_random_seed = tf_random_seed
    self._save_summary_steps = save_summary_steps
    self._save_checkpoints_steps = save_checkpoints_steps
    self._save_checkpoints_secs = save_checkpoints_secs
    self._session_config = session_config
    self._keep_checkpoint_max = keep_checkpoint_max
    self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self._log_step_count_steps = log_step_count_steps
    self._train_distribute = train_distribute
    self._device_fn = device_fn
    self._protocol = protocol
    self._eval_distribute = eval_distribute
    self._experimental_distribute = experimental_distribute
    self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
    self._session_creation_timeout_secs = session_creation_timeout_secs
    self._checkpoint_save_graph_def = checkpoint_save_graph_def
    self._num_clones = num_clones
    self._clone_on_cpu = clone_on_cpu
    self._deployment_config = deployment_config
    self._recovery_timeout_secs = recovery_timeout_secs
    self._termination_grace_secs = termination_grace_secs
    self._chief_timeout_secs = chief_timeout_secs
    self._snapshot_interval_secs = snapshot_interval_secs
    _validate_properties(self)
    self._init_cluster(tf_config)

  def _init_cluster(self, tf_config):
    """Reads the cluster and task from TF_CONFIG via deployment.cluster."""
    self._cluster = cluster_lib.ClusterConfig.from_tf_config(
        {'TF_CONFIG': json.dumps(tf_config)} if tf_config else {})
    self._service = tf_config.get('service')
    eval_master = tf_config.get('eval_session_master')
    self._evaluation_master = eval_master or ''
    if self._session_config is None and self._cluster.is_distributed:
      self._session_config = self._cluster.session_config()

  @property
  def cluster(self):
    """The `deployment.cluster.ClusterConfig` parsed from TF_CONFIG (slimtrain)."""
    return self._cluster

  cluster_spec = _cluster_property('cluster_spec')

  @property
  def evaluation_master(self):
    return self._evaluation_master

  is_chief = _cluster_property('is_chief')

  master = _cluster_property('master')

  num_ps_replicas = _cluster_property('num_ps_tasks')

  num_worker_replicas = _cluster_property('num_worker_replicas')

  task_id = _cluster_property('task_index')

  task_type = _cluster_property('task_type')

  @property
  def global_id_in_cluster(self):
    return _global_id(self._cluster, self.task_type, self.task_id)

  @property
  def service(self):
    return self._service

  @property
  def model_dir(self):
    return self._model_dir

  @property
  def tf_random_seed(self):
    return self._tf_random_seed

  @property
  def save_summary_steps(self):
    return self._save_summary_steps

  @property
  def save_checkpoints_steps(self):
    return self._save_checkpoints_steps

  @property
  def save_checkpoints_secs(self):
    return self._save_checkpoints_secs

  @property
  def session_config(self):
    return self._session_config

  @property
  def keep_checkpoint_max(self):
    return self._keep_checkpoint_max

  @property
  def keep_checkpoint_every_n_hours(self):
    return self._keep_checkpoint_every_n_hours

  @property
  def log_step_count_steps(self):
    return self._log_step_count_steps

  @property
  def train_distribute(self):
    return self._train_distribute

  @property
  def eval_distribute(self):
    return self._eval_distribute

  @property
  def experimental_distribute(self):
    return self._experimental_distribute

  @property
  def device_fn(self):
    return self._device_fn

  @property
  def protocol(self):
    return self._protocol

  @property
  def experimental_max_worker_delay_secs(self):
    return self._experimental_max_worker_delay_secs

  @property
  def session_creation_timeout_secs(self):
    return self._session_creation_timeout_secs

  @property
  def checkpoint_save_graph_def(self):
    return self._checkpoint_save_graph_def

  def _train_placement(self):
    """The train_distribute strategy's `distribute.Placement` (None without one)."""
    return distribute.placement(self._train_distribute, 'train_distribute')

  @property
  def num_clones(self):
    """Clones per training step (slimtrain; deployment_config's or train_distribute's)."""
    if self._deployment_config is not None:
      return self._deployment_config.num_clones
    placement = self._train_placement()
    return placement.num_replicas if placement else self._num_clones

  @property
  def clone_on_cpu(self):
    """Whether the clones run on CPU (slimtrain; a MirroredStrategy over CPUs: True)."""
    placement = self._train_placement()
    if placement is not None and placement.num_replicas > 1:
      return placement.on_cpu
    return self._clone_on_cpu

  @property
  def recovery_timeout_secs(self):
    """Seconds a training task may take to rebuild its session after a lost ps (slimtrain)."""
    return self._recovery_timeout_secs

  @property
  def termination_grace_secs(self):
    """Seconds from SIGTERM to the exit of a task of a ps cluster (slimtrain)."""
    return self._termination_grace_secs

  @property
  def chief_timeout_secs(self):
    """Seconds a worker or ps of a ps cluster waits for a lost chief (slimtrain)."""
    return self._chief_timeout_secs

  @property
  def snapshot_interval_secs(self):
    """Seconds between the chief's copies of each ps shard onto another ps; 0: off (slimtrain)."""
    return self._snapshot_interval_secs

  @property
  def deployment_config(self):
    """The `DeploymentConfig` for train(): the one given, or one from num_clones.

    The built one places variables like the rest of the Estimator graph: with
    ps tasks in TF_CONFIG they go round-robin to the ps job. A MirroredStrategy
    as train_distribute gives one clone on each of its devices.
    """
    if self._deployment_config is not None:
      return self._deployment_config
    from deployment import model_deploy  # Imported late: tf_slim is heavy.
    num_ps = self.num_ps_replicas if self.task_type != TaskType.EVALUATOR else 0
    placement = self._train_placement()
    clone_devices = None
    if placement is not None and placement.num_replicas > 1:
      clone_devices = list(placement.devices)
    return model_deploy.DeploymentConfig(
        num_clones=self.num_clones, clone_on_cpu=self.clone_on_cpu,
        num_ps_tasks=num_ps, clone_devices=clone_devices,
        worker_job_name='%s/task:%d' % (self.task_type, self.task_id) if num_ps else 'worker')

  def __deepcopy__(self, memo):
    """Copies the settings; the parsed cluster (which may hold a running server) is shared."""
    new = copy.copy(self)
    new._session_config = copy.deepcopy(self._session_config, memo)
    return new

  def replace(self, **kwargs):
    """Returns a copy with the given properties replaced.

    Only the properties in `_DEFAULT_REPLACEABLE_LIST` may be replaced;
    giving one checkpoint cadence clears the other.

    Raises:
      ValueError: for a property that cannot be replaced, or both cadences.
    """
    for key in kwargs:
      if key not in _DEFAULT_REPLACEABLE_LIST:
        raise ValueError('Replacing {} is not supported. Allowed properties are {}.'.format(
            key, _DEFAULT_REPLACEABLE_LIST))
    steps = kwargs.get('save_checkpoints_steps')
    secs = kwargs.get('save_checkpoints_secs')
    if steps is not None and secs is not None:
      raise ValueError(_SAVE_CKPT_ERR)
    new_copy = copy.copy(self)
    if steps is not None:
      new_copy._save_checkpoints_secs = None
    if secs is not None:
      new_copy._save_checkpoints_steps = None
    for key, value in kwargs.items():
      setattr(new_copy, '_' + key, value)
    _validate_properties(new_copy)
    return new_copy

  def __repr__(self):
    keys = ['model_dir', 'tf_random_seed', 'save_summary_steps', 'save_checkpoints_steps',
            'save_checkpoints_secs', 'keep_checkpoint_max', 'log_step_count_steps',
            'num_clones', 'task_type', 'task_id', 'is_chief', 'master']
    return 'RunConfig(%s)' % ', '.join('%s=%r' % (k, getattr(self, k)) for k in keys)
