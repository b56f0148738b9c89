"""Bounded shutdown, dead sync replicas and lost peers: the pieces a cluster task needs.

A task of a multi-host job must never wait forever: a gRPC call to a dead ps
can block `Session.close()` for minutes, a sync-replicas step waits for
gradients a killed worker will never send, and a restarted ps leaves every
session that used it broken. This module holds what the trainer and the ps
loop use to turn each of those into a clear log line and an exit code of the
contract in `deployment.exit_codes`:

* `Watchdog` ends the process with a chosen code when a deadline passes,
  whatever the main thread is blocked in (a `Session.run`, a `close()`);
* `close_session` closes the training session after the last step within a
  bound, and says what it waits for when that takes more than a few seconds
  (TensorFlow's `Session.close()` waits for every step still running in the
  session and for every task of the session to drop it);
* `SignalWatch` notices SIGTERM at once from its own thread, even while the
  main thread is inside TensorFlow and Python handlers cannot run yet;
  `SigtermGrace` uses it to turn SIGTERM into a stop with an exit deadline;
* `deployment.replica_watch` (beside this module) finds sync replicas that
  stopped delivering gradients;
* `Recovery` arms the `deploy_config.recovery_timeout_secs` deadline when a
  peer is lost and logs, once training runs again, which step was restored
  and how many steps were lost.

`deployment.fault_runtime` assembles these pieces into the one fault
runtime of a training task (`TaskFaults`), which both training paths use.

Usage (trainer/train.py does this):

    faults = fault_runtime.TaskFaults(settings, cluster, master, is_chief)
    while True:
      try:
        return trainer.run_training(graph, ..., faults=faults)  # a new session
      except fault_tolerance.PEER_ERRORS:
        # The failing step called faults.recovery.lost(error, last_step),
        # which armed the deadline (past it: exit 129).
        faults.recovery.wait_for_peers()
    # The first step of the new session calls faults.recovery.resumed(step),
    # which logs the restored step and the steps lost.

Differs on purpose from `MonitoredTrainingSession` (what tf.estimator users
had): every recovery has a deadline after which the task exits retryable
instead of retrying forever. Like it, a recovery keeps the graph and makes a
new session: queues and readers are private to a session's kernels, so they
start clean, while variables live on the ps tasks.
"""

import contextlib
import faulthandler
import os
import re
import signal
import sys
import threading
import time

from core import logs as logging
import tensorflow as tf

from deployment import cluster_runtime
from deployment import exit_codes

# What a session reports when a peer died or restarted under it.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError)
# How long a Watchdog lets its last words (a checkpoint, a message to the ps) run.
LAST_WORDS_SECS = 15.0
# How long a recovering worker accepts that the chief is unreachable as well as its ps.
CHIEF_GONE_SECS = 5.0
_TASK_RE = re.compile(r'/job:(\w+)/replica:\d+/task:(\d+)')
# After this long, a slow Session.close() logs what it waits for (and again every period).
CLOSE_REPORT_SECS = 5.0

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


def close_session(close, timeout_secs, peers=(), after='training has ended'):
  """Runs `close()` (a `Session.close`) with a bound; logs what a slow close waits for.

  TensorFlow's close of a cluster session waits for the steps still running
  in it and for each task of the session to drop its state, without a
  deadline and without a word. Nothing more is asked of the session when
  this runs (training has ended with its checkpoint saved, or a lost peer
  broke it), so a close that does not finish is left behind.

  Args:
    close: the session's original `close` method.
    timeout_secs: give up waiting after this long (None: wait as long as it takes).
    peers: names of the other tasks the session runs on ('/job:ps/task:0', ...).
    after: why going on without the session is safe, for the log line.

  Returns:
    True when the session closed, False when it was left closing.
  """
  waiting_for = 'the steps still running in it%s' % (
      ' and for %s to drop it' % ', '.join(peers) if peers else '')

  def report(seconds):
    logging.info('closing the training session: %.0f s so far; TensorFlow waits for %s',
                 seconds, waiting_for)
  if cluster_runtime.close_in_thread(close, timeout_secs, CLOSE_REPORT_SECS, report):
    return True
  logging.warning('gave up closing the training session after %.0f s (still waiting for %s); '
                  '%s, going on without it', timeout_secs, waiting_for, after)
  return False


def exit_process(code):
  """`sys.exit(code)`, or `os._exit(code)` when a session close was left running.

  A thread left inside TensorFlow can block the interpreter's shutdown.
  """
  if cluster_runtime.abandoned_closes:
    _exit(code)
  sys.exit(code)


def exit_without_teardown(code):
  """Flushes the logs and ends the process now, skipping the interpreter's teardown.

  For a task whose work is saved and told (a worker leaving a running job): tearing
  down TensorFlow's runtime took 12-22 s on a loaded 2-core machine, past the
  termination grace that a scheduler gives before SIGKILL.

  Args:
    code: the exit code.
  """
  _exit(code)


