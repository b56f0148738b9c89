r"""Runs a whole TF_CONFIG cluster on this machine: one process per task.

A chief, one worker and one ps training the shapes detector, every task with
the TF_CONFIG it would get on Kubernetes, on free 127.0.0.1 ports:

    python -m deployment.launch --chief --workers=1 --ps=1 -- \
        --pipeline_config_path=configs/ssd_shapes.config --train_dir=/tmp/train

Everything after `--` goes to the program (`--module`, default
`trainer.train`; `trainer.model_main` works too). A Kubeflow TFJob manifest
runs the same way, so the exact job can be tried before it is submitted:

    python -m deployment.tfjob ... --output=job.yaml
    python -m deployment.launch --tfjob=job.yaml

and so does a JobSet (`deployment.tfjob --kind=jobset`): each pod's env is
expanded as Kubernetes does it (`$(VAR)`, the completion index), and each
pod's TF_CONFIG, its pod names mapped to this machine's ports, must be the
one the launcher gives that task:

    python -m deployment.launch --jobset=job.yaml

A manifest's commands run as written, with your rights: never run a
manifest you did not write or read (docs/security.md).

The output is one stream: each task's lines prefixed with its task
(`[worker:1] ...`), the launcher's own lines with `[launch]`, and the chief's
step lines (one per `log_every_n_steps`) repeated as `[progress] ...`.

A task that exits is restarted according to its replica type's restart
policy (TFJob's Never / OnFailure / ExitCode / Always, see replicas.py), after
an exponential backoff (--backoff_secs doubling per restart of that task, up
to --max_backoff_secs), as long as the job has restarted fewer than
--backoff_limit tasks. The launcher's exit code is the job's outcome:

* 0: the chief (worker 0 without a chief) exited 0; the other tasks get
  --finish_timeout_secs to end by themselves (ps tasks exit when the trainer
  tells them training is done), then they are stopped;
* 143: the launcher got SIGTERM, SIGINT or SIGHUP (its terminal or ssh
  session closed); it sends SIGTERM to every task (the chief writes a
  checkpoint) and waits --grace_secs before SIGKILL (a second signal, e.g. a
  second Ctrl-C, kills at once);
* the code of the task that failed and is not restarted otherwise (signals
  reported as 128 + N); the other tasks are then stopped.

Tasks die with the launcher: each is started with a parent-death signal
(Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`), so when the launcher itself is
SIGKILLed or crashes no task is left running on its own; the signals it can
catch stop the job gracefully as above.

While the job runs, SIGUSR1 to the launcher adds a worker and SIGUSR2 removes
the newest one (the job trains on; deployment/launch_resize.py).

`--evaluator` adds an evaluator task: trainer.eval on the program's
--train_dir for trainer.train, the program itself otherwise. Like the
training operator, the launcher lists it in TF_CONFIG["cluster"] (at an
address nothing listens on); the training tasks leave it out of their
ClusterSpec. It waits for the first checkpoint of a train_dir that does not
exist yet (within its eval timeout), since every task starts at once.
`--restart_policy` sets every replica type's policy (default ExitCode),
`--replica_restart_policy=ps=Always,...` overrides single types, and
`--task_log_dir` also keeps each task's raw output in a file. `--netns` puts
every task on a "machine" of its own (a Linux network namespace with its own
address on a private subnet, deployment/netns.py; root and iproute2 needed),
so the job talks over a real network stack instead of 127.0.0.1.

From Python (tests, benchmarks):

    command = [sys.executable, '-m', 'trainer.train', '--pipeline_config_path=...', ...]
    specs = [replicas.ReplicaSpec('chief', 1, command),
             replicas.ReplicaSpec('worker', 2, command, restart_policy='OnFailure'),
             replicas.ReplicaSpec('ps', 1, command)]
    launcher = launch.Launcher(specs, backoff_limit=3, out=sys.stdout)
    exit_code = launcher.run()

Differs on purpose:
* The TFJob operator's default is no backoff limit, and under ExitCode its
  backoffLimit does not count the pods it recreates (docs/kubernetes.md);
  the launcher counts every restart against --backoff_limit (default 6), so
  a crash loop ends.
* A manifest's `python`/`python3` command runs with this interpreter, and the
  image, resources and volumes of the pod template are ignored: the tasks run
  in this checkout.
* Under `ExitCode` a task exiting 143 is not restarted (the operator would):
  slimtrain's contract reads 143 as "preempted", a whole-job matter, so the
  job ends with 143 (deployment/exit_codes.is_retryable).
* An evaluator's failure never fails the job (as on the cluster, where it
  runs as a Job of its own): it restarts under its restart policy on a
  budget of its own (--backoff_limit restarts of the evaluator alone, not
  counted against the job's), after which training goes on without it.
"""

