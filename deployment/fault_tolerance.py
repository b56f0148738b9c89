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
  logging.flush()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


def _run_bounded(function, timeout_secs, what):
  """Runs `function()` in a daemon thread; gives up waiting after `timeout_secs`."""
  thread = threading.Thread(target=function, name=what, daemon=True)
  thread.start()
  thread.join(timeout_secs)
  if thread.is_alive():
    logging.warning('%s did not finish within %.0f s; going on without it', what, timeout_secs)


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
    logging.error('%s', message)
    if self._last_words is not None:
      _run_bounded(self._last_words, _LAST_WORDS_SECS, 'last words before exiting')
    exit_now(code, message)


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


def _stamp_variable_name(task_name):
  return 'slimtrain_replica_delivered' + re.sub(r'[^A-Za-z0-9]+', '_', task_name)


class ReplicaProgress(object):
  """Per sync replica, the global step it last delivered gradients for, on the ps.

  The stamps are bare resource variables (no collection): savers,
  initialisers and the ready check never see them, each replica creates its
  own stamp with its first assignment, and a stamp never assigned reads as
  "never delivered".

  Args:
    replica_names: every training task, e.g. ['/job:chief/task:0',
      '/job:worker/task:0'].
    device: where the stamps live (the global step's ps).
  """

  def __init__(self, replica_names, device):
    self.replica_names = list(replica_names)
    self._device = device
    self._handles = {}
    with tf.compat.v1.device(device):
      for name in self.replica_names:
        self._handles[name] = tf.raw_ops.VarHandleOp(
            dtype=tf.int64, shape=[], shared_name=_stamp_variable_name(name),
            name=_stamp_variable_name(name))
      self._initialized = [tf.raw_ops.VarIsInitializedOp(resource=self._handles[n])
                           for n in self.replica_names]
      self._reads = [tf.raw_ops.ReadVariableOp(resource=self._handles[n], dtype=tf.int64)
                     for n in self.replica_names]

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
      return tf.raw_ops.AssignVariableOp(resource=self._handles[replica_name],
                                         value=tf.cast(step, tf.int64))

  def read(self, sess, options=None):
    """{replica name: last delivered step, or None if it never delivered}."""
    initialized = sess.run(self._initialized, options=options)
    reads = [r for r, ok in zip(self._reads, initialized) if ok]
    values = iter(sess.run(reads, options=options) if reads else [])
    return {name: int(next(values)) if ok else None
            for name, ok in zip(self.replica_names, initialized)}


def replica_log_interval(timeout_secs):
  """Seconds between "replicas missing" lines: 30, or a third of a shorter timeout."""
  return min(30.0, max(1.0, timeout_secs / 3.0))


class ReplicaMonitor(object):
  """Watches a sync-replicas job for a step that does not advance.

  While the global step stays put, logs every `replica_log_interval` which
  replicas have not delivered gradients for it; once it has stayed put for
  `timeout_secs` with a replica missing, calls `on_timeout(message)` (which
  ends the process).

  Args:
    progress: the graph's `ReplicaProgress`.
    global_step: the global step tensor.
    timeout_secs: deploy_config.replica_timeout_secs.
    on_timeout: callable(message) run from the monitor's thread.
    final_step: the training's last step (None: no end); reaching it is not
      a stall.
    poll_secs: seconds between reads.
  """

  def __init__(self, progress, global_step, timeout_secs, on_timeout, final_step=None,
               poll_secs=2.0):
    self._progress = progress
    self._global_step = global_step
    self._timeout_secs = timeout_secs
    self._on_timeout = on_timeout
    self._final_step = final_step
    self._poll_secs = poll_secs
    self._stop = threading.Event()
    self._thread = None

  def start(self, sess):
    """Starts watching through `sess` in a daemon thread (once)."""
    if self._thread is None:
      self._thread = threading.Thread(target=self._loop, args=(sess,),
                                      name='ReplicaMonitor', daemon=True)
      self._thread.start()

  def stop(self):
    self._stop.set()

  def _missing(self, sess, options):
    """(global step, [replicas that did not deliver for it]); raises on read errors."""
    step = int(sess.run(self._global_step, options=options))
    stamps = self._progress.read(sess, options=options)
    return step, [name for name, stamp in stamps.items() if stamp is None or stamp < step]

  def _loop(self, sess):
    options = tf.compat.v1.RunOptions(timeout_in_ms=10000)
    last_step, since, last_log = None, time.time(), time.time()
    while not self._stop.wait(self._poll_secs):
      try:
        step, missing = self._missing(sess, options)
      except (tf.errors.OpError, RuntimeError):
        continue  # A lost ps is the recovery's business; a closed session ends us soon.
      now = time.time()
      if step != last_step or (self._final_step and step >= self._final_step):
        last_step, since, last_log = step, now, now
        continue
      if not missing:
        continue
      message = ('sync replicas: no gradients from %s for global step %d in %.0f s '
                 '(deploy_config.replica_timeout_secs=%d)' % (
                     ', '.join(missing), step, now - since, self._timeout_secs))
      if now - since >= self._timeout_secs and not self._stop.is_set():
        self._on_timeout(message + '; exiting retryable')
        return
      if now - last_log >= replica_log_interval(self._timeout_secs):
        logging.warning('%s', message)
        last_log = now
