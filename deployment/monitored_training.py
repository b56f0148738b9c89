"""A `MonitoredSession` training loop that meets cluster faults (the Estimator's).

The Estimator runs its steps in a `MonitoredSession`; in a cluster with ps
tasks `train` gives that session the fault runtime of
`deployment.fault_runtime` (the same `TaskFaults` the legacy trainer uses):

* a lost ps: the failing step starts the recovery deadline
  (`BoundedSession.run`), `MonitoredSession` closes the broken session
  (bounded to a few seconds) and asks for a new one, which first waits until
  every ps accepts connections; the chief restores the latest checkpoint
  into the variables of the ps that came back empty only
  (`deployment.shard_restore`; the other ps tasks keep theirs), from the
  snapshot another ps holds when there is one (`deployment.shard_snapshots`,
  `snapshot_interval_secs`), a worker polls every second until it has;
  the first new session logs the step restored and the steps lost;
* a ps cut off by the network: the step deadline (`TaskFaults.step_watch`);
  from creating a session to its first step, the startup timeout plus it;
* SIGTERM: the step in flight finishes, the chief writes `model.ckpt-N`
  (`SIGTERM: wrote checkpoint ...`), the session closes and `train` raises
  `fault_runtime.TrainingPreempted` (143);
* a peer lost after the last step (the final checkpoint, the close):
  `fault_runtime.TaskFailed` (129).

Usage (estimator.faults does this for a RunConfig):

    faults = fault_runtime.TaskFaults(settings, cluster, master, is_chief)
    loss, any_step = monitored_training.train(
        spec.train_op, spec.loss, spec.scaffold, model_dir, hooks, chief_hooks,
        master=master, is_chief=is_chief, session_config=None,
        session_creation_timeout_secs=7200, save_summary_steps=100,
        log_step_count_steps=100, faults=faults)

Without `faults` it is tf.estimator's `MonitoredTrainingSession` loop.

Differs on purpose from `MonitoredTrainingSession`: its recovery retried
forever with a generic message and restored every variable (rolling back
the ps tasks that never failed), a worker checked every 30 s for the
chief's model, closing a broken session had no deadline, and SIGTERM killed
the task mid-step.
"""

import threading

from core import logs as logging
import tensorflow as tf

from core import paths
from deployment import fault_runtime
from deployment import fault_tolerance
from deployment import shard_restore

# How often a worker checks whether the chief has (re)initialised the model.
WORKER_POLL_SECS = 1.0


class _RecoveringSessionCreator(tf.compat.v1.train.SessionCreator):
  """Creates the task's sessions; after a lost peer, first waits for the ps tasks.

  Args:
    creator: the `SessionCreator` of the task (chief or worker).
    faults: the task's `fault_runtime.TaskFaults`.
  """

  def __init__(self, creator, faults):
    self._creator = creator
    self._faults = faults

  def create_session(self):
    faults = self._faults
    if faults.recovery.recovering:
      # Bounded by the recovery deadline, which the failing step armed.
      faults.recovery.wait_for_peers()
      logging.info('the ps tasks accept connections again; creating a new session')
    else:
      faults.session_starting()
    return fault_runtime.BoundedSession(self._creator.create_session(), faults)


def _session_manager(scaffold, **kwargs):
  """A `SessionManager` with the finalized `scaffold`'s init and ready ops, in the default graph."""
  return tf.compat.v1.train.SessionManager(
      local_init_op=scaffold.local_init_op,
      local_init_feed_dict=scaffold.local_init_feed_dict,
      ready_op=scaffold.ready_op,
      ready_for_local_init_op=scaffold.ready_for_local_init_op,
      graph=tf.compat.v1.get_default_graph(), **kwargs)


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
      self._manager = _session_manager(self._scaffold, recovery_wait_secs=WORKER_POLL_SECS)
    return self._manager.wait_for_session(self._master, config=self._config,
                                          max_wait_secs=self._max_wait_secs)


