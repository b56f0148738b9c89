"""Cluster faults in the Estimator's training loop: a lost ps, and SIGTERM.

`Estimator.train` of a chief or worker in a cluster with ps tasks (TF_CONFIG)
runs its steps through `run_training`, which meets two faults the way
`python -m trainer.train` does (docs/fault_tolerance.md):

* A ps task dies and comes back on its address. The failing step raises
  `UnavailableError`/`AbortedError`; `MonitoredSession` closes the broken
  session and creates a new one. Around that, this module logs
  `lost /job:ps/task:0 at global step N ...` and arms
  `RunConfig.recovery_timeout_secs` (`fault_tolerance.Recovery`), closes the
  broken session within a few seconds (TensorFlow's close may wait for the
  dead ps without a deadline), waits until every ps accepts connections,
  and lets the chief restore the latest checkpoint into the fresh ps
  variables while a worker polls every second until the chief has done so.
  The first new session logs `recovered from a lost peer: restored global
  step M, ...`. A ps that stays away ends the task with exit code 129
  (retryable) naming it; the chief first tells the ps tasks it can still
  reach that the job failed.
* A ps cut off by the network fails no step; the steps stop. When none has
  finished for `RunConfig.recovery_timeout_secs` (`deployment.step_watch`),
  the task exits 129 naming the ps tasks it cannot reach; the chief first
  tells the others that the job failed. A partition that heals sooner costs
  only the wait. From creating a session to its first step (a ps that hangs
  before training starts) the deadline is `session_creation_timeout_secs +
  recovery_timeout_secs`.
* The chief lost: a worker whose chief's port stays closed for
  `RunConfig.chief_timeout_secs` exits 129 instead of training on with
  nobody left to save its work.
* SIGTERM (a pod deletion). The step in flight finishes, the chief writes
  `model.ckpt-N` at the step it reached (`SIGTERM: wrote checkpoint ...`),
  the session closes, and `Estimator.train` raises `TrainingPreempted`, a
  `SystemExit` with code 143. Whatever still runs `termination_grace_secs`
  after the signal (a step blocked on a dead peer) is ended by a watchdog:
  143, or 129 for a chief that did not get to write its checkpoint.

Usage (Estimator._train_with_estimator_spec does this):

    loss, any_step = faults.run_training(
        config, model_dir, spec, worker_hooks, chief_hooks,
        save_summary_steps=100, log_step_count_steps=100)
    # raises faults.TrainingPreempted after SIGTERM (exit code 143)

and a program that runs `train_and_evaluate` on a cluster ends with:

    try:
      tfe.train_and_evaluate(estimator, train_spec, eval_spec)
    except SystemExit as e:  # TrainingPreempted 143, TaskFailed 129
      fault_tolerance.exit_process(e.code)
    fault_tolerance.exit_process(0)

(`exit_process` uses `os._exit` when a session close was left running in a
thread, which could otherwise hold up the interpreter's exit.)

Differs on purpose from tf.estimator's `MonitoredTrainingSession`:

* its recovery retried forever and said nothing but TensorFlow's generic
  "An error was raised ... a new session will be created"; here the lost
  task and the step are named and the recovery has a deadline;
* a worker waited 30 s between checks for the chief's initialisation after
  a recovery; here it checks every second;
* `Session.close()` of a broken or finished session is bounded (5 s while
  recovering, `termination_grace_secs` at the end);
* SIGTERM killed the task mid-step with no checkpoint; here the chief saves
  the step reached and the task exits 143;
* a partitioned ps blocked every task for as long as the partition lasted,
  and a worker trained on without its chief; here both have a deadline.

Only clusters with ps tasks use this loop; local training and clusters
without ps tasks run `MonitoredTrainingSession` exactly as before.
"""

import threading

from absl import logging
import tensorflow as tf

from core import paths
from deployment import cluster_runtime
from deployment import exit_codes
from deployment import fault_tolerance
from deployment import step_watch
from estimator import run_config as run_config_lib

# How long closing the session of a lost ps may take before it is left behind.
RECOVERY_CLOSE_SECS = 5.0
# How often a worker checks whether the chief has (re)initialised the model.
WORKER_POLL_SECS = 1.0
# Set once a training task of this process heard SIGTERM.
_sigterm_heard = threading.Event()