import ctypes
import ctypes.util
import os
import re
import signal
import subprocess
import sys
import threading
import time

from absl import app
from absl import flags

from deployment import exit_codes
from deployment import launch_resize
from deployment import netns
from deployment import ports
from deployment import replicas as replicas_lib

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A step line of trainer.training_loop ('global step 10, loss = ...') or of
# the Estimator's LoggingTensorHook ('loss = 0.5, step = 10 (...)').
PROGRESS_RE = re.compile(r'(global step \d+,.*|loss = \S+, step = \d+.*)$')
_POLL_SECS = 0.1
# A command that cannot be started (not found, not executable): permanent,
# the code a shell gives a command it cannot find.
_CANNOT_START = 127
# Signals that stop the job as preempted: Ctrl-C, kill, a closed terminal or ssh session.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl():
  """libc's prctl, resolved here so that a child only calls it; None off Linux."""
  if not sys.platform.startswith('linux'):
    return None
  try:
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    return libc.prctl
  except (OSError, AttributeError):
    return None


_PRCTL = _prctl()


def die_with_parent_fn():
  """A `preexec_fn` that makes the child get SIGKILL when this process dies; or None.

  The kernel sends the signal when the thread that forked the child exits,
  so tasks must be started (and restarted) by a thread that lives as long
  as the job: `Launcher.run`'s. A child whose parent already died between
  fork and prctl kills itself at once. The setting survives exec (except
  of set-user-ID programs) and is not inherited by the task's own children:
  its process group is signalled for those while the launcher lives.
  """
  if _PRCTL is None:
    return None
  parent = os.getpid()
  sigkill = int(signal.SIGKILL)

  def set_parent_death_signal():
    # Runs in the forked child before exec (other threads of ours exist): it only calls
    # functions resolved in the parent, and imports nothing.
    _PRCTL(_PR_SET_PDEATHSIG, sigkill, 0, 0, 0)
    if os.getppid() != parent:
      os.kill(os.getpid(), sigkill)

  return set_parent_death_signal



class _Task(object):
  """One task of the job: its current process, attempts and a pending restart."""

  def __init__(self, spec, index, tf_config_json):
    self.spec = spec
    self.index = index
    self.key = (spec.replica_type, index)
    self.name = '%s:%d' % self.key
    self.tf_config = tf_config_json
    self.popen = None
    self.pump = None
    self.attempts = 0
    self.restarts = 0
    self.restart_at = None

  @property
  def running(self):
    return self.popen is not None


