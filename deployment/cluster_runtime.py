"""The distributed runtime: startup waits, the ps serving loop, the done signal.

Every cluster task, whichever workflow started it (`python -m trainer.train`
or `estimator.train_and_evaluate`), follows one protocol:

1. Startup. A training task first waits until every ps task accepts
   connections (`wait_for_tasks`); a non-chief task then waits until the chief
   has initialised the model (`wait_for_model_ready`). Both log while they
   wait and raise a clear error naming the deploy_config field once their
   timeout is spent, instead of TF's silent, endless retry.
2. Serving. A ps task runs `serve_until_training_done`: it serves the
   variables and, between polls of its done queue, checks that the chief's
   port still answers (it gives up `PS_CHIEF_TIMEOUT_MARGIN_SECS` after the
   training tasks would, so that they always exit first).
3. Done signal. Each ps task owns a small FIFO queue, shared by name. A
   training task that stopped puts its token (-1 for a chief or master, else
   its worker index), a status and a reason into every ps task's queue
   (`signal_training_done`). A ps returns once it has the chief's FINISHED
   token and every worker's (a worker that stopped on SIGTERM, e.g. removed
   by a scale-down, counts as done), or when the workers' grace period after
   the chief's token ran out; a worker that joined the running job
   (deployment/elastic.py) says so with a JOINED token and is waited for
   too; it raises `ChiefLostError` when the chief has been
   unreachable too long, and `JobFailedError` when the chief sent FAILED.
4. Termination. After SIGTERM a ps keeps serving until the chief (having
   written its final checkpoint) and every worker sent their token, at most
   `termination_grace_secs`, then returns `exit_codes.PREEMPTED`. A PREEMPTED
   token without SIGTERM at the ps (one task preempted alone) changes
   nothing: the ps waits for that task's restart.

    # ps task:
    server = cluster.start_server()
    cluster_runtime.serve_until_training_done(server, cluster, chief_timeout_secs=300)

    # training task:
    cluster_runtime.wait_for_tasks(cluster.cluster_spec.job_tasks('ps'), timeout_secs=600)
    ...  # train
    cluster_runtime.signal_training_done(server.target, cluster)

Differs on purpose from the originals (a ps that runs `server.join()` forever
and needs an external kill; tf.estimator's chief that waited on its own
"workers done" queue): the ps exits 0 by itself, and the ps, which must
outlive every worker anyway, is the one place that counts who finished.
"""

import signal
import socket
import threading
import time

from core import logs as logging
import tensorflow as tf

from deployment import exit_codes
from deployment import request_ids

_DONE_QUEUE_NAME = 'slimtrain_training_done_%d'
_POLL_SECS = 2.0
# A ps gives up on a lost chief this much later than the training tasks do.
# Every task measures the same outage, from its own last answer of the
# chief's port (each checks every _POLL_SECS, and a probe of a dropped route
# takes up to 1 s), so without a margin which one reaches the limit first is
# a race: a worker that lost the race also found the ps gone and blamed both.
# With it every training task names the chief alone and exits first, then the
# ps follows (docs/fault_tolerance.md, "A lost chief").
PS_CHIEF_TIMEOUT_MARGIN_SECS = 10

# What a training task tells the ps tasks with its token.
FINISHED = 0   # training reached its end
PREEMPTED = 1  # stopped on SIGTERM (the chief after its checkpoint)
FAILED = 2     # the chief gave up (a sync replica missing, ...): the job must restart
JOINED = 3     # a worker joined the running job (deployment/elastic.py): wait for it too


class ChiefLostError(RuntimeError):
  """The chief has been unreachable for longer than the allowed timeout."""


class JobFailedError(RuntimeError):
  """The chief reported that the job failed and must be restarted."""


def _ps_device(task_index):
  return '/job:ps/task:%d/device:CPU:0' % task_index


def _done_queue(task_index):
  with tf.compat.v1.device(_ps_device(task_index)):
    # (token, FINISHED / PREEMPTED / FAILED, reason)
    return tf.queue.FIFOQueue(
        capacity=16, dtypes=[tf.int32, tf.int32, tf.string], shapes=[[], [], []],
        shared_name=_DONE_QUEUE_NAME % task_index,
        name='training_done_queue_%d' % task_index)