def sigterm_heard():
  """Whether a training task of this process was told to stop by SIGTERM.

  The end of a preempted training is not the end of training: a master skips
  its final evaluation and export then.
  """
  return _sigterm_heard.is_set()


class TrainingPreempted(SystemExit):
  """Training stopped after SIGTERM; `code` is 143 (`exit_codes.PREEMPTED`).

  A `SystemExit`, so a program that does not catch it exits with 143 and
  its scheduler restarts the job.

  Args:
    message: what happened (the step, the checkpoint written).
    step: the global step reached, or None (a ps task).
    checkpoint_path: the checkpoint the chief wrote, or None.
  """

  def __init__(self, message, step=None, checkpoint_path=None):
    super().__init__(exit_codes.PREEMPTED)
    self.message = message
    self.step = step
    self.checkpoint_path = checkpoint_path

  def __str__(self):
    return self.message


class TaskFailed(SystemExit):
  """A cluster task gave up on a lost peer; `code` is 129 (`exit_codes.RETRYABLE`)."""

  def __init__(self, message):
    super().__init__(exit_codes.RETRYABLE)
    self.message = message

  def __str__(self):
    return self.message


def uses_cluster_faults(config):
  """Whether a training task of `config` (a RunConfig) runs the fault-tolerant loop.

  Args:
    config: a `tfe.RunConfig`.

  Returns:
    True for a chief, master or worker of a cluster with ps tasks.
  """
  return (config.cluster.is_distributed and config.num_ps_replicas > 0 and
          config.task_type in ('chief', 'master', 'worker'))


class TaskFaults(object):
  """The recovery deadline and the SIGTERM state of one training task.

  Args:
    config: the Estimator's `RunConfig` (a task of a cluster with ps tasks).
  """

  def __init__(self, config):
    self.cluster = config.cluster
    self.master = config.master
    self.is_chief = config.is_chief
    self.termination_grace_secs = config.termination_grace_secs
    self.peers = cluster_runtime.ps_peers(self.cluster)
    # The chief's last words before a retryable exit: the ps tasks learn the job failed.
    self.end_job = cluster_runtime.job_failed_notice(self.master, self.cluster)
    self.recovery = fault_tolerance.Recovery(
        config.recovery_timeout_secs, last_words=self.end_job if self.is_chief else None,
        chief=None if self.is_chief else cluster_runtime.chief_address(self.cluster),
        peers=self.peers, setting='RunConfig.recovery_timeout_secs')
    # A ps cut off by the network fails no step: the steps just stop. A
    # master runs its evaluations inside a step (after a save), so it has none.
    self.step_watch = None if config.task_type == 'master' else step_watch.StepWatch(
        config.recovery_timeout_secs, self.peers, 'RunConfig.recovery_timeout_secs',
        last_words=self.end_job if self.is_chief else None)
    self.chief_timeout_secs = config.chief_timeout_secs
    # From creating a session to its first step (a hung ps blocks it silently):
    # as long as tf.estimator lets a worker wait for its session, plus a step.
    self._session_start_timeout = (
        config.session_creation_timeout_secs + config.recovery_timeout_secs,
        'RunConfig.session_creation_timeout_secs + recovery_timeout_secs')
    self.last_step = None
    self.sigterm = threading.Event()
    self._sigterm_grace = fault_tolerance.SigtermGrace(
        self.termination_grace_secs, 'RunConfig.termination_grace_secs', self.is_chief,
        self._note_sigterm)
    self.preempted = None
    logging.info('training task of a ps cluster: a lost ps is recovered within '
                 'RunConfig.recovery_timeout_secs=%d; SIGTERM ends it within '
                 'RunConfig.termination_grace_secs=%d', config.recovery_timeout_secs,
                 self.termination_grace_secs)

  def step_done(self, step, ending=False):
    """Training reached `step` (`ending`: its last); restarts the step watch's clock."""
    self.last_step = step
    if self.step_watch is not None:
      self.step_watch.step_done(step, ending=ending)

  def session_starting(self):
    """A session is about to be created: its first step must finish in time."""
    if self.step_watch is not None:
      self.step_watch.session_starting(*self._session_start_timeout)

  def stop_step_watch(self):
    if self.step_watch is not None:
      self.step_watch.stop()

  def watch_chief(self):
    """A worker exits 129 once its chief is gone; returns the event that stops the watch."""
    if self.is_chief:
      return threading.Event()
    return fault_tolerance.exit_when_chief_lost(
        self.cluster, self.chief_timeout_secs, self.chief_timeout_secs, chief_seen=True,
        setting='RunConfig.chief_timeout_secs')

  def handling_sigterm(self):
    """A context: while active, SIGTERM asks for a checkpoint and a stop instead of killing."""
    return self._sigterm_grace.handling()

  @property
  def checkpoint_written(self):
    """Whether the chief's preemption checkpoint is written (then SIGTERM exits 143)."""
    return self._sigterm_grace.checkpoint_written

  @checkpoint_written.setter
  def checkpoint_written(self, written):
    self._sigterm_grace.checkpoint_written = written

  def _note_sigterm(self):
    self.sigterm.set()
    _sigterm_heard.set()

  def wrap_session(self, session):
    """Makes `session` (a raw tf Session) note lost peers and close within a bound.

    The instance's `run` and `close` are replaced (only this object's):
    `MonitoredSession` calls them through its wrappers, so this is the one
    place that sees the failing step and the close of the broken session.

    Args:
      session: a `tf.compat.v1.Session` just created.

    Returns:
      `session`.
    """
    run, close = session.run, session.close

    def run_noting_lost_peers(*args, **kwargs):
      try:
        return run(*args, **kwargs)
      except fault_tolerance.PEER_ERRORS as e:
        self.stop_step_watch()  # The recovery has its own deadline.
        if not self.recovery.recovering:
          self.recovery.lost(e, self.last_step)
        raise

    def bounded_close():
      session.close = close  # Session.__del__ may call it again: the plain close then.
      timeout = RECOVERY_CLOSE_SECS if self.recovery.recovering else self.termination_grace_secs
      fault_tolerance.close_session(close, timeout, [name for name, _ in self.peers])

    session.run = run_noting_lost_peers
    session.close = bounded_close
    return session


