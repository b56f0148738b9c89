"""Do all tasks of a cluster share one TF_CONFIG cluster? Checked at startup over gRPC.

Every task of a job reads its own TF_CONFIG. When two tasks were given different clusters
(a stale manifest, one worker started by hand with an old address list), TensorFlow does
not notice: variables land on the ps a task believes in, sessions wait for tasks that do
not exist, and the job trains wrongly or hangs. So the chief publishes its cluster, as a
canonical JSON string, in a variable on its own gRPC server, and every other training task
and ps reads it from there at startup and compares it with its own:

    cluster = deployment.cluster.ClusterConfig.from_tf_config()
    server = cluster_check.start_server_and_agree(cluster, timeout_secs=600)
    # chief: publishes and returns at once.
    # others: wait (up to timeout_secs) for the chief, then return or raise
    #   ClusterMismatchError naming each difference, e.g.
    #   'job "worker" task 1: this task has 10.0.0.3:2222, the chief has 10.0.0.4:2222'.

The variable lives in the chief server's resource manager for the life of the process,
outside every training graph, so it costs nothing per step and is never checkpointed.

A ps job of the legacy trainer, asynchronous or sync replicas, may grow or shrink
while it runs (`deployment/elastic.py`, `deployment/sync_replicas.py`): a task
whose worker list is the chief's with tasks added or removed at the end is a resize, not
a mismatch, when the caller says so (`resizable=True`); it is logged and the chief's
cluster is returned so the caller can tell whether this task is new to the job. A
different chief, master or ps list, or another address at a worker index both lists
have, stays an error. A caller whose worker list is fixed (the Estimator path) passes
`resizable=False`, and may give a reason (`fixed_workers_reason`) for the error to quote.

Differs on purpose: the originals (tf.estimator, the OD API, slim) do not check this,
and have no notion of a worker list that changes while the job runs.
"""

import json
import time

from core import logs as logging
import tensorflow as tf

from deployment import cluster_runtime

_FINGERPRINT_VARIABLE = 'slimtrain_cluster_spec_of_the_chief'
_POLL_SECS = 0.5
_RPC_TIMEOUT_MS = 10000


class ClusterMismatchError(ValueError):
  """This task's TF_CONFIG cluster differs from the chief's."""


def canonical_cluster(cluster):
  """The training part of a cluster as a canonical JSON string.

  Args:
    cluster: a `deployment.cluster.ClusterConfig`.

  Returns:
    JSON of {job: [addresses]} with sorted keys, the evaluator left out (it is not part of
    the training cluster and holds no server).
  """
  jobs = {job: addresses for job, addresses in cluster.cluster.items()
          if job != 'evaluator'}
  return json.dumps(jobs, sort_keys=True)


def describe_differences(mine, chiefs):
  """Lists how two {job: [addresses]} dicts differ, one sentence per difference.

  Args:
    mine: this task's cluster.
    chiefs: the chief's cluster.

  Returns:
    A list of strings; empty when the clusters are equal.
  """
  differences = []
  for job in sorted(set(mine) | set(chiefs)):
    if job not in chiefs:
      differences.append('job "%s" is in this task\'s cluster only' % job)
      continue
    if job not in mine:
      differences.append('job "%s" is in the chief\'s cluster only' % job)
      continue
    ours, theirs = mine[job], chiefs[job]
    if len(ours) != len(theirs):
      differences.append('job "%s" has %d task(s) here and %d at the chief' % (
          job, len(ours), len(theirs)))
    for index, (a, b) in enumerate(zip(ours, theirs)):
      if a != b:
        differences.append('job "%s" task %d: this task has %s, the chief has %s' % (
            job, index, a, b))
  return differences


def worker_list_change(mine, chiefs):
  """Describes a grown or shrunk worker list, or returns None when it is not one.

  Args:
    mine: this task's {job: [addresses]}.
    chiefs: the chief's {job: [addresses]}.

  Returns:
    e.g. 'job "worker" grew from 2 to 3 task(s)' when the worker lists differ only by
    tasks added or removed at the end (every index both have holds the same address),
    else None (equal lists, or an address that moved).
  """
  ours, theirs = mine.get('worker', []), chiefs.get('worker', [])
  common = min(len(ours), len(theirs))
  if len(ours) == len(theirs) or ours[:common] != theirs[:common]:
    return None
  return 'job "worker" %s from %d to %d task(s)' % (
      'grew' if len(ours) > len(theirs) else 'shrank', len(theirs), len(ours))


def _without_workers(jobs):
  return {job: addresses for job, addresses in jobs.items() if job != 'worker'}


def compare_with_chief(cluster, chiefs, resizable=False, fixed_workers_reason=''):
  """Checks this task's cluster against the chief's; a worker-list resize may pass.

  Args:
    cluster: this task's `ClusterConfig`.
    chiefs: the chief's {job: [addresses]}.
    resizable: accept a grown or shrunk worker list (a legacy trainer's ps job).
    fixed_workers_reason: why the worker list may not change, quoted in the error
      when `resizable` is False and it did.

  Returns:
    The resize as `worker_list_change` words, or None when the clusters are equal.

  Raises:
    ClusterMismatchError: naming every difference and showing both clusters.
  """
  mine = json.loads(canonical_cluster(cluster))
  resize = worker_list_change(mine, chiefs)
  if resize is not None and resizable:
    differences = describe_differences(_without_workers(mine), _without_workers(chiefs))
  else:
    differences = describe_differences(mine, chiefs)
    if resize is not None and fixed_workers_reason:
      differences.append('the worker list may not change: %s' % fixed_workers_reason)
  if differences:
    raise ClusterMismatchError(
        'TF_CONFIG of task %s:%d does not match the chief\'s cluster: %s. This task: %s; '
        'the chief: %s. Give every task the same TF_CONFIG["cluster"]%s.' % (
            cluster.task_type, cluster.task_index, '; '.join(differences),
            json.dumps(mine, sort_keys=True), json.dumps(chiefs, sort_keys=True),
            ' (only the worker list of a resizable job may differ)' if resizable
            else ''))
  return resize


