"""Sync replicas that stopped delivering gradients: found, named, and the job ended.

TF's `SyncReplicasOptimizer` counts gradients, not replicas: when a worker
dies, the others either block for good waiting for its gradients or go on
without it on leftover tokens, and nothing says which worker is gone. Here
each replica stamps, on the global step's ps, the local step its gradients
carry, and bumps a heartbeat counter; every task runs a `ReplicaMonitor`
that reads both, logs the missing replicas by name and, after
`deploy_config.replica_timeout_secs`, ends the task retryable (the chief
first checkpoints and tells the ps tasks why). A replica removed on purpose
(a scale-down of a resizable job) records that it leaves
(`ReplicaMonitor.leave`), and no monitor waits for it; its next delivered
gradients, if it comes back, clear that.

    progress = replica_watch.ReplicaProgress(
        ['/job:chief/task:0', '/job:worker/task:0'], global_step.device)
    train_op = ...  # sync_optimizer.apply_gradients(...)
    stamp = progress.stamp_delivery('/job:worker/task:0', sync_optimizer, gradients)
    monitor = replica_watch.ReplicaMonitor.for_task(progress, global_step, faults)
    monitor.start(sess)   # before every step, as the trainer's TrainStepRunner does

Differs on purpose: the original had no such watch (a missing replica was
silent, and a closed token queue ended training as if it were done).
"""

import re
import threading
import time

from core import logs as logging
import tensorflow as tf

from deployment import exit_codes
from deployment import fault_tolerance


class _Stamps(object):
  """One bare int64 resource variable per replica on `device`, named `prefix` + replica."""

  def __init__(self, prefix, replica_names, device):
    self.handles = {}
    for name in replica_names:
      variable_name = prefix + re.sub(r'[^A-Za-z0-9]+', '_', name)
      self.handles[name] = tf.raw_ops.VarHandleOp(
          dtype=tf.int64, shape=[], shared_name=variable_name, name=variable_name)
    self._names = list(replica_names)
    self._initialized = [tf.raw_ops.VarIsInitializedOp(resource=self.handles[n])
                         for n in self._names]
    self._reads = [tf.raw_ops.ReadVariableOp(resource=self.handles[n], dtype=tf.int64)
                   for n in self._names]

  def read(self, sess, options):
    """{replica name: value, or None if never assigned}."""
    initialized = sess.run(self._initialized, options=options)
    reads = [r for r, ok in zip(self._reads, initialized) if ok]
    values = iter(sess.run(reads, options=options) if reads else [])
    return {name: int(next(values)) if ok else None
            for name, ok in zip(self._names, initialized)}


