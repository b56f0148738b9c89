"""How parameter servers learn that training is over.

Upstream, a ps task runs `server.join()` and never returns, so every job
needs an external kill. Here each ps task owns a small "done" queue, shared
by name with the chief: when the chief finishes, it puts one token into every
ps queue, and each ps, which has been waiting on its own queue, exits 0.
While it waits, the ps checks that the chief is reachable; if the chief has
been gone longer than `chief_timeout_secs`, the ps exits non-zero with a
message saying so.

    # ps task (python -m trainer.train does this from TF_CONFIG):
    cluster_roles.serve_until_training_done(server, cluster, chief_timeout_secs=300)

    # chief, once training has finished:
    cluster_roles.signal_training_done(master, cluster)
"""

import time

from absl import logging
import tensorflow as tf

_DONE_QUEUE_NAME = 'slimtrain_training_done_%d'
_POLL_SECS = 5.0


class ChiefLostError(RuntimeError):
  """The chief has been unreachable for longer than the allowed timeout."""


def _ps_device(task_index):
  return '/job:ps/task:%d/device:CPU:0' % task_index


def _done_queue(task_index):
  with tf.compat.v1.device(_ps_device(task_index)):
    return tf.queue.FIFOQueue(
        capacity=16, dtypes=[tf.int32], shapes=[[]],
        shared_name=_DONE_QUEUE_NAME % task_index,
        name='training_done_queue_%d' % task_index)


def chief_device(cluster):
  """The device string of the chief task of a `deployment.cluster` config."""
  jobs = cluster.cluster_spec.jobs
  # Without a chief or master job, worker 0 is the chief (as tf.estimator).
  job = next((j for j in ('chief', 'master') if j in jobs), 'worker')
  return '/job:%s/task:0/device:CPU:0' % job


def signal_training_done(master, cluster, timeout_secs=60):
  """Tells every ps task of `cluster` that training is over.

  Args:
    master: gRPC target of this (chief) task's server.
    cluster: a `deployment.cluster.ClusterConfig`.
    timeout_secs: how long to try to reach each ps.
  """
  if not cluster.num_ps_tasks:
    return
  with tf.Graph().as_default() as graph:
    enqueue_ops = [_done_queue(k).enqueue([1]) for k in range(cluster.num_ps_tasks)]
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    with tf.compat.v1.Session(master, graph=graph) as sess:
      for task_index, op in enumerate(enqueue_ops):
        try:
          sess.run(op, options=options)
        except tf.errors.OpError as e:
          logging.warning('could not tell ps task %d that training is done: %s',
                          task_index, e.message)
  logging.info('told %d ps task(s) that training is done', cluster.num_ps_tasks)


def serve_until_training_done(server, cluster, chief_timeout_secs=300,
                              startup_timeout_secs=600):
  """Runs a ps task until the chief signals the end of training.

  Args:
    server: this ps task's started `tf.distribute.Server`.
    cluster: its `deployment.cluster.ClusterConfig`.
    chief_timeout_secs: exit with ChiefLostError once the chief, after having
      been seen, is unreachable this long.
    startup_timeout_secs: same, for a chief that is never seen at all.

  Raises:
    ChiefLostError: when the chief is gone too long.
  """
  with tf.Graph().as_default() as graph:
    dequeue = _done_queue(cluster.task_index).dequeue()
    with tf.compat.v1.device(chief_device(cluster)):
      # A random op cannot be constant-folded away, so running it proves
      # the chief's server answers.
      probe = tf.random.uniform([])
    wait_options = tf.compat.v1.RunOptions(timeout_in_ms=int(_POLL_SECS * 1000))
    config = tf.compat.v1.ConfigProto(
        device_filters=['/job:ps/task:%d' % cluster.task_index,
                        chief_device(cluster).rsplit('/device', 1)[0]])
    start = time.time()
    last_seen = None
    with tf.compat.v1.Session(server.target, graph=graph, config=config) as sess:
      while True:
        try:
          sess.run(dequeue, options=wait_options)
          logging.info('ps task %d: chief reports training done; exiting',
                       cluster.task_index)
          return
        except tf.errors.DeadlineExceededError:
          pass
        try:
          sess.run(probe, options=wait_options)
          last_seen = time.time()
        except tf.errors.OpError:
          since = last_seen if last_seen is not None else start
          limit = chief_timeout_secs if last_seen is not None else startup_timeout_secs
          waited = time.time() - since
          if waited > limit:
            raise ChiefLostError(
                'ps task %d: chief %s unreachable for %.0f s (limit %d s); '
                'exiting' % (cluster.task_index, chief_device(cluster), waited,
                             limit)) from None
          logging.info('ps task %d: waiting for chief %s (%.0f s)',
                       cluster.task_index, chief_device(cluster), waited)
