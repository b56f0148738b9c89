"""Turns a pipeline's `DeployConfig` into the settings a training run uses.

The legacy trainer (`trainer.train`) and the Estimator path
(`trainer.model_main`) read the same message through `build`, so one config
trains with the same number of clones either way:

    deploy_config {
      num_clones: 2           # -1: one per visible GPU
      clone_on_cpu: false
      ps_strategy: GREEDY
    }

    settings = deploy_config_builder.build(configs['deploy_config'],
                                           num_clones=FLAGS.num_clones)
    settings.num_clones          # 2 (a --num_clones flag, when given, wins)
    model_deploy.DeploymentConfig(num_clones=settings.num_clones,
                                  clone_on_cpu=settings.clone_on_cpu,
                                  **settings.deployment_options)
"""

import collections

import tensorflow as tf

from deployment import fault_runtime
from protos import pipeline_pb2

DeploySettings = collections.namedtuple(
    'DeploySettings', ['num_clones', 'clone_on_cpu', 'deployment_options'])

# Every timeout of a cluster task, in seconds: the fault runtime's settings
# (deployment/fault_runtime.py, docs/fault_tolerance.md).
ClusterTimeouts = fault_runtime.FaultSettings


def resolve_num_clones(num_clones):
  """Returns num_clones, with -1 meaning one clone per visible GPU (CPU: 1).

  Raises:
    ValueError: for 0 or a negative count other than -1.
  """
  if num_clones == -1:
    return max(1, len(tf.config.list_physical_devices('GPU')))
  if num_clones < 1:
    raise ValueError('num_clones must be positive or -1 (one per GPU), got %d'
                     % num_clones)
  return num_clones


def deployment_options(deploy_config):
  """The `DeploymentConfig` arguments beyond clones that a `DeployConfig` sets.

  Args:
    deploy_config: a `pipeline_pb2.DeployConfig`.

  Returns:
    A dict with `variable_update` and `ps_strategy` (lower-case enum names).
  """
  message = pipeline_pb2.DeployConfig
  return {
      'variable_update': message.VariableUpdate.Name(deploy_config.variable_update).lower(),
      'ps_strategy': message.PsStrategy.Name(deploy_config.ps_strategy).lower(),
  }


def build(deploy_config, num_clones=None, clone_on_cpu=None):
  """Builds the deployment settings of a training task.

  Args:
    deploy_config: a `pipeline_pb2.DeployConfig`.
    num_clones: a command-line override of `deploy_config.num_clones`, or None.
    clone_on_cpu: a command-line override of `deploy_config.clone_on_cpu`, or None.

  Returns:
    A `DeploySettings(num_clones, clone_on_cpu, deployment_options)` with
    num_clones resolved (-1 becomes the number of visible GPUs, at least 1).

  Raises:
    ValueError: if `deploy_config` is not a `DeployConfig`, or for a bad
      clone count.
  """
  if not isinstance(deploy_config, pipeline_pb2.DeployConfig):
    raise ValueError('deploy_config not of type pipeline_pb2.DeployConfig.')
  if num_clones is None:
    num_clones = deploy_config.num_clones
  if clone_on_cpu is None:
    clone_on_cpu = deploy_config.clone_on_cpu
  return DeploySettings(resolve_num_clones(num_clones), bool(clone_on_cpu),
                        deployment_options(deploy_config))


def placement_text(settings, deploy_config, num_clones=None, clone_on_cpu=None,
                   num_gpus=None):
  """The line a training task logs to say where its clones run, and why.

  Args:
    settings: the `DeploySettings` that `build` returned.
    deploy_config: the `pipeline_pb2.DeployConfig` it was built from.
    num_clones: the --num_clones flag (None: not given).
    clone_on_cpu: the --clone_on_cpu flag (None: not given).
    num_gpus: GPUs this process sees (default: counted).

  Returns:
    E.g. 'clones: 2 on GPU:0, GPU:1 (--noclone_on_cpu, overriding
    deploy_config.clone_on_cpu: true)'. A config that puts the clones on the
    CPU while GPUs are visible gets a hint: a pod given GPUs must use them
    (Kubernetes manifests of deployment.tfjob pass --noclone_on_cpu).
  """
  if num_gpus is None:
    num_gpus = len(tf.config.list_physical_devices('GPU'))
  if settings.clone_on_cpu:
    where = 'the CPU'
  else:
    where = ', '.join('GPU:%d' % i for i in range(settings.num_clones)) if num_gpus else (
        'the CPU (no GPU visible)')
  config_value = 'deploy_config.clone_on_cpu: %s' % str(deploy_config.clone_on_cpu).lower()
  if clone_on_cpu is None:
    why = config_value
  elif bool(clone_on_cpu) != deploy_config.clone_on_cpu:
    why = '--%sclone_on_cpu, overriding %s' % ('' if clone_on_cpu else 'no', config_value)
  else:
    why = '--%sclone_on_cpu' % ('' if clone_on_cpu else 'no')
  count = ('--num_clones=%d' % num_clones if num_clones is not None
           else 'deploy_config.num_clones: %d' % deploy_config.num_clones)
  text = 'clones: %d on %s (%s; %s)' % (settings.num_clones, where, why, count)
  if settings.clone_on_cpu and num_gpus:
    text += ('; %d GPU(s) visible and unused: pass --noclone_on_cpu to train on them'
             % num_gpus)
  return text


def cluster_timeouts(deploy_config):
  """The cluster timeouts a `DeployConfig` sets, checked.

  Args:
    deploy_config: a `pipeline_pb2.DeployConfig`.

  Returns:
    The `fault_runtime.FaultSettings(startup, chief, termination_grace,
    replica, recovery, snapshot_interval)` in seconds that both training
    paths' fault runtime takes (source 'deploy_config').

  Raises:
    ValueError: if `deploy_config` is not a `DeployConfig`, or a timeout is 0
      (every wait must be bounded and none may end at once), or the snapshot
      interval is negative or not finite, naming the field.
  """
  if not isinstance(deploy_config, pipeline_pb2.DeployConfig):
    raise ValueError('deploy_config not of type pipeline_pb2.DeployConfig.')
  fields = ('startup_timeout_secs', 'chief_timeout_secs', 'termination_grace_secs',
            'replica_timeout_secs', 'recovery_timeout_secs')
  return fault_runtime.FaultSettings(
      *[fault_runtime.check_timeout('deploy_config', name, getattr(deploy_config, name))
        for name in fields], source='deploy_config',
      snapshot_interval=fault_runtime.check_interval(
          'deploy_config', 'snapshot_interval_secs', deploy_config.snapshot_interval_secs))
