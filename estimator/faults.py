"""The Estimator's side of the fault runtime: RunConfig in, `deployment` runtime out.

Cluster faults are met by one runtime for both training paths
(`deployment.fault_runtime`, `deployment.monitored_training`;
docs/fault_tolerance.md). This module only translates Estimator terms:
`fault_settings` maps a RunConfig's fields onto the runtime's
`FaultSettings` (errors name the RunConfig field), and the functions below
call the runtime with them.

    loss, any_step = faults.run_training(config, model_dir, spec, hooks,
                                         chief_hooks, 100, 100)
    # raises faults.TrainingPreempted (143) after SIGTERM,
    # faults.TaskFailed (129) for a peer lost after the last step
"""

from core import logs as logging

from builders import deploy_config_builder
from deployment import fault_runtime
from deployment import monitored_training
from protos import pipeline_pb2
from estimator import run_config as run_config_lib

TrainingPreempted = fault_runtime.TrainingPreempted
TaskFailed = fault_runtime.TaskFailed
sigterm_heard = fault_runtime.sigterm_heard

# The RunConfig fields a pipeline's deploy_config may set (same names there).
_SHARED_FIELDS = {'recovery_timeout_secs': 'recovery', 'termination_grace_secs':
                  'termination_grace', 'chief_timeout_secs': 'chief',
                  'snapshot_interval_secs': 'snapshot_interval'}
# Their RunConfig defaults: a RunConfig value other than these was set in code.
_RUN_CONFIG_DEFAULTS = dict(run_config_lib.FAULT_TIMEOUT_DEFAULTS,
                            snapshot_interval_secs=run_config_lib.DEFAULT_SNAPSHOT_INTERVAL_SECS)


def fault_settings(config):
  """The `fault_runtime.FaultSettings` of a RunConfig (source 'RunConfig').

  Raises:
    ValueError: naming the RunConfig field that is not a positive number of seconds.
  """
  def field(name):
    return fault_runtime.check_timeout('RunConfig', name, getattr(config, name))
  return fault_runtime.FaultSettings(
      startup=config.session_creation_timeout_secs, chief=field('chief_timeout_secs'),
      termination_grace=field('termination_grace_secs'),
      # Not a RunConfig field (the Estimator has no sync replicas): deploy_config's default.
      replica=pipeline_pb2.DeployConfig().replica_timeout_secs,
      recovery=field('recovery_timeout_secs'), source='RunConfig',
      snapshot_interval=fault_runtime.check_interval(
          'RunConfig', 'snapshot_interval_secs', config.snapshot_interval_secs))


def uses_cluster_faults(config):
  """Whether a training task of `config` runs the fault runtime: a chief, master or
  worker of a cluster with ps tasks."""
  return (config.cluster.is_distributed and config.num_ps_replicas > 0 and
          config.task_type in ('chief', 'master', 'worker'))


def apply_deploy_config_timeouts(run_config, deploy_config):
  """The RunConfig with the fault settings a pipeline's `deploy_config` sets (checked).

  A field the file leaves out keeps the RunConfig's value, and a RunConfig
  value other than the default was set in code, which wins.
  """
  timeouts = deploy_config_builder.cluster_timeouts(deploy_config)
  changes = {name: getattr(timeouts, key) for name, key in _SHARED_FIELDS.items()
             if deploy_config.HasField(name) and
             getattr(run_config, name) == _RUN_CONFIG_DEFAULTS[name]}
  return run_config.replace(**changes) if changes else run_config


def run_training(config, model_dir, spec, hooks, chief_hooks, save_summary_steps,
                 log_step_count_steps):
  """Runs `spec.train_op` until a hook stops it; a task of a ps cluster survives faults."""
  faults = None
  if uses_cluster_faults(config):
    settings = fault_settings(config)
    # A master runs its evaluations inside a step (after a save): no step deadline.
    faults = fault_runtime.TaskFaults(settings, config.cluster, config.master,
                                      config.is_chief,
                                      watch_steps=config.task_type != 'master')
    logging.info('training task of a ps cluster: a lost ps is recovered within '
                 'RunConfig.recovery_timeout_secs=%d; SIGTERM ends it within '
                 'RunConfig.termination_grace_secs=%d', settings.recovery,
                 settings.termination_grace)
  return monitored_training.train(
      spec.train_op, spec.loss, spec.scaffold, model_dir, hooks, chief_hooks,
      config.master, config.is_chief, config.session_config,
      config.session_creation_timeout_secs, save_summary_steps, log_step_count_steps,
      faults=faults, save_graph_def=config.checkpoint_save_graph_def)


def serve_ps(server, config):
  """Runs a ps task of a `train_and_evaluate` cluster until training is over."""
  fault_runtime.serve_ps(server, config.cluster, fault_settings(config))


def signal_preempted(server, config):
  """Tells the ps tasks that this training task stopped on SIGTERM."""
  if server is not None:
    fault_runtime.signal_preempted(server.target, config.cluster, fault_settings(config))
