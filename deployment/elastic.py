"""Workers that join and leave a running ps job, no other task restarting.

In an asynchronous ps job every worker reads the variables from the ps tasks, computes
its gradients and applies them on its own, so the number of workers is not part of the
model; in a sync-replicas job it is only the number of gradients a round waits for, which
the chief adjusts (`deployment/sync_replicas.py`). This module lets that number change
while the job runs:

* Join. A new worker gets a TF_CONFIG with the job's chief and ps addresses and one more
  worker (what TFJob gives a pod after `replicas` was raised, JobSet after a resize,
  `deployment.launch` for an added task). Its startup check (`deployment/cluster_check.py`)
  accepts a grown worker list. The ps tasks and the chief were
  started with the old list and cannot resolve the new worker's name, so the joiner's
  server boots under a job name of its own (`cluster.JOINING_JOB`, at its worker index:
  a ps drops the sessions of a master name that comes back from another process, so
  two joiners never share one) and every session it
  creates carries its whole cluster to the tasks it uses (TensorFlow's cluster
  propagation, with state shared, so it sees the same variables). Its device filters name
  only the ps job and itself (`ClusterConfig.device_filters`), so no other worker and not
  the chief need to know it. It then waits for the model as any worker and starts at the
  current global step.
* Announce. Every non-chief worker of a ps job tells the chief that it is in the job
  (`announce(cluster, JOINED)`; a sync-replicas worker right before its first step), by a
  small queue on the chief's own server, next to the cluster the chief published; a chief
  thread (`MembershipLog`) logs `worker:2 joined (3 workers)` for a worker it did not
  count yet and, in a sync-replicas job, has the rounds take its gradients from then on.
  It also tells the ps tasks (`cluster_runtime.JOINED`), which then wait for it at the
  end of the job.
* Leave. A worker removed on purpose gets SIGTERM (a scale-down): it stops within
  `deploy_config.termination_grace_secs`, tells the chief (`LEFT`: `worker:2 left (2
  workers)`) and the ps tasks (PREEMPTED: not waited for at the end), and exits 143. A
  worker killed -9 tells nobody: as before, no other task notices.

Usage (trainer/train.py does this for a worker):

    server, joining = elastic.start_worker_server(cluster, timeouts.startup,
                                                  resizable=True)
    session_config = cluster.propagate_cluster(session_config)
    elastic.announce(cluster, elastic.JOINED)        # chief logs 'worker:N joined ...'
    ...                                              # train; on SIGTERM:
    elastic.announce(cluster, elastic.LEFT)

and for the chief:

    members = elastic.MembershipLog(cluster, server.target).start()
    ...
    members.stop()

Differs on purpose from the originals (tf-slim, the OD API, tf.estimator), whose cluster
is fixed for the life of the job: the worker list of a legacy trainer's ps job may grow or
shrink, asynchronous or sync replicas (the Estimator path's stays fixed).
"""

import json
import threading

from core import logs as logging
import tensorflow as tf

from deployment import cluster_check
from deployment import cluster_runtime
from deployment import request_ids

JOINED = 'joined'
LEFT = 'left'
_QUEUE_NAME = 'slimtrain_worker_membership'
_QUEUE_CAPACITY = 1024
_POLL_SECS = 1.0
_RPC_TIMEOUT_MS = 10000


def _chief_job(cluster):
  return cluster_runtime.chief_device(cluster).split('/')[1][len('job:'):]


def _membership_queue(cluster):
  with tf.compat.v1.device(cluster_runtime.chief_device(cluster)):
    # A JSON event per element: {"event": "joined", "task": 2, "workers": 3}.
    return tf.queue.FIFOQueue(capacity=_QUEUE_CAPACITY, dtypes=[tf.string], shapes=[[]],
                              shared_name=_QUEUE_NAME, name='worker_membership')


def _chief_session_config(cluster):
  return tf.compat.v1.ConfigProto(device_filters=['/job:%s/task:0' % _chief_job(cluster)],
                                  operation_timeout_in_ms=_RPC_TIMEOUT_MS)


def is_new_worker(cluster, chiefs):
  """Whether this task is a worker the chief's cluster does not list.

  Args:
    cluster: this task's `ClusterConfig`.
    chiefs: the chief's {job: [addresses]} (from the cluster check).

  Returns:
    True for a worker whose index is past the chief's worker list.
  """
  return (cluster.task_type == 'worker' and
          cluster.task_index >= len(chiefs.get('worker', [])))


