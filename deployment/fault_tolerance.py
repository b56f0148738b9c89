"""Bounded shutdown, dead sync replicas and lost peers: the pieces a cluster task needs.

A task of a multi-host job must never wait forever: a gRPC call to a dead ps
can block `Session.close()` for minutes, a sync-replicas step waits for
gradients a killed worker will never send, and a restarted ps leaves every
session that used it broken. This module holds what the trainer and the ps
loop use to turn each of those into a clear log line and an exit code of the
contract in `deployment.exit_codes`:

* `Watchdog` ends the process with a chosen code when a deadline passes,
  whatever the main thread is blocked in (a `Session.run`, a `close()`);
* `SignalWatch` notices SIGTERM at once from its own thread, even while the
  main thread is inside TensorFlow and Python handlers cannot run yet;
* `ReplicaProgress` stamps, on the ps, the global step each sync replica last
  delivered gradients for; `ReplicaMonitor` reads the stamps, logs which
  replicas are missing while the step is stuck and gives up after
  `deploy_config.replica_timeout_secs`;
* `Recovery` arms the `deploy_config.recovery_timeout_secs` deadline when a
  peer is lost and logs, once training runs again, which step was restored
  and how many steps were lost.

Usage (trainer.train and trainer.trainer do this):

    recovery = fault_tolerance.Recovery(timeout_secs=300)
    while True:
      try:
        return train_once()
      except fault_tolerance.PEER_ERRORS as e:
        recovery.lost(e, last_step)        # arms the deadline
        recovery.wait_for(ps_addresses)    # the ps is back (or exit retryable)
    # ... the runner calls recovery.resumed(step) after the first good step.

Differs on purpose from `MonitoredTrainingSession` (what tf.estimator users
had): the whole graph and session are rebuilt after a lost peer, not only the
session, so queues and readers start clean; and every recovery has a deadline
after which the task exits retryable instead of retrying forever.
"""

import contextlib
import os
import re
import signal
import socket
import sys
import threading
import time

from absl import logging
import tensorflow as tf

from deployment import exit_codes

# What a session reports when a peer died or restarted under it.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError)
# How long a Watchdog lets its last words (a checkpoint, a message to the ps) run.
_LAST_WORDS_SECS = 15.0
_TASK_RE = re.compile(r'/job:(\w+)/replica:\d+/task:(\d+)')


def exit_now(code, message):
  """Logs `message` and ends the process with `code` at once.

  `sys.exit` would wait for threads blocked inside TensorFlow (and for
  `Session.close()`); `os._exit` does not.
  """
  logging.error('%s', message)
  _exit(code)


def _exit(code):
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


def _run_bounded(function, timeout_secs, what):
  """Runs `function()` in a daemon thread; gives up waiting after `timeout_secs`."""
  def run():
    try:
      function()
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('%s failed: %s', what, e)
  thread = threading.Thread(target=run, name=what, daemon=True)
  thread.start()
  thread.join(timeout_secs)
  if thread.is_alive():
    logging.warning('%s did not finish within %.0f s; going on without it', what, timeout_secs)


def exit_after(code, message, last_words=None):
  """Runs `last_words()` (for at most 15 s), then `exit_now(code, message)`."""
  logging.error('%s', message)
  if last_words is not None:
    _run_bounded(last_words, _LAST_WORDS_SECS, 'last words before exiting')
  _exit(code)


class Watchdog(object):
  """Ends the process unless cancelled before `timeout_secs` pass.

  Args:
    timeout_secs: the deadline, from `start()`.
    code: exit code, or a callable returning it when the deadline passes.
    message: what to log on expiry (or a callable returning it).
    last_words: optional callable run (bounded) before exiting, e.g. telling
      the ps tasks that the job failed.
  """

  def __init__(self, timeout_secs, code, message, last_words=None):
    self._timeout_secs = timeout_secs
    self._code = code
    self._message = message
    self._last_words = last_words
    self._cancelled = threading.Event()
    self._thread = None

  def start(self):
    """Starts counting; returns self."""
    self._thread = threading.Thread(target=self._wait, name='Watchdog', daemon=True)
    self._thread.start()
    return self

  def cancel(self):
    """Stops the countdown (nothing happens at the deadline)."""
    self._cancelled.set()

  @property
  def active(self):
    return self._thread is not None and not self._cancelled.is_set()

  def _wait(self):
    if self._cancelled.wait(self._timeout_secs):
      return
    message = self._message() if callable(self._message) else self._message
    code = self._code() if callable(self._code) else self._code
    exit_after(code, message, self._last_words)