class Launcher(launch_resize.ResizeMixin):
  """Starts, watches, restarts and stops every task of one job on this machine."""

  def __init__(self, specs, backoff_limit=6, backoff_secs=1.0, max_backoff_secs=60.0,
               grace_secs=30.0, finish_timeout_secs=300.0, out=None, log_dir=None,
               cwd=None, env=None, cluster=None, network=None, task_env=None):
    """Prepares (does not start) a job.

    Args:
      specs: list of `replicas.ReplicaSpec` (checked with `replicas.check_specs`).
      backoff_limit: restarts allowed across the whole job; the next task that
        would be restarted fails the job instead.
      backoff_secs: delay before a task's first restart; doubles with each
        further restart of the same task.
      max_backoff_secs: upper bound of that delay.
      grace_secs: after SIGTERM, seconds the tasks get before SIGKILL.
      finish_timeout_secs: after the job succeeded, seconds the other tasks
        get to exit by themselves before they are sent SIGTERM.
      out: text stream of the merged log (default sys.stdout).
      log_dir: optional directory for one raw `<type>-<index>.log` per task.
      cwd: working directory of the tasks (default: the current one).
      env: extra environment variables for every task.
      cluster: optional {type: [addresses]} to use instead of free loopback
        ports (must match the specs' replica counts).
      network: optional created `netns.Network` with one host per task named
        '<type><index>' (see `replicas.netns_hosts`); each task then runs in its
        host's namespace, at the address `replicas.netns_cluster` gives it.
      task_env: optional {'worker:1': {name: value}}: env of single tasks
        (a JobSet pod's own index), over `env` and the spec's.

    Raises:
      ValueError: on bad specs or numbers, naming them.
    """
    replicas_lib.check_specs(specs)
    for name, value in (('backoff_limit', backoff_limit), ('backoff_secs', backoff_secs),
                        ('max_backoff_secs', max_backoff_secs), ('grace_secs', grace_secs),
                        ('finish_timeout_secs', finish_timeout_secs)):
      if value < 0:
        raise ValueError('%s must be >= 0, got %r' % (name, value))
    self._specs = sorted((s for s in specs if s.replicas),
                         key=lambda s: replicas_lib.REPLICA_TYPES.index(s.replica_type))
    self._backoff_limit = backoff_limit
    self._backoff_secs = backoff_secs
    self._max_backoff_secs = max_backoff_secs
    self._grace_secs = grace_secs
    self._finish_timeout_secs = finish_timeout_secs
    self._out = out or sys.stdout
    self._log_dir = log_dir
    self._cwd = cwd
    self._env = dict(env or {})
    self._per_task_env = dict(task_env or {})
    self._cluster = cluster
    self._network = network
    self._success_key = replicas_lib.success_task(self._specs)
    self._write_lock = threading.Lock()
    self._stop_signal = None
    self._stop_requests = 0
    self._stopping = False
    self._outcome = None
    self._stop_at = None
    self._kill_at = None
    self._tasks = []
    self.restarts = 0
    self.exits = []
    self.progress = []
    self._init_resize()

  @property
  def cluster(self):
    """The TF_CONFIG cluster of the job (after `start`)."""
    return self._cluster

  @property
  def tasks(self):
    """{'worker:1': tf_config JSON} of every task (after `start`)."""
    return {task.name: task.tf_config for task in self._tasks}

  def run(self, handle_signals=True):
    """Starts the job, waits for its outcome and returns it as an exit code.

    Args:
      handle_signals: turn SIGINT/SIGTERM/SIGHUP into `request_stop` while
        running (only possible in the main thread; ignored elsewhere).
    """
    previous = {}
    if handle_signals and threading.current_thread() is threading.main_thread():
      for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, lambda s, f: self.request_stop(s))
      for signum, delta in launch_resize.RESIZE_SIGNALS.items():
        previous[signum] = signal.signal(
            signum, lambda s, f, delta=delta: self.request_resize(delta))
    try:
      self.start()
      return self.wait()
    finally:
      for signum, handler in previous.items():
        signal.signal(signum, handler)
      self.kill_all()

  def request_stop(self, signum=signal.SIGTERM):
    """Asks the job to stop as preempted (safe from a signal handler or thread).

    The first request sends SIGTERM to every task and gives them the grace
    period; a second one (a second Ctrl-C) SIGKILLs whatever still runs.
    """
    self._stop_signal = signum
    self._stop_requests += 1

  def start(self):
    """Picks the addresses and starts every task (ps tasks first)."""
    if self._cluster is None and self._network is not None:
      self._cluster = replicas_lib.netns_cluster(self._network, self._specs)
    if self._cluster is None:
      addresses = iter(ports.loopback_addresses(replicas_lib.num_cluster_tasks(self._specs)))
      self._cluster = replicas_lib.local_cluster(self._specs, addresses)
    if self._log_dir:
      os.makedirs(self._log_dir, exist_ok=True)
    self.log('cluster %s' % self._cluster)
    for spec in self._specs:
      for index in range(spec.replicas):
        task = self._new_task(spec, index, replicas_lib.tf_config(
            self._cluster, spec.replica_type, index))
        self._tasks.append(task)
        if self._outcome is None:
          self._start(task)

  def wait(self):
    """Watches the tasks until the job's outcome is known and every task ended.

    Returns:
      The job's exit code (0, 143, or the failing task's code).
    """
    while True:
      self._apply_resizes()  # those asked before a stop request first
      if self._stop_signal is not None and not self._stopping:
        self._stop_for_signal()
      elif self._stop_requests > 1 and self._kill_at is not None:
        self.log('second stop request: SIGKILL now')
        self._kill_at = time.monotonic()
      now = time.monotonic()
      for task in list(self._tasks):
        self._check(task, now)
      if self._outcome is not None:
        if not any(task.running for task in self._tasks):
          break
        self._escalate(now)
      time.sleep(_POLL_SECS)
    self.log('job finished with exit code %d' % self._outcome)
    return self._outcome

  @staticmethod
  def _new_task(spec, index, tf_config_json):
    return _Task(spec, index, tf_config_json)

  def kill_all(self):
    """SIGKILLs every task still running and reaps it (cleanup after errors)."""
    for task in self._tasks:
      if task.running:
        self._signal(task, signal.SIGKILL)
        try:
          task.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
          self.log('%s (pid %d) did not die within 30s of SIGKILL' % (
              task.name, task.popen.pid))
          continue
        self._reap(task)

  def _task_env(self, task):
    """The environment of a task: ours, the job's, the spec's, then its TF_CONFIG."""
    env = dict(os.environ)
    env.pop('TF_CONFIG', None)
    env['PYTHONPATH'] = os.pathsep.join(
        [_REPO_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p])
    env['PYTHONUNBUFFERED'] = '1'  # lines reach the merged log as they are written
    if sum(spec.replicas for spec in self._specs) > 1:
      # Several tasks may share a GPU here; each would otherwise take all its memory.
      env.setdefault('TF_FORCE_GPU_ALLOW_GROWTH', 'true')
    env.update(self._env)
    env.update(task.spec.env)
    env.update(self._per_task_env.get(task.name, {}))
    env['TF_CONFIG'] = task.tf_config
    return env

  def _start(self, task):
    """Starts (or restarts) `task`'s process and the thread that copies its output."""
    task.attempts += 1
    log_file = None
    if self._log_dir:
      path = os.path.join(self._log_dir, '%s-%d.log' % task.key)
      log_file = open(path, 'a', encoding='utf-8')
      log_file.write('===== attempt %d =====\n' % task.attempts)
    options = dict(cwd=self._cwd, env=self._task_env(task), stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                   start_new_session=True,  # its own process group: signals reach children
                   preexec_fn=die_with_parent_fn())  # and none outlives the launcher
    try:
      if self._network is not None:
        task.popen = self._network.popen('%s%d' % task.key, task.spec.command, **options)
      else:
        task.popen = subprocess.Popen(task.spec.command, **options)
    except (OSError, netns.NetnsError) as e:
      if log_file:
        log_file.close()
      self.log('cannot start %s: %s: the job fails' % (task.name, e))
      self.exits.append((task.name, _CANNOT_START))
      if self._outcome is None:
        self._decide(_CANNOT_START, stop_others=True)
      return
    task.pump = threading.Thread(target=self._pump, args=(task, task.popen, log_file),
                                 name='output of %s' % task.name, daemon=True)
    task.pump.start()
    self.log('started %s (pid %d, attempt %d): %s' % (
        task.name, task.popen.pid, task.attempts, ' '.join(task.spec.command)))

  def _pump(self, task, popen, log_file):
    """Copies one process's output into the merged log, line by line, prefixed."""
    reports_progress = task.key == self._success_key
    try:
      for raw in iter(popen.stdout.readline, b''):
        line = raw.decode('utf-8', 'replace').rstrip('\r\n')
        self._emit('[%s] %s' % (task.name, line))
        if log_file:
          log_file.write(line + '\n')
          log_file.flush()
        match = PROGRESS_RE.search(line) if reports_progress else None
        if match:
          self.progress.append(match.group(1))
          self._emit('[progress] %s' % match.group(1))
    finally:
      popen.stdout.close()
      if log_file:
        log_file.close()

  def _reap(self, task):
    """Forgets a finished process once its remaining output is copied."""
    # A grandchild that kept the pipe open must not hang the launcher.
    task.pump.join(timeout=5.0)
    task.popen = None

  def _check(self, task, now):
    """Handles an exit of `task`, or starts a restart that is due."""
    if task.running:
      code = task.popen.poll()
      if code is not None:
        self._reap(task)
        self._on_exit(task, exit_codes.normalize(code))
    elif task.restart_at is not None and now >= task.restart_at:
      task.restart_at = None
      self._start(task)

  def _on_exit(self, task, code):
    """Applies the restart policy and the job's success/failure rules to one exit."""
    self.exits.append((task.name, code))
    policy = task.spec.restart_policy
    if self._removed_exit(task, code):
      return
    if self._outcome is not None:
      self.log('%s exited with code %d' % (task.name, code))
    elif code == 0 and task.key == self._success_key:
      self.log('%s exited with code 0: the job succeeded' % task.name)
      self._decide(0, stop_others=False)
    elif code != 0 and task.spec.replica_type == 'evaluator':
      self._on_evaluator_failure(task, code, policy)
    elif replicas_lib.should_restart(policy, code) and self.restarts < self._backoff_limit:
      self._schedule_restart(task, code)
    elif code == 0:
      self.log('%s exited with code 0 (done)' % task.name)
    elif replicas_lib.should_restart(policy, code):
      self.log('%s exited with code %d; the job already restarted %d task(s), its '
                'backoff limit: the job fails' % (task.name, code, self._backoff_limit))
      self._decide(code, stop_others=True)
    else:
      self.log('%s exited with code %d, which restart policy %s does not restart: '
                'the job fails' % (task.name, code, policy))
      self._decide(code, stop_others=True)

  def _schedule_restart(self, task, code, counts_for_job=True):
    delay = min(self._backoff_secs * 2 ** task.restarts, self._max_backoff_secs)
    task.restarts += 1
    task.restart_at = time.monotonic() + delay
    if not counts_for_job:
      self.log('%s exited with code %d; restart policy %s: restarting in %.1fs '
               '(restart %d of at most %d of this task)' % (
                   task.name, code, task.spec.restart_policy, delay, task.restarts,
                   self._backoff_limit))
      return
    self.restarts += 1
    self.log('%s exited with code %d; restart policy %s: restarting in %.1fs '
              '(restart %d of at most %d in the job)' % (
                  task.name, code, task.spec.restart_policy, delay, self.restarts,
                  self._backoff_limit))

  def _on_evaluator_failure(self, task, code, policy):
    """An evaluator's failure never fails the job: it restarts on a budget of its own.

    As its own Job in a JobSet or beside a TFJob: up to --backoff_limit
    restarts of the evaluator alone, then training goes on without it.
    """
    if replicas_lib.should_restart(policy, code) and task.restarts < self._backoff_limit:
      self._schedule_restart(task, code, counts_for_job=False)
      return
    self.log('%s exited with code %d and is not restarted (policy %s, %d restart(s) '
             'done): training goes on without it; an evaluator never fails the job'
             % (task.name, code, policy, task.restarts))

  def _decide(self, exit_code, stop_others):
    """Fixes the job's outcome; stops the other tasks now or after the finish timeout."""
    self._outcome = exit_code
    for task in self._tasks:
      task.restart_at = None
    if stop_others:
      self._terminate_all()
    else:
      self._stop_at = time.monotonic() + self._finish_timeout_secs

  def _stop_for_signal(self):
    self._stopping = True
    self.log('got %s: sending SIGTERM to every task, SIGKILL after %.0fs' % (
        signal.Signals(self._stop_signal).name, self._grace_secs))
    if self._outcome is None:
      self._outcome = exit_codes.PREEMPTED
    for task in self._tasks:
      task.restart_at = None
    self._terminate_all()

  def _terminate_all(self):
    self._stop_at = None
    self._kill_at = time.monotonic() + self._grace_secs
    for task in self._tasks:
      if task.running:
        self._signal(task, signal.SIGTERM)

  def _escalate(self, now):
    """SIGTERM after the finish timeout, SIGKILL after the grace period."""
    if self._stop_at is not None and now >= self._stop_at:
      self.log('tasks still running %.0fs after the job succeeded: %s; stopping them' % (
          self._finish_timeout_secs, ', '.join(t.name for t in self._tasks if t.running)))
      self._terminate_all()
    if self._kill_at is not None and now >= self._kill_at:
      self._kill_at = None
      for task in self._tasks:
        if task.running:
          self.log('%s still running %.0fs after SIGTERM: SIGKILL' % (
              task.name, self._grace_secs))
          self._signal(task, signal.SIGKILL)

  def _signal(self, task, signum):
    try:
      os.killpg(task.popen.pid, signum)
    except ProcessLookupError:
      pass

  def log(self, message):
    """Writes one `[launch] message` line to the merged log."""
    self._emit('[launch] %s' % message)

  def _emit(self, line):
    with self._write_lock:
      self._out.write(line + '\n')
      self._out.flush()


