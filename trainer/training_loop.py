"""The per-step function of the legacy trainer (a `train_step_fn` as `slim.learning.train` takes).

`slim.learning.train_step` runs three `Session.run` calls per step (the train
op, then `should_log`, then `should_stop`) and logs only seconds per step.
`TrainStepRunner` runs one call per step, decides logging and stopping in
Python from the global step it fetched, and adds what long jobs need:

* progress every N steps: step, loss, steps/sec, examples/sec and an ETA;
* a clear error naming the step when the loss or the gradient norm becomes
  inf or NaN (the variables are left as they were);
* preemption: after SIGTERM, the chief writes a checkpoint at the current
  step and training stops with `TrainingPreempted`; with
  `TaskFaults.termination_grace_secs` the process exits once that grace has
  passed, whatever it is blocked in (a step waiting for a dead peer, a
  `Session.close()`);
* faults, through the one fault runtime of both training paths
  (`deployment.fault_runtime`): each step runs through its `BoundedSession`,
  so a step failing on a lost peer starts the recovery deadline; the first
  step of a rebuilt session logs what was restored, and a sync-replicas
  monitor (or, on the chief of asynchronous training, the copies of the ps
  shards of `deployment.shard_snapshots`) runs beside the steps; in a
  cluster, a step that does not finish
  within `TaskFaults.step_timeout_secs` (a partitioned ps) ends the task
  retryable. `session_for(sess)` is that `BoundedSession`:
  `trainer.supervised_loop` closes each session through it, so the close
  after the last step is bounded by the termination grace and names the ps
  tasks it waits for when slow (`slim.learning.train` takes the runner too,
  but closes its sessions itself, without a bound).

Usage (trainer.trainer.run_training does this):

    runner = TrainStepRunner(number_of_steps=1000, examples_per_step=32,
                             log_every_n_steps=10, is_chief=True,
                             saver=saver, checkpoint_path=train_dir + '/model.ckpt')
    with runner.handle_sigterm():
      supervised_loop.run_supervised(train_op, train_dir, step_fn=runner,
                                     bounded_session_fn=runner.session_for, ...)
    runner.raise_if_preempted()
"""

import threading
import time

from core import logs as logging
import tensorflow as tf

from deployment import exit_codes
from deployment import fault_runtime
from trainer import numerics

NAN_LOSS_MESSAGE = 'LossTensor is inf or nan.'

# Exit code of `python -m trainer.train` after a preemption checkpoint:
# 128 + SIGTERM, so schedulers see a terminated (not a finished) task.
PREEMPTED_EXIT_CODE = exit_codes.PREEMPTED
# Training stopped on SIGTERM (the runtime's, shared with the Estimator path).
TrainingPreempted = fault_runtime.TrainingPreempted


class NanLossError(tf.errors.InvalidArgumentError):
  """The total loss or the gradient norm became inf or NaN; names the step."""


def _numerics_failure(error_message):
  """Returns which numerics check an error message comes from, or None."""
  for message in (NAN_LOSS_MESSAGE, numerics.GRADIENT_NORM_MESSAGE):
    if message in error_message:
      return message
  return None


def _format_duration(seconds):
  seconds = int(max(seconds, 0))
  hours, rest = divmod(seconds, 3600)
  minutes, seconds = divmod(rest, 60)
  return '%d:%02d:%02d' % (hours, minutes, seconds)


