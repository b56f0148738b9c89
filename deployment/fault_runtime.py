"""The one fault runtime of a training task, whichever loop runs its steps.

`python -m trainer.train` (tf-slim's Supervisor loop, `trainer.training_loop`)
and the Estimator (`MonitoredSession`, `deployment.monitored_training`) meet
the same faults of a cluster the same way (docs/fault_tolerance.md). What they
share lives here, built from one settings object:

* `FaultSettings`: every timeout of a cluster task in seconds (and the
  interval of the chief's ps shard snapshots), and which config it came
  from, so that log lines and errors name the field the user sets
  (`deploy_config.recovery_timeout_secs` for a pipeline,
  `RunConfig.recovery_timeout_secs` on the Estimator path).
  `builders.deploy_config_builder.cluster_timeouts` makes one from a
  pipeline's `deploy_config`, `estimator.faults.fault_settings` from
  a `RunConfig`; both check their fields through `check_timeout` (the
  interval through `check_interval`).
* `TaskFaults`: what one training task holds while it trains: the recovery
  deadline after a lost peer (`fault_tolerance.Recovery`), the step deadline
  of a ps cut off by the network (`step_watch.StepWatch`, with the longer
  deadline from a session's creation to its first step), SIGTERM as a
  checkpoint-and-stop request with an exit deadline
  (`fault_tolerance.SigtermGrace`), the chief's last words to the ps tasks,
  and the watch of a worker on its chief.
* `BoundedSession`: the training session as the runtime hands it to a loop:
  a step that fails on a lost peer starts the recovery, and closing it is
  bounded and says what it waits for.
* `TrainingPreempted` (exit 143) and `TaskFailed` (exit 129): how a task
  stopped by SIGTERM or by a lost peer ends its training call.
* `serve_ps` and `signal_preempted`: the ps task's loop and a preempted
  task's word to the ps tasks, in the terms of the same settings.

Usage (trainer/train.py does this; the Estimator's adapter likewise from its
RunConfig):

    settings = deploy_config_builder.cluster_timeouts(deploy_config)
    faults = fault_runtime.TaskFaults(settings, cluster, master, is_chief)
    with faults.sigterm_grace(is_chief, stop_requested.set).handling():
      session = fault_runtime.BoundedSession(raw_session, faults)
      session.run(train_op)      # a lost peer: the recovery deadline starts
      faults.step_done(step)     # restarts the step deadline
      session.close()            # bounded, names the ps tasks it waits for

Differs on purpose from the originals (tf-slim's Supervisor loop,
tf.estimator's `MonitoredTrainingSession`): every wait of a cluster task has
a deadline named after its config field, and both training paths share it;
a step that TensorFlow refuses only because its random request id repeated
one (`AbortedError: The same RunGraph (Worker) request was received twice`,
which a long job meets by chance) runs again in the same session, where the
originals threw the session away and built a new one.
"""

import collections
import contextlib
import math
import threading

from core import logs as logging
from tensorflow.python.client import session as tf_session_lib

from deployment import cluster as cluster_lib
from deployment import cluster_runtime
from deployment import exit_codes
from deployment import fault_tolerance
from deployment import request_ids
from deployment import step_watch

# How long closing the session of a lost ps may take before it is left behind.
# Nothing waits on that close (the new session does not need it), and every
# recovery paid the whole wait: 5 s until 2026-11-27, a fixed part of each ps
# loss in benchmarks/ps_failover.py.
RECOVERY_CLOSE_SECS = 1.0

# The config fields each timeout of `FaultSettings` is read from, per config.
_FIELDS = {
    'deploy_config': {
        'startup': 'startup_timeout_secs', 'chief': 'chief_timeout_secs',
        'termination_grace': 'termination_grace_secs', 'replica': 'replica_timeout_secs',
        'recovery': 'recovery_timeout_secs', 'snapshot_interval': 'snapshot_interval_secs'},
    'RunConfig': {
        # A RunConfig bounds a session's creation, which is what startup bounds.
        'startup': 'session_creation_timeout_secs', 'chief': 'chief_timeout_secs',
        'termination_grace': 'termination_grace_secs', 'replica': 'replica_timeout_secs',
        'recovery': 'recovery_timeout_secs', 'snapshot_interval': 'snapshot_interval_secs'},
}

