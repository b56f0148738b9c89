"""`slim.learning.train` with a SyncReplicasOptimizer ends on every task (two compat fixes).

Part of the compat layer: `core/compat.py` applies it (and is its entry
point); see core/COMPAT.md for the fix ids and their tests.

A user's script in the research/slim lineage (`train_image_classifier.py
--sync_replicas`) calls tf-slim's own `slim.learning.train(train_op, logdir,
master=..., is_chief=..., sync_optimizer=opt)` with a
`tf.compat.v1.train.SyncReplicasOptimizer`, on a cluster whose ps tasks run
`server.join()`. On TF 2.21 such a job never ends cleanly:

1. The chief's sync queue runner loops "take a round of gradients from every
   accumulator, apply them, hand out tokens". After the last step it is left
   blocked in the accumulators' `take_grad`, waiting for gradients no worker
   sends, and `Session.run` cannot be interrupted; so the chief's
   `Supervisor.stop` waits out its 120 s grace period and raises
   "Coordinator stopped with threads still running" (exit 1).
2. A ps that runs `server.join()` serves for ever: nothing tells it the job
   is over.

Fix `learning.sync_replicas_stop` (1): on the chief, `slim.learning.train`
gets a shallow copy of each sync optimizer whose chief queue runner is a
`PollingQueueRunner`: it runs the same update, but only once every
accumulator holds a full round (so the update never blocks), and checks the
coordinator in between; it ends within `POLL_SECS` of the stop request.
After the step that ends training the chief also hands every replica one
more token, so no worker stays blocked waiting for one. slimtrain's own
trainer uses the same runner (`deployment/sync_replicas.py`).

Fix `learning.sync_replicas_ps_exit` (2): when a distributed run (a `master`
given) ends normally, each non-chief replica puts a token into a small queue
on the ps that holds the global step; the chief takes one token per other
replica (waiting at most `WORKERS_DONE_TIMEOUT_SECS`) and then runs TF's
`Abort` op, with `exit_without_error`, on every ps task that holds a
variable: each of those processes exits 0 from inside `server.join()`. No
code has to run in the ps process, so a ps started by any program ends. If a
replica does not report in time the ps tasks are left serving (as before),
with a warning. The abort's session is closed with GRPC_FAIL_FAST=true, set
only around it: by default TF's session close waits, without a deadline, for
the ps it has just ended.

Neither fix changes the user's optimizer, graph or arguments beyond that;
`slim.learning.train` is replaced, in `tf_slim.learning`, by a wrapper that
calls tf-slim's own function. Its docstring and signature are tf-slim's.

    import tf_slim as slim                       # compat applied by the hook or a package
    slim.learning.train(train_op, logdir, master=server.target, is_chief=is_chief,
                        number_of_steps=N, sync_optimizer=opt)
    # returns within seconds of the last step on every task; the ps exits 0
"""

import contextlib
import copy
import functools
import importlib
import importlib.metadata
import inspect
import os
import threading
import time

import tensorflow as tf
from tensorflow.python.platform import tf_logging as _logging

SYNC_STOP_FIX = 'learning.sync_replicas_stop'
SYNC_PS_EXIT_FIX = 'learning.sync_replicas_ps_exit'
FIX_IDS = (SYNC_STOP_FIX, SYNC_PS_EXIT_FIX)

# How often the chief's polling queue runner looks at the accumulators.
POLL_SECS = 0.005
# How long the chief waits, after its own last step, for the other replicas.
WORKERS_DONE_TIMEOUT_SECS = 60
# Every other remote call here (a token, the done signal, the abort).
_RPC_TIMEOUT_MS = 10000
# The done queue, shared by name on the global step's ps (same attributes everywhere).
_DONE_QUEUE_NAME = 'slimtrain_sync_replicas_done'
_DONE_QUEUE_CAPACITY = 4096
_GRPC_FAIL_FAST_ENV = 'GRPC_FAIL_FAST'
# Jobs whose tasks train or evaluate: never ended, even when they hold variables.
_TRAINING_JOBS = ('job:worker', 'job:chief', 'job:master', 'job:evaluator')

_tf1 = tf.compat.v1


class PollingQueueRunner(_tf1.train.QueueRunner):
  """Runs `update_op` only when `ready_op` is true; stops with the coordinator.

  Args:
    queue: the sync token queue (what the runner feeds).
    update_op: the chief's round: take every accumulator's gradients, apply
      them, enqueue the next tokens.
    ready_op: a bool tensor, true when every accumulator holds a full round.
  """

  def __init__(self, queue, update_op, ready_op):
    super().__init__(queue, [update_op])
    self._update_op = update_op
    self._ready_op = ready_op

  def create_threads(self, sess, coord=None, daemon=False, start=False):
    """Starts the polling thread; returns it in a list.

    Unlike TF's queue runner it never closes the token queue when the
    coordinator stops: the queue lives on the ps and outlives the chief's
    session. tf-slim answers an AbortedError with a new session on the same
    graph ("Retrying training!"), whose first tokens a closed queue refuses;
    and a worker waiting for a token would stop training (OutOfRangeError)
    although the job goes on. Workers get their last tokens from the
    chief's release after the last step instead.
    """
    thread = threading.Thread(target=self._loop, args=(sess, coord),
                              name='SyncReplicasChiefUpdates')
    if coord is not None:
      coord.register_thread(thread)
    thread.daemon = daemon
    if start:
      thread.start()
    return [thread]

  def _loop(self, sess, coord):
    try:
      while coord is None or not coord.should_stop():
        if sess.run(self._ready_op):
          sess.run(self._update_op)
        else:
          time.sleep(POLL_SECS)
    except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
      pass  # The session or the token queue closed: training is over.
    except Exception as e:  # pylint: disable=broad-except
      if coord is None:
        raise
      coord.request_stop(e)