def exit_after(code, message, last_words=None):
  """Runs `last_words(message)` (for at most 15 s), then `exit_now(code, message)`."""
  logging.error('%s', message)
  if last_words is not None:
    run_bounded(lambda: last_words(message), LAST_WORDS_SECS, 'last words before exiting')
  _exit(code)


def exit_when_chief_lost(cluster, chief_timeout_secs, startup_timeout_secs, chief_seen=False,
                         setting='deploy_config.chief_timeout_secs'):
  """A worker of a ps cluster exits retryable (129) once its chief is lost.

  Without the chief nobody saves the worker's updates: training on would only
  waste them. The arguments are those of `cluster_runtime.ChiefWatch`; the
  message also names the ps tasks that are unreachable (a worker whose step
  hung on a partitioned ps may see the chief go first).

  Returns:
    A `threading.Event`; set it to stop watching (when training ends).
  """
  watch = cluster_runtime.ChiefWatch(cluster, chief_timeout_secs, startup_timeout_secs,
                                     chief_seen=chief_seen, setting=setting,
                                     peers=cluster_runtime.ps_peers(cluster))
  return watch.watch_in_thread(lambda message: exit_now(exit_codes.RETRYABLE, message))


class Watchdog(object):
  """Ends the process unless cancelled before `timeout_secs` pass.

  Args:
    timeout_secs: the deadline, from `start()`.
    code: exit code, or a callable returning it when the deadline passes.
    message: what to log on expiry (or a callable returning it).
    last_words: optional callable(message) run (bounded) before exiting,
      e.g. telling the ps tasks that the job failed and why.
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


def _log_thread_stacks(unused_message):
  """Writes every thread's Python stack to stderr: where a task past its grace was stuck.

  A task still running when its termination grace ends was blocked somewhere
  (a `Session.run` on a lost peer, a close, a lock); the stacks name the call,
  which the exit line alone cannot. `faulthandler` writes to the file
  descriptor itself, so a stuck thread holding a logging or stream lock
  cannot hold this up.
  """
  stderr = sys.__stderr__
  os.write(stderr.fileno(), b'stacks of the threads still running:\n')
  faulthandler.dump_traceback(file=stderr, all_threads=True)


class SigtermGrace(object):
  """SIGTERM as a request to checkpoint and stop, with a deadline to exit.

  While `handling()` is active, SIGTERM calls `on_sigterm()` instead of
  killing the process: from the Python handler, and at once from a
  `SignalWatch` thread, since a main thread blocked in `Session.run` may
  never get to run the handler. The same moment starts the grace: once
  `grace_secs` pass the process exits, 143 when the chief's preemption
  checkpoint is written (`checkpoint_written`; always for a non-chief), 129
  when it is not, so the job is restarted from an older checkpoint.

  Usage (the trainer's step loop and the Estimator's fault hook):

      grace = fault_tolerance.SigtermGrace(
          25, 'deploy_config.termination_grace_secs', is_chief=True,
          on_sigterm=stop_requested.set)
      with grace.handling():
        ...train; on stop_requested, save a checkpoint, then:
        grace.checkpoint_written = True

  Args:
    grace_secs: seconds from SIGTERM to the exit; None or 0: no deadline
      (SIGTERM only asks for the stop).
    setting: the config field `grace_secs` comes from, for the exit's log line.
    is_chief: whether this task writes the preemption checkpoint.
    on_sigterm: callable() asking training to stop. It may run twice and from
      another thread (set an Event, say).
  """

  def __init__(self, grace_secs, setting, is_chief, on_sigterm):
    self._grace_secs = grace_secs
    self._setting = setting
    self._is_chief = is_chief
    self._on_sigterm = on_sigterm
    self._watchdog = None
    self._lock = threading.Lock()
    self.checkpoint_written = False

  @contextlib.contextmanager
  def handling(self):
    """The block during which SIGTERM is handled so (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
      yield
      return
    previous = signal.signal(signal.SIGTERM,
                             lambda unused_signum, unused_frame: self._on_sigterm())
    remove_listener = add_sigterm_listener(self._start)
    try:
      yield
    finally:
      remove_listener()
      signal.signal(signal.SIGTERM, previous)

  def _start(self):
    self._on_sigterm()
    with self._lock:
      if self._watchdog is not None or not self._grace_secs:
        return
      self._watchdog = Watchdog(
          self._grace_secs, self._exit_code,
          'SIGTERM: still running after %s=%d (blocked on a peer?); exiting'
          % (self._setting, self._grace_secs), last_words=_log_thread_stacks).start()

  def _exit_code(self):
    if self.checkpoint_written or not self._is_chief:
      return exit_codes.PREEMPTED
    return exit_codes.RETRYABLE


def task_names(error_message):
  """The tasks ('/job:ps/task:1') an error message of TensorFlow names, in order."""
  names = []
  for job, index in _TASK_RE.findall(error_message or ''):
    name = '/job:%s/task:%s' % (job, index)
    if name not in names:
      names.append(name)
  return names


def lost_tasks(error_message):
  """Who a peer error says was lost, for a log line: its ps tasks, else any task named.

  Returns:
    e.g. '/job:ps/task:1', or 'a peer' when the message names no task.
  """
  names = task_names(error_message)
  return ', '.join([n for n in names if '/job:ps/' in n] or names) or 'a peer'


def error_summary(error_message, max_chars=300):
  """The first two telling lines of a TensorFlow error message, on one line.

  TF 2.x messages of a failed step start with 'Graph execution error:' and a
  line of '='; what failed and where (`UNAVAILABLE: From /job:ps/...`)
  comes after.
  """
  lines = [line.strip() for line in (error_message or '').splitlines()]
  telling = [line for line in lines
             if line and line != 'Graph execution error:' and set(line) != {'='}]
  return ' '.join(telling[:2])[:max_chars]


class Recovery(object):
  """The deadline and the log line of one task's recoveries from lost peers.

  A non-chief task names its `chief`: when the chief is unreachable too for
  `CHIEF_GONE_SECS` while recovering, the task exits retryable at once,
  wherever its main thread is blocked (a `Session.close()` on the dead ps):
  the chief ended the job or lost its node, nobody is left to restore the
  model from, and a restarted task joins the restarted job anyway.

  Args:
    timeout_secs: deploy_config.recovery_timeout_secs.
    last_words: optional callable(message) run before a retryable exit (bounded).
    chief: optional ('host:port', task name) of the chief, for a non-chief task.
    peers: [(name, 'host:port')] of the ps tasks (`cluster_runtime.ps_peers`):
      what `wait_for_peers` waits for, and an exit message names those that
      do not accept connections (`cluster_runtime.unreachable`).
    setting: the config field `timeout_secs` comes from, for the log lines
      ('RunConfig.recovery_timeout_secs' on the Estimator path).
  """

  def __init__(self, timeout_secs, last_words=None, chief=None, peers=(),
               setting='deploy_config.recovery_timeout_secs'):
    self._timeout_secs = timeout_secs
    self._setting = setting
    self._last_words = last_words
    self._chief = chief
    self._peers = list(peers)
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
    self._lost = lost_tasks(error.message)
    if last_step is not None or not self.recovering:
      self._lost_at_step = last_step  # Never the step of an earlier recovery.
    logging.warning('lost %s at global step %s (%s: %s); rebuilding the session, '
                    '%s=%d', self._lost, last_step, type(error).__name__,
                    error_summary(error.message), self._setting, self._timeout_secs)
    if not self.recovering:
      self._watchdog = Watchdog(
          self._timeout_secs, exit_codes.RETRYABLE,
          lambda: 'lost %s and could not rebuild the session within %s=%d%s; '
          'exiting retryable' % (self._lost, self._setting, self._timeout_secs,
                                 self._unreachable_peers()),
          last_words=self._last_words).start()
      if self._chief is not None:
        threading.Thread(target=self._exit_if_chief_gone, args=(self._watchdog,),
                         name='RecoveryChiefWatch', daemon=True).start()

  def _exit_if_chief_gone(self, watchdog, poll_secs=0.5):
    """While `watchdog` (one recovery) is active: exit retryable once the chief is gone."""
    address, name = self._chief
    last_seen = time.time()
    while watchdog.active:
      if cluster_runtime.reachable(address):
        last_seen = time.time()
      elif time.time() - last_seen >= CHIEF_GONE_SECS:
        exit_now(exit_codes.RETRYABLE,
                 'lost %s and the chief %s is unreachable too%s: nobody is left to restore '
                 'the model from; exiting retryable' % (self._lost, name,
                                                        self._unreachable_peers()))
      time.sleep(poll_secs)

  def _unreachable_peers(self):
    unreachable = cluster_runtime.unreachable(self._peers)
    return ' (unreachable: %s)' % ', '.join(unreachable) if unreachable else ''

  def wait_for_peers(self):
    """Waits until every peer (the `peers` given) accepts connections again.

    Gives up (exit retryable) with the deadline of `lost()`.
    """
    start = last_log = time.time()
    while True:
      missing = [n for n, a in self._peers if not cluster_runtime.reachable(a)]
      if not missing:
        return
      self._lost = ', '.join(missing)  # What the timeout message names.
      if time.time() - last_log >= 5.0:
        logging.info('waiting for %s to come back (%.0f s; %s=%d)', ', '.join(missing),
                     time.time() - start, self._setting, self._timeout_secs)
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