# Set once a training task of this process heard SIGTERM.
_sigterm_heard = threading.Event()

# How a worker told to go before its first training step ends its training call.
SIGTERM_BEFORE_FIRST_STEP = 'SIGTERM before the first training step of this worker: leaving the job'


class FaultSettings(collections.namedtuple(
    'FaultSettings',
    ['startup', 'chief', 'termination_grace', 'replica', 'recovery', 'source',
     'snapshot_interval'],
    defaults=('deploy_config', 0))):
  """Every timeout of a cluster task, in seconds, and the config they come from.

  Fields:
    startup: how long a task waits for its peers before training (deploy_config
      `startup_timeout_secs`; RunConfig `session_creation_timeout_secs`).
    chief: a worker or ps exits 129 once its chief is gone this long.
    termination_grace: after SIGTERM, the longest a task takes to exit.
    replica: how long a sync replica may miss its gradients.
    recovery: the longest a task takes to rebuild its session after a lost
      peer, and the longest a step may take in a ps cluster.
    source: 'deploy_config' or 'RunConfig', for the messages.
    snapshot_interval: seconds between the chief's copies of each ps shard
      onto another ps (`deployment.shard_snapshots`); 0 (the default of a
      hand-made FaultSettings): no copies.
  """

  __slots__ = ()

  def setting(self, name):
    """The user-facing field of timeout `name`, e.g. 'RunConfig.recovery_timeout_secs'."""
    return '%s.%s' % (self.source, _FIELDS[self.source][name])


def check_timeout(source, field, value):
  """Raises ValueError naming `source.field` unless `value` is a usable timeout.

  Every wait of a cluster task must be bounded, and none may end at once.

  Args:
    source: 'deploy_config' or 'RunConfig'.
    field: the field's name, e.g. 'recovery_timeout_secs'.
    value: its value.

  Returns:
    `value`.
  """
  if source == 'RunConfig':
    # Python values: None, a bool or a string must not pass for seconds.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
      raise ValueError('RunConfig.{} must be a positive number of seconds, got {!r}'.format(
          field, value))
  elif value <= 0:
    raise ValueError('%s.%s must be positive (seconds), got %d' % (source, field, value))
  return value


def check_interval(source, field, value):
  """Raises ValueError naming `source.field` unless `value` is 0 (off) or a positive interval.

  Args:
    source: 'deploy_config' or 'RunConfig'.
    field: the field's name, e.g. 'snapshot_interval_secs'.
    value: its value in seconds.

  Returns:
    `value` as a float.
  """
  # Python values: None, a bool or a string must not pass for seconds; NaN
  # and infinity would never (or always) be due.
  if (isinstance(value, bool) or not isinstance(value, (int, float)) or
      not math.isfinite(value) or value < 0):
    raise ValueError('{}.{} must be 0 (off) or a positive number of seconds, got {!r}'.format(
        source, field, value))
  return float(value)


def sigterm_heard():
  """Whether a training task of this process was told to stop by SIGTERM.

  The end of a preempted training is not the end of training: a master skips
  its final evaluation and export then.
  """
  return _sigterm_heard.is_set()


