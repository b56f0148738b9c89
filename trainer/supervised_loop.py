"""The legacy trainer's session loop: a Supervisor driven the way slim.learning.train drives it.

`slim.learning.train` builds a `tf.compat.v1.train.Supervisor`, opens a
session with it (restoring the latest checkpoint, or initialising, or waiting
for the chief), starts the checkpoint and summary services and the queue
runners, calls a step function until it says stop, writes a final checkpoint
on the chief, and starts over in a new session after an `AbortedError`.
`run_supervised` does the same for `trainer.trainer.run_training`, with one
thing that `learning.train` cannot offer: the session is closed through the
fault runtime's `deployment.fault_runtime.BoundedSession`, so closing it after
the last step, or after a step failed on a lost ps, waits only as long as the
runtime allows (TensorFlow's own close waits for a lost ps without a limit).

Usage (trainer.trainer.run_training does this):

    runner = training_loop.TrainStepRunner(number_of_steps=1000, faults=faults, ...)
    loss = supervised_loop.run_supervised(
        train_op, train_dir, step_fn=runner, bounded_session_fn=runner.session_for,
        master=server.target, is_chief=True, saver=saver)

Differs on purpose from `slim.learning.train`:
  * the session is closed by `bounded_session_fn(session).close()`, and the
    Supervisor's threads (queue runners, the chief's checkpoint, summary and
    step-counter services) run through that object: a run TensorFlow refuses
    as a repeated request id runs again there, where in `learning.train` it
    ended the session from whichever thread met it;
  * the chief writes its final checkpoint after the Supervisor's threads have
    stopped, not before: a periodic save still in progress (the first one of
    a short run on a loaded machine) could otherwise end last and leave the
    `checkpoint` file naming an older step; an error a thread raised now
    ends the run before that final checkpoint;
  * the step function decides logging and stopping itself: no
    `train_step_kwargs` ops are added to the graph and the step function is
    called with an empty dict;
  * `startup_delay_steps`, `trace_every_n_steps`, `init_feed_dict`, `graph`
    and `summary_writer` are not arguments (`TrainStepRunner` waits out the
    startup delay; the graph is the default one; the Supervisor's default
    summary writer is used).
Op names (`init_ops/...`), log messages and the retry on `AbortedError`
follow `learning.train`.
"""

from core import logs as logging
import tensorflow as tf


def run_supervised(train_op, logdir, step_fn, bounded_session_fn, master='', is_chief=True,
                   session_config=None, init_fn=None, summary_op=None,
                   save_summaries_secs=600, save_interval_secs=600, sync_optimizer=None,
                   saver=None, ignore_live_threads=False):
  """Trains in Supervisor sessions until `step_fn` says stop.

  Args:
    train_op: the tensor that runs one step and returns the loss.
    logdir: where checkpoints and summaries go (None: neither).
    step_fn: callable(session, train_op, global_step, {}) -> (loss, should_stop).
    bounded_session_fn: callable(tf.compat.v1.Session) -> a session around it
      (a `SessionInterface` with `make_callable`) whose `close()` closes it
      within a bound, and through which the Supervisor's threads run (e.g. a
      `deployment.fault_runtime.BoundedSession`, or `TrainStepRunner.session_for`).
    master: the session target ('' = in process).
    is_chief: whether this task initialises the model and writes checkpoints.
    session_config: a `tf.compat.v1.ConfigProto`, or None.
    init_fn: optional callable(session) run once after initialisation, on
      the chief (e.g. restore a fine-tune checkpoint).
    summary_op: the summary op the Supervisor runs every
      `save_summaries_secs` (None: no summaries).
    save_summaries_secs, save_interval_secs: the Supervisor's summary and
      checkpoint periods.
    sync_optimizer: a `SyncReplicasOptimizer`, a list of them, or None.
    saver: the Saver for checkpoints (None: a new `tf.compat.v1.train.Saver`).
    ignore_live_threads: passed to `Supervisor.stop` after the final
      checkpoint (a sync chief's token queue runner may still be blocked).

  Returns:
    The loss of the last step, or None if no step ran.

  Raises:
    ValueError: `train_op` is None, or `sync_optimizer` holds something else
      than a `SyncReplicasOptimizer`.
    Whatever a step or a Supervisor service raised, other than
    `tf.errors.AbortedError` (a new session is started after one) and
    `tf.errors.OutOfRangeError` (the input ran out: training stops).
  """
  if train_op is None:
    raise ValueError('train_op cannot be None.')
  sync_optimizers = _as_list(sync_optimizer)
  graph = tf.compat.v1.get_default_graph()
  global_step = tf.compat.v1.train.get_or_create_global_step()
  saver = saver or tf.compat.v1.train.Saver()
  init_ops = _init_ops(is_chief, sync_optimizers)
  # Before the Supervisor finalizes the graph: these add ops.
  chief_sync = _ChiefSync(sync_optimizers) if is_chief and sync_optimizers else None
  supervisor = tf.compat.v1.train.Supervisor(
      graph=graph, is_chief=is_chief, logdir=logdir, summary_op=summary_op,
      global_step=global_step, saver=saver, save_summaries_secs=save_summaries_secs,
      save_model_secs=save_interval_secs, init_fn=init_fn, **init_ops)
  while True:
    try:
      return _train_in_one_session(
          supervisor, master, session_config, step_fn, bounded_session_fn, train_op,
          global_step, chief_sync, ignore_live_threads)
    except tf.errors.AbortedError:
      logging.info('Retrying training!')