def _task_of(device):
  """'/job:ps/task:0' of a device string, or None without a job."""
  spec = tf.DeviceSpec.from_string(device or '')
  if spec.job is None:
    return None
  return '/job:%s/task:%d' % (spec.job, spec.task or 0)


def _run_with_timeout(sess, fetches, timeout_ms=_RPC_TIMEOUT_MS):
  return sess.run(fetches, options=_tf1.RunOptions(timeout_in_ms=timeout_ms))


class _SyncReplicasEnd(object):
  """What the wrapper adds to one `slim.learning.train` call with a sync optimizer.

  Args:
    train_op: the call's train_op (its graph is the training graph).
    optimizers: the list of SyncReplicasOptimizers.
    is_chief, master: the call's arguments.
    stop: apply fix SYNC_STOP_FIX.
    ps_exit: apply fix SYNC_PS_EXIT_FIX.
  """

  def __init__(self, train_op, optimizers, is_chief, master, stop, ps_exit):
    self._is_chief = is_chief
    self._master = master
    self._release_ops = []
    graph = train_op.graph
    global_step = _tf1.train.get_global_step(graph)
    with graph.as_default():
      self.optimizers = [self._stoppable(opt, global_step) if stop and is_chief else opt
                         for opt in optimizers]
    self._replicas = getattr(optimizers[0], '_total_num_replicas', None) or 1
    own_task = _task_of(train_op.device)
    training_jobs = set(_TRAINING_JOBS) | ({own_task.split('/')[1]} if own_task else set())
    # The ps tasks: those holding variables, in a job that does not train.
    self._ps_tasks = sorted({
        task for task in (_task_of(v.device) for v in graph.get_collection(
            _tf1.GraphKeys.GLOBAL_VARIABLES))
        if task is not None and task.split('/')[1] not in training_jobs})
    step_task = _task_of(global_step.device) if global_step is not None else None
    self._queue_task = step_task if step_task in self._ps_tasks else (
        self._ps_tasks[0] if self._ps_tasks else None)
    self._ps_exit = bool(ps_exit and master and self._queue_task)

  def _stoppable(self, opt, global_step):
    """A shallow copy of `opt` whose chief queue runner is a PollingQueueRunner."""
    runner = getattr(opt, '_chief_queue_runner', None)
    accumulators = getattr(opt, '_accumulator_list', None)
    if (runner is None or isinstance(runner, PollingQueueRunner) or not accumulators
        or not hasattr(opt, '_sync_token_queue')):
      return opt  # Already stoppable (slimtrain's optimizer), or not what we know.
    ready = []
    for accumulator, device in accumulators:
      with _tf1.device(device):
        ready.append(tf.greater_equal(accumulator.num_accumulated(),
                                      opt._replicas_to_aggregate))  # pylint: disable=protected-access
    step_device = global_step.device if global_step is not None else ''
    with _tf1.device(step_device):
      ready_op = tf.reduce_all(tf.stack(ready), name='sync_replicas_round_complete')
      if global_step is not None:
        self._release_ops.append(opt._sync_token_queue.enqueue_many(  # pylint: disable=protected-access
            (tf.fill([opt._total_num_replicas], global_step.read_value()),),  # pylint: disable=protected-access
            name='sync_replicas_release_workers'))
    stoppable = copy.copy(opt)
    stoppable._chief_queue_runner = PollingQueueRunner(  # pylint: disable=protected-access
        opt._sync_token_queue, runner.enqueue_ops[0], ready_op)  # pylint: disable=protected-access
    return stoppable

  def wrap_step_fn(self, train_step_fn):
    """`train_step_fn` that, on the step that ends training, gives every replica a token."""
    if not self._release_ops:
      return train_step_fn

    def step(sess, train_op, global_step, train_step_kwargs):
      total_loss, should_stop = train_step_fn(sess, train_op, global_step, train_step_kwargs)
      if should_stop:
        try:
          _run_with_timeout(sess, self._release_ops)
        except tf.errors.OpError as e:
          _logging.warning('could not release the sync replicas workers: %s', e.message)
      return total_loss, should_stop
    return step

  def _done_queue(self):
    with _tf1.device(self._queue_task):
      return _tf1.FIFOQueue(_DONE_QUEUE_CAPACITY, [tf.int32], shapes=[[]],
                            shared_name=_DONE_QUEUE_NAME, name='sync_replicas_done')

  def _session(self, graph, task):
    return _tf1.Session(self._master, graph=graph,
                        config=_tf1.ConfigProto(device_filters=[task]))

  def after_training(self):
    """Reports this replica done (non-chief), or ends the ps tasks (chief)."""
    if not self._ps_exit:
      return
    try:
      if self._is_chief:
        self._end_ps_tasks()
      else:
        with tf.Graph().as_default() as graph:
          signal = self._done_queue().enqueue(1)
        with self._session(graph, self._queue_task) as sess:
          _run_with_timeout(sess, signal)
    except tf.errors.OpError as e:
      _logging.warning('sync replicas: could not signal the end of training to the ps '
                       'tasks: %s', e.message)

  def _end_ps_tasks(self):
    others = self._replicas - 1
    if others > 0:
      with tf.Graph().as_default() as graph:
        wait = self._done_queue().dequeue_many(others)
      with self._session(graph, self._queue_task) as sess:
        try:
          _run_with_timeout(sess, wait, WORKERS_DONE_TIMEOUT_SECS * 1000)
        except tf.errors.DeadlineExceededError:
          _logging.warning('sync replicas: %d other replicas did not report the end of '
                           'training within %d s; the ps tasks %s keep serving', others,
                           WORKERS_DONE_TIMEOUT_SECS, ', '.join(self._ps_tasks))
          return
    _logging.info('sync replicas: training is over, ending the ps tasks %s',
                  ', '.join(self._ps_tasks))
    for task in self._ps_tasks:
      _end_ps_task(self._master, task)