class TrainingPreempted(SystemExit):
  """Training stopped after SIGTERM; `code` is 143 (`exit_codes.PREEMPTED`).

  A `SystemExit`, so a program that does not catch it exits with 143 and its
  scheduler restarts the job.

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


def _replica_names(cluster):
  return ['/job:%s/task:%d' % (job, index) for job in cluster_lib.TRAINING_JOBS
          for index in range(len(cluster.cluster.get(job, [])))]


class TaskFaults(object):
  """How one training task meets the faults of its cluster.

  Outside a cluster (`cluster` None or not distributed) it holds only the
  termination grace; in a cluster also the recovery deadline; with ps tasks
  also the step deadline, the bounded close and the chief's last words.

  Args:
    settings: the task's `FaultSettings`; None: no deadline at all (a test,
      a program without a config).
    cluster: the task's `deployment.cluster.ClusterConfig`, or None.
    master: gRPC target of the task's server ('' outside a cluster).
    is_chief: whether this task writes checkpoints.
    sync_replicas: the steps also wait for the other sync replicas: the step
      deadline adds `settings.replica`.
    watch_steps: whether to bound the steps at all (a master evaluates
      inside a step after a save, so its steps have no deadline).
  """

  def __init__(self, settings=None, cluster=None, master='', is_chief=True,
               sync_replicas=False, watch_steps=True):
    distributed = cluster is not None and cluster.is_distributed
    self.settings = settings
    self.cluster = cluster if distributed else None
    self.is_chief = is_chief
    self.termination_grace_secs = settings.termination_grace if settings else None
    self.replica_timeout_secs = settings.replica if settings else 300
    self.replica_names = _replica_names(cluster) if distributed else []
    self.replica_name = ('/job:%s/task:%d' % (cluster.task_type, cluster.task_index)
                         if distributed else None)
    self.session_peers = cluster_runtime.ps_peers(cluster) if distributed else []
    # The chief's last words before a retryable exit: the ps tasks learn the job failed.
    self.end_job = (cluster_runtime.job_failed_notice(master, cluster)
                    if distributed and is_chief and self.session_peers else None)
    self.recovery = None
    if distributed and settings is not None:
      self.recovery = fault_tolerance.Recovery(
          settings.recovery, last_words=self.end_job,
          chief=None if is_chief else cluster_runtime.chief_address(cluster),
          peers=self.session_peers, setting=settings.setting('recovery'))
    self.step_timeout_secs = None
    self.step_timeout_setting = None
    self.step_watch = None
    if self.session_peers and settings is not None and watch_steps:
      # A sync step also waits for the other replicas, which their own watch bounds.
      self.step_timeout_secs = settings.recovery + (settings.replica if sync_replicas else 0)
      self.step_timeout_setting = (
          '%s + recovery_timeout_secs' % settings.setting('replica') if sync_replicas
          else settings.setting('recovery'))
      self.step_watch = step_watch.StepWatch(
          self.step_timeout_secs, self.session_peers, self.step_timeout_setting,
          last_words=self.end_job)
    # Only the chief copies the ps shards, and only a cluster with ps has any.
    self.snapshot_interval_secs = (
        settings.snapshot_interval if settings is not None and is_chief and self.session_peers
        else 0)
    self.last_step = None
    # Set by `leaving_on_sigterm`; the training loop leaves before its first step.
    self._sigterm_before_loop = threading.Event()
    self._say_left = None  # `leaving_on_sigterm`'s, until `leave` runs it once.
    self._say_left_lock = threading.Lock()

  @property
  def watches_replicas(self):
    """Whether sync replicas should stamp and watch their deliveries."""
    return len(self.replica_names) > 1 and self.replica_name in self.replica_names

  def note_lost_peer(self, error, last_step):
    """A peer failed under a running session: starts the recovery deadline (once).

    Args:
      error: the `UnavailableError`/`AbortedError`.
      last_step: the last global step the task reached, for the log line;
        None: the last one `step_done` heard of (a loss seen outside a step,
        by a Supervisor thread or between two sessions).
    """
    if self.recovery is not None and not self.recovery.recovering:
      self.recovery.lost(error, self.last_step if last_step is None else last_step)

  def noting_lost_peers(self, last_step_fn):
    """A context: a lost peer that escapes it starts the recovery deadline.

    Args:
      last_step_fn: returns the last global step reached (for the log line).
    """
    return _NotingLostPeers(self, last_step_fn)

  def step_done(self, step, ending=False):
    """Training reached `step` (`ending`: its last); restarts the step deadline."""
    self.last_step = step
    if self.step_watch is not None:
      self.step_watch.step_done(step, ending=ending)

  def session_starting(self, startup_timeout_secs=None):
    """A session is about to be created: its first step must finish in time.

    The deadline is the startup timeout plus the step timeout (a first step
    may wait for replicas still starting).

    Args:
      startup_timeout_secs: the startup timeout; None: `settings.startup`.
    """
    if self.step_watch is None:
      return
    if startup_timeout_secs is None:
      startup_timeout_secs = self.settings.startup
    self.step_watch.session_starting(
        startup_timeout_secs + self.step_timeout_secs, '%s + %s' % (
            self.settings.setting('startup'),
            self.step_timeout_setting.replace(self.settings.source + '.', '')))

  def still_starting(self):
    """Progress before the first step (a peer answered): re-arms the start deadline."""
    if self.step_watch is not None:
      self.step_watch.still_starting()

  def stop_step_watch(self):
    """Stops the step deadline (training ended, or the session is being rebuilt)."""
    if self.step_watch is not None:
      self.step_watch.stop()

  def watch_chief(self, chief_seen=False):
    """A worker of a ps cluster exits 129 once its chief is gone.

    Args:
      chief_seen: the task has just talked to its chief, so the chief timeout
        applies from now on (else the startup timeout until it is seen).

    Returns:
      A `threading.Event`; set it to stop watching (when training ends).
    """
    if self.is_chief or self.cluster is None or not self.session_peers:
      return threading.Event()
    return fault_tolerance.exit_when_chief_lost(
        self.cluster, self.settings.chief, self.settings.startup,
        chief_seen=chief_seen,
        setting=self.settings.setting('chief'))

  def sigterm_grace(self, is_chief, on_sigterm):
    """A `fault_tolerance.SigtermGrace` with this task's termination grace.

    Args:
      is_chief: whether this task writes the preemption checkpoint.
      on_sigterm: callable() asking the loop to checkpoint and stop.
    """
    def heard():
      _sigterm_heard.set()
      on_sigterm()
    return fault_tolerance.SigtermGrace(self.termination_grace_secs, self._grace_setting(),
                                        is_chief, heard)

  @contextlib.contextmanager
  def leaving_on_sigterm(self, active=True, say_left=None):
    """While active, SIGTERM raises `TrainingPreempted` (a worker of a resizable job).

    The training loop hears SIGTERM itself once it runs; before that, a worker
    joining a running job spends 15-30 s announcing itself and building its
    graph on a busy machine, and a scale-down may land there. The raise is
    the fast way out, but not a sure one: a handler that runs inside a
    `__del__` (TensorFlow's objects have many, and the garbage collector runs
    them at any time) has its exception printed and dropped, and the worker
    trained on, or inside TensorFlow's C++ where it comes out as another
    error (a bare TypeError from `nest.flatten`). So the signal is also
    recorded (`sigterm_before_loop`): the training loop, seeing it, leaves
    before its first step, and an error escaping this block after it is
    raised as `TrainingPreempted`. From the
    signal on, the termination grace bounds the exit as it does in the loop
    (this block's `SigtermGrace` starts the watchdog from its watch thread).

    Args:
      active: False makes this a no-op (a chief, a job whose workers are fixed).
      say_left: optional callable() telling the job that this worker left;
        `leave` runs it once, as the training loop stops.
    """
    if not active:
      yield
      return
    self._say_left = say_left

    def heard():
      _sigterm_heard.set()
      self._sigterm_before_loop.set()
      # The watch thread records the signal too; only the main thread can leave.
      if threading.current_thread() is threading.main_thread():
        raise TrainingPreempted(SIGTERM_BEFORE_FIRST_STEP)
    grace = fault_tolerance.SigtermGrace(self.termination_grace_secs, self._grace_setting(),
                                         is_chief=False, on_sigterm=heard)
    with grace.handling():
      try:
        yield
      except Exception as e:  # noqa: BLE001  (re-raised unless the signal caused it)
        if not self._sigterm_before_loop.is_set():
          raise
        # A raise inside TensorFlow's C++ (e.g. nest.flatten while the input
        # pipeline is traced) comes out as a bare TypeError: still the leave.
        raise TrainingPreempted('%s (the signal interrupted %s: %s)' % (
            SIGTERM_BEFORE_FIRST_STEP, type(e).__name__, e)) from e

  def leave(self):
    """Tells the job, once, that this worker leaves it (`leaving_on_sigterm`'s `say_left`).

    The training loop calls it when it stops on SIGTERM, before the session
    closes: a close can wait out the whole grace on a busy ps (one leaver in
    15 of a loopback churn run, 2026-11-28), and until told the chief counts
    a worker that is gone. Later calls, and calls without `say_left`, do nothing.
    """
    with self._say_left_lock:
      say_left, self._say_left = self._say_left, None
    if say_left is not None:
      say_left()

  def sigterm_before_loop(self):
    """Whether `leaving_on_sigterm` heard SIGTERM (the worker is to leave before its
    first step)."""
    return self._sigterm_before_loop.is_set()

  def _grace_setting(self):
    return (self.settings.setting('termination_grace') if self.settings
            else 'deploy_config.termination_grace_secs')

  def close_timeout_secs(self):
    """How long closing the training session may take: short while recovering."""
    if self.recovery is not None and self.recovery.recovering:
      return RECOVERY_CLOSE_SECS
    return self.termination_grace_secs

  def fail_after_last_step(self, error):
    """A peer was lost after the last step: exit retryable rather than with a traceback.

    Args:
      error: the `UnavailableError`/`AbortedError` of the final checkpoint or the close.

    Raises:
      TaskFailed: naming the lost task; a restart resumes from the latest checkpoint.
    """
    message = ('lost %s at global step %s after the last training step (the final '
               'checkpoint or the close of the session; %s: %s); exiting retryable, a restart '
               'resumes from the latest checkpoint' % (
                   fault_tolerance.lost_tasks(error.message), self.last_step,
                   type(error).__name__, fault_tolerance.error_summary(error.message)))
    logging.error('%s', message)
    if self.end_job is not None:
      fault_tolerance.run_bounded(lambda: self.end_job(message),
                                  fault_tolerance.LAST_WORDS_SECS, 'telling the ps tasks')
    raise TaskFailed(message) from None


class _NotingLostPeers(object):
  """The context of `TaskFaults.noting_lost_peers`."""

  def __init__(self, faults, last_step_fn):
    self._faults = faults
    self._last_step_fn = last_step_fn

  def __enter__(self):
    return self

  def __exit__(self, kind, error, traceback):
    if kind is not None and issubclass(kind, fault_tolerance.PEER_ERRORS):
      self._faults.note_lost_peer(error, self._last_step_fn())
    return False


class BoundedSession(tf_session_lib.SessionInterface):
  """A training session as the fault runtime hands it to a loop.

  It holds a `tf.compat.v1.Session` and the task's `TaskFaults`, and it is
  what the loop runs its steps through and closes: `run` starts the recovery
  deadline when a step fails on a lost peer, runs again a step that
  TensorFlow refused only for a repeated request id (no peer was lost: the
  session stays), and `close` is bounded
  (`fault_tolerance.close_session`: the termination grace after the last
  step, a few seconds for the broken session of a lost peer) and names the
  ps tasks it waits for when slow. Savers, hooks and queue runners accept it
  as the session it holds.

  Args:
    session: the `tf.compat.v1.Session` just created.
    faults: the task's `TaskFaults`.
    last_step_fn: returns the last global step reached, for the log line of
      a lost peer (default: `faults.last_step`).
    stop_step_watch_on_loss: a lost peer stops the step deadline (the
      recovery has its own); False leaves it to the loop.

  Attributes:
    duplicate_requests: how many runs were refused as a repeated request id
      and run again.
  """

  def __init__(self, session, faults, last_step_fn=None, stop_step_watch_on_loss=True):
    self.duplicate_requests = 0
    self._session = session
    self._faults = faults
    self._last_step_fn = last_step_fn or (lambda: faults.last_step)
    self._stop_step_watch_on_loss = stop_step_watch_on_loss

  @property
  def session(self):
    """The `tf.compat.v1.Session` held."""
    return self._session

  @property
  def graph(self):
    return self._session.graph

  @property
  def sess_str(self):
    return self._session.sess_str

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """`Session.run`; a lost peer starts the recovery deadline before the error goes on.

    A run that a worker service refused as a repeated request id
    (`deployment.request_ids`) runs again in this session, up to
    `request_ids.RETRIES` times in a row, with new ids.
    """
    return self._bounded(lambda: self._session.run(
        fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata))

  def _bounded(self, run_once):
    """`run_once()`, again after a refused request id; a lost peer noted before it goes on."""
    refused = 0
    while True:
      try:
        return run_once()
      except fault_tolerance.PEER_ERRORS as e:
        if refused < request_ids.RETRIES and request_ids.is_duplicate_request(e):
          refused += 1
          self.duplicate_requests += 1
          logging.warning('a run was refused as a repeated request id (%s); running it '
                          'again in the same session (%d of %d)', request_ids.what_was_refused(e),
                          refused, request_ids.RETRIES)
          continue
        if self._stop_step_watch_on_loss:
          self._faults.stop_step_watch()
        self._faults.note_lost_peer(e, self._last_step_fn())
        raise

  def partial_run_setup(self, fetches, feeds=None):
    return self._session.partial_run_setup(fetches, feeds)

  def partial_run(self, handle, fetches, feed_dict=None):
    return self._session.partial_run(handle, fetches, feed_dict)

  def make_callable(self, fetches, feed_list=None, accept_options=False):
    """`Session.make_callable`; its calls are bounded as `run` is (queue runners use it)."""
    call = self._session.make_callable(fetches, feed_list, accept_options)
    return lambda *args, **kwargs: self._bounded(lambda: call(*args, **kwargs))

  def list_devices(self):
    return self._session.list_devices()

  def close(self):
    """Closes the session, within `TaskFaults.close_timeout_secs` when it has ps peers.

    Returns:
      False when the close was left running in a thread, else True.
    """
    peers = self._faults.session_peers
    if not peers:
      self._session.close()
      return True
    recovering = self._faults.recovery is not None and self._faults.recovery.recovering
    return fault_tolerance.close_session(
        self._session.close, self._faults.close_timeout_secs(), [name for name, _ in peers],
        after='the session broke on a lost peer' if recovering else 'training has ended')


def serve_ps(server, cluster, settings, chief_seen=True):
  """Runs a ps task until training is over.

  Args:
    server: the task's started `tf.distribute.Server`.
    cluster: its `deployment.cluster.ClusterConfig`.
    settings: its `FaultSettings`.
    chief_seen: the caller has just talked to the chief (e.g. the startup
      cluster check), so the chief timeout applies from now on.

  Returns:
    `exit_codes.DONE`.

  Raises:
    TrainingPreempted: after SIGTERM, once the training tasks stopped or the
      termination grace passed.
    TaskFailed: when the chief was lost past its timeout, or said the job failed.
  """
  try:
    code = cluster_runtime.serve_until_training_done(
        server, cluster, chief_timeout_secs=settings.chief,
        startup_timeout_secs=settings.startup,
        termination_grace_secs=settings.termination_grace, chief_seen=chief_seen,
        config_name=settings.source)
  except (cluster_runtime.ChiefLostError, cluster_runtime.JobFailedError) as e:
    logging.error('%s', e)
    raise TaskFailed(str(e)) from None
  if code == exit_codes.PREEMPTED:
    raise TrainingPreempted('ps task %d: stopped after SIGTERM' % cluster.task_index)
  return code


def signal_preempted(master, cluster, settings):
  """Tells the ps tasks that this training task stopped on SIGTERM (within the grace).

  Args:
    master: gRPC target of this task's server (None or '': not in a cluster).
    cluster: its `deployment.cluster.ClusterConfig`.
    settings: its `FaultSettings`.
  """
  if master and cluster.is_distributed and cluster.num_ps_tasks:
    cluster_runtime.signal_training_done(
        master, cluster, status=cluster_runtime.PREEMPTED,
        timeout_secs=settings.termination_grace)
