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

With `resizable=True` the number of replicas may change while the job runs
(workers joining and leaving, `deployment/elastic.py`): how many gradients a
round takes and how many tokens it hands out are read each round from two
counters on the global step's device instead of being fixed in the graph,
and the chief sets them at a step boundary (`ReplicaResizer`):

    opt = sync_replicas.SyncReplicasOptimizer(base_opt, 2, 2, resizable=True)
    ...
    resizer = sync_replicas.ReplicaResizer(replicas=2)
    resizer.attach(sess, opt)     # the chief, at the first step of each session
    resizer.set_replicas(3)       # a worker joined: rounds take 3 gradients

A round in progress completes with the new count: one that was waiting for
a replica that left goes on at once. The number of backup replicas stays
what the configuration gave (`total_num_replicas - replicas_to_aggregate`).

Differs on purpose from TF's optimizer: the chief can stop, workers get a
last token, the token queue stays open when the chief's session ends (a new
session of the chief goes on with it), and (resizable) the replica counts are
variables.
"""

import threading

from core import compat_learning
from core import logs as logging
import tensorflow as tf

# The chief's stoppable queue runner; slim.learning.train calls get the same
# one through compat fix learning.sync_replicas_stop.
_PollingQueueRunner = compat_learning.PollingQueueRunner


class _ReplicaCounts(object):
  """Two int32 counters on the ps: gradients a round takes, and replicas (tokens per round).

  Bare variables (no collection): savers, initializers and ready checks never
  see them; the chief's `chief_init_op` sets the configured values and
  `assign` the current ones.
  """

  def __init__(self, device, to_aggregate, total):
    self.backups = total - to_aggregate
    with tf.compat.v1.device(device):
      self._to_aggregate = tf.compat.v1.Variable(
          to_aggregate, dtype=tf.int32, trainable=False, collections=[], use_resource=True,
          name='sync_replicas_to_aggregate')
      self._total = tf.compat.v1.Variable(
          total, dtype=tf.int32, trainable=False, collections=[], use_resource=True,
          name='sync_replicas_total')
      self.to_aggregate = self._to_aggregate.read_value()
      self.total = self._total.read_value()
      self.initializer = tf.group(self._to_aggregate.initializer, self._total.initializer)
      self._new_total = tf.compat.v1.placeholder(tf.int32, [], name='sync_replicas_new_total')
      self._assign = tf.group(
          self._total.assign(self._new_total),
          self._to_aggregate.assign(tf.maximum(self._new_total - self.backups, 1)))

  def assign(self, sess, replicas):
    """Sets the replica count; a round then takes `replicas - backups` gradients (at least 1)."""
    sess.run(self._assign, feed_dict={self._new_total: replicas})

  def read(self, sess):
    """(gradients a round takes, replicas)."""
    return tuple(int(v) for v in sess.run([self.to_aggregate, self.total]))


class SyncReplicasOptimizer(tf.compat.v1.train.SyncReplicasOptimizer):
  """`tf.compat.v1.train.SyncReplicasOptimizer` without the end-of-training hang.

  Args:
    opt, replicas_to_aggregate, total_num_replicas, **kwargs: as the base class.
    resizable: read the replica counts from variables the chief may change
      (`ReplicaResizer`) instead of fixing them in the graph.
  """

  def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None, resizable=False,
               **kwargs):
    super().__init__(opt, replicas_to_aggregate, total_num_replicas=total_num_replicas,
                     **kwargs)
    self._resizable = resizable
    self.counts = None  # A resizable optimizer's _ReplicaCounts, built by apply_gradients.

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """As the base class; then swaps in the polling chief queue runner."""
    configured = (self._replicas_to_aggregate, self._tokens_per_step)
    to_aggregate, total = self._replicas_to_aggregate, self._total_num_replicas
    if self._resizable:
      self.counts = _ReplicaCounts(global_step.device, to_aggregate, total)
      to_aggregate, total = self.counts.to_aggregate, self.counts.total
      # The base class builds take_grad and the token fill from these two.
      self._replicas_to_aggregate = to_aggregate
      self._tokens_per_step = tf.maximum(to_aggregate, total)
    try:
      train_op = super().apply_gradients(grads_and_vars, global_step=global_step, name=name)
    finally:
      # get_init_tokens_op does arithmetic on them: the configured numbers.
      self._replicas_to_aggregate, self._tokens_per_step = configured
    if self.counts is not None:
      self.chief_init_op = tf.group(self.chief_init_op, self.counts.initializer)
      with tf.compat.v1.device(global_step.device):
        self._added_replicas = tf.compat.v1.placeholder(tf.int32, [],
                                                        name='sync_replicas_added')
        self._tokens_for_added = self._sync_token_queue.enqueue_many(
            (tf.fill([self._added_replicas], global_step.read_value()),),
            name='sync_replicas_tokens_for_added')
    ready = []
    for accumulator, device in self._accumulator_list:
      with tf.compat.v1.device(device):
        ready.append(tf.greater_equal(accumulator.num_accumulated(), to_aggregate))
    with tf.compat.v1.device(global_step.device):
      ready_op = tf.reduce_all(tf.stack(ready), name='sync_replicas_round_complete')
      self._release_tokens = self._sync_token_queue.enqueue_many(
          (tf.fill([total], global_step.read_value()),),
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

  def set_replicas(self, sess, replicas):
    """Sets a resizable optimizer's replica count through `sess`; returns the counts set.

    More replicas than before also get one token each at the current global
    step, as the first tokens of a job do: a replica new to the job (or one
    whose last gradient was too old to count) waits for a token after its
    step, and without one, rounds that now count it could never complete.

    Returns:
      (gradients a round takes, replicas) as the counters now hold them.
    """
    _, before = self.counts.read(sess)
    self.counts.assign(sess, replicas)
    if replicas > before:
      sess.run(self._tokens_for_added, feed_dict={self._added_replicas: replicas - before})
    return self.counts.read(sess)

  def release_workers(self, sess):
    """Gives every worker one token, so none stays blocked after the last step."""
    try:
      sess.run(self._release_tokens,
               options=tf.compat.v1.RunOptions(timeout_in_ms=10000))
    except tf.errors.OpError as e:
      logging.warning('could not release the sync replicas workers: %s', e.message)


class ReplicaResizer(object):
  """The chief's count of sync replicas, applied to the running training session.

  `set_replicas` comes from the thread that follows the job's membership
  (`elastic.MembershipLog`), possibly while the chief's own step is blocked
  waiting for a round that a departed replica will never complete: it
  assigns the counters through the session at once (`Session.run` is
  thread-safe). `attach` comes from the chief's step function before the
  first step of each session (whose `chief_init_op` has just reset the
  counters to the configured values).

  Args:
    replicas: the number of replicas the job started with.
  """

  def __init__(self, replicas):
    self._replicas = replicas
    self._lock = threading.Lock()
    self._session = None
    self._optimizer = None
    self._applied = None

  def attach(self, sess, optimizer):
    """Applies the current count to the session `sess` of a resizable `optimizer`."""
    with self._lock:
      if sess is not self._session:
        self._session, self._optimizer, self._applied = sess, optimizer, None
      self._apply()

  def set_replicas(self, replicas):
    """Takes a new replica count (chief and workers); applies it when a session is attached."""
    with self._lock:
      self._replicas = replicas
      self._apply()

  def _apply(self):
    if self._session is None or self._optimizer.counts is None:
      return
    if self._replicas == self._applied:
      return
    try:
      to_aggregate, _ = self._optimizer.set_replicas(self._session, self._replicas)
    except (tf.errors.OpError, RuntimeError) as e:  # a lost ps or a closed session
      logging.warning('sync replicas: could not set %d replicas: %s', self._replicas,
                      getattr(e, 'message', e))
      return
    self._applied = self._replicas
    logging.info('sync replicas: %d replicas, a round takes %d gradients', self._replicas,
                 to_aggregate)