# ----------------------------------------------------------------------------
# Command line.

FLAGS = flags.FLAGS


def define_flags():
  """Defines the launcher's flags; called only when this module is the program."""
  flags.DEFINE_boolean('chief', True, 'Run a chief task (otherwise worker 0 is the chief).')
  flags.DEFINE_integer('workers', 1, 'Number of worker tasks.')
  flags.DEFINE_integer('ps', 1, 'Number of ps tasks.')
  flags.DEFINE_boolean('evaluator', False, 'Run an evaluator task (it trains nothing; like '
                       'the operator, TF_CONFIG lists it in the cluster).')
  flags.DEFINE_string('module', 'trainer.train', 'Program every training and ps task runs '
                      '(python -m MODULE <flags after -->).')
  flags.DEFINE_string('evaluator_module', None, 'Program of the evaluator (default: '
                      'trainer.eval for trainer.train, else --module).')
  flags.DEFINE_string('restart_policy', replicas_lib.EXIT_CODE, 'Restart policy of every '
                      'replica type: %s.' % ', '.join(replicas_lib.RESTART_POLICIES))
  flags.DEFINE_list('replica_restart_policy', [], 'Per replica type, overriding '
                    '--restart_policy, e.g. "ps=Always,worker=OnFailure".')
  flags.DEFINE_integer('backoff_limit', 6, 'Task restarts allowed across the job (default 6; '
                       'with --tfjob/--jobset, the manifest\'s backoffLimit unless this flag '
                       'is set).')
  flags.DEFINE_float('backoff_secs', 1.0, 'Delay before a task\'s first restart; doubles '
                     'with each further restart of that task.')
  flags.DEFINE_float('max_backoff_secs', 60.0, 'Upper bound of the restart delay.')
  flags.DEFINE_float('grace_secs', 30.0, 'Seconds tasks get after SIGTERM before SIGKILL.')
  flags.DEFINE_float('finish_timeout_secs', 300.0, 'Seconds the other tasks get to exit by '
                     'themselves after the chief finished.')
  flags.DEFINE_string('tfjob', None, 'Run this TFJob manifest (YAML) instead of the job '
                      'described by the flags.')
  flags.DEFINE_string('jobset', None, 'Run this JobSet manifest (YAML) instead of the job '
                      'described by the flags.')
  flags.DEFINE_string('task_log_dir', None, 'Also write each task\'s output to '
                      'TASK_LOG_DIR/<type>-<index>.log.')
  flags.DEFINE_boolean('netns', False, 'Run every task in a network namespace of its own '
                       '(deployment/netns.py; needs root and iproute2).')


