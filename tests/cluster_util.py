"""Launch real TensorFlow cluster tasks as subprocesses on loopback ports.

A cluster test starts one process per task, each with its own TF_CONFIG,
waits for them with bounded timeouts, and always kills whatever is left, even
when an assertion fails halfway:

    with cluster_util.ProcessGroup(log_dir=str(tmp_path)) as group:
      cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
      group.start('ps0', cluster_util.tf_config(cluster, 'ps', 0),
                  module='tests.deployment.cluster_task_main', args=['--role=ps'])
      w0 = group.start('worker0', cluster_util.tf_config(cluster, 'worker', 0),
                       module='tests.deployment.cluster_task_main')
      group.wait_for_output(w0, r'READY', timeout=60)
      assert group.wait(w0, timeout=120) == 0, group.logs()
    # every process of the group is dead here; logs stay in tmp_path

Output goes to one log file per process (never a pipe, so a chatty process
cannot block on a full pipe). Processes run in their own session, so killing a
task also kills anything it spawned. Ports come from
`tests.test_util.pick_unused_ports` and every address is 127.0.0.1.

The same group runs a cluster across network namespaces, one per task, each
with its own address (`deployment.netns`; the `netns_network` fixture of
tests/conftest.py creates the network and removes it after the test):

    def test_x(tmp_path, netns_network):
      network = netns_network(['chief0', 'worker0', 'ps0'])
      cluster = cluster_util.netns_cluster(network)   # {'chief': ['10.213.X.2:2222'], ...}
      with cluster_util.ProcessGroup(str(tmp_path), network=network) as group:
        tasks = group.start_cluster(cluster, 'trainer.train', args=[...])
        network.partition('ps0')
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from tests import fork_server
from tests import test_util

# Lines every TensorFlow process prints that say nothing about where it is.
_NOISE = re.compile(r'deprecat|Instructions for updating|^\s*(warnings\.warn|Please |To construct|'
                    r'Queue-based)|oneDNN|cuda|cuInit|absl::InitializeLog', re.IGNORECASE)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def local_cluster(num_workers=1, num_ps=0, chief=False, master=False):
  """A cluster dict of free 127.0.0.1 ports, e.g. {'worker': [...], 'ps': [...]}.

  Args:
    num_workers: tasks in the `worker` job (0 for none).
    num_ps: tasks in the `ps` job (0 for none).
    chief: add a one-task `chief` job.
    master: add a one-task `master` job.

  Returns:
    dict {job: ['127.0.0.1:port', ...]}.
  """
  sizes = [('chief', 1 if chief else 0), ('master', 1 if master else 0),
           ('worker', num_workers), ('ps', num_ps)]
  ports = iter(test_util.pick_unused_ports(sum(n for _, n in sizes)))
  return {job: ['127.0.0.1:%d' % next(ports) for _ in range(n)] for job, n in sizes if n}


def netns_cluster(network, port=2222):
  """The cluster dict of a `deployment.netns.Network` whose hosts are task names.

  Args:
    network: a created `Network` with hosts named '<job><index>' ('chief0',
      'worker1', 'ps0', ...); hosts of no TF_CONFIG job (e.g. 'client0') are
      left out.
    port: the port of every task (each has its own address).

  Returns:
    dict {job: ['10.213.X.Y:port', ...]} with the tasks of each job in index order.
  """
  jobs = {}
  for host in network.hosts:
    match = re.match(r'^(chief|master|worker|ps|evaluator)(\d+)$', host)
    if not match:
      continue
    jobs.setdefault(match.group(1), []).append((int(match.group(2)), host))
  for job, tasks in jobs.items():
    if [index for index, _ in sorted(tasks)] != list(range(len(tasks))):
      raise ValueError('job %r has tasks %s; expected 0..%d' % (
          job, sorted(i for i, _ in tasks), len(tasks) - 1))
  return network.cluster({job: [h for _, h in sorted(tasks)] for job, tasks in jobs.items()},
                         port=port)


def tf_config(cluster, task_type, task_index, **extra):
  """The TF_CONFIG JSON string for one task of `cluster`."""
  config = {'cluster': cluster, 'task': {'type': task_type, 'index': task_index}}
  config.update(extra)
  return json.dumps(config)


def loopback_addresses(count):
  """`count` free '127.0.0.1:port' addresses, for clusters built by hand."""
  return ['127.0.0.1:%d' % port for port in test_util.pick_unused_ports(count)]


def cluster_config(cluster, task_type, task_index=0):
  """The `deployment.cluster.ClusterConfig` one task of `cluster` reads from its TF_CONFIG."""
  from deployment import cluster as cluster_lib  # noqa: PLC0415  (imports TensorFlow)
  return cluster_lib.ClusterConfig.from_tf_config(
      {'TF_CONFIG': tf_config(cluster, task_type, task_index)})


class TaskProcess(object):
  """A started subprocess with its name and log file."""

  def __init__(self, name, popen, log_path):
    self.name = name
    self.popen = popen
    self.log_path = log_path

  @property
  def pid(self):
    return self.popen.pid

  def poll(self):
    return self.popen.poll()

  def output(self):
    """Everything the process wrote so far (stdout and stderr)."""
    try:
      with open(self.log_path, encoding='utf-8', errors='replace') as f:
        return f.read()
    except FileNotFoundError:
      return ''


class ProcessGroup(object):
  """Starts task processes and guarantees they are killed at the end."""

  def __init__(self, log_dir, python=None, hide_gpus=True, network=None):
    """Creates an empty group.

    Args:
      log_dir: directory for one `<name>.log` per process.
      python: interpreter (default: the running one).
      hide_gpus: set CUDA_VISIBLE_DEVICES='' in the tasks (unless the caller's
        environment sets it), so several tasks never fight over one GPU.
      network: optional created `deployment.netns.Network`; a process whose
        name (before any '_', e.g. 'ps0' of 'ps0_restarted') is one of its
        hosts runs in that host's namespace.
    """
    self._network = network
    self._log_dir = log_dir
    self._python = python or sys.executable
    self._hide_gpus = hide_gpus
    self._processes = []
    os.makedirs(log_dir, exist_ok=True)

  def __enter__(self):
    return self

  def __exit__(self, exc_type, *unused_exc):
    self.kill_all()
    if exc_type is not None:
      self._keep_logs_for_bazel()
    return False

  def _keep_logs_for_bazel(self):
    """After a failure under `bazel test`, copies every log where bazel keeps them.

    Bazel deletes the test's temporary directory; files in
    TEST_UNDECLARED_OUTPUTS_DIR end up in bazel-testlogs/<target>/test.outputs/,
    so a failure seen only under bazel still shows each task's whole log
    (pytest shortens the one in its assertion message).
    """
    outputs = os.environ.get('TEST_UNDECLARED_OUTPUTS_DIR')
    if not outputs or not os.path.isdir(self._log_dir):
      return
    name = '%s-%d' % (os.path.basename(os.path.dirname(os.path.abspath(self._log_dir))),
                      os.getpid())
    shutil.copytree(self._log_dir, os.path.join(outputs, 'failed_task_logs', name),
                    dirs_exist_ok=True)

  @property
  def processes(self):
    return list(self._processes)

  def start(self, name, tf_config_json=None, module=None, script=None, args=(), env=None):
    """Starts `python -m module args` (or `python script args`) with TF_CONFIG.

    Args:
      name: label for logs and errors (also the log file name).
      tf_config_json: the TF_CONFIG string, or None to leave it unset.
      module: a module to run with `-m` (from the repository root).
      script: a script path, instead of `module`.
      args: extra command-line arguments.
      env: extra environment variables.

    Returns:
      A `TaskProcess`.
    """
    if (module is None) == (script is None):
      raise ValueError('give exactly one of module= or script=')
    command = [self._python, '-u']
    command += ['-m', module] if module else [script]
    command += [str(a) for a in args]
    process_env = dict(os.environ)
    process_env.pop('TF_CONFIG', None)
    process_env['PYTHONPATH'] = os.pathsep.join(
        [REPO_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p])
    process_env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    if self._hide_gpus:
      process_env.setdefault('CUDA_VISIBLE_DEVICES', '')
    if tf_config_json is not None:
      process_env['TF_CONFIG'] = tf_config_json
    process_env.update(env or {})
    host = name.split('_')[0]
    if self._network is not None and host in self._network.hosts:
      command = self._network.command(host, command)
      # gRPC would send the cluster's traffic to a proxy the namespace cannot reach.
      for variable in [k for k in process_env if k.lower().endswith('_proxy')]:
        del process_env[variable]
    log_path = os.path.join(self._log_dir, '%s.log' % name)
    with open(log_path, 'wb') as log:
      # In a namespace, `ip netns exec` must start it; elsewhere it is forked
      # from a process that has already imported TensorFlow (tests/fork_server.py).
      start = subprocess.Popen if self._network is not None else fork_server.popen
      popen = start(command, cwd=REPO_ROOT, env=process_env, stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    process = TaskProcess(name, popen, log_path)
    self._processes.append(process)
    return process

  def start_cluster(self, cluster, module, args=(), task_args=None, skip=(), env=None):
    """Starts one `python -m module` per task of `cluster` with its TF_CONFIG.

    Args:
      cluster: dict {job: [addresses]} (e.g. from `local_cluster`).
      module: the module every task runs.
      args: arguments for every task.
      task_args: optional {'worker0': [...]} extra arguments per task name.
      skip: task names ('ps0', 'worker1', ...) not to start.
      env: extra environment variables of every task.

    Returns:
      dict {task name: TaskProcess}, names like 'chief0', 'worker1', 'ps0'.
    """
    started = {}
    for job in ('chief', 'master', 'ps', 'worker', 'evaluator'):
      for index in range(len(cluster.get(job, []))):
        name = '%s%d' % (job, index)
        if name in skip:
          continue
        extra = list((task_args or {}).get(name, ()))
        started[name] = self.start(name, tf_config(cluster, job, index), module=module,
                                   args=list(args) + extra, env=env)
    return started

  def wait_for_output(self, process, pattern, timeout):
    """Waits until `process`'s output matches regex `pattern`; returns the match.

    Raises:
      TimeoutError: after `timeout` seconds, or RuntimeError when the process
        exited without printing it; both carry every log of the group.
    """
    regex = re.compile(pattern, re.M)
    deadline = time.time() + timeout
    while True:
      match = regex.search(process.output())
      if match:
        return match
      if process.poll() is not None:
        raise RuntimeError('%s exited with %s before printing %r\n%s' % (
            process.name, process.poll(), pattern, self.logs()))
      if time.time() > deadline:
        raise TimeoutError('%s did not print %r within %ss\n%s' % (
            process.name, pattern, timeout, self.logs()))
      time.sleep(0.2)

  def wait(self, process, timeout):
    """Waits for `process` to exit; returns its exit code.

    Raises:
      TimeoutError: when it is still running after `timeout` seconds (with logs).
    """
    try:
      return process.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      raise TimeoutError('%s still running after %ss\n%s' % (
          process.name, timeout, self.logs())) from None

  def kill(self, process, grace_secs=3.0):
    """SIGTERM, then SIGKILL after `grace_secs`, to the process's own session."""
    if process.poll() is not None:
      return process.poll()
    for sig, wait_secs in ((signal.SIGTERM, grace_secs), (signal.SIGKILL, 10.0)):
      try:
        os.killpg(process.pid, sig)
      except ProcessLookupError:
        break
      try:
        return process.popen.wait(timeout=wait_secs)
      except subprocess.TimeoutExpired:
        continue
    return process.poll()

  def kill_all(self):
    """Kills every process of the group that is still running."""
    for process in self._processes:
      self.kill(process)

  def digest(self, lines_per_process=10, width=240):
    """Each process's last log lines that are not TensorFlow's start-up noise.

    `logs()` starts with it: a CI log that keeps only the head of a long
    failure still shows where each process was.
    """
    parts = []
    for process in self._processes:
      lines = [line[:width] for line in process.output().splitlines()
               if line.strip() and not _NOISE.search(line)]
      parts.append('--- %s (exit %s), last lines:\n%s' % (
          process.name, process.poll(), '\n'.join(lines[-lines_per_process:])))
    return '\n'.join(parts)

  def logs(self):
    """Each process's digest, then all logs under a header with its name and exit code."""
    parts = [self.digest()]
    for process in self._processes:
      parts.append('===== %s (exit %s) =====\n%s' % (
          process.name, process.poll(), process.output()[-6000:]))
    return '\n'.join(parts)