class _ChiefSessionCreator(tf.compat.v1.train.SessionCreator):
  """The chief's sessions, as tf's ChiefSessionCreator, restoring by ps shard when it can.

  Each new session restored, it starts the copies of the ps shards
  (`restore_by_shard.snapshots`, when there are any) on that session.

  Args:
    scaffold, master, config, checkpoint_dir: as `ChiefSessionCreator`'s.
    restore_by_shard: a `deployment.shard_restore.ShardRestore` over the
      scaffold saver's variables, or None for the saver's full restore.
  """

  def __init__(self, scaffold, master, config, checkpoint_dir, restore_by_shard=None):
    self._scaffold = scaffold
    self._master = master
    self._config = config
    self._checkpoint_dir = checkpoint_dir
    self._restore_by_shard = restore_by_shard
    self._manager = None

  def create_session(self):
    self._scaffold.finalize()
    if self._manager is None:
      self._manager = _session_manager(self._scaffold)
    saver = self._scaffold.saver
    snapshots = self._restore_by_shard and self._restore_by_shard.snapshots
    if snapshots is not None:
      snapshots.stop()  # The old session's copies end before the restore reads them.
    if self._restore_by_shard is not None:
      saver = self._restore_by_shard.saver_for(saver)
    session = self._manager.prepare_session(
        self._master, saver=saver, checkpoint_dir=self._checkpoint_dir, config=self._config,
        init_op=self._scaffold.init_op, init_feed_dict=self._scaffold.init_feed_dict,
        init_fn=self._scaffold.init_fn)
    if snapshots is not None:
      snapshots.start(session)
    return session

  def stop_snapshots(self):
    """Stops the copies of the ps shards (training is over or failed)."""
    snapshots = self._restore_by_shard and self._restore_by_shard.snapshots
    if snapshots is not None:
      snapshots.stop()


# The ops of SyncReplicasOptimizer's gradient accumulators.
_SYNC_REPLICAS_OPS = ('ConditionalAccumulator', 'ResourceConditionalAccumulator',
                      'SparseConditionalAccumulator')


def _shard_restore_for(scaffold, snapshot_interval_secs=0):
  """A ShardRestore for the chief, or None where only a full restore is right.

  With `snapshot_interval_secs` it also keeps snapshots of the ps shards.

  Full restore: a saver the model built over its own variable list (a
  shard restore could reach variables it leaves out), saveable objects
  (they have no ps of their own), and synchronous training (the replicas'
  gradients must again come from one consistent point).
  """
  graph = tf.compat.v1.get_default_graph()
  saver = scaffold.saver or next(iter(graph.get_collection(tf.compat.v1.GraphKeys.SAVERS)),
                                 None)
  # Saver keeps the var_list it was given; None means every global variable.
  if saver is not None and getattr(saver, '_var_list', None) is not None:
    return None
  if graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS):
    return None
  if any(op.type in _SYNC_REPLICAS_OPS for op in graph.get_operations()):
    return None
  return shard_restore.ShardRestore(tf.compat.v1.global_variables(),
                                    snapshot_interval_secs=snapshot_interval_secs)


class _FaultHook(tf.compat.v1.train.SessionRunHook):
  """Follows the global step; ends a recovery; after SIGTERM, checkpoints and stops.

  Args:
    faults: the task's `fault_runtime.TaskFaults`.
    stop: the `threading.Event` SIGTERM sets.
    scaffold: the training Scaffold (its saver writes the preemption checkpoint).
    model_dir: where the chief writes it.
  """

  def __init__(self, faults, stop, scaffold, model_dir):
    self._faults = faults
    self._stop = stop
    self._scaffold = scaffold
    self._model_dir = model_dir
    self._global_step = None
    self.preempted = None
    self.grace = None  # The task's SigtermGrace, set by `train`.

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
    if not self._stop.is_set() or self.preempted is not None:
      return
    session = run_context.session
    step = int(session.run(self._global_step))
    path = None
    if faults.is_chief:
      path = self._saver().save(session, paths.join(self._model_dir, 'model.ckpt'),
                                global_step=step)
      self.grace.checkpoint_written = True
      logging.info('SIGTERM: wrote checkpoint %s, stopping', path)
    self.preempted = fault_runtime.TrainingPreempted(
        'training preempted by SIGTERM at global step %d%s' % (
            step, '; checkpoint %s' % path if path else ''), step, path)
    run_context.request_stop()

  def _saver(self):
    if self._scaffold.saver is not None:
      return self._scaffold.saver
    return tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)[0]


def _run_steps(session, train_op, loss):
  """Runs `train_op` until the session stops or the input ends.

  The end of the input (`OutOfRangeError` from the step) ends training
  normally, as in tf.estimator: the session then closes as after a stop, so
  the hooks' `end` writes the final checkpoint. It is caught here rather than
  left to `MonitoredSession.__exit__`, which would swallow it and skip what
  follows the loop (the return value, the final checkpoint's bounds).

  Returns:
    (the loss of the last step or None, whether any step ran).
  """
  last_loss, any_step_done = None, False
  try:
    while not session.should_stop():
      _, last_loss = session.run([train_op, loss])
      any_step_done = True
  except tf.errors.OutOfRangeError:
    logging.info('the input ended; training stops here')
  return last_loss, any_step_done