def chief_device(cluster):
  """The device string of the chief task of a `deployment.cluster` config."""
  jobs = cluster.cluster_spec.jobs
  # Without a chief or master job, worker 0 is the chief (as tf.estimator).
  job = next((j for j in ('chief', 'master') if j in jobs), 'worker')
  return '/job:%s/task:0/device:CPU:0' % job


def chief_address(cluster):
  """('host:port', '/job:chief/task:0') of the chief task of a `deployment.cluster` config."""
  task = chief_device(cluster)[:-len('/device:CPU:0')]
  job = task.split('/')[1][len('job:'):]
  return cluster.cluster_spec.task_address(job, 0), task


class StartupTimeoutError(RuntimeError):
  """A task this one needs did not come up within the startup timeout."""


def reachable(address, timeout_secs=1.0):
  """Whether something accepts TCP connections at 'host:port' (or '[v6]:port')."""
  host, port = address.rsplit(':', 1)
  try:
    with socket.create_connection((host.strip('[]'), int(port)), timeout=timeout_secs):
      return True
  except OSError:
    return False


def ps_peers(cluster):
  """[('/job:ps/task:i', 'host:port')] of a `deployment.cluster` config ([] without ps)."""
  if not cluster.num_ps_tasks:
    return []
  return [('/job:ps/task:%d' % index, address)
          for index, address in enumerate(cluster.cluster_spec.job_tasks('ps'))]


def unreachable(peers):
  """['/job:ps/task:1 (10.0.0.3:2222)', ...]: those of `peers` that refuse or drop a connect.

  Args:
    peers: [(task name, 'host:port')].
  """
  return ['%s (%s)' % (name, address) for name, address in peers if not reachable(address)]


def wait_for_tasks(addresses, timeout_secs, what='ps tasks', log_every_secs=5.0,
                   poll_secs=0.5):
  """Waits until every 'host:port' in `addresses` accepts connections.

  A TF session blocks forever (logging from C++) when a task of its cluster is
  missing; probing the ports first turns a late or absent task into a
  periodic log line and, after `timeout_secs`, a clear error.

  Args:
    addresses: list of 'host:port'.
    timeout_secs: give up after this long.
    what: words for the log lines and the error, e.g. 'ps tasks'.
    log_every_secs: seconds between "waiting" log lines.
    poll_secs: seconds between probes.

  Raises:
    StartupTimeoutError: naming the tasks still unreachable.
  """
  start = last_log = time.time()
  while True:
    missing = [a for a in addresses if not reachable(a)]
    if not missing:
      return
    waited = time.time() - start
    if waited > timeout_secs:
      raise StartupTimeoutError(
          '%s %s still unreachable after %.0f s (deploy_config.startup_timeout_secs=%d); '
          'start them or raise the timeout' % (what, ', '.join(missing), waited,
                                               timeout_secs))
    if time.time() - last_log >= log_every_secs:
      logging.info('waiting for %s %s (%.0f s of %d s)', what, ', '.join(missing),
                   waited, timeout_secs)
      last_log = time.time()
    time.sleep(poll_secs)


def wait_for_model_ready(master, config, timeout_secs, log_every_secs=5.0, poll_secs=0.5):
  """Non-chief tasks: waits until the chief initialised the default graph's variables.

  The Supervisor of a non-chief worker re-checks only every 30 s; this polls
  every `poll_secs`, logs every `log_every_secs` and gives up with a clear
  error after `timeout_secs`.

  Args:
    master: gRPC target of this task's server.
    config: the session ConfigProto (device filters included).
    timeout_secs: deploy_config.startup_timeout_secs.
    log_every_secs: seconds between "waiting" log lines.
    poll_secs: seconds between checks.

  Raises:
    TimeoutError: naming what is still uninitialised.
  """
  ready_op = tf.compat.v1.report_uninitialized_variables(tf.compat.v1.global_variables())
  options = tf.compat.v1.RunOptions(timeout_in_ms=int(max(poll_secs, 5.0) * 1000))
  start = last_log = time.time()
  with tf.compat.v1.Session(master, config=config) as sess:
    while True:
      try:
        missing = sess.run(ready_op, options=options)
      except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
              tf.errors.AbortedError) as e:
        missing = [e.message.encode()]
      if not len(missing):
        return
      waited = time.time() - start
      if waited > timeout_secs:
        raise TimeoutError(
            'the chief did not initialise the model within %.0f s '
            '(deploy_config.startup_timeout_secs=%d); still uninitialised: %s' % (
                waited, timeout_secs, b', '.join(missing[:5]).decode()))
      if time.time() - last_log >= log_every_secs:
        logging.info('waiting for the chief to initialise the model (%.0f s of %d s)',
                     waited, timeout_secs)
        last_log = time.time()
      time.sleep(poll_secs)