def _as_list(sync_optimizer):
  if sync_optimizer is None:
    return []
  optimizers = sync_optimizer if isinstance(sync_optimizer, (list, tuple)) else [sync_optimizer]
  for optimizer in optimizers:
    if not isinstance(optimizer, tf.compat.v1.train.SyncReplicasOptimizer):
      raise ValueError('`sync_optimizer` must be a tf.train.SyncReplicasOptimizer.')
  return list(optimizers)


def _init_ops(is_chief, sync_optimizers):
  """The Supervisor's init, ready and local-init ops, named as learning.train names them.

  With sync optimizers the local init also sets the task's local step (the
  chief's `chief_init_op`, a worker's `local_step_init_op`), and a task may
  run it only once the optimizers' variables are ready.
  """
  with tf.compat.v1.name_scope('init_ops'):
    ops = {
        'init_op': tf.compat.v1.global_variables_initializer(),
        'ready_op': tf.compat.v1.report_uninitialized_variables(),
        'local_init_op': tf.group(tf.compat.v1.local_variables_initializer(),
                                  tf.compat.v1.tables_initializer()),
        'ready_for_local_init_op': None,
    }
    if sync_optimizers:
      with tf.control_dependencies([ops['local_init_op']]):
        ops['local_init_op'] = tf.group(*[
            optimizer.chief_init_op if is_chief else optimizer.local_step_init_op
            for optimizer in sync_optimizers])
      ops['ready_for_local_init_op'] = tf.concat(
          [optimizer.ready_for_local_init_op for optimizer in sync_optimizers], axis=0)
  return ops


class _ChiefSync:
  """The sync chief's extra work in each session: the token queue runner, then the first tokens."""

  def __init__(self, sync_optimizers):
    self._queue_runners = [optimizer.get_chief_queue_runner() for optimizer in sync_optimizers]
    self._init_tokens = [optimizer.get_init_tokens_op() for optimizer in sync_optimizers]

  def start(self, supervisor, session):
    supervisor.start_queue_runners(session, self._queue_runners)
    session.run(self._init_tokens)


def _train_in_one_session(supervisor, master, session_config, step_fn, bounded_session_fn,
                          train_op, global_step, chief_sync, ignore_live_threads):
  """One Supervisor session, from its start to its bounded close; returns the last loss.

  As `Supervisor.managed_session`: whatever fails, the Supervisor's threads are
  stopped first (its `stop()` raises the first error again), then the session
  is closed, here through `bounded_session_fn`.
  """
  bounded = loss = None
  try:
    session = supervisor.prepare_or_wait_for_session(
        master, config=session_config, start_standard_services=False)
    logging.info('Starting Session.')
    bounded = bounded_session_fn(session)
    # The Supervisor's threads run through it too: a run TensorFlow refuses as a
    # repeated request id, which ended the session from a queue runner in the
    # elastic benchmark, runs again there as the steps' runs do.
    if supervisor.is_chief and supervisor.save_path:
      supervisor.start_standard_services(bounded)
    threads = supervisor.start_queue_runners(bounded)
    logging.info('Starting Queues.')
    if chief_sync is not None:
      chief_sync.start(supervisor, bounded)
    loss = _run_steps(supervisor, step_fn, session, train_op, global_step)
    if supervisor.is_chief and supervisor.save_path:
      # Threads first: a periodic save still running must not end after the
      # final one (the `checkpoint` file would name the older step).
      supervisor.stop(threads, close_summary_writer=True,
                      ignore_live_threads=ignore_live_threads)
      logging.info('Finished training! Saving model to disk.')
      supervisor.saver.save(session, supervisor.save_path, global_step=global_step)
  except Exception as e:  # noqa: BLE001  (stop() below raises it again)
    supervisor.request_stop(e)
  finally:
    try:
      supervisor.stop(close_summary_writer=True)
    finally:
      if bounded is not None:
        _close_quietly(bounded)
  return loss


def _run_steps(supervisor, step_fn, session, train_op, global_step):
  loss = None
  try:
    while not supervisor.should_stop():
      loss, should_stop = step_fn(session, train_op, global_step, {})
      if should_stop:
        logging.info('Stopping Training.')
        supervisor.request_stop()
        break
  except tf.errors.OutOfRangeError as e:
    logging.info('Caught OutOfRangeError. Stopping Training. %s', e)
  return loss


def _close_quietly(bounded):
  """Closes the session; like the Supervisor, an error from the close is not the run's."""
  try:
    bounded.close()
  except Exception as e:  # noqa: BLE001
    logging.info('closing the training session raised %s: %s (ignored)',
                 type(e).__name__, e)