class SignalWatch(object):
  """Calls `callback(signum)` from a thread as soon as a watched signal arrives.

  Python runs signal handlers only in the main thread, between bytecodes, so
  a main thread blocked in `Session.run` hears SIGTERM only when that call
  returns, perhaps never. The C-level handler also writes the signal number
  to the "wakeup fd"; a thread reading it learns of the signal at once.
  A Python handler must be installed for the signal (any, e.g. the trainer's
  preemption handler); this class installs none itself.

  Install it from the main thread; it stays for the life of the process.
  """

  def __init__(self, callback, signals=(signal.SIGTERM,)):
    self._callback = callback
    self._signals = frozenset(int(s) for s in signals)
    self._thread = None

  def install(self):
    """Takes over the wakeup fd and starts the reading thread; returns self.

    Returns self without watching when not called from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
      return self
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    self._thread = threading.Thread(target=self._read, args=(read_fd,),
                                    name='SignalWatch', daemon=True)
    self._thread.start()
    return self

  def _read(self, read_fd):
    while True:
      data = os.read(read_fd, 64)
      if not data:
        return
      for signum in data:
        if signum in self._signals:
          self._callback(signum)


_sigterm_listeners = []
_sigterm_watch = None


def _notify_sigterm_listeners(unused_signum):
  for callback in list(_sigterm_listeners):
    callback()


def add_sigterm_listener(callback):
  """Calls `callback()` from a thread the moment SIGTERM arrives.

  Signals belong to the process, so one `SignalWatch` serves every listener;
  call this from the main thread (elsewhere nothing is watched). Someone must
  have installed a Python SIGTERM handler (the trainer's preemption handler).

  Returns:
    A function that removes the listener again.
  """
  global _sigterm_watch
  if threading.current_thread() is not threading.main_thread():
    return lambda: None
  if _sigterm_watch is None:
    _sigterm_watch = SignalWatch(_notify_sigterm_listeners).install()
  _sigterm_listeners.append(callback)

  def remove():
    if callback in _sigterm_listeners:
      _sigterm_listeners.remove(callback)
  return remove


class TaskFaults(object):
  """How one training task of a cluster meets faults; `trainer.train` takes one.

  Args:
    termination_grace_secs: after SIGTERM, the longest this task takes to
      exit (deploy_config.termination_grace_secs); None: unbounded.
    replica_timeout_secs: deploy_config.replica_timeout_secs (sync replicas).
    replica_names: every training task of the job ('/job:chief/task:0', ...);
      with sync replicas they are watched for missing gradients.
    replica_name: this task's name among them.
    recovery: a `Recovery`, or None not to recover from lost peers.
    end_job: optional callable(message) telling the ps tasks the job failed
      (the chief's, before a retryable exit).
  """

  def __init__(self, termination_grace_secs=None, replica_timeout_secs=300,
               replica_names=(), replica_name=None, recovery=None, end_job=None):
    self.termination_grace_secs = termination_grace_secs
    self.replica_timeout_secs = replica_timeout_secs
    self.replica_names = list(replica_names)
    self.replica_name = replica_name
    self.recovery = recovery
    self.end_job = end_job

  @contextlib.contextmanager
  def noting_lost_peers(self, last_step_fn):
    """Starts the recovery deadline for a lost peer that escapes the block.

    Args:
      last_step_fn: returns the last global step reached (for the log line).
    """
    try:
      yield
    except PEER_ERRORS as e:
      if self.recovery is not None and not self.recovery.recovering:
        self.recovery.lost(e, last_step_fn())
      raise

  @property
  def watches_replicas(self):
    """Whether sync replicas should stamp and watch their deliveries."""
    return len(self.replica_names) > 1 and self.replica_name in self.replica_names


def _reachable(address, timeout_secs=1.0):
  """Whether something accepts TCP connections at 'host:port'."""
  host, port = address.rsplit(':', 1)
  try:
    with socket.create_connection((host.strip('[]'), int(port)), timeout=timeout_secs):
      return True
  except OSError:
    return False


def task_names(error_message):
  """The tasks ('/job:ps/task:1') an error message of TensorFlow names, in order."""
  names = []
  for job, index in _TASK_RE.findall(error_message or ''):
    name = '/job:%s/task:%s' % (job, index)
    if name not in names:
      names.append(name)
  return names


class Recovery(object):
  """The deadline and the log line of one task's recoveries from lost peers.

  Args:
    timeout_secs: deploy_config.recovery_timeout_secs.
    last_words: optional callable run before a retryable exit (bounded).
  """

  def __init__(self, timeout_secs, last_words=None):
    self._timeout_secs = timeout_secs
    self._last_words = last_words
    self._watchdog = None
    self._lost_at_step = None
    self._lost = ''

  @property
  def recovering(self):
    """True between `lost()` and `resumed()`."""
    return self._watchdog is not None and self._watchdog.active

  def lost(self, error, last_step):
    """A peer failed under a running session: start the recovery deadline.

    Args:
      error: the `tf.errors.OpError` that showed it.
      last_step: the last global step this task reached (None if none).
    """
    names = [n for n in task_names(error.message) if '/job:ps/' in n] or task_names(
        error.message) or ['a peer']
    self._lost = ', '.join(names)
    if last_step is not None:
      self._lost_at_step = last_step
    logging.warning('lost %s at global step %s (%s: %s); rebuilding the session, '
                    'deploy_config.recovery_timeout_secs=%d', self._lost, last_step,
                    type(error).__name__, error.message.splitlines()[0][:300],
                    self._timeout_secs)
    if not self.recovering:
      self._watchdog = Watchdog(
          self._timeout_secs, exit_codes.RETRYABLE,
          lambda: 'lost %s and could not rebuild the session within '
          'deploy_config.recovery_timeout_secs=%d; exiting retryable' % (
              self._lost, self._timeout_secs),
          last_words=self._last_words).start()

  def wait_for(self, addresses, names):
    """Waits until every 'host:port' of `addresses` accepts connections again.

    Gives up (exit retryable) with the deadline of `lost()`.

    Args:
      addresses: the peers' 'host:port'.
      names: their task names, for the log.
    """
    start = last_log = time.time()
    while True:
      missing = [n for a, n in zip(addresses, names) if not _reachable(a)]
      if not missing:
        return
      self._lost = ', '.join(missing)  # What the timeout message names.
      if time.time() - last_log >= 5.0:
        logging.info('waiting for %s to come back (%.0f s; deploy_config.'
                     'recovery_timeout_secs=%d)', ', '.join(missing), time.time() - start,
                     self._timeout_secs)
        last_log = time.time()
      time.sleep(0.5)

  def resumed(self, step):
    """Training ran a step again at `step`: log the recovery, stop the deadline."""
    if not self.recovering:
      return
    self._watchdog.cancel()
    lost_steps = max(0, self._lost_at_step - step) if self._lost_at_step is not None else 0
    logging.warning('recovered from a lost peer: restored global step %d, %d step(s) lost '
                    '(%s was lost at global step %s)', step, lost_steps, self._lost,
                    self._lost_at_step)


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
      self._beat_value = tf.compat.v1.placeholder(tf.int64, [], name='replica_heartbeat')
      self._beats = {name: tf.raw_ops.AssignVariableOp(resource=handle, value=self._beat_value)
                     for name, handle in self._alive.handles.items()}

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
      return tf.raw_ops.AssignVariableOp(resource=self._delivered.handles[replica_name],
                                         value=tf.cast(step, tf.int64))

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
  on without it on leftover tokens), or, when every late replica still
  beats, while the global step stays put. The monitor logs the missing
  replicas every `replica_log_interval`; once one has been missing for
  `timeout_secs` it calls `on_timeout(message, sess)` (which ends the
  process).

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
  """

  def __init__(self, progress, global_step, timeout_secs, on_timeout, final_step=None,
               poll_secs=2.0, replica_name=None, silent_secs=None):
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
      def last_words():
        if saver is not None:
          _run_bounded(lambda: save(sess), _LAST_WORDS_SECS, 'the final checkpoint')
        if faults.end_job is not None:
          faults.end_job(message)
      exit_after(exit_codes.RETRYABLE, message, last_words)
    return cls(progress, global_step, faults.replica_timeout_secs, give_up,
               final_step=final_step or None, replica_name=faults.replica_name)

  def start(self, sess):
    """Starts watching through `sess` in a daemon thread (once)."""
    if self._thread is None:
      self._thread = threading.Thread(target=self._loop, args=(sess,),
                                      name='ReplicaMonitor', daemon=True)
      self._thread.start()

  def stop(self):
    self._stop.set()

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
    """(global step, replicas late for it, silent replicas); raises on read errors."""
    if self._replica_name is not None:
      self._beat_count += 1
      self._progress.beat(sess, self._replica_name, self._beat_count, options=options)
    step = int(sess.run(self._global_step, options=options))
    stamps = self._progress.read(sess, options=options)
    silent = self._silent(self._progress.heartbeats(sess, options=options), time.time())
    late = [name for name, stamp in stamps.items() if stamp is None or stamp < step]
    return step, late, silent

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
      return late, self._stalled_since
    return [], None

  def _loop(self, sess):
    options = tf.compat.v1.RunOptions(timeout_in_ms=10000)
    self._last_step, self._stalled_since, self._gone_since = None, time.time(), {}
    last_log = time.time()
    while not self._stop.wait(self._poll_secs):
      try:
        step, late, silent = self._read(sess, options)
      except (tf.errors.OpError, RuntimeError):
        continue  # A lost ps is the recovery's business; a closed session ends us soon.
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
      if now - last_log >= replica_log_interval(self._timeout_secs):
        logging.warning('%s', message)
        last_log = now