def replica_token(cluster):
  """The token a training task puts into the done queues: -1 chief/master, else its index."""
  return -1 if cluster.task_type in ('chief', 'master') else cluster.task_index


def _expected_tokens(cluster):
  jobs = cluster.cluster_spec.jobs
  tokens = {-1} if ('chief' in jobs or 'master' in jobs) else set()
  if 'worker' in jobs:
    tokens |= set(range(cluster.cluster_spec.num_tasks('worker')))
  return tokens


def _chief_token(cluster):
  jobs = cluster.cluster_spec.jobs
  return -1 if ('chief' in jobs or 'master' in jobs) else 0


def run_once_quietly(target, graph, config, fetch, failure):
  """Runs `fetch` once in a new session on `target`; logs a failure, never raises.

  For a task's last words to a peer that may be going away at the same moment
  (a whole job ending): the session's close talks to the peer too, and a
  peer gone between the run and the close made the close raise
  (`DeadlineExceededError` after `config.operation_timeout_in_ms` when the
  peer was the session's master) or wait for good (a ps of a session on this
  task's own server), which ended a worker removed by SIGTERM with exit 1
  instead of 143, or held it until its termination grace ran out.

  Args:
    target: the gRPC target of the session.
    graph: the graph of `fetch`.
    config: its `ConfigProto`; give it an `operation_timeout_in_ms`: the
      bound of the run and of the close.
    fetch: what to run.
    failure: the start of the warning logged when the run or the close fails.

  Returns:
    True when the run succeeded (whatever the close did: left running past
    the timeout, it goes on in a daemon thread).
  """
  try:
    sess = tf.compat.v1.Session(target, graph=graph, config=config)
  except tf.errors.OpError as e:
    logging.warning('%s: %s', failure, e.message)
    return False
  ran = False
  try:
    sess.run(fetch, options=tf.compat.v1.RunOptions(
        timeout_in_ms=config.operation_timeout_in_ms))
    ran = True
  except tf.errors.OpError as e:
    logging.warning('%s: %s', failure, e.message)
  _close_within(sess, config.operation_timeout_in_ms / 1000.0, failure)
  return ran


# Session closes left running in a thread (`close_in_thread`): a process exiting
# with one skips the interpreter's teardown (`fault_tolerance.exit_process`).
abandoned_closes = []


def close_in_thread(close, timeout_secs, report_secs=None, report=None):
  """Runs `close()` in a daemon thread and waits for it at most `timeout_secs`.

  The one place where a session close may be left behind: TensorFlow's close
  of a cluster session can wait for good on a peer that is gone.

  Args:
    close: the callable that closes (a `Session.close`, or a wrapper of it).
    timeout_secs: how long to wait; None waits as long as it takes.
    report_secs: with `report`, call `report(seconds so far)` every this many
      seconds while the close goes on.
    report: see `report_secs`.

  Returns:
    True when the close finished in time; False when it was left running (the
    thread is then in `abandoned_closes`).
  """
  start = time.time()
  thread = threading.Thread(target=close, name='SessionClose', daemon=True)
  thread.start()
  while True:
    remaining = None if timeout_secs is None else timeout_secs - (time.time() - start)
    if remaining is not None and remaining <= 0:
      break
    step = report_secs if report is not None else None
    thread.join(remaining if step is None else (
        step if remaining is None else min(step, remaining)))
    if not thread.is_alive():
      return True
    if report is not None:
      report(time.time() - start)
  abandoned_closes.append(thread)
  return False