def _restart_policies():
  """{replica type: policy} from --restart_policy and --replica_restart_policy."""
  policies = {t: FLAGS.restart_policy for t in replicas_lib.REPLICA_TYPES}
  for item in FLAGS.replica_restart_policy:
    replica_type, sep, policy = item.partition('=')
    if not sep or replica_type not in replicas_lib.REPLICA_TYPES:
      raise app.UsageError('--replica_restart_policy: %r is not TYPE=POLICY with TYPE one of %s'
                           % (item, ', '.join(replicas_lib.REPLICA_TYPES)))
    policies[replica_type] = policy
  for replica_type, policy in policies.items():
    if policy not in replicas_lib.RESTART_POLICIES:
      raise app.UsageError('--restart_policy/--replica_restart_policy: %r for %s is not one of %s'
                           % (policy, replica_type, ', '.join(replicas_lib.RESTART_POLICIES)))
  return policies


def specs_from_flags(program_args):
  """The job the flags describe, as a list of `replicas.ReplicaSpec`."""
  for name in ('workers', 'ps'):
    if FLAGS[name].value < 0:
      raise app.UsageError('--%s must be >= 0, got %d' % (name, FLAGS[name].value))
  if not FLAGS.chief and not FLAGS.workers:
    raise app.UsageError('--nochief needs --workers >= 1: a job needs a chief or a worker')
  if not FLAGS.module:
    raise app.UsageError('--module must name the program to run')
  policies = _restart_policies()
  command = [sys.executable, '-m', FLAGS.module] + list(program_args)
  counts = {'chief': int(FLAGS.chief), 'worker': FLAGS.workers, 'ps': FLAGS.ps}
  specs = [replicas_lib.ReplicaSpec(t, n, command, restart_policy=policies[t])
           for t, n in counts.items() if n]
  if FLAGS.evaluator:
    try:
      eval_command = replicas_lib.evaluator_command(FLAGS.module, program_args,
                                                    FLAGS.evaluator_module)
    except ValueError as e:
      raise app.UsageError(str(e)) from None
    specs.append(replicas_lib.ReplicaSpec('evaluator', 1, eval_command,
                                          restart_policy=policies['evaluator']))
  return specs


