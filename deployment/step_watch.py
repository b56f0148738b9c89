"""Training steps that stop finishing: a peer cut off without an error.

A ps behind a network partition does not fail a step: gRPC keeps waiting
for its answer, and `Session.run` has no deadline, so every training task
would wait for as long as the partition lasts. `StepWatch` notices when no
step has finished for `timeout_secs` (after the first step, so start-up does
not count), probes each ps with a TCP connect to name the unreachable ones,
and exits retryable (`deployment.exit_codes`); a restart of the job resumes
from the last checkpoint. A partition that heals before the deadline costs
nothing: the blocked step finishes and training goes on in the same session.

Usage (trainer.training_loop does this for each training task of a ps
cluster, with deploy_config.recovery_timeout_secs):

    watch = step_watch.StepWatch(300, [('/job:ps/task:0', '10.0.0.2:2222')],
                                 setting='deploy_config.recovery_timeout_secs')
    ...
    watch.step_done(step)   # after each step; the first call starts the watch
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
    self._last = None  # (time, global step, ending) of the last finished step.
    self._stopped = threading.Event()
    self._thread = None

  def step_done(self, step, ending=False):
    """Records a finished step at `step`; the first call starts watching.

    Args:
      step: the global step reached.
      ending: training ended at `step`; what follows (the final checkpoint,
        closing the session) must finish within the same timeout.
    """
    with self._lock:
      self._last = (time.time(), step, ending)
      if self._thread is None or not self._thread.is_alive():
        self._stopped.clear()
        self._thread = threading.Thread(target=self._watch, name='StepWatch', daemon=True)
        self._thread.start()

  def stop(self):
    """Stops watching until the next `step_done`."""
    with self._lock:
      self._stopped.set()
      self._last = None

  def _watch(self):
    while not self._stopped.wait(self._poll_secs):
      with self._lock:
        if self._last is None:
          return
        since, step, ending = self._last
      if time.time() - since > self._timeout_secs:
        fault_tolerance.exit_after(exit_codes.RETRYABLE, self._message(step, ending),
                                   self._last_words)

  def _message(self, step, ending):
    unreachable = cluster_runtime.unreachable(self._peers)
    cause = ('unreachable: %s (a partition or a lost node?)' % ', '.join(unreachable)
             if unreachable else 'every ps accepts connections, but a peer does not answer')
    if ending:
      what = ('training ended at global step %d, but its final checkpoint and shutdown have '
              'not finished in %d s' % (step, self._timeout_secs))
    else:
      what = 'no training step finished for %d s since global step %d' % (
          self._timeout_secs, step)
    return ('%s; %s; past %s=%d, exiting retryable (a restart resumes from the last '
            'checkpoint)' % (what, cause, self._setting, self._timeout_secs))