class _RecoveringSessionCreator(tf.compat.v1.train.SessionCreator):
  """Creates the task's sessions; after a lost peer, first waits for the ps tasks.

  Args:
    creator: the `SessionCreator` of the task (chief or worker).
    faults: the task's `TaskFaults`.
  """

  def __init__(self, creator, faults):
    self._creator = creator
    self._faults = faults

  def create_session(self):
    faults = self._faults
    if faults.recovery.recovering:
      # Bounded by the recovery deadline, which lost() armed.
      faults.recovery.wait_for_peers()
      logging.info('the ps tasks accept connections again; creating a new session')
    else:
      faults.session_starting()
    return faults.wrap_session(self._creator.create_session())


class _WorkerSessionCreator(tf.compat.v1.train.SessionCreator):
  """A worker's session once the chief has initialised the model, checked every second.

  tf's WorkerSessionCreator checks every 30 s, which after a recovery costs
  up to 30 s of the worker's training for nothing.
  """

  def __init__(self, scaffold, master, config, max_wait_secs):
    self._scaffold = scaffold
    self._master = master
    self._config = config
    self._max_wait_secs = max_wait_secs
    self._manager = None

  def create_session(self):
    self._scaffold.finalize()
    if self._manager is None:
      self._manager = tf.compat.v1.train.SessionManager(
          local_init_op=self._scaffold.local_init_op,
          local_init_feed_dict=self._scaffold.local_init_feed_dict,
          ready_op=self._scaffold.ready_op,
          ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
          graph=tf.compat.v1.get_default_graph(), recovery_wait_secs=WORKER_POLL_SECS)
    return self._manager.wait_for_session(self._master, config=self._config,
                                          max_wait_secs=self._max_wait_secs)