class TrainStepRunner:
  """A step function for `supervised_loop` (or `slim.learning.train`): one run per step.

  Args:
    number_of_steps: stop once the global step reaches it; None = forever.
    examples_per_step: examples one step of this worker consumes (for
      examples/sec); 0 to leave that column out.
    log_every_n_steps: log progress every N global steps; 0 disables.
    is_chief: only the chief writes the preemption checkpoint.
    saver: a `tf.compat.v1.train.Saver` used for the preemption checkpoint.
    checkpoint_path: prefix of checkpoints, e.g. `train_dir/model.ckpt`.
    on_finish: optional callable(sess, step) run once when training ends by
      reaching `number_of_steps` or by preemption.
    step_after_update: optional tensor reading the global step after the
      train op ran (a control dependency on it). Without it the step fetched
      beside the train op may be the value before the update, and training
      would run one step past `number_of_steps`.
    faults: optional `deployment.fault_runtime.TaskFaults`.
    replica_monitor: optional `deployment.replica_watch.ReplicaMonitor`, started with
      the first step, moved to each session the Supervisor rebuilds, and stopped
      when training ends.
    startup_delay_steps: a non-chief task waits before its first step until
      the global step reaches this (tf-slim's option of the same name, done
      here so that every step read re-arms the session-start deadline).
    snapshots: optional `deployment.shard_snapshots.ShardSnapshots` (the
      chief's): its copies start with the first step of each session and
      stop when training ends or the session is given up.
    on_new_session: optional callable(sess) run before the first step of
      each session (the chief's `sync_replicas.ReplicaResizer`, a sync
      joiner's announcement).
    mixed_precision_check: optional (update_skipped, loss_scale) tensors
      (`core.numerics.mixed_precision_check`), fetched with every step; a step
      whose update the dynamic loss scale skipped is logged as a warning and
      counted in `skipped_updates`.
  """

  def __init__(self, number_of_steps=None, examples_per_step=0,
               log_every_n_steps=10, is_chief=True, saver=None,
               checkpoint_path=None, on_finish=None, step_after_update=None,
               faults=None, replica_monitor=None, startup_delay_steps=0, snapshots=None,
               on_new_session=None, mixed_precision_check=None):
    self._number_of_steps = number_of_steps or None
    self._examples_per_step = examples_per_step
    self._log_every_n_steps = log_every_n_steps
    self._is_chief = is_chief
    self._saver = saver
    self._checkpoint_path = checkpoint_path
    self._on_finish = on_finish
    self._step_after_update = step_after_update
    self._faults = faults or fault_runtime.TaskFaults()
    self._replica_monitor = replica_monitor
    self._snapshots = snapshots
    self._on_new_session = on_new_session
    self._last_session = None  # The session `on_new_session` last ran for.
    self._startup_delay_steps = startup_delay_steps if not is_chief else 0
    self._sigterm = self._faults.sigterm_grace(is_chief, self.request_preemption)
    self._session = None  # The BoundedSession of the Supervisor's current session.
    self._preempt_requested = threading.Event()
    self._preempted = None
    self._window_start = None
    self._mixed_check = [t for t in mixed_precision_check or () if t is not None]
    self.skipped_updates = 0
    self.last_step = None
    self.last_loss = None

  def request_preemption(self):
    """Asks the loop to checkpoint and stop after the current step."""
    self._preempt_requested.set()

  def handle_sigterm(self):
    """A context: while active, SIGTERM requests preemption instead of killing.

    With a termination grace, SIGTERM also starts the countdown at once (from
    a watching thread, even while a step blocks the main thread).
    """
    return self._sigterm.handling()

  def raise_if_preempted(self):
    """Raises `TrainingPreempted` if the loop stopped because of SIGTERM."""
    if self._preempted is not None:
      raise self._preempted

  def _log_progress(self, step, loss):
    now = time.time()
    if self._window_start is None:
      self._window_start = (now, step)
      return
    start_time, start_step = self._window_start
    if step - start_step < self._log_every_n_steps or now <= start_time:
      return
    steps_per_sec = (step - start_step) / (now - start_time)
    parts = ['global step %d' % step, 'loss = %.4f' % loss,
             '%.2f steps/sec' % steps_per_sec]
    if self._examples_per_step:
      parts.append('%.1f examples/sec' % (steps_per_sec * self._examples_per_step))
    if self._number_of_steps and steps_per_sec > 0:
      parts.append('ETA %s' % _format_duration(
          (self._number_of_steps - step) / steps_per_sec))
    logging.info(', '.join(parts))
    self._window_start = (now, step)

  def watch_session_start(self, startup_timeout_secs):
    """Bounds starting a session up to its first finished step (a ps may hang meanwhile).

    Args:
      startup_timeout_secs: deploy_config.startup_timeout_secs; the step
        timeout is added to it (a first step may wait for starting replicas).
    """
    self._faults.session_starting(startup_timeout_secs)

  def _wait_for_startup_delay(self, sess, global_step):
    """Waits until the global step reaches `startup_delay_steps` (or the last step).

    The peers answering a step read is progress: it re-arms the
    session-start deadline, however slowly the chief's steps go.
    """
    target = min(self._startup_delay_steps, self._number_of_steps or self._startup_delay_steps)
    while not self._preempt_requested.is_set():
      if int(sess.run(global_step)) >= target:
        return
      self._faults.still_starting()
      time.sleep(1.0)

  def stop_watching(self):
    """Stops the step deadline and the snapshot copies (training ended, or the
    session is being rebuilt)."""
    self._faults.stop_step_watch()
    if self._snapshots is not None:
      self._snapshots.stop()

  def _finish(self, sess, step):
    # The final checkpoint and the close still need the ps: bound them too.
    self._faults.step_done(step, ending=True)
    if self._preempted is not None and not self._is_chief:
      self._faults.leave()  # Before the close, which may hang on a busy ps.
    if self._replica_monitor is not None:
      if self._preempted is not None and not self._is_chief:
        self._replica_monitor.leave(sess)  # removed: nobody is to wait for this replica
      else:
        self._replica_monitor.stop()
    if self._snapshots is not None:
      self._snapshots.stop()  # Before the final checkpoint and the close.
    logging.info('training finished at global step %d', step)
    if self._on_finish is not None:
      self._on_finish(sess, step)

  def __call__(self, sess, train_op, global_step, train_step_kwargs):
    del train_step_kwargs  # Logging and stopping are decided here instead.
    if self.last_step is None and self._faults.sigterm_before_loop():
      return self._leave_before_first_step(sess, global_step)
    self._watch_session(sess, global_step)
    if self.last_step is None and self._number_of_steps:
      # A task (re)started after the end must not push the step past it.
      step = int(sess.run(global_step))
      if step >= self._number_of_steps:
        self.last_step = step
        self._finish(sess, step)
        return float('nan'), True
    if self.last_step is None and self._startup_delay_steps:
      self._wait_for_startup_delay(sess, global_step)
    try:
      # A lost peer starts the recovery deadline (BoundedSession.run).
      loss, step, *mixed = self.session_for(sess).run(
          [train_op, self._step_after_update
           if self._step_after_update is not None else global_step] + self._mixed_check)
    except tf.errors.InvalidArgumentError as e:
      cause = _numerics_failure(str(e.message))
      if cause is None:
        raise
      step = sess.run(global_step)
      raise NanLossError(
          e.node_def, e.op,
          '%s Training stopped at global step %d; variables were not updated '
          'by the failing step and the last checkpoint is intact.' %
          (cause, step)) from None
    self.last_step, self.last_loss = int(step), float(loss)
    if mixed and mixed[0]:
      self._report_skipped_update(mixed[1:])
    self._faults.step_done(self.last_step)
    if self._log_every_n_steps:
      self._log_progress(self.last_step, self.last_loss)
    if self._preempt_requested.is_set():
      path = self._checkpoint_path
      if self._is_chief and self._saver is not None and path:
        path = self._saver.save(sess, path, global_step=self.last_step)
        self._sigterm.checkpoint_written = True
        logging.info('SIGTERM: wrote checkpoint %s, stopping', path)
      self._preempted = TrainingPreempted(
          'training preempted by SIGTERM at global step %d; checkpoint %s' % (
              self.last_step, path), self.last_step, path)
      self._finish(sess, self.last_step)
      return loss, True
    if self._number_of_steps and self.last_step >= self._number_of_steps:
      self._finish(sess, self.last_step)
      return loss, True
    return loss, False

  def _leave_before_first_step(self, sess, global_step):
    """A joining worker removed by SIGTERM before its training loop began stops
    without a step (`TaskFaults.leaving_on_sigterm`).

    It has nothing of its own to save, and it would otherwise join the rounds
    (a sync joiner announces itself before its first step) only to leave them
    again. Any other task heard SIGTERM in the loop and takes its step first: a
    sync chief stopped with its whole job needs its workers' gradients for the
    step it checkpoints.
    """
    step = int(sess.run(global_step))
    self._preempted = TrainingPreempted(
        '%s (global step %d)' % (fault_runtime.SIGTERM_BEFORE_FIRST_STEP, step), step)
    self._finish(sess, step)
    return float('nan'), True

  def _report_skipped_update(self, loss_scale):
    """Logs a step whose update mixed precision's dynamic loss scale skipped."""
    self.skipped_updates += 1
    logging.warning(
        'global step %d: mixed precision skipped this update (a gradient was inf or NaN '
        'at the loss scale used)%s; %d update%s skipped so far', self.last_step,
        '; the loss scale is now %g' % loss_scale[0] if loss_scale else '',
        self.skipped_updates, '' if self.skipped_updates == 1 else 's')

  def session_for(self, sess):
    """The runtime's `BoundedSession` around `sess`, one per session: the steps
    run through it, and `trainer.supervised_loop` closes the session with it.

    A lost peer leaves the step deadline running: `trainer.run_training`
    stops it once the Supervisor let go of the broken session.
    """
    if self._session is None or self._session.session is not sess:
      self._session = fault_runtime.BoundedSession(
          sess, self._faults, last_step_fn=lambda: self.last_step,
          stop_step_watch_on_loss=False)
    return self._session

  def _watch_session(self, sess, global_step):
    """Before a step: end a recovery in progress, start the replica monitor and the
    snapshots, run `on_new_session` once per session."""
    recovery = self._faults.recovery
    if recovery is not None and recovery.recovering:
      recovery.resumed(int(sess.run(global_step)))
    if self._replica_monitor is not None:
      self._replica_monitor.start(sess)
    if self._snapshots is not None:
      self._snapshots.start(sess)  # Once per session: the thread copies beside the steps.
    if self._on_new_session is not None and sess is not self._last_session:
      self._last_session = sess
      self._on_new_session(sess)

