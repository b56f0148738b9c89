"""Who am I in the cluster? TF_CONFIG parsed into what model_deploy needs.

Every process of a distributed job gets the same cluster description and its
own task in the `TF_CONFIG` environment variable (the tf.estimator / Cloud ML
convention):

    TF_CONFIG='{"cluster": {"chief": ["host0:2222"],
                            "worker": ["host1:2222", "host2:2222"],
                            "ps": ["host3:2222"]},
                "task": {"type": "worker", "index": 1}}'

`ClusterConfig.from_tf_config()` validates it and answers the questions the
legacy trainer asks:

    cluster = ClusterConfig.from_tf_config()
    if cluster.task_type == 'ps':
      cluster.start_server().join()
    server = cluster.start_server()
    config = model_deploy.DeploymentConfig(
        num_clones=2, replica_id=cluster.task_index,
        num_replicas=cluster.num_worker_replicas,
        num_ps_tasks=cluster.num_ps_tasks,
        worker_job_name=cluster.worker_job_name)   # 'worker/task:1'
    ... slim.learning.train(..., master=server.target, is_chief=cluster.is_chief)

Accepted layouts:

* chief style: `chief` (exactly one), `worker`, `ps`, optional `evaluator`;
  the chief is the chief;
* master style (legacy OD/slim): `master` (exactly one), `worker`, `ps`; the
  master is the chief;
* worker only: `worker` (+ `ps`); worker 0 is the chief;
* no TF_CONFIG, an empty one or an empty cluster: one local process
  (task `worker` 0, chief, one replica, no ps, master '').

An `evaluator` task is not part of training: it gets an empty cluster spec,
master '' and no replicas, like tf.estimator's. The Kubeflow operator lists
the evaluator in `TF_CONFIG["cluster"]` of every pod; the training tasks
accept that and leave it out of their `cluster_spec` (so of their servers
and device filters), as tf.estimator's distribute coordinator did: nothing
listens at the evaluator's address.

`num_worker_replicas` counts the chief/master with the workers.
`worker_job_name` carries the task ('worker/task:1') because model_deploy
prefixes devices with `/job:<worker_job_name>`, and a job without a task would
let TensorFlow place one worker's ops on another.

Every malformed TF_CONFIG raises ValueError naming the key and showing the bad
value, e.g. `TF_CONFIG["task"]["index"] is 2, out of range for job "worker"
with 2 tasks (cluster ...)`.
"""

import json
import os
import re

from core import logs as logging
import tensorflow as tf

JOBS = ('chief', 'master', 'worker', 'ps', 'evaluator')
# The job a worker that joins a running job boots its server under (deployment/elastic.py),
# at its worker index: never a job of any TF_CONFIG, so the name its sessions give it
# ('worker', index) can be sent to the other tasks with the session (TensorFlow refuses
# to propagate a server's own boot name).
JOINING_JOB = 'slimtrain_joining'

TRAINING_JOBS = ('chief', 'master', 'worker')
_HOST = re.compile(r'^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)$')


def _key(*path):
  return 'TF_CONFIG' + ''.join('[%s]' % json.dumps(p) for p in path)


def _fail(path, message, value):
  """Raises ValueError('TF_CONFIG[...] <message>, got <value>')."""
  raise ValueError('%s %s, got %s' % (_key(*path), message, json.dumps(value)))


def _check_address(job, index, address):
  path = ('cluster', job, index)
  if not isinstance(address, str):
    _fail(path, 'must be a "host:port" string', address)
  if not address.strip():
    _fail(path, 'is an empty address; expected "host:port"', address)
  host, sep, port = address.rpartition(':')
  if not sep or not host:
    _fail(path, 'has no port; expected "host:port"', address)
  if not _HOST.match(host):
    _fail(path, 'has an invalid host %s; expected "host:port"' % json.dumps(host), address)
  if not port.isdigit() or not 0 < int(port) < 65536:
    _fail(path, 'has an invalid port %s; expected 1..65535' % json.dumps(port), address)


