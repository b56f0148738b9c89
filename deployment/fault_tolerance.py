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
* `deployment.replica_watch` (beside this module) finds sync replicas that
  stopped delivering gradients;
* `Recovery` arms the `deploy_config.recovery_timeout_secs` deadline when a
  peer is lost and logs, once training runs again, which step was restored
  and how many steps were lost;
* `TaskFaults` carries all of this into `trainer.trainer.train`.

Usage (trainer/train.py and trainer.training_loop do this):

    faults = fault_tolerance.TaskFaults(
        termination_grace_secs=25, replica_timeout_secs=300,
        replica_names=['/job:chief/task:0', '/job:worker/task:0'],
        replica_name='/job:worker/task:0',
        recovery=fault_tolerance.Recovery(timeout_secs=300))
    while True:
      try:
        return trainer.train(..., faults=faults)  # a new graph and session
      except fault_tolerance.PEER_ERRORS:
        # The failing step called faults.recovery.lost(error, last_step),
        # which armed the deadline (past it: exit 129).
        faults.recovery.wait_for(ps_addresses, ps_names)
    # The first step of the new session calls faults.recovery.resumed(step),
    # which logs the restored step and the steps lost.

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
LAST_WORDS_SECS = 15.0
# How long a recovering worker accepts that the chief is unreachable as well as its ps.
CHIEF_GONE_SECS = 5.0
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


def run_bounded(function, timeout_secs, what):
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
    run_bounded(last_words, LAST_WORDS_SECS, 'last words before exiting')
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

  A non-chief task names its `chief`: when the chief is unreachable too for
  `CHIEF_GONE_SECS` while recovering, the task exits retryable at once,
  wherever its main thread is blocked (a `Session.close()` on the dead ps):
  the chief ended the job or lost its node, nobody is left to restore the
  model from, and a restarted task joins the restarted job anyway.

  Args:
    timeout_secs: deploy_config.recovery_timeout_secs.
    last_words: optional callable run before a retryable exit (bounded).
    chief: optional ('host:port', task name) of the chief, for a non-chief task.
  """

  def __init__(self, timeout_secs, last_words=None, chief=None):
    self._timeout_secs = timeout_secs
    self._last_words = last_words
    self._chief = chief
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
      if self._chief is not None:
        threading.Thread(target=self._exit_if_chief_gone, args=(self._watchdog,),
                         name='RecoveryChiefWatch', daemon=True).start()

  def _exit_if_chief_gone(self, watchdog, poll_secs=0.5):
    """While `watchdog` (one recovery) is active: exit retryable once the chief is gone."""
    address, name = self._chief
    last_seen = time.time()
    while watchdog.active:
      if _reachable(address):
        last_seen = time.time()
      elif time.time() - last_seen >= CHIEF_GONE_SECS:
        exit_now(exit_codes.RETRYABLE,
                 'lost %s and the chief %s is unreachable too: nobody is left to restore '
                 'the model from; exiting retryable' % (self._lost, name))
      time.sleep(poll_secs)

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
