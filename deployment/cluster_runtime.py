"""The distributed runtime: startup waits, the ps serving loop, the done signal.

Every cluster task, whichever workflow started it (`python -m trainer.train`
or `trainer.estimator.train_and_evaluate`), follows one protocol:

1. Startup. A training task first waits until every ps task accepts
   connections (`wait_for_tasks`); a non-chief task then waits until the chief
   has initialised the model (`wait_for_model_ready`). Both log while they
   wait and raise a clear error naming the deploy_config field once their
   timeout is spent, instead of TF's silent, endless retry.
2. Serving. A ps task runs `serve_until_training_done`: it serves the
   variables and, between polls of its done queue, checks that the chief's
   port still answers.
3. Done signal. Each ps task owns a small FIFO queue, shared by name. A
   training task that finished puts its token (-1 for a chief or master, else
   its worker index) into every ps task's queue (`signal_training_done`). A ps
   returns once it has the chief's token and every worker's, or when the
   workers' grace period after the chief's token ran out; it raises
   `ChiefLostError` when the chief has been unreachable too long.

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