def _parse_cluster(cluster):
  """Validates the 'cluster' dict; returns {job: [addresses]}."""
  if not isinstance(cluster, dict):
    _fail(('cluster',), 'must be an object mapping job names to address lists', cluster)
  jobs = {}
  seen = {}
  for job, addresses in cluster.items():
    if job not in JOBS:
      _fail(('cluster',), 'has unknown job %s; expected jobs among %s' % (
          json.dumps(job), ', '.join(JOBS)), cluster)
    if not isinstance(addresses, list):
      _fail(('cluster', job), 'must be a list of "host:port" strings', addresses)
    if not addresses:
      _fail(('cluster', job), 'is empty; list at least one "host:port"', addresses)
    for index, address in enumerate(addresses):
      _check_address(job, index, address)
      if address in seen:
        _fail(('cluster', job, index), 'repeats the address of %s' % _key(
            'cluster', *seen[address]), address)
      seen[address] = (job, index)
    jobs[job] = list(addresses)
  for job in ('chief', 'master', 'evaluator'):
    if len(jobs.get(job, [])) > 1:
      _fail(('cluster', job), 'must list exactly one address', jobs[job])
  if 'chief' in jobs and 'master' in jobs:
    _fail(('cluster',), 'has both a "chief" and a "master" job; use one of them', cluster)
  if not any(job in jobs for job in TRAINING_JOBS):
    _fail(('cluster',), 'needs a "chief", "master" or "worker" job', cluster)
  return jobs


def _parse_index(task, jobs, task_type):
  if 'index' not in task:
    _fail(('task',), 'must set "index" when TF_CONFIG["cluster"] is set', task)
  index = task['index']
  if isinstance(index, bool) or not isinstance(index, int):
    _fail(('task', 'index'), 'must be an integer', index)
  if index < 0:
    _fail(('task', 'index'), 'must be >= 0', index)
  if task_type == 'evaluator':
    if index != 0:
      _fail(('task', 'index'), 'must be 0: there is only one evaluator', index)
  elif index >= len(jobs[task_type]):
    _fail(('task', 'index'), 'is out of range for job %s with %d task(s) %s' % (
        json.dumps(task_type), len(jobs[task_type]), json.dumps(jobs[task_type])), index)
  return index


def is_loopback_host(address):
  """Whether a 'host:port' names this machine's loopback interface."""
  host = address.rsplit(':', 1)[0].strip('[]')
  return host == 'localhost' or host.startswith('127.') or host == '::1'


def warn_if_exposed(cluster):
  """Logs one warning when the cluster spans addresses beyond loopback.

  TensorFlow's gRPC server listens on every interface, accepts any client and runs any
  graph sent to it (which can read and write files as the training user); on a shared
  network that is remote code execution. Only loopback-only clusters stay quiet.

  Args:
    cluster: a `ClusterConfig`.

  Returns:
    True when the warning was logged.
  """
  exposed = [a for addresses in cluster.cluster.values() for a in addresses
             if not is_loopback_host(a)]
  if not exposed or not cluster.is_distributed or cluster.is_evaluator:
    return False
  port = cluster.task_address.rsplit(':', 1)[1]
  logging.warning(
      'the TensorFlow gRPC server of task %s:%d listens on port %s of every interface, '
      'unauthenticated: anyone who can reach it can run graphs and read or write files as '
      'this user. The cluster spans %s. Run only on an isolated, trusted network (see '
      'docs/security.md).', cluster.task_type, cluster.task_index, port, ', '.join(exposed))
  return True


def input_shard(cluster, task_type, task_index):
  """Where one training task's input split puts it: (training tasks, its place).

  The chief (or master) has place 0 and worker i place i + 1 (place i when the
  job has no chief), so the training tasks of one TF_CONFIG cover every place
  once: no two read the same shard and no shard is left unread.

  Args:
    cluster: dict {job: [addresses]} of the task's TF_CONFIG.
    task_type: 'chief', 'master', 'worker' (any other reads everything).
    task_index: the task's index in its job.

  Returns:
    (num_shards, index) for `builders.input_reader_builder.shard_files`;
    (1, 0) for a task that is not a training task of a distributed job.
  """
  if task_type not in TRAINING_JOBS:
    return 1, 0
  leaders = len(cluster.get('chief', [])) + len(cluster.get('master', []))
  num_shards = leaders + len(cluster.get('worker', []))
  if num_shards <= 1:
    return 1, 0
  return num_shards, 0 if task_type in ('chief', 'master') else task_index + leaders