def _chief_task(cluster):
  """(job, address) of the chief: chief or master, else worker 0."""
  jobs = cluster.cluster
  job = next((j for j in ('chief', 'master') if j in jobs), 'worker')
  return job, jobs[job][0]


def _only_the_chief(job):
  # Without a device filter a session's master waits for every task of the cluster; this
  # check must work before the others are up.
  return tf.compat.v1.ConfigProto(device_filters=['/job:%s/task:0' % job],
                                  operation_timeout_in_ms=_RPC_TIMEOUT_MS)


def _fingerprint_variable(job):
  with tf.compat.v1.device('/job:%s/task:0/device:CPU:0' % job):
    return tf.compat.v1.get_variable(
        _FINGERPRINT_VARIABLE, shape=[], dtype=tf.string,
        initializer=tf.compat.v1.constant_initializer(''), trainable=False,
        collections=[], use_resource=True)


def publish(cluster, server):
  """Stores the chief's canonical cluster on its own server (chief only).

  Args:
    cluster: the chief's `ClusterConfig`.
    server: its started `tf.distribute.Server`.
  """
  job, _ = _chief_task(cluster)
  with tf.Graph().as_default():
    variable = _fingerprint_variable(job)
    assign = variable.assign(canonical_cluster(cluster))
    with tf.compat.v1.Session(server.target, config=_only_the_chief(job)) as session:
      session.run(assign, options=tf.compat.v1.RunOptions(timeout_in_ms=_RPC_TIMEOUT_MS))


def read_chiefs_cluster(cluster, timeout_secs):
  """Waits for the chief's published cluster and returns it as {job: [addresses]}.

  Args:
    cluster: this task's `ClusterConfig`.
    timeout_secs: give up after this long.

  Returns:
    The chief's cluster.

  Raises:
    cluster_runtime.StartupTimeoutError: nothing listens at the chief's address within
      `timeout_secs` (probed first: a session to an absent server would block unbounded).
    TimeoutError: the chief is up but did not publish within `timeout_secs`.
  """
  job, address = _chief_task(cluster)
  deadline = time.time() + timeout_secs
  cluster_runtime.wait_for_tasks([address], timeout_secs, what='the chief')
  with tf.Graph().as_default():
    variable = _fingerprint_variable(job)
    initialized = tf.compat.v1.is_variable_initialized(variable)
    options = tf.compat.v1.RunOptions(timeout_in_ms=_RPC_TIMEOUT_MS)
    with tf.compat.v1.Session('grpc://' + address, config=_only_the_chief(job)) as session:
      while True:
        try:
          if session.run(initialized, options=options):
            return json.loads(session.run(variable.value(), options=options).decode('utf-8'))
        except tf.errors.DeadlineExceededError:
          # A chief busy with a restore answered late (a ps restarted during a
          # checkpoint recovery died of this, 2026-11-28): ask again.
          logging.info('the chief at %s did not answer within %d ms; asking again', address,
                       _RPC_TIMEOUT_MS)
        if time.time() > deadline:
          raise TimeoutError(
              'the chief at %s did not publish its cluster within %d s; is it running '
              'slimtrain with the same TF_CONFIG?' % (address, timeout_secs))
        time.sleep(_POLL_SECS)


def agree_with_chief(cluster, server, timeout_secs, resizable=False,
                     fixed_workers_reason=''):
  """The chief publishes its cluster; every other task checks its own against it.

  Args:
    cluster: this task's `ClusterConfig` (a distributed one).
    server: this task's started server (used by the chief only).
    timeout_secs: how long a non-chief task waits for the chief.
    resizable, fixed_workers_reason: see `compare_with_chief`.

  Returns:
    The chief's {job: [addresses]} for a task that compared; None for the chief, the
    evaluator and a local process.

  Raises:
    ClusterMismatchError: naming every difference and showing both clusters.
    cluster_runtime.StartupTimeoutError, TimeoutError: see `read_chiefs_cluster`.
  """
  if not cluster.is_distributed or cluster.is_evaluator:
    return None
  if cluster.is_chief:
    publish(cluster, server)
    return None
  chiefs = read_chiefs_cluster(cluster, timeout_secs)
  resize = compare_with_chief(cluster, chiefs, resizable, fixed_workers_reason)
  if resize:
    logging.info('task %s:%d: %s since the chief started (a resizable job); chief, '
                 'master and ps lists match', cluster.task_type,
                 cluster.task_index, resize)
  else:
    logging.info('cluster of task %s:%d matches the chief\'s', cluster.task_type,
                 cluster.task_index)
  return chiefs


def start_server_and_agree(cluster, timeout_secs, config=None, **agreement):
  """Starts this task's server, then `agree_with_chief`; returns the server.

  Args:
    cluster: this task's distributed `ClusterConfig`.
    timeout_secs: how long a non-chief task waits for the chief's cluster.
    config: optional ConfigProto for the server.
    **agreement: `resizable`, `fixed_workers_reason` of `agree_with_chief`.

  Returns:
    The started `tf.distribute.Server`.
  """
  server = cluster.start_server(config=config)
  agree_with_chief(cluster, server, timeout_secs, **agreement)
  return server