def _close_within(sess, timeout_secs, failure):
  """Closes `sess` in a thread; gives up waiting after `timeout_secs`, never raises.

  A close whose peer is gone raises after the operation timeout when the peer
  was the session's master, and waits for good when it was another task.
  """
  def close():
    try:
      sess.close()
    except tf.errors.OpError as e:
      logging.warning('%s (closing its session): %s', failure, e.message)
  if not close_in_thread(close, timeout_secs):
    logging.warning('%s (closing its session): no answer within %.0f s; going on',
                    failure, timeout_secs)


def signal_training_done(master, cluster, timeout_secs=60, status=FINISHED, reason=''):
  """Tells every ps task of `cluster` that this training task has stopped.

  Args:
    master: gRPC target of this training task's server.
    cluster: a `deployment.cluster.ClusterConfig`.
    timeout_secs: how long to try to reach each ps.
    status: FINISHED (training is over), PREEMPTED (stopped on SIGTERM),
      FAILED (the chief gives up on the job; `reason` says why) or JOINED (a
      worker new to the running job).
    reason: a message the ps tasks log.
  """
  if not cluster.num_ps_tasks:
    return
  token = replica_token(cluster)
  this_task = '/job:%s/task:%d' % (cluster.task_type, cluster.task_index)
  timeout_ms = int(timeout_secs * 1000)
  # One session per ps: a session spanning them all could not even be made
  # while one of them is cut off, and the others would never be told.
  for task_index, address in enumerate(cluster.cluster_spec.job_tasks('ps')):
    if not reachable(address):
      logging.warning('could not tell ps task %d (%s) that training is done: unreachable',
                      task_index, address)
      continue
    with tf.Graph().as_default() as graph:
      enqueue = _done_queue(task_index).enqueue([token, status, reason])
      # The operation timeout bounds the close too, which waits for the ps.
      config = cluster.propagate_cluster(tf.compat.v1.ConfigProto(
          device_filters=['/job:ps/task:%d' % task_index, this_task],
          operation_timeout_in_ms=timeout_ms))
      run_once_quietly(master, graph, config, enqueue,
                       'could not tell ps task %d that training is done' % task_index)
  logging.info('told %d ps task(s) that %s:%d %s', cluster.num_ps_tasks, cluster.task_type,
               cluster.task_index, {FINISHED: 'finished training', PREEMPTED: 'was preempted',
                                    FAILED: 'ended the job (failed)',
                                    JOINED: 'joined the job'}[status])


def job_failed_notice(master, cluster):
  """A chief's last words before a retryable exit: the ps tasks learn the job failed.

  Args:
    master: gRPC target of the chief's server.
    cluster: a `deployment.cluster.ClusterConfig`.

  Returns:
    callable(message) telling every ps task (within 10 s each) that the job
    failed and why, so they exit retryable too instead of waiting for it.
  """
  def tell(message):
    signal_training_done(master, cluster, timeout_secs=10, status=FAILED, reason=message)
  return tell