class ClusterConfig(object):
  """This process's place in a (possibly one-process) cluster."""

  def __init__(self, cluster=None, task_type='worker', task_index=0, session_master=None):
    """Builds a config from already-validated parts; use `from_tf_config`.

    Args:
      cluster: dict {job name: [addresses]} or None for a local process.
      task_type: this task's job.
      task_index: this task's index in its job.
      session_master: optional explicit master target.
    """
    self._cluster = dict(cluster or {})
    self._task_type = task_type
    self._task_index = task_index
    self._session_master = session_master
    self._server = None
    self._joining = False

  @classmethod
  def from_tf_config(cls, env=os.environ, require_ps=False):
    """Parses `env['TF_CONFIG']`.

    Args:
      env: a mapping holding TF_CONFIG (default: the process environment).
      require_ps: when True, a cluster with several worker replicas and no ps
        job is an error (the legacy trainer needs ps tasks to share
        variables between workers).

    Returns:
      A `ClusterConfig`.

    Raises:
      ValueError: on malformed TF_CONFIG, naming the key and showing the value.
    """
    raw = env.get('TF_CONFIG', '') or ''
    if not raw.strip():
      return cls()
    try:
      tf_config = json.loads(raw)
    except ValueError as e:
      raise ValueError('TF_CONFIG is not valid JSON (%s), got %r' % (e, raw)) from None
    if not isinstance(tf_config, dict):
      _fail((), 'must be a JSON object with "cluster" and "task"', tf_config)
    task = tf_config.get('task', {})
    if task is None:
      task = {}
    if not isinstance(task, dict):
      _fail(('task',), 'must be an object like {"type": "worker", "index": 0}', task)
    session_master = tf_config.get('session_master')
    if session_master is not None and not isinstance(session_master, str):
      _fail(('session_master',), 'must be a string', session_master)
    task_type = task.get('type')
    if task_type is not None and task_type not in JOBS:
      _fail(('task', 'type'), 'must be one of %s' % ', '.join(JOBS), task_type)

    cluster = tf_config.get('cluster')
    if not cluster:
      if cluster is not None and not isinstance(cluster, dict):
        _fail(('cluster',), 'must be an object mapping job names to address lists',
              cluster)
      if task_type not in (None, 'worker', 'evaluator'):
        _fail(('task', 'type'), 'must be "worker" or "evaluator" when TF_CONFIG["cluster"] '
              'is empty', task_type)
      index = task.get('index', 0)
      if index != 0 or isinstance(index, bool):
        _fail(('task', 'index'), 'must be 0 when TF_CONFIG["cluster"] is empty', index)
      return cls(None, task_type or 'worker', 0, session_master)

    jobs = _parse_cluster(cluster)
    if task_type is None:
      _fail(('task',), 'must set "type" when TF_CONFIG["cluster"] is set', task)
    if task_type == 'evaluator':
      if 'master' in jobs:
        _fail(('task', 'type'), 'cannot be "evaluator" in a "master"-style cluster %s' %
              json.dumps(cluster), task_type)
    elif task_type not in jobs:
      _fail(('task', 'type'), 'is not a job of TF_CONFIG["cluster"] (jobs: %s)' % ', '.join(
          sorted(jobs)), task_type)
    index = _parse_index(task, jobs, task_type)
    config = cls(jobs, task_type, index, session_master)
    if require_ps and config.num_worker_replicas > 1 and not config.num_ps_tasks:
      _fail(('cluster',), 'has %d worker replicas but no "ps" job; at least 1 ps task is '
            'needed for distributed training' % config.num_worker_replicas, cluster)
    return config

  @property
  def cluster(self):
    """{job: [addresses]} (empty for a local process)."""
    return {job: list(addresses) for job, addresses in self._cluster.items()}

  @property
  def cluster_spec(self):
    """The training cluster as a `tf.train.ClusterSpec`, without any evaluator.

    Empty for a local process and for the evaluator itself.
    """
    if self._task_type == 'evaluator':
      return tf.train.ClusterSpec({})
    return tf.train.ClusterSpec({job: addresses for job, addresses in self.cluster.items()
                                 if job != 'evaluator'})

  @property
  def task_type(self):
    return self._task_type

  @property
  def task_index(self):
    return self._task_index

  @property
  def is_evaluator(self):
    return self._task_type == 'evaluator'

  @property
  def is_distributed(self):
    """True when this training process talks to other tasks."""
    if self.is_evaluator or not self._cluster:
      return False
    return sum(len(a) for job, a in self._cluster.items() if job != 'evaluator') > 1

  @property
  def is_chief(self):
    """The chief, the master, or worker 0 when there is neither; local: True."""
    if not self._cluster:
      return self._task_type == 'worker'
    if 'chief' in self._cluster:
      return self._task_type == 'chief'
    if 'master' in self._cluster:
      return self._task_type == 'master'
    return self._task_type == 'worker' and self._task_index == 0

  @property
  def num_worker_replicas(self):
    """Training replicas: workers plus chief/master (1 locally, 0 for the evaluator)."""
    if self.is_evaluator:
      return 0
    if not self._cluster:
      return 1
    return sum(len(self._cluster.get(job, [])) for job in TRAINING_JOBS)

  @property
  def input_shard(self):
    """(training tasks, this task's place among them) for splitting the input.

    See `input_shard`: the chief reads place 0, worker i place i + 1.
    """
    return input_shard(self._cluster, self._task_type, self._task_index)

  @property
  def num_ps_tasks(self):
    if self.is_evaluator:
      return 0
    return len(self._cluster.get('ps', []))

  @property
  def ps_job_name(self):
    return 'ps'

  @property
  def worker_job_name(self):
    """Job (with task) prefixing this worker's devices, e.g. 'worker/task:1'."""
    if not self.is_distributed or self._task_type not in TRAINING_JOBS:
      return 'worker'
    return '%s/task:%d' % (self._task_type, self._task_index)

  @property
  def task_address(self):
    """This task's 'host:port' ('' when it is not in the cluster)."""
    if self.is_evaluator or not self._cluster:
      return ''
    return self._cluster[self._task_type][self._task_index]

  @property
  def master(self):
    """gRPC target for this task's sessions ('' for a local process)."""
    if self._session_master is not None:
      return self._session_master
    if not self.is_distributed:
      return ''
    return 'grpc://' + self.task_address

  @property
  def device_filters(self):
    """Devices this task's sessions may see (the tf.estimator defaults)."""
    if not self.is_distributed:
      return []
    if self._task_type == 'ps':
      return ['/job:ps', '/job:worker', '/job:chief', '/job:master']
    if self._task_type in ('chief', 'master'):
      return ['/job:ps', '/job:%s' % self._task_type]
    return ['/job:ps', '/job:worker/task:%d' % self._task_index]

  def session_config(self, **kwargs):
    """A ConfigProto with soft placement and this task's device filters."""
    kwargs.setdefault('allow_soft_placement', True)
    return self.propagate_cluster(
        tf.compat.v1.ConfigProto(device_filters=self.device_filters, **kwargs))

  @property
  def is_joining(self):
    """Whether this task's server booted as a worker joining a running job."""
    return self._joining

  def propagate_cluster(self, config):
    """Lets a joining worker's session carry its cluster to the other tasks.

    The ps tasks of a running job were started with the old worker list and cannot
    resolve the new worker's name; a session that carries the cluster (and shares the
    tasks' variables instead of isolating them) can. Other tasks' configs are returned
    unchanged.

    Args:
      config: a ConfigProto, changed in place.

    Returns:
      `config`.
    """
    if self._joining:
      config.cluster_def.CopyFrom(self.cluster_spec.as_cluster_def())
      config.experimental.share_session_state_in_clusterspec_propagation = True
    return config

  def start_server(self, config=None, joining=False):
    """Starts (once) and returns the `tf.distribute.Server` of this task.

    Args:
      config: optional ConfigProto for the server.
      joining: boot as a worker joining a running job: the server listens on this
        task's address under `JOINING_JOB`, and `propagate_cluster` makes its sessions
        name it by its TF_CONFIG task (deployment/elastic.py).

    Returns:
      The running server; `server.target` is the session master.

    Raises:
      ValueError: for a local process or the evaluator (not in the cluster).
    """
    if not self.is_distributed:
      raise ValueError('start_server() needs a TF_CONFIG cluster with this task in it; '
                       'task %s:%d is not part of a cluster %s' % (
                           self._task_type, self._task_index, json.dumps(self._cluster)))
    if self._server is None:
      if joining:
        # Its own index in the boot job: a ps drops the sessions of a master task whose
        # name comes back from a new process, so two joiners must not share one.
        spec, job, index = (
            tf.train.ClusterSpec({JOINING_JOB: {self._task_index: self.task_address}}),
            JOINING_JOB, self._task_index)
      else:
        spec, job, index = self.cluster_spec, self._task_type, self._task_index
      self._server = tf.distribute.Server(spec, job_name=job, task_index=index,
                                          protocol='grpc', config=config, start=True)
      self._joining = joining
      warn_if_exposed(self)
    return self._server

  def __repr__(self):
    return 'ClusterConfig(task=%s:%d, chief=%s, workers=%d, ps=%d, master=%r)' % (
        self._task_type, self._task_index, self.is_chief, self.num_worker_replicas,
        self.num_ps_tasks, self.master)