def start_worker_server(cluster, timeout_secs, resizable, fixed_workers_reason=''):
  """A non-chief training task: checks its cluster with the chief, then starts its server.

  Args:
    cluster: this task's distributed `ClusterConfig` (not the chief's).
    timeout_secs: how long to wait for the chief's published cluster.
    resizable: whether the worker list may differ from the chief's.
    fixed_workers_reason: quoted when it may not and does.

  Returns:
    (server, joining): joining is True when this worker is new to the running job and
    its server booted so (`ClusterConfig.start_server(joining=True)`).

  Raises:
    cluster_check.ClusterMismatchError: a different chief or ps list, or a changed
      worker list where it may not change.
    cluster_runtime.StartupTimeoutError, TimeoutError: the chief is not up.
  """
  chiefs = cluster_check.agree_with_chief(cluster, None, timeout_secs, resizable,
                                          fixed_workers_reason)
  joining = is_new_worker(cluster, chiefs)
  if joining:
    logging.info('task worker:%d is new to the running job: joining it', cluster.task_index)
  return cluster.start_server(joining=joining), joining


def announce(cluster, event, timeout_secs=10):
  """Tells the chief that this worker joined or leaves; never raises.

  Args:
    cluster: this worker's `ClusterConfig`.
    event: JOINED or LEFT.
    timeout_secs: bound of the one RPC to the chief.

  Returns:
    True when the chief's server took the event.
  """
  address, _ = cluster_runtime.chief_address(cluster)
  message = json.dumps({'event': event, 'task': cluster.task_index,
                        'workers': len(cluster.cluster.get('worker', []))})
  if not cluster_runtime.reachable(address):
    logging.warning('could not tell the chief (%s) that worker %d %s: unreachable',
                    address, cluster.task_index, event)
    return False
  with tf.Graph().as_default() as graph:
    enqueue = _membership_queue(cluster).enqueue([message])
  config = _chief_session_config(cluster)
  config.operation_timeout_in_ms = min(config.operation_timeout_in_ms,
                                       int(timeout_secs * 1000))
  # The chief's own server runs it: it needs to know nothing about this worker.
  told = cluster_runtime.run_once_quietly(
      'grpc://' + address, graph, config, enqueue,
      'could not tell the chief that worker %d %s' % (cluster.task_index, event))
  if told:
    logging.info('told the chief that worker %d %s', cluster.task_index, event)
  return told


class MembershipLog(object):
  """The chief's count of workers, logged as workers join and leave.

  It starts from the chief's own TF_CONFIG worker list; a JOINED event of a worker not
  counted yet adds it (`worker:3 joined (4 workers)`), a LEFT event removes it
  (`worker:3 left (3 workers)`). A worker killed -9 sends nothing and stays counted.

  Args:
    cluster: the chief's `ClusterConfig`.
    master: the chief server's target.
    on_change: optional callable(number of workers), run after each change of the
      count (from the log's thread).
  """

  def __init__(self, cluster, master, on_change=None):
    self._cluster = cluster
    self._master = master
    self._on_change = on_change
    self.members = set(range(len(cluster.cluster.get('worker', []))))
    self._stop = threading.Event()
    self._thread = None

  def record(self, message):
    """Applies one event (its JSON bytes); returns the line it logged, or None."""
    event = json.loads(message.decode('utf-8') if isinstance(message, bytes) else message)
    task = int(event['task'])
    if event['event'] == JOINED:
      if task in self.members:
        logging.info('worker:%d started (already counted; %d workers)', task,
                     len(self.members))
        return None
      self.members.add(task)
    else:
      if task not in self.members:
        logging.info('worker:%d left (it was not counted; %d workers)', task,
                     len(self.members))
        return None
      self.members.discard(task)
    line = 'worker:%d %s (%d workers)' % (task, event['event'], len(self.members))
    logging.info('%s', line)
    if self._on_change is not None:
      self._on_change(len(self.members))
    return line

  def _run(self):
    with tf.Graph().as_default():
      dequeue = _membership_queue(self._cluster).dequeue()
      options = tf.compat.v1.RunOptions(timeout_in_ms=int(_POLL_SECS * 1000))
      with tf.compat.v1.Session(self._master,
                                config=_chief_session_config(self._cluster)) as session:
        while not self._stop.is_set():
          try:
            self.record(session.run(dequeue, options=options))
          except tf.errors.DeadlineExceededError:
            continue
          except tf.errors.OpError as e:
            if request_ids.is_duplicate_request(e):
              continue  # chance, no fault: the next poll has new request ids
            # The chief's own server is going away.
            logging.warning('worker membership log stopped: %s', e.message)
            return

  def start(self):
    """Starts the logging thread; returns self."""
    self._thread = threading.Thread(target=self._run, name='MembershipLog', daemon=True)
    self._thread.start()
    return self

  def running(self):
    """Whether the logging thread is still polling."""
    return self._thread is not None and self._thread.is_alive()

  def stop(self, timeout_secs=5.0):
    """Stops the thread (within one poll, at most `timeout_secs`)."""
    self._stop.set()
    if self._thread is not None:
      self._thread.join(timeout_secs)
