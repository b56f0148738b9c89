"""Training steps that stop finishing: a peer cut off without an error.

A ps behind a network partition does not fail a step: gRPC keeps waiting
for its answer, and `Session.run` has no deadline, so every training task
would wait for as long as the partition lasts. `StepWatch` notices when no
step has finished for `timeout_secs`, probes each ps with a TCP connect to
name the unreachable ones, and exits retryable (`deployment.exit_codes`); a
restart of the job resumes from the last checkpoint. A partition that heals
before the deadline costs nothing: the blocked step finishes and training
goes on in the same session.

Starting a session waits on the ps tasks too (creating the session on each,
initialising or restoring the variables, a worker waiting for the chief's
model), and a first step may wait for replicas still starting, so from
`session_starting` to the first finished step the deadline is a longer one,
the start-up timeout plus the step timeout.

Usage (trainer.training_loop does this for each training task of a ps
cluster, with deploy_config.recovery_timeout_secs):

    watch = step_watch.StepWatch(300, [('/job:ps/task:0', '10.0.0.2:2222')],
                                 setting='deploy_config.recovery_timeout_secs')
    ...
    watch.session_starting(600 + 300, 'deploy_config.startup_timeout_secs + '
                           'recovery_timeout_secs')  # before creating the session
    watch.step_done(step)   # after each step
    watch.stop()            # when training ends or the session is rebuilt

Differs on purpose from tf.estimator: `MonitoredTrainingSession` has no such
deadline (a partitioned ps blocks it until the partition heals).
"""

import threading
import time

from deployment import cluster_runtime
from deployment import exit_codes
from deployment import fault_tolerance


class StepWatch(object):
  """Exits retryable when no training step finishes for `timeout_secs`.

  Args:
    timeout_secs: the longest a step may take once training runs.
    peers: [(name, 'host:port')] of the tasks a step waits for (the ps tasks).
    setting: the config field the timeout comes from, for the message.
    last_words: optional callable(message) run (bounded) before exiting,
      e.g. the chief telling the ps tasks that the job failed and why.
    poll_secs: how often the deadline is checked.
  """

  def __init__(self, timeout_secs, peers, setting, last_words=None, poll_secs=1.0):
    self._timeout_secs = timeout_secs
    self._peers = list(peers)
    self._setting = setting
    self._last_words = last_words
    self._poll_secs = poll_secs
    self._lock = threading.Lock()
    # (time, global step, ending) of the last finished step; the step is None
    # while the session starts.
    self._last = None
    self._start_timeout = None  # (seconds, setting) of the session's start.
    self._stopped = threading.Event()
    self._thread = None

  def session_starting(self, timeout_secs, setting):
    """Starts watching a session being created: its first step must finish in time.

    Args:
      timeout_secs: the longest from now to the first finished step.
      setting: the config fields `timeout_secs` comes from, for the message.
    """
    self._start_timeout = (timeout_secs, setting)
    self._record(None, False)

  def still_starting(self):
    """Records progress before the first step (a peer answered); re-arms the start deadline.

    Without a preceding `session_starting` it does nothing.
    """
    if self._start_timeout is not None:
      self._record(None, False)

  def step_done(self, step, ending=False):
    """Records a finished step at `step`; the first call starts watching.

    Args:
      step: the global step reached.
      ending: training ended at `step`; what follows (the final checkpoint,
        closing the session) must finish within the same timeout.
    """
    self._record(step, ending)

  def _record(self, step, ending):
    with self._lock:
      self._last = (time.time(), step, ending)
      # A stopped thread may still be waiting out its poll: it gets no say any more.
      if self._thread is None or not self._thread.is_alive() or self._stopped.is_set():
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(self._stopped,),
                                        name='StepWatch', daemon=True)
        self._thread.start()

  def stop(self):
    """Stops watching until the next `step_done` or `session_starting`."""
    with self._lock:
      self._stopped.set()
      self._last = None

  def _watch(self, stopped):
    while not stopped.wait(self._poll_secs):
      with self._lock:
        if stopped.is_set() or self._last is None:
          return
        since, step, ending = self._last
      timeout_secs, setting = (self._start_timeout if step is None
                               else (self._timeout_secs, self._setting))
      if time.time() - since > timeout_secs:
        fault_tolerance.exit_after(
            exit_codes.RETRYABLE, self._message(step, ending, timeout_secs, setting),
            self._last_words)

  def _message(self, step, ending, timeout_secs, setting):
    unreachable = cluster_runtime.unreachable(self._peers)
    cause = ('unreachable: %s (a partition or a lost node?)' % ', '.join(unreachable)
             if unreachable else 'every ps accepts connections, but a peer does not answer')
    if step is None:
      what = 'no training step finished within %d s of starting the session' % timeout_secs
    elif ending:
      what = ('training ended at global step %d, but its final checkpoint and shutdown have '
              'not finished in %d s' % (step, self._timeout_secs))
    else:
      what = 'no training step finished for %d s since global step %d' % (
          self._timeout_secs, step)
    return ('%s; %s; past %s=%d, exiting retryable (a restart resumes from the last '
            'checkpoint)' % (what, cause, setting, timeout_secs))