class _DoneTokens(object):
  """What a ps task heard from the training tasks, and whether it may exit."""

  def __init__(self, cluster, chief_timeout_secs, termination_grace_secs,
               config_name='deploy_config'):
    self.config_name = config_name
    self.expected, self.chief = _expected_tokens(cluster), _chief_token(cluster)
    self.task_index = cluster.task_index
    self.finished, self.stopped = set(), set()
    self.chief_done_at = self.terminating_since = None
    self.worker_grace_secs = chief_timeout_secs
    self.termination_grace_secs = termination_grace_secs

  def add(self, token, status, reason):
    """Records one token; raises JobFailedError for the chief's FAILED."""
    if status == FAILED:
      raise JobFailedError('ps task %d: the chief ended the job: %s' % (
          self.task_index, reason.decode(errors='replace')))
    if status == JOINED:
      if token not in self.expected:
        self.expected.add(token)
        logging.info('ps task %d: worker %d joined; waiting for it at the end too',
                     self.task_index, token)
      self.stopped.discard(token)
      return
    if status == PREEMPTED:
      self.stopped.add(token)
      if token == self.chief:
        logging.info('ps task %d: the chief was preempted%s', self.task_index,
                     '; chief wrote its final checkpoint' if self.terminating_since else
                     '; serving until it comes back')
      return
    self.finished.add(token)
    if token == self.chief and self.chief_done_at is None:
      self.chief_done_at = time.time()
      logging.info('ps task %d: chief reports training done', self.task_index)

  def exit_code(self):
    """The exit code once this ps may exit, else None."""
    if self.terminating_since is not None:
      stopped = self.finished | self.stopped
      if self.chief in stopped and stopped >= self.expected:
        logging.info('ps task %d: SIGTERM; every training task stopped; exiting',
                     self.task_index)
        return exit_codes.PREEMPTED
      if time.time() - self.terminating_since > self.termination_grace_secs:
        logging.warning('ps task %d: SIGTERM and %s.termination_grace_secs=%d '
                        'passed; tasks %s did not report; exiting', self.task_index,
                        self.config_name, self.termination_grace_secs,
                        sorted(self.expected - stopped))
        return exit_codes.PREEMPTED
      return None
    if self.chief_done_at is None:
      return None
    if self.finished >= self.expected:
      logging.info('ps task %d: every worker finished; exiting', self.task_index)
      return exit_codes.DONE
    left = (self.stopped - {self.chief}) - self.finished
    if self.finished | left >= self.expected:
      logging.info('ps task %d: every worker finished or left on SIGTERM (workers %s); '
                   'exiting', self.task_index, sorted(left))
      return exit_codes.DONE
    if time.time() - self.chief_done_at > self.worker_grace_secs:
      logging.info('ps task %d: workers %s did not report within %d s of the chief; exiting',
                   self.task_index, sorted(self.expected - self.finished),
                   self.worker_grace_secs)
      return exit_codes.DONE
    return None


def _on_sigterm(tokens):
  """While serving, SIGTERM starts the termination grace instead of killing the ps."""
  def handler(unused_signum, unused_frame):
    if tokens.terminating_since is None:
      tokens.terminating_since = time.time()
      logging.warning('ps task %d: SIGTERM; serving until the chief wrote its final '
                      'checkpoint, at most %s.termination_grace_secs=%d',
                      tokens.task_index, tokens.config_name, tokens.termination_grace_secs)
  if threading.current_thread() is not threading.main_thread():
    return None
  return signal.signal(signal.SIGTERM, handler)


def serve_until_training_done(server, cluster, chief_timeout_secs=300,
                              startup_timeout_secs=600, termination_grace_secs=25,
                              chief_seen=False, config_name='deploy_config'):
  """Runs a ps task until the chief signals the end of training.

  After the chief's signal the ps keeps serving until every other worker has
  said it finished too (so none loses its variables mid-step), but at most
  `chief_timeout_secs`. A chief lost while training runs ends it after
  `chief_timeout_secs + PS_CHIEF_TIMEOUT_MARGIN_SECS`: the training tasks,
  which watch the same chief with `chief_timeout_secs`, exit first and name
  the chief, not this ps, as what they lost. After SIGTERM it keeps serving until the chief (its
  final checkpoint written) and the workers said they stopped, but at most
  `termination_grace_secs`.

  Args:
    server: this ps task's started `tf.distribute.Server`.
    cluster: its `deployment.cluster.ClusterConfig`.
    chief_timeout_secs: the training tasks' limit for a lost chief; this ps
      raises ChiefLostError once the chief, after having been seen, is
      unreachable this long plus `PS_CHIEF_TIMEOUT_MARGIN_SECS`.
    startup_timeout_secs: same, for a chief that is never seen at all.
    chief_seen: True when the caller has just talked to the chief (e.g. the
      startup cluster check), so `chief_timeout_secs` applies from now on.
    termination_grace_secs: deploy_config.termination_grace_secs.
    config_name: where the timeouts come from, for the log lines:
      'deploy_config' (the pipeline) or 'RunConfig' (the Estimator path).

  Returns:
    The exit code: `exit_codes.DONE`, or `exit_codes.PREEMPTED` after SIGTERM.

  Raises:
    ChiefLostError: when the chief is gone too long.
    JobFailedError: when the chief reported that the job failed.
  """
  tokens = _DoneTokens(cluster, chief_timeout_secs, termination_grace_secs, config_name)
  previous_handler = _on_sigterm(tokens)
  try:
    with tf.Graph().as_default() as graph:
      dequeue = _done_queue(cluster.task_index).dequeue()
      wait_options = tf.compat.v1.RunOptions(timeout_in_ms=int(_POLL_SECS * 1000))
      # Only this ps's own devices: a session that spans a dead task would block.
      config = tf.compat.v1.ConfigProto(
          device_filters=['/job:ps/task:%d' % cluster.task_index])
      with tf.compat.v1.Session(server.target, graph=graph, config=config) as sess:
        chief_watch = ChiefWatch(
            cluster, chief_timeout_secs + PS_CHIEF_TIMEOUT_MARGIN_SECS, startup_timeout_secs,
            chief_seen=chief_seen, setting='%s.chief_timeout_secs + %d s ps margin' % (
                config_name, PS_CHIEF_TIMEOUT_MARGIN_SECS))
        while True:
          try:
            tokens.add(*sess.run(dequeue, options=wait_options))
          except tf.errors.DeadlineExceededError:
            pass
          except tf.errors.AbortedError as e:
            if not request_ids.is_duplicate_request(e):
              raise
          code = tokens.exit_code()
          if code is not None:
            return code
          if tokens.chief_done_at is None and tokens.terminating_since is None:
            chief_watch.check()
  finally:
    if previous_handler is not None:
      signal.signal(signal.SIGTERM, previous_handler)


