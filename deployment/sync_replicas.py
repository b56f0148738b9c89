"""A SyncReplicasOptimizer whose chief can always stop.

With `tf.compat.v1.train.SyncReplicasOptimizer`, the chief's queue runner
loops on "take `replicas_to_aggregate` gradients from every accumulator, apply
them, hand out tokens". After the last step it is left blocked in
`take_grad`, waiting for gradients no worker will send; `Session.run` cannot
be interrupted, so the chief's Supervisor waits out its 120 s grace period
and, on TF 2.21, the process can hang for good. Workers, in turn, can be left
waiting for a token after the chief stopped.

Here the chief's queue runner first polls the accumulators' counts and runs
the (then non-blocking) update only when every accumulator holds enough
gradients, so it notices a stop request within a poll interval; and
`release_workers` hands every worker a final token after the last step.

    opt = sync_replicas.SyncReplicasOptimizer(base_opt, replicas_to_aggregate=2,
                                              total_num_replicas=2)
    train_op = opt.apply_gradients(grads_and_vars, global_step=global_step)
    # slim.learning.train(..., sync_optimizer=opt); after the last step the
    # chief runs opt.release_workers(sess).
"""

import threading
import time

from absl import logging
import tensorflow as tf

_POLL_SECS = 0.005


class _PollingQueueRunner(tf.compat.v1.train.QueueRunner):
  """Runs `update_op` only when `ready_op` is true; stops with the coordinator."""

  def __init__(self, queue, update_op, ready_op):
    super().__init__(queue, [update_op])
    self._update_op = update_op
    self._ready_op = ready_op

  def create_threads(self, sess, coord=None, daemon=False, start=False):
    """Starts one polling thread (and the usual close-on-stop thread)."""
    threads = [threading.Thread(target=self._loop, args=(sess, coord),
                                name='SyncReplicasChiefUpdates')]
    if coord is not None:
      threads.append(threading.Thread(target=self._close_on_stop,
                                      args=(sess, self.cancel_op, coord)))
    for thread in threads:
      if coord is not None:
        coord.register_thread(thread)
      thread.daemon = daemon
      if start:
        thread.start()
    return threads

  def _loop(self, sess, coord):
    try:
      while coord is None or not coord.should_stop():
        if sess.run(self._ready_op):
          sess.run(self._update_op)
        else:
          time.sleep(_POLL_SECS)
    except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
      pass  # The session or the token queue closed: training is over.
    except Exception as e:  # pylint: disable=broad-except
      if coord is None:
        raise
      coord.request_stop(e)


class SyncReplicasOptimizer(tf.compat.v1.train.SyncReplicasOptimizer):
  """`tf.compat.v1.train.SyncReplicasOptimizer` without the end-of-training hang."""

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """As the base class; then swaps in the polling chief queue runner."""
    train_op = super().apply_gradients(grads_and_vars, global_step=global_step, name=name)
    ready = []
    for accumulator, device in self._accumulator_list:
      with tf.compat.v1.device(device):
        ready.append(tf.greater_equal(accumulator.num_accumulated(),
                                      self._replicas_to_aggregate))
    with tf.compat.v1.device(global_step.device):
      ready_op = tf.reduce_all(tf.stack(ready), name='sync_replicas_round_complete')
      self._release_tokens = self._sync_token_queue.enqueue_many(
          (tf.fill([self._total_num_replicas], global_step.read_value()),),
          name='sync_replicas_release_workers')
    runner = self._chief_queue_runner
    self._chief_queue_runner = _PollingQueueRunner(
        self._sync_token_queue, runner.enqueue_ops[0], ready_op)
    return train_op

  @property
  def local_step(self):
    """The step this replica's gradients carry (the accumulators drop older ones).

    A local variable created by `apply_gradients`; None before it.
    """
    return getattr(self, '_local_step', None)

  def release_workers(self, sess):
    """Gives every worker one token, so none stays blocked after the last step."""
    try:
      sess.run(self._release_tokens,
               options=tf.compat.v1.RunOptions(timeout_in_ms=10000))
    except tf.errors.OpError as e:
      logging.warning('could not release the sync replicas workers: %s', e.message)