@contextlib.contextmanager
def _grpc_fail_fast():
  """Sets GRPC_FAIL_FAST=true for the calls inside, then restores it.

  TF reads the variable for each RPC it starts. By default a session's close
  waits, without a deadline, for a peer to answer; for the ps this module has
  just ended that would be for ever. Fail-fast calls to it fail at once.
  """
  before = os.environ.get(_GRPC_FAIL_FAST_ENV)
  os.environ[_GRPC_FAIL_FAST_ENV] = 'true'
  try:
    yield
  finally:
    if before is None:
      os.environ.pop(_GRPC_FAIL_FAST_ENV, None)
    else:
      os.environ[_GRPC_FAIL_FAST_ENV] = before


def _end_ps_task(master, task):
  """Runs `Abort(exit_without_error=True)` on `task`: that process exits 0.

  The run's answer is an Unavailable error (the ps went away mid-run), which
  is what was asked for.
  """
  with tf.Graph().as_default() as graph, _tf1.device(task):
    abort = tf.raw_ops.Abort(error_msg='slimtrain: sync replicas training is over',
                             exit_without_error=True)
  with _grpc_fail_fast():
    with _tf1.Session(master, graph=graph, config=_tf1.ConfigProto(device_filters=[task])) as sess:
      try:
        _run_with_timeout(sess, abort)
      except tf.errors.OpError:
        pass


def _wrap_train(original, stop, ps_exit):
  """`slim.learning.train` that adds `_SyncReplicasEnd` to calls with a sync_optimizer."""
  signature = inspect.signature(original)

  @functools.wraps(original)
  def train(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = bound.arguments
    sync = arguments['sync_optimizer']
    if sync is None:
      return original(*args, **kwargs)
    optimizers = list(sync) if isinstance(sync, (list, tuple)) else [sync]
    end = _SyncReplicasEnd(arguments['train_op'], optimizers, arguments['is_chief'],
                           arguments['master'], stop, ps_exit)
    arguments['sync_optimizer'] = end.optimizers
    arguments['train_step_fn'] = end.wrap_step_fn(arguments['train_step_fn'])
    total_loss = original(*bound.args, **bound.kwargs)
    end.after_training()
    return total_loss

  train.slimtrain_compat = (stop, ps_exit)
  return train


def needed():
  """The fix ids tf-slim needs: those of a `learning.train` that waits for the chief queue runner.

  Returns:
    FIX_IDS while tf-slim is 1.1.0 (its train stops the Supervisor with the
    chief queue runner still blocked), else an empty tuple.
  """
  try:
    return FIX_IDS if importlib.metadata.version('tf-slim') == '1.1.0' else ()
  except importlib.metadata.PackageNotFoundError:
    return ()


def apply(disabled):
  """Wraps `tf_slim.learning.train` with the fixes not in `disabled`.

  Args:
    disabled: set of fix ids to skip.

  Returns:
    The fix ids this call applied (empty when already wrapped or not needed).
  """
  wanted = [fix for fix in needed() if fix not in disabled]
  if not wanted:
    return []
  learning = importlib.import_module('tf_slim.learning')
  if getattr(learning.train, 'slimtrain_compat', None) is not None:
    return []
  learning.train = _wrap_train(learning.train, SYNC_STOP_FIX in wanted,
                               SYNC_PS_EXIT_FIX in wanted)
  return wanted