class ChiefWatch(object):
  """Raises ChiefLostError once the chief's port has been closed too long.

  A ps task checks between polls of its done queue; a worker of a ps cluster
  runs `watch_in_thread` beside its training, so it never trains on with
  nobody left to save its work.

  Args:
    cluster: this task's `deployment.cluster.ClusterConfig`.
    chief_timeout_secs: the limit once the chief has been seen.
    startup_timeout_secs: the limit for a chief never seen.
    chief_seen: count the chief as seen now.
    setting: the config field `chief_timeout_secs` comes from, for the message.
    peers: [(name, 'host:port')] of other tasks (the ps) that the message
      names when they are unreachable too, e.g. behind the same partition.
  """

  def __init__(self, cluster, chief_timeout_secs, startup_timeout_secs, chief_seen=False,
               setting='deploy_config.chief_timeout_secs', peers=()):
    self._cluster = cluster
    self._peers = list(peers)
    self._setting = setting
    self._address = chief_address(cluster)[0]
    self._chief = chief_device(cluster)
    self._who = '%s task %d' % (cluster.task_type, cluster.task_index)
    self._chief_timeout_secs = chief_timeout_secs
    self._startup_timeout_secs = startup_timeout_secs
    self._start = time.time()
    self._last_seen = self._start if chief_seen else None

  def check(self):
    """Returns if the chief answers (or has not been gone too long); logs while it waits.

    Raises:
      ChiefLostError: past the limit.
    """
    # The chief's gRPC port answering proves its server is up (a restarted
    # chief included).
    if reachable(self._address):
      self._last_seen = time.time()
      return
    since = self._last_seen if self._last_seen is not None else self._start
    limit = (self._chief_timeout_secs if self._last_seen is not None
             else self._startup_timeout_secs)
    waited = time.time() - since
    if waited > limit:
      others = unreachable(self._peers)
      raise ChiefLostError(
          '%s: chief %s unreachable for %.0f s (limit %d s, %s)%s; exiting' % (
              self._who, self._chief, waited, limit, self._setting,
              '; unreachable too: %s' % ', '.join(others) if others else ''))
    logging.info('%s: waiting for chief %s (%.0f s)', self._who, self._chief, waited)

  def watch_in_thread(self, on_lost, poll_secs=_POLL_SECS):
    """Checks every `poll_secs` in a daemon thread; calls `on_lost(message)` once.

    Returns:
      A `threading.Event`; set it to stop watching.
    """
    stop = threading.Event()

    def watch():
      while not stop.is_set():
        try:
          self.check()
        except ChiefLostError as e:
          if not stop.is_set():
            on_lost(str(e))
          return
        stop.wait(poll_secs)
    threading.Thread(target=watch, name='ChiefWatch', daemon=True).start()
    return stop