class _FaultHook(tf.compat.v1.train.SessionRunHook):
  """Follows the global step; ends a recovery; after SIGTERM, checkpoints and stops.

  Args:
    faults: the task's `TaskFaults`.
    scaffold: the training Scaffold (its saver writes the preemption checkpoint).
    model_dir: where the chief writes it.
  """

  def __init__(self, faults, scaffold, model_dir):
    self._faults = faults
    self._scaffold = scaffold
    self._model_dir = model_dir
    self._global_step = None

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def after_create_session(self, session, coord):
    del coord
    step = int(session.run(self._global_step))
    if self._faults.recovery.recovering:
      self._faults.recovery.resumed(step)
    if self._faults.last_step is None:
      self._faults.last_step = step

  def before_run(self, run_context):
    return tf.compat.v1.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    faults = self._faults
    faults.step_done(int(run_values.results))
    if not faults.sigterm.is_set() or faults.preempted is not None:
      return
    session = run_context.session
    step = int(session.run(self._global_step))
    path = None
    if faults.is_chief:
      path = self._saver().save(session, paths.join(self._model_dir, 'model.ckpt'),
                                global_step=step)
      faults.checkpoint_written = True
      logging.info('SIGTERM: wrote checkpoint %s, stopping', path)
    faults.preempted = TrainingPreempted(
        'training preempted by SIGTERM at global step %d%s' % (
            step, '; checkpoint %s' % path if path else ''), step, path)
    run_context.request_stop()

  def _saver(self):
    if self._scaffold.saver is not None:
      return self._scaffold.saver
    return tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)[0]


def _monitored_session(config, model_dir, scaffold, faults, hooks, chief_hooks,
                       save_summary_steps, log_step_count_steps):
  """What `MonitoredTrainingSession` builds, with this module's creators and hook.

  Args:
    config: the RunConfig.
    model_dir: checkpoints and summaries.
    scaffold: the training Scaffold.
    faults: the task's `TaskFaults`.
    hooks: hooks of every training task.
    chief_hooks: hooks of the chief only.
    save_summary_steps: the chief's summary cadence (None or 0: none).
    log_step_count_steps: the chief's steps/sec cadence (None or 0: none).

  Returns:
    A `tf.compat.v1.train.MonitoredSession`.
  """
  session_config = config.session_config
  all_hooks = [_FaultHook(faults, scaffold, model_dir)]
  if config.is_chief:
    creator = tf.compat.v1.train.ChiefSessionCreator(
        scaffold=scaffold, master=config.master, config=session_config,
        checkpoint_dir=model_dir)
    all_hooks += list(chief_hooks)
    if log_step_count_steps:
      all_hooks.append(tf.compat.v1.train.StepCounterHook(
          output_dir=model_dir, every_n_steps=log_step_count_steps))
    if save_summary_steps:
      all_hooks.append(tf.compat.v1.train.SummarySaverHook(
          scaffold=scaffold, save_steps=save_summary_steps, output_dir=model_dir))
  else:
    creator = _WorkerSessionCreator(scaffold, config.master, session_config,
                                    config.session_creation_timeout_secs)
  all_hooks += list(hooks)
  return tf.compat.v1.train.MonitoredSession(
      session_creator=_RecoveringSessionCreator(creator, faults), hooks=all_hooks)


def _run_plain(config, model_dir, spec, hooks, chief_hooks, save_summary_steps,
               log_step_count_steps):
  """tf.estimator's loop: `MonitoredTrainingSession`, for local training and ps-less clusters."""
  loss, any_step_done = None, False
  with tf.compat.v1.train.MonitoredTrainingSession(
      master=config.master, is_chief=config.is_chief, checkpoint_dir=model_dir,
      scaffold=spec.scaffold, hooks=hooks, chief_only_hooks=chief_hooks,
      save_checkpoint_secs=0, save_summaries_steps=save_summary_steps,
      config=config.session_config, max_wait_secs=config.session_creation_timeout_secs,
      log_step_count_steps=log_step_count_steps,
      save_graph_def=config.checkpoint_save_graph_def) as session:
    while not session.should_stop():
      _, loss = session.run([spec.train_op, spec.loss])
      any_step_done = True
  return loss, any_step_done