def train(train_op, loss, scaffold, model_dir, hooks, chief_hooks, master, is_chief,
          session_config, session_creation_timeout_secs, save_summary_steps,
          log_step_count_steps, faults=None, save_graph_def=True):
  """Runs `train_op` until a hook stops it; with `faults`, survives cluster faults.

  Args:
    train_op: the training op.
    loss: the loss tensor fetched beside it.
    scaffold: the training `Scaffold`.
    model_dir: checkpoints and summaries.
    hooks: hooks of every training task.
    chief_hooks: hooks of the chief only.
    master: gRPC target of the task's server ('' in process).
    is_chief: whether this task initialises, checkpoints and summarises.
    session_config: a `ConfigProto` or None.
    session_creation_timeout_secs: how long a worker waits for the chief's model.
    save_summary_steps: the chief's summary cadence (None or 0: none).
    log_step_count_steps: the chief's steps/sec cadence (None or 0: none).
    faults: the task's `fault_runtime.TaskFaults` (a task of a ps cluster),
      or None for tf.estimator's `MonitoredTrainingSession` loop.
    save_graph_def: whether the chief writes graph.pbtxt (without `faults`).

  Returns:
    (the loss of the last step or None, whether any step ran).

  Raises:
    fault_runtime.TrainingPreempted: after SIGTERM, once the chief's
      checkpoint is written and the session closed.
    fault_runtime.TaskFailed: a peer lost after the last step.
  """
  if faults is None:
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=master, is_chief=is_chief, checkpoint_dir=model_dir, scaffold=scaffold,
        hooks=hooks, chief_only_hooks=chief_hooks, save_checkpoint_secs=0,
        save_summaries_steps=save_summary_steps, config=session_config,
        max_wait_secs=session_creation_timeout_secs,
        log_step_count_steps=log_step_count_steps, save_graph_def=save_graph_def) as session:
      return _run_steps(session, train_op, loss)
  stop = threading.Event()
  fault_hook = _FaultHook(faults, stop, scaffold, model_dir)
  fault_hook.grace = faults.sigterm_grace(is_chief, stop.set)
  all_hooks = [fault_hook]
  if is_chief:
    # After a lost ps, only its variables come from the checkpoint.
    creator = _ChiefSessionCreator(
        scaffold, master, session_config, model_dir,
        restore_by_shard=_shard_restore_for(scaffold, faults.snapshot_interval_secs))
    all_hooks += list(chief_hooks)
    if log_step_count_steps:
      all_hooks.append(tf.compat.v1.train.StepCounterHook(
          output_dir=model_dir, every_n_steps=log_step_count_steps))
    if save_summary_steps:
      all_hooks.append(tf.compat.v1.train.SummarySaverHook(
          scaffold=scaffold, save_steps=save_summary_steps, output_dir=model_dir))
  else:
    creator = _WorkerSessionCreator(scaffold, master, session_config,
                                    session_creation_timeout_secs)
  all_hooks += list(hooks)
  loss_value, any_step_done = None, False
  # The task's server has just agreed on the cluster with the chief's.
  stop_watching_chief = faults.watch_chief(chief_seen=True)
  with fault_hook.grace.handling():
    try:
      with tf.compat.v1.train.MonitoredSession(
          session_creator=_RecoveringSessionCreator(creator, faults),
          hooks=all_hooks) as session:
        loss_value, any_step_done = _run_steps(session, train_op, loss)
        if is_chief:
          creator.stop_snapshots()  # Before the final checkpoint and the close.
        if faults.last_step is not None:
          # The final checkpoint and the close come next: bounded alike.
          faults.step_done(faults.last_step, ending=True)
    except fault_tolerance.PEER_ERRORS as e:
      # MonitoredSession recovers inside its steps only; a peer lost in the
      # hooks' end (the final checkpoint) or in the close gets here.
      faults.fail_after_last_step(e)
    finally:
      if is_chief:
        creator.stop_snapshots()
      faults.stop_step_watch()
      stop_watching_chief.set()
  if fault_hook.preempted is not None:
    raise fault_hook.preempted
  return loss_value, any_step_done