def _read_tfjob(program_args):
  """(specs, backoff limit, tfjob.TFJob) of the --tfjob manifest."""
  from deployment import tfjob  # pylint: disable=import-outside-toplevel
  if program_args:
    raise app.UsageError('--tfjob runs the manifest\'s commands; remove the program flags '
                         'after --: %s' % ' '.join(program_args))
  try:
    job = tfjob.read_tfjob(FLAGS.tfjob)
  except (OSError, ValueError) as e:
    raise app.UsageError('--tfjob: %s' % e) from None
  specs = [s._replace(command=replicas_lib.local_command(s.command)) for s in job.specs]
  backoff_limit = FLAGS.backoff_limit
  if job.backoff_limit is not None and not FLAGS['backoff_limit'].present:
    backoff_limit = job.backoff_limit  # the flag, when given, wins over the manifest
  return specs, backoff_limit, job


def _read_jobset(program_args):
  """(specs, backoff limit, jobset.JobSet) of the --jobset manifest."""
  from deployment import jobset  # pylint: disable=import-outside-toplevel
  if program_args:
    raise app.UsageError('--jobset runs the manifest\'s commands; remove the program flags '
                         'after --: %s' % ' '.join(program_args))
  if FLAGS.tfjob:
    raise app.UsageError('give --tfjob or --jobset, not both')
  try:
    job = jobset.read_jobset(FLAGS.jobset)
  except (OSError, ValueError) as e:
    raise app.UsageError('--jobset: %s' % e) from None
  specs = [s._replace(command=replicas_lib.local_command(s.command)) for s in job.specs]
  backoff_limit = FLAGS.backoff_limit
  if not FLAGS['backoff_limit'].present:
    backoff_limit = job.backoff_limit  # the flag, when given, wins over the manifest
  return specs, backoff_limit, job