def run_training(config, model_dir, spec, hooks, chief_hooks, save_summary_steps,
                 log_step_count_steps):
  """Runs `spec.train_op` until a hook stops it; in a ps cluster, survives faults.

  Without ps tasks (`uses_cluster_faults` False) this is tf.estimator's
  `MonitoredTrainingSession` loop, unchanged.

  Args:
    config: the Estimator's RunConfig.
    model_dir: the Estimator's model_dir.
    spec: the TRAIN `EstimatorSpec` (train_op, loss, scaffold).
    hooks: hooks of every training task.
    chief_hooks: hooks of the chief only.
    save_summary_steps: the chief's summary cadence.
    log_step_count_steps: the chief's steps/sec cadence.

  Returns:
    (the loss of the last step or None, whether any step ran).

  Raises:
    TrainingPreempted: after SIGTERM, once the chief's checkpoint is written
      and the session closed.
  """
  if not uses_cluster_faults(config):
    return _run_plain(config, model_dir, spec, hooks, chief_hooks, save_summary_steps,
                      log_step_count_steps)
  faults = TaskFaults(config)
  loss, any_step_done = None, False
  stop_watching_chief = faults.watch_chief()
  with faults.handling_sigterm():
    try:
      with _monitored_session(config, model_dir, spec.scaffold, faults, hooks, chief_hooks,
                              save_summary_steps, log_step_count_steps) as session:
        while not session.should_stop():
          _, loss = session.run([spec.train_op, spec.loss])
          any_step_done = True
        if faults.last_step is not None:
          # The final checkpoint and the close come next: bounded alike.
          faults.step_done(faults.last_step, ending=True)
    except fault_tolerance.PEER_ERRORS as e:
      # MonitoredSession recovers inside its steps only; a peer lost in the
      # hooks' end (the final checkpoint) or in the close gets here.
      _fail_outside_steps(faults, e)
    finally:
      faults.stop_step_watch()
      stop_watching_chief.set()
  if faults.preempted is not None:
    raise faults.preempted
  return loss, any_step_done


def _fail_outside_steps(faults, error):
  """A peer was lost after the last step: exit retryable rather than with a traceback.

  Args:
    faults: the task's `TaskFaults`.
    error: the `UnavailableError`/`AbortedError`.

  Raises:
    TaskFailed: naming the lost task; a restart resumes from the latest checkpoint.
  """
  message = ('lost %s at global step %s after the last training step (the final '
             'checkpoint or the close of the session; %s: %s); exiting retryable, a restart '
             'resumes from the latest checkpoint' % (
                 fault_tolerance.lost_tasks(error.message), faults.last_step,
                 type(error).__name__,
                 fault_tolerance.error_summary(error.message)))
  logging.error('%s', message)
  if faults.is_chief:
    fault_tolerance.run_bounded(lambda: faults.end_job(message),
                                fault_tolerance.LAST_WORDS_SECS, 'telling the ps tasks')
  raise TaskFailed(message) from None


def apply_deploy_config_timeouts(run_config, deploy_config):
  """The RunConfig with the fault timeouts a pipeline's `deploy_config` sets.

  `recovery_timeout_secs`, `termination_grace_secs` and `chief_timeout_secs`
  mean the same on both paths. A field the file leaves out keeps the RunConfig's value, and a
  RunConfig value other than the default was set in code, which wins.

  Args:
    run_config: a `tfe.RunConfig`.
    deploy_config: a `pipeline_pb2.DeployConfig`.

  Returns:
    A `tfe.RunConfig` (`run_config` itself when nothing changes).
  """
  changes = {name: getattr(deploy_config, name)
             for name, default in run_config_lib.FAULT_TIMEOUT_DEFAULTS.items()
             if deploy_config.HasField(name) and getattr(run_config, name) == default}
  return run_config.replace(**changes) if changes else run_config


def serve_ps(server, config):
  """Runs a ps task of a `train_and_evaluate` cluster until training is over.

  Args:
    server: the task's started `tf.distribute.Server`.
    config: its RunConfig.

  Raises:
    TrainingPreempted: after SIGTERM, once the training tasks stopped or
      `RunConfig.termination_grace_secs` passed.
    TaskFailed: when the chief was lost past its timeout, or said the job failed.
  """
  try:
    code = cluster_runtime.serve_until_training_done(
        server, config.cluster, chief_timeout_secs=config.chief_timeout_secs,
        termination_grace_secs=config.termination_grace_secs, chief_seen=True,
        config_name='RunConfig')
  except (cluster_runtime.ChiefLostError, cluster_runtime.JobFailedError) as e:
    logging.error('%s', e)
    raise TaskFailed(str(e)) from None
  if code == exit_codes.PREEMPTED:
    raise TrainingPreempted('ps task %d: stopped after SIGTERM' % config.task_id)


def signal_preempted(server, config):
  """Tells the ps tasks that this training task stopped on SIGTERM (bounded by the grace)."""
  if server is not None and config.num_ps_replicas:
    cluster_runtime.signal_training_done(
        server.target, config.cluster, status=cluster_runtime.PREEMPTED,
        timeout_secs=config.termination_grace_secs)