class ReplicaProgress(object):
  """Per sync replica, on the ps: the step it last delivered gradients for, and a heartbeat.

  The delivery stamp is the local step its gradients carry (what the
  accumulators compare with the global step). The heartbeat is a counter its
  `ReplicaMonitor` bumps every poll, so a replica blocked in a step (waiting
  for its token) is told apart from a dead or cut-off one. Both are bare
  resource variables (no collection): savers, initialisers and the ready
  check never see them, each replica creates its own with its first
  assignment, and one never assigned reads as None.

  Args:
    replica_names: every training task, e.g. ['/job:chief/task:0',
      '/job:worker/task:0'].
    device: where the stamps live (the global step's ps).
  """

  def __init__(self, replica_names, device):
    self.replica_names = list(replica_names)
    self._device = device
    with tf.compat.v1.device(device):
      self._delivered = _Stamps('slimtrain_replica_delivered', self.replica_names, device)
      self._alive = _Stamps('slimtrain_replica_alive', self.replica_names, device)
      # 1 once a replica left the job on purpose (a scale-down); 0 again when it delivers.
      self._left = _Stamps('slimtrain_replica_left', self.replica_names, device)
      self._beat_value = tf.compat.v1.placeholder(tf.int64, [], name='replica_heartbeat')
      self._beats = {name: tf.raw_ops.AssignVariableOp(resource=handle, value=self._beat_value)
                     for name, handle in self._alive.handles.items()}
      self._leave = {name: tf.raw_ops.AssignVariableOp(
          resource=handle, value=tf.constant(1, tf.int64)) for name, handle in
                     self._left.handles.items()}

  def stamp(self, replica_name, step, after):
    """An op recording that `replica_name` delivered gradients for `step`.

    Args:
      replica_name: one of `replica_names`.
      step: the global step the gradients were computed at (a tensor).
      after: tensors (the gradients) the stamp waits for.

    Returns:
      The assignment op; run it with the train op.
    """
    with tf.compat.v1.device(self._device), tf.control_dependencies(after):
      return tf.group(
          tf.raw_ops.AssignVariableOp(resource=self._delivered.handles[replica_name],
                                      value=tf.cast(step, tf.int64)),
          tf.raw_ops.AssignVariableOp(resource=self._left.handles[replica_name],
                                      value=tf.constant(0, tf.int64)))

  def stamp_delivery(self, replica_name, sync_optimizer, gradients):
    """The op stamping the local step `sync_optimizer`'s gradients carry.

    Call it after `sync_optimizer.apply_gradients` (which creates that local
    step). It waits for the gradients, not for the token, so a step blocked
    on a missing replica is already stamped.

    Args:
      replica_name: this replica, one of `replica_names`.
      sync_optimizer: a `deployment.sync_replicas.SyncReplicasOptimizer`.
      gradients: this step's gradients (None entries are skipped).
    """
    return self.stamp(replica_name, sync_optimizer.local_step.read_value(),
                      after=[g for g in gradients if g is not None])

  def read(self, sess, options=None):
    """{replica name: last delivered step, or None if it never delivered}."""
    return self._delivered.read(sess, options)

  def heartbeats(self, sess, options=None):
    """{replica name: heartbeat counter, or None if it never beat}."""
    return self._alive.read(sess, options)

  def left(self, sess, options=None):
    """The replicas that left the job on purpose and have not delivered since."""
    return {name for name, flag in self._left.read(sess, options).items() if flag}

  def mark_left(self, sess, replica_name, options=None):
    """Records that `replica_name` leaves the job on purpose: no monitor waits for it."""
    sess.run(self._leave[replica_name], options=options)

  def beat(self, sess, replica_name, count, options=None):
    """Sets `replica_name`'s heartbeat counter to `count`."""
    sess.run(self._beats[replica_name], feed_dict={self._beat_value: count}, options=options)


def replica_log_interval(timeout_secs):
  """Seconds between "replicas missing" lines: 30, or a third of a shorter timeout."""
  return min(30.0, max(1.0, timeout_secs / 3.0))