def _log_manifest(launcher, job, cluster):
  """Logs which manifest runs and where each of its names is on this machine."""
  from deployment import jobset  # pylint: disable=import-outside-toplevel
  from deployment import tfjob  # pylint: disable=import-outside-toplevel
  if isinstance(job, jobset.JobSet):
    launcher.log('JobSet %s/%s from %s' % (job.namespace, job.name, FLAGS.jobset))
    for name, address in jobset.local_addresses(job, cluster).items():
      launcher.log('pod %s -> %s' % (name, address))
    return
  launcher.log('TFJob %s/%s from %s' % (job.namespace, job.name, FLAGS.tfjob))
  for replica_type, names in tfjob.service_addresses(job).items():
    for name, address in zip(names, cluster[replica_type]):
      launcher.log('service %s -> %s' % (name, address))


def _run_job(specs, backoff_limit, job=None, network=None):
  """Runs the job (on `network` when given); returns the launcher's exit code."""
  from deployment import jobset  # pylint: disable=import-outside-toplevel
  if network is not None:
    cluster = replicas_lib.netns_cluster(network, specs)
  else:
    addresses = iter(ports.loopback_addresses(replicas_lib.num_cluster_tasks(specs)))
    cluster = replicas_lib.local_cluster(specs, addresses)
  task_env = None
  if isinstance(job, jobset.JobSet):
    try:
      jobset.check_tf_configs(job, cluster, FLAGS.jobset)
    except ValueError as e:
      raise app.UsageError('--jobset: %s' % e) from None
    task_env = job.task_env
  try:
    launcher = Launcher(specs, backoff_limit=backoff_limit, backoff_secs=FLAGS.backoff_secs,
                        max_backoff_secs=FLAGS.max_backoff_secs, grace_secs=FLAGS.grace_secs,
                        finish_timeout_secs=FLAGS.finish_timeout_secs,
                        log_dir=FLAGS.task_log_dir, cluster=cluster, network=network,
                        task_env=task_env)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  if job is not None:
    _log_manifest(launcher, job, cluster)
  return launcher.run()


def main(argv):
  program_args = argv[1:]
  if FLAGS.jobset:
    specs, backoff_limit, job = _read_jobset(program_args)
  elif FLAGS.tfjob:
    specs, backoff_limit, job = _read_tfjob(program_args)
  else:
    specs, backoff_limit, job = specs_from_flags(program_args), FLAGS.backoff_limit, None
  if not FLAGS.netns:
    sys.exit(_run_job(specs, backoff_limit, job))
  reason = netns.unavailable_reason()
  if reason:
    raise app.UsageError('--netns: %s' % reason)
  try:
    replicas_lib.check_specs(specs)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  with netns.Network(replicas_lib.netns_hosts([s for s in specs if s.replicas])) as network:
    code = _run_job(specs, backoff_limit, job, network)
  sys.exit(code)


if __name__ == '__main__':
  define_flags()
  app.run(main)
