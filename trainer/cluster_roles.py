"""How parameter servers learn that training is over.

Upstream, a ps task runs `server.join()` and never returns, so every job
needs an external kill. Here each ps task owns a small "done" queue, shared
by name with the training tasks: when one finishes, it puts its token into
every ps queue. A ps exits 0 once the chief's token and every worker's token
arrived (or the workers' grace period after the chief's ran out). While it
waits, the ps checks that the chief is reachable; if the chief has been gone
longer than `chief_timeout_secs`, the ps exits non-zero with a message saying
so. `wait_for_tasks` lets training tasks wait for late ps tasks with a log
line every few seconds and a clear error after the startup timeout.

    # ps task (python -m trainer.train does this from TF_CONFIG):
    cluster_roles.serve_until_training_done(server, cluster, chief_timeout_secs=300)

    # every training task, once it has finished:
    cluster_roles.signal_training_done(master, cluster)
"""

import socket
import time

from absl import logging
import tensorflow as tf

_DONE_QUEUE_NAME = 'slimtrain_training_done_%d'
_POLL_SECS = 2.0


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


class StartupTimeoutError(RuntimeError):
  """A task this one needs did not come up within the startup timeout."""


def _reachable(address, timeout_secs=1.0):
  """Whether something accepts TCP connections at 'host:port'."""
  host, port = address.rsplit(':', 1)
  try:
    with socket.create_connection((host, int(port)), timeout=timeout_secs):
      return True
  except OSError:
    return False


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
    missing = [a for a in addresses if not _reachable(a)]
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


def signal_training_done(master, cluster, timeout_secs=60):
  """Tells every ps task of `cluster` that this training task has finished.

  Args:
    master: gRPC target of this training task's server.
    cluster: a `deployment.cluster.ClusterConfig`.
    timeout_secs: how long to try to reach each ps.
  """
  if not cluster.num_ps_tasks:
    return
  token = replica_token(cluster)
  with tf.Graph().as_default() as graph:
    enqueue_ops = [_done_queue(k).enqueue([token]) for k in range(cluster.num_ps_tasks)]
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
    config = tf.compat.v1.ConfigProto(device_filters=['/job:ps'] + [
        '/job:%s/task:%d' % (cluster.task_type, cluster.task_index)])
    with tf.compat.v1.Session(master, graph=graph, config=config) as sess:
      for task_index, op in enumerate(enqueue_ops):
        try:
          sess.run(op, options=options)
        except tf.errors.OpError as e:
          logging.warning('could not tell ps task %d that training is done: %s',
                          task_index, e.message)
  logging.info('told %d ps task(s) that %s:%d finished training', cluster.num_ps_tasks,
               cluster.task_type, cluster.task_index)


def serve_until_training_done(server, cluster, chief_timeout_secs=300,
                              startup_timeout_secs=600, worker_grace_secs=None):
  """Runs a ps task until the chief signals the end of training.

  After the chief's signal the ps keeps serving until every other worker has
  said it finished too (so none loses its variables mid-step), but at most
  `worker_grace_secs`.

  Args:
    server: this ps task's started `tf.distribute.Server`.
    cluster: its `deployment.cluster.ClusterConfig`.
    chief_timeout_secs: exit with ChiefLostError once the chief, after having
      been seen, is unreachable this long.
    startup_timeout_secs: same, for a chief that is never seen at all.
    worker_grace_secs: how long to wait for the other workers after the
      chief finished (default: chief_timeout_secs).

  Raises:
    ChiefLostError: when the chief is gone too long.
  """
  if worker_grace_secs is None:
    worker_grace_secs = chief_timeout_secs
  expected, chief_token = _expected_tokens(cluster), _chief_token(cluster)
  chief_job = chief_device(cluster).split('/')[1][len('job:'):]
  chief_address = cluster.cluster_spec.task_address(chief_job, 0)
  with tf.Graph().as_default() as graph:
    dequeue = _done_queue(cluster.task_index).dequeue()
    wait_options = tf.compat.v1.RunOptions(timeout_in_ms=int(_POLL_SECS * 1000))
    # Only this ps's own devices: a session that spans a dead task would block.
    config = tf.compat.v1.ConfigProto(
        device_filters=['/job:ps/task:%d' % cluster.task_index])
    start = time.time()
    last_seen = chief_done_at = None
    finished = set()
    with tf.compat.v1.Session(server.target, graph=graph, config=config) as sess:
      while True:
        try:
          finished.add(int(sess.run(dequeue, options=wait_options)))
        except tf.errors.DeadlineExceededError:
          pass
        if chief_token in finished:
          if chief_done_at is None:
            chief_done_at = time.time()
            logging.info('ps task %d: chief reports training done', cluster.task_index)
          if finished >= expected:
            logging.info('ps task %d: every worker finished; exiting', cluster.task_index)
            return
          if time.time() - chief_done_at > worker_grace_secs:
            logging.info('ps task %d: workers %s did not report within %d s of the chief; '
                         'exiting', cluster.task_index, sorted(expected - finished),
                         worker_grace_secs)
            return
          continue
        # The chief's gRPC port answering proves its server is up (a restarted
        # chief included).
        if _reachable(chief_address):
          last_seen = time.time()
          continue
        since = last_seen if last_seen is not None else start
        limit = chief_timeout_secs if last_seen is not None else startup_timeout_secs
        waited = time.time() - since
        if waited > limit:
          raise ChiefLostError(
              'ps task %d: chief %s unreachable for %.0f s (limit %d s, '
              'deploy_config.chief_timeout_secs); exiting' % (
                  cluster.task_index, chief_device(cluster), waited, limit))
        logging.info('ps task %d: waiting for chief %s (%.0f s)',
                     cluster.task_index, chief_device(cluster), waited)