class ReplicaMonitor(object):
  """Watches a sync-replicas job for replicas that stopped delivering gradients.

  A replica is missing when it has not delivered gradients for the current
  global step and its heartbeat stopped (dead or cut off; the others may go
  on without it on leftover tokens). While the global step stays put with
  late replicas that all still beat, the silent replicas are missing (one
  may hold the token a late one waits for), or else the late ones. The
  monitor logs the missing replicas every `replica_log_interval`; once one
  has been missing for `timeout_secs` it calls `on_timeout(message, sess)`
  (which ends the process). A replica that has not shown up at all (no
  gradients, no heartbeat) is not missing before `startup_secs` have passed.

  Args:
    progress: the graph's `ReplicaProgress`.
    global_step: the global step tensor.
    timeout_secs: deploy_config.replica_timeout_secs.
    on_timeout: callable(message, sess) run from the monitor's thread.
    final_step: the training's last step (None: no end); reaching it is not
      a stall.
    poll_secs: seconds between reads.
    replica_name: this task's replica, whose heartbeat the monitor bumps
      (None: no heartbeat).
    silent_secs: a heartbeat unchanged this long counts as stopped (default:
      5 polls, at least 10 s).
    startup_secs: deploy_config.startup_timeout_secs: a replica that has
      neither delivered nor beaten since the watch began on the session is
      still starting (a pod pulling its image, a worker building its graph),
      and counts as missing only once this long has passed (None: at once).
  """

  def __init__(self, progress, global_step, timeout_secs, on_timeout, final_step=None,
               poll_secs=2.0, replica_name=None, silent_secs=None, startup_secs=None):
    self._startup_secs = startup_secs
    self._watching_since = None
    self._progress = progress
    self._replica_name = replica_name
    self._beat_count = 0
    self._silent_secs = silent_secs or max(10.0, 5 * poll_secs)
    self._beats_seen = {}  # replica -> (counter, when it last changed)
    self._global_step = global_step
    self._timeout_secs = timeout_secs
    self._on_timeout = on_timeout
    self._final_step = final_step
    self._poll_secs = poll_secs
    self._stop = threading.Event()
    self._sess = None
    self._thread = None

  @classmethod
  def for_task(cls, progress, global_step, faults, final_step=None, saver=None,
               checkpoint_path=None):
    """The monitor of a training task: on timeout, save, tell the ps, exit retryable.

    Args:
      progress: the graph's `ReplicaProgress`.
      global_step: the graph's global step tensor.
      faults: the task's `TaskFaults` (timeout, `end_job`).
      final_step: the training's last step (0 or None: none).
      saver: the chief's `Saver`, to checkpoint the step reached; None for
        the other tasks.
      checkpoint_path: the checkpoint prefix for `saver`.

    Returns:
      A `ReplicaMonitor`.
    """
    def save(sess):
      # From the monitor's thread, whose default context is eager: enter the graph.
      with sess.graph.as_default():
        step = int(sess.run(global_step))
        path = saver.save(sess, checkpoint_path, global_step=step, write_meta_graph=False)
      logging.info('sync replicas: wrote checkpoint %s before exiting', path)

    def give_up(message, sess):
      def last_words(unused_message):
        if saver is not None:
          fault_tolerance.run_bounded(lambda: save(sess), fault_tolerance.LAST_WORDS_SECS,
                                      'the final checkpoint')
        if faults.end_job is not None:
          faults.end_job(message)
      fault_tolerance.exit_after(exit_codes.RETRYABLE, message, last_words)
    startup = faults.settings.startup if faults.settings is not None else None
    return cls(progress, global_step, faults.replica_timeout_secs, give_up,
               final_step=final_step or None, replica_name=faults.replica_name,
               startup_secs=startup)

  def start(self, sess):
    """Watches through `sess` from a daemon thread, started by the first call.

    Call it before every step: when the Supervisor rebuilt the session (an
    error ended the old one), the watch moves to the new session and its
    clocks start again, so the time spent rebuilding never counts as a
    replica's silence.
    """
    self._sess = sess
    if self._thread is None:
      self._thread = threading.Thread(target=self._loop, name='ReplicaMonitor', daemon=True)
      self._thread.start()

  def stop(self):
    self._stop.set()

  def leave(self, sess):
    """Stops watching and records that this task's replica leaves the job on purpose.

    The other tasks' monitors then skip it instead of ending the job after
    `replica_timeout_secs`; its next delivered gradients (a rejoin) clear it.
    """
    self.stop()
    if self._replica_name is None:
      return
    try:
      self._progress.mark_left(sess, self._replica_name,
                               options=tf.compat.v1.RunOptions(timeout_in_ms=10000))
      logging.info('sync replicas: %s leaves the job', self._replica_name)
    except (tf.errors.OpError, RuntimeError) as e:
      logging.warning('sync replicas: could not record that %s leaves: %s',
                      self._replica_name, getattr(e, 'message', e))

  def _silent(self, heartbeats, now):
    """Replicas whose heartbeat has not changed for `silent_secs`."""
    silent = set()
    for name, count in heartbeats.items():
      seen = self._beats_seen.get(name)
      if seen is None or seen[0] != count:
        self._beats_seen[name] = seen = (count, now)
      if count is None or now - seen[1] >= self._silent_secs:
        silent.add(name)
    return silent

  def _read(self, sess, options):
    """(global step, replicas late for it, silent replicas); raises on read errors.

    While the startup grace lasts, replicas still starting are in neither list.
    """
    if self._replica_name is not None:
      self._beat_count += 1
      self._progress.beat(sess, self._replica_name, self._beat_count, options=options)
    step = int(sess.run(self._global_step, options=options))
    stamps = self._progress.read(sess, options=options)
    heartbeats = self._progress.heartbeats(sess, options=options)
    now = time.time()
    silent = self._silent(heartbeats, now)
    skipped = self._progress.left(sess, options=options)
    if self._startup_secs and now - self._watching_since < self._startup_secs:
      skipped |= {name for name, stamp in stamps.items()
                  if stamp is None and heartbeats.get(name) is None}
    late = [name for name, stamp in stamps.items()
            if (stamp is None or stamp < step) and name not in skipped]
    return step, late, silent - skipped

  def _report_read_failure(self, error, failing_since, last_log):
    """Logs, at most every log interval, that the progress reads keep failing.

    Returns:
      (failing since, last log time), updated.
    """
    now = time.time()
    failing_since = failing_since or now
    interval = replica_log_interval(self._timeout_secs)
    if now - failing_since >= interval and now - last_log >= interval:
      logging.warning("sync replicas: the replica watch cannot read the replicas' progress "
                      'for %.0f s (%s: %s); it names missing replicas once it can again',
                      now - failing_since, type(error).__name__,
                      getattr(error, 'message', error))
      last_log = now
    return failing_since, last_log

  def _missing(self, step, late, silent, now):
    """([replicas to name], since when they are missing) or ([], None).

    A late and silent replica is gone, even if the others go on without it;
    late replicas that still beat are missing only while the step is stuck.
    """
    if step != self._last_step or (self._final_step and step >= self._final_step):
      self._last_step, self._stalled_since = step, now
    gone = [name for name in late if name in silent]
    self._gone_since = {name: self._gone_since.get(name, now) for name in gone}
    if self._final_step and step >= self._final_step:
      return [], None
    if gone:
      return gone, min(self._gone_since.values())
    if late and now > self._stalled_since:
      # A replica that delivered for this step and then went silent can hold
      # the token a late, beating replica waits for: it is the one stalling.
      dead = [name for name in self._progress.replica_names if name in silent]
      return dead or late, self._stalled_since
    return [], None

  def _loop(self):
    options = tf.compat.v1.RunOptions(timeout_in_ms=10000)
    watched = None
    while not self._stop.wait(self._poll_secs):
      sess = self._sess
      if sess is not watched:
        watched, last_log = sess, time.time()
        self._watching_since = last_log
        self._last_step, self._stalled_since, self._gone_since = None, last_log, {}
        self._beats_seen, failing_since = {}, None
      try:
        step, late, silent = self._read(sess, options)
      except (tf.errors.OpError, RuntimeError) as e:
        # A lost ps is the recovery's business; a closed session is replaced by
        # start(). Neither is silent for long: the job may be stalled meanwhile.
        failing_since, last_log = self._report_read_failure(e, failing_since, last_log)
        continue
      failing_since = None
      now = time.time()
      missing, since = self._missing(step, late, silent, now)
      if not missing:
        last_log = now
        continue
      message = ('sync replicas: no gradients from %s for global step %d in %.0f s '
                 '(deploy_config.replica_timeout_secs=%d)' % (
                     ', '.join(missing), step, now - since, self._timeout_secs))
      if now - since >= self._timeout_secs and not self._stop.is_set():
        self._on_timeout(message + '; exiting retryable', sess)
        return
      interval = replica_log_interval(self._timeout_secs)
      if now - since >= interval and now - last_log >= interval:
        logging.warning('%s', message)
        last_log = now
