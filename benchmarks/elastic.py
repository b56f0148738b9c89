r"""Elastic asynchronous training: workers join and leave a running job (not a test).

An asynchronous `python -m trainer.train` job (chief + 2 ps, the tiny 16x16 colour
classifier of the cluster tests) runs while its worker count follows a schedule, by the
means docs/fault_tolerance.md ("Workers joining and leaving") describes: a worker is
added by starting it with the job's TF_CONFIG plus itself, and removed by SIGTERM to it
alone (the highest index goes first, as a scale-down removes it; a re-added index comes
back at the same address, as a pod under the same name). Two elastic runs:

  schedule  workers 1 -> 3 -> 2 -> 4 -> 1 -> 3 ... every `--phase_secs` (30 s) for
            `--duration_secs` (300 s), the schedule cycled;
  churn     one worker joining or leaving every `--churn_secs` (10 s): 1, 2, 3, 4, 3,
            2, 1, 2, ... for the same duration.

Every task logs each global step it saw (`log_every_n_steps: 1`), stamped by absl on
the one clock of the machine, so the union of all tasks' lines is the job's progress
(`benchmarks/elastic_timeline.py`). From it:

* global steps/sec over time (one row per `--bin_secs`);
* the longest gap between consecutive global steps in each phase (a change and what
  follows it), goal: none longer than 2 s at any membership change;
* examples/sec per training task (chief + workers) in the window after each change,
  from `--settle_secs` after the change is complete (every worker of the phase, also
  one added earlier, has logged a step, every removed one has logged its last) to the
  next change, against a job
  started at that size (one `--baseline_secs` run per size, started fresh in the same
  invocation, before the elastic runs), goal >= 0.95;
* restarts of every task that was neither added nor removed (chief, ps tasks, worker
  0): an exit before the end, a second training session (tf-slim's `Starting Session.`),
  or a log line of a rebuilt graph or session, a recovery, `Retrying training!` or a
  traceback; goal: zero;
* the loss against a fixed-size job (`--loss_workers`, 2) that ran the same number of
  global steps (the same examples): the mean over the last 20 % of the steps and a
  10-point curve, goal: no divergence;
* the chief's own count (`worker:N joined (W workers)`) at the end of every phase
  against the schedule, and seconds from start to first step of each added worker,
  from SIGTERM to exit (143) of each removed one.

    python -m benchmarks.elastic --quick                 # 1,2,1 with 15 s phases
    python -m benchmarks.elastic                         # schedule and churn, loopback
    python -m benchmarks.elastic --netns                 # each task its own namespace
    python -m benchmarks.elastic --runs=churn --churn_secs=10 --duration_secs=300

The whole invocation takes about 20 minutes with the defaults on loopback (4 baselines,
2 elastic runs of 5 minutes, one loss run about as long). Task logs stay in
`--task_log_dir` (printed).
`--netns` runs every job of the invocation with each task in its own network namespace
(`deployment/netns.py`, needs root and `ip`): chief0, ps0, ps1, worker0..3 are hosts.

Differs on purpose from the other benchmarks:
* it starts its jobs with the cluster tests' own helpers (`tests.cluster_util`
  ProcessGroup, `tests.trainer.cluster_testlib` data, config and task start), so it runs
  from the repository root; on loopback they fork tasks from a process that already
  imported TensorFlow (`tests/fork_server.py`; `SLIMTRAIN_TEST_FORK_SERVER=0` turns it
  off), which makes a join cheaper than a fresh pod's; `--netns` starts fresh
  interpreters;
* a ratio's "repeats" are the windows after the changes of one run, against one
  baseline job per size that ran minutes before: not the side-by-side repeats of
  benchmarks/RESULTS.md's rule, so the ratio goal is printed "not resolved" whatever the
  windows show (with how many reach it); the gap, the restarts and the loss are plain
  measurements of one run.
"""

import collections
import contextlib
import os
import signal
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import bench_util
from benchmarks import elastic_timeline as timeline

flags.DEFINE_bool('quick', False, 'A smoke run: schedule 1,2,1 with 15 s phases, 15 s '
                  'baselines, no churn run.')
flags.DEFINE_bool('netns', False, 'Run every job with each task in its own network '
                  'namespace (deployment/netns.py; needs root and `ip`).')
flags.DEFINE_list('runs', ['schedule', 'churn'], 'Elastic runs: schedule, churn.')
flags.DEFINE_list('schedule', ['1', '3', '2', '4', '1'], 'Worker counts, cycled.')
flags.DEFINE_float('phase_secs', 30, 'Seconds between changes of the schedule run.')
flags.DEFINE_float('churn_secs', 10, 'Seconds between changes of the churn run.')
flags.DEFINE_float('duration_secs', 300, 'Seconds of each elastic run.')
flags.DEFINE_float('baseline_secs', 40, 'Timed seconds of each fixed-size baseline job.')
flags.DEFINE_float('settle_secs', 3, 'Seconds skipped after a change is complete.')
flags.DEFINE_float('min_window_secs', 5, 'Shorter windows give no rate.')
flags.DEFINE_float('gap_goal_secs', 2, 'Goal: no longer gap between global steps.')
flags.DEFINE_float('bin_secs', 10, 'Seconds per row of the steps/sec timeline.')
flags.DEFINE_integer('loss_workers', 2, 'Workers of the fixed-size loss job.')
flags.DEFINE_integer('batch_size', 8, 'Examples per step of each task.')
flags.DEFINE_float('learning_rate', 0.01, 'SGD learning rate.')
flags.DEFINE_integer('examples', 2048, 'Training examples (one TFRecord file).')
flags.DEFINE_float('label_noise', 0.2, 'Probability that an example\'s label is flipped.')
flags.DEFINE_float('start_secs', 240, 'Seconds a job (or a joiner) may take to step.')
flags.DEFINE_float('grace_secs', 15, 'deploy_config.termination_grace_secs.')
flags.DEFINE_string('task_log_dir', None, 'Task logs go here (default: a new temp dir).')
FLAGS = flags.FLAGS

NUM_PS = 2
RATIO_GOAL = 0.95
LOSS_TAIL = 0.2  # the last fraction of the global steps whose mean loss is compared


class Task(object):
  """One started task process and what became of it."""

  def __init__(self, name, process, role):
    self.name, self.process, self.role = name, process, role
    self.log = timeline.TaskLog(process.log_path)
    self.started = time.time()
    self.signalled = self.exited = self.code = None

  def poll(self):
    if self.exited is None and self.process.poll() is not None:
      self.exited, self.code = time.time(), self.process.poll()
    return self.code


class Job(object):
  """An asynchronous job of `python -m trainer.train` tasks whose workers change.

  Args:
    group: the `tests.cluster_util.ProcessGroup` that starts (and finally kills) them.
    addresses: {'chief', 'ps', 'worker'} addresses, with as many workers as it may have.
    config: the pipeline config path.
    train_dir: a train_dir of its own (a job must not restore another's checkpoint).
  """

  def __init__(self, group, addresses, config, train_dir):
    from tests.trainer import cluster_testlib  # noqa: PLC0415  (imports TensorFlow)
    self._lib = cluster_testlib
    self._group, self._addresses = group, addresses
    self._config, self._train_dir = config, train_dir
    self.tasks = collections.OrderedDict()
    self.workers = {}  # live worker index -> Task

  def _cluster(self, workers):
    return dict(chief=self._addresses['chief'], ps=self._addresses['ps'],
                worker=self._addresses['worker'][:workers])

  def _start(self, job, index, cluster, role):
    base = '%s%d' % (job, index)
    incarnation = sum(1 for name in self.tasks if name.split('_')[0] == base)
    name = base if not incarnation else '%s_%d' % (base, incarnation + 1)
    process = self._lib.start_task(self._group, cluster, job, index, self._config,
                                   self._train_dir, name=name)
    self.tasks[name] = Task(name, process, role)
    return self.tasks[name]

  def start(self, workers):
    """Starts the chief, the ps tasks and workers 0..workers-1 (TF_CONFIG of that size)."""
    cluster = self._cluster(workers)
    for index in range(NUM_PS):
      self._start('ps', index, cluster, 'kept')
    self._start('chief', 0, cluster, 'kept')
    for index in range(workers):
      self.workers[index] = self._start('worker', index, cluster, 'kept')

  def add(self, index, size):
    """Starts worker `index` with a TF_CONFIG of `size` workers (once its last one is gone)."""
    for task in self.tasks.values():
      if task.name.split('_')[0] == 'worker%d' % index and task.poll() is None:
        self._group.wait(task.process, timeout=FLAGS.grace_secs + 30)
        task.poll()
    self.workers[index] = self._start('worker', index, self._cluster(max(size, index + 1)),
                                      'added')
    return self.workers[index]

  def restart_ps(self, index, workers):
    """SIGKILLs the running ps `index` and starts it again on its address at once.

    Args:
      index: the ps task.
      workers: the worker count of the TF_CONFIG it restarts with.

    Returns:
      (the time of the kill, the restarted Task).
    """
    current = [task for task in self.tasks.values()
               if task.name.split('_')[0] == 'ps%d' % index and task.poll() is None][-1]
    killed = time.time()
    os.killpg(current.process.pid, signal.SIGKILL)
    current.process.popen.wait(timeout=30)
    return killed, self._start('ps', index, self._cluster(workers), 'restarted')

  def remove(self, index):
    """Sends SIGTERM to worker `index` alone (a scale-down); returns its Task."""
    task = self.workers.pop(index)
    task.signalled = time.time()
    task.role = 'removed' if task.role == 'kept' else 'added+removed'
    os.killpg(task.process.pid, signal.SIGTERM)
    return task

  def resize(self, size):
    """Adds or removes workers (highest index first) to reach `size`; returns (added, removed)."""
    added, removed = [], []
    while len(self.workers) > size:
      removed.append(self.remove(max(self.workers)))
    while len(self.workers) < size:
      added.append(self.add(len(self.workers), size))
    return added, removed

  def update(self):
    """Reads every log's new lines and notes exits (a kept task's exit is counted later)."""
    for task in self.tasks.values():
      task.log.update()
      task.poll()

  def sleep_until(self, when):
    while True:
      self.update()
      left = when - time.time()
      if left <= 0:
        return
      time.sleep(min(left, 0.5))

  def training(self):
    """The chief and live workers."""
    return [self.tasks['chief0']] + list(self.workers.values())

  def wait_training(self, tasks, timeout):
    """Waits until each of `tasks` logged a step; returns the time the last one did."""
    deadline = time.time() + timeout
    while not all(task.log.progress for task in tasks):
      if time.time() > deadline or any(task.code is not None for task in tasks):
        raise TimeoutError('not every task stepped within %d s (or one exited)\n%s' % (
            timeout, self._group.logs()))
      self.sleep_until(time.time() + 0.5)
    return max(task.log.first_step_time() for task in tasks)

  def address(self, job, index):
    """The address of task `index` of `job` ('chief', 'ps' or 'worker')."""
    return self._addresses[job][index]

  def start_helper(self, name, module, args):
    """Starts `python -m module args` beside the job, on the host `name` starts with.

    A helper is no task of the cluster (no TF_CONFIG); with `--netns` it runs in
    that host's namespace, so it reaches the tasks as the task there does.
    """
    return self._group.start(name, module=module, args=args)

  def step(self):
    return max((s for task in self.tasks.values() for _, s, _ in task.log.progress), default=0)

  def progress(self):
    return [task.log.progress for task in self.tasks.values()]

  def kill(self):
    """SIGKILLs every task still running (each in its own session) and reaps it."""
    for task in self.tasks.values():
      if task.poll() is None:
        with contextlib.suppress(ProcessLookupError):
          os.killpg(task.process.pid, signal.SIGKILL)
    for task in self.tasks.values():
      with contextlib.suppress(Exception):
        task.process.popen.wait(timeout=30)


@contextlib.contextmanager
def running_job(name, max_workers, config, log_dir):
  """A `Job` on loopback or in namespaces, killed (and its network removed) at exit."""
  from tests import cluster_util  # noqa: PLC0415
  hosts = ['chief0'] + ['ps%d' % i for i in range(NUM_PS)] + [
      'worker%d' % i for i in range(max_workers)]
  with contextlib.ExitStack() as stack:
    network = None
    if FLAGS.netns:
      from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
      network = stack.enter_context(netns.Network(hosts))
      addresses = cluster_util.netns_cluster(network)
    else:
      addresses = cluster_util.local_cluster(num_workers=max_workers, num_ps=NUM_PS,
                                             chief=True)
    group = stack.enter_context(cluster_util.ProcessGroup(os.path.join(log_dir, name),
                                                          network=network))
    job = Job(group, addresses, config, os.path.join(log_dir, name, 'train'))
    try:
      yield job
    finally:
      job.kill()


def run_fixed(name, workers, config, log_dir, secs=None, until_step=None):
  """A job started at `workers` workers, timed for `secs` or run to global step `until_step`.

  Returns:
    dict: rate (global steps/sec in the window), window (start, end), progress (every
    task's lines), tasks ({name: own steps/sec in the window}).
  """
  with running_job(name, workers, config, log_dir) as job:
    job.start(workers)
    start = job.wait_training(job.training(), FLAGS.start_secs) + FLAGS.settle_secs
    if until_step is None:
      job.sleep_until(start + secs)
    else:
      deadline = time.time() + FLAGS.start_secs + 4 * FLAGS.duration_secs
      while job.step() < until_step and time.time() < deadline:
        job.sleep_until(time.time() + 1.0)
    end = time.time()
    job.update()
    advances = timeline.merged_advances(job.progress())
    return dict(rate=timeline.window_rate(advances, start, end), window=(start, end),
                progress=job.progress(), advances=advances,
                tasks={t.name: timeline.task_rate(t.log.progress, start, end)
                       for t in job.training()})


def run_elastic(name, sizes, phase_secs, config, log_dir):
  """Runs one elastic job through `sizes` (one phase each); returns what happened.

  Returns:
    dict: t0 (when every first task stepped), end, phases ([{size, start, added,
    removed}] with Task lists), tasks (every Task), progress.
  """
  with running_job(name, max(sizes), config, log_dir) as job:
    job.start(sizes[0])
    t0 = job.wait_training(job.training(), FLAGS.start_secs)
    phases = []
    for k, size in enumerate(sizes):
      job.sleep_until(t0 + k * phase_secs)
      start = time.time()
      added, removed = job.resize(size) if k else ([], [])
      phases.append(dict(size=size, start=start, added=added, removed=removed,
                         live=list(job.workers.values())))
      print('  %s %6.1f s: %d workers%s%s' % (
          name, start - t0, size, ''.join(' +' + t.name for t in added),
          ''.join(' -' + t.name for t in removed)), flush=True)
    end = t0 + len(sizes) * phase_secs
    job.sleep_until(end)
    for task in job.tasks.values():
      task.poll()
    return dict(t0=t0, end=end, phases=phases, tasks=list(job.tasks.values()),
                progress=job.progress(), chief=job.tasks['chief0'])


def analyse_phases(run, baselines):
  """Per phase: change latency, the settled window's rate, its ratio and the longest gap.

  Args:
    run: from `run_elastic`.
    baselines: {workers: global steps/sec of a job started at that size}.

  Returns:
    [dict] one per phase (keys as printed by `print_phases`).
  """
  advances = timeline.merged_advances(run['progress'])
  rows = []
  for k, phase in enumerate(run['phases']):
    end = run['phases'][k + 1]['start'] if k + 1 < len(run['phases']) else run['end']
    start = run['t0'] if k == 0 else phase['start']
    # Complete once every worker of the phase has stepped (one added in an earlier phase
    # may still be starting) and every removed one has made its last step.
    done = [t.log.first_step_time() for t in phase['live']]
    done += [t.log.last_step_time() or t.signalled for t in phase['removed']]
    done = [None if d is None or d > end else d for d in done]
    complete = None if None in done else max(done + [start])
    row = dict(k=k, size=phase['size'], start=start - run['t0'], end=end,
               change=' '.join(['+' + t.name for t in phase['added']] +
                               ['-' + t.name for t in phase['removed']]) or '(start)',
               latency=None if complete is None else complete - start,
               gap=timeline.longest_gap(advances, start, end)[0], rate=None, ratio=None)
    counts = [c for t, _, _, c in run['chief'].log.membership if t <= end]
    row['chief_count'] = counts[-1] if counts else run['phases'][0]['size']
    if complete is not None and end - (complete + FLAGS.settle_secs) >= FLAGS.min_window_secs:
      window = (complete + FLAGS.settle_secs, end)
      row['window'] = window[1] - window[0]
      row['rate'] = timeline.window_rate(advances, *window)
      row['ratio'] = row['rate'] / baselines[phase['size']]
    rows.append(row)
  return rows


def goal_line(name, numerator, denominator):
  """`bench_util.ratio_line` of windows against baselines, with the goal's honest label.

  The windows of one run are compared with one baseline job per size that ran before
  them, not alternating with them: not the side-by-side repeats benchmarks/RESULTS.md's
  rule asks for, so however many windows reach the goal the label is "not resolved".
  """
  reached = sum(1 for r in bench_util.paired_ratios(numerator, denominator) if r >= RATIO_GOAL)
  return '%s goal >= %.2f: %d of %d windows reach it; not resolved (the baselines ran ' \
      'before the windows, not alternating with them)' % (
          bench_util.ratio_line(name, numerator, denominator), RATIO_GOAL, reached,
          len(numerator))


def per_task(rate, workers):
  """Examples/sec per training task (chief + workers) of a job at `rate` global steps/sec."""
  return timeline.examples_per_task(rate, FLAGS.batch_size, workers)


def print_timeline(run):
  """Global steps/sec per `--bin_secs`, with the scheduled worker count."""
  advances = timeline.merged_advances(run['progress'])
  print('\n| t (s) | workers | global steps/sec | examples/sec |')
  print('| ---: | ---: | ---: | ---: |')
  t = run['t0']
  while t < run['end'] - 1e-6:
    upper = min(t + FLAGS.bin_secs, run['end'])
    middle = (t + upper) / 2
    size = [p['size'] for p in run['phases'] if p['start'] <= middle or p is
            run['phases'][0]][-1]
    rate = timeline.window_rate(advances, t, upper)
    print('| %.0f-%.0f | %d | %.1f | %.1f |' % (t - run['t0'], upper - run['t0'], size, rate,
                                                rate * FLAGS.batch_size))
    t = upper


def print_phases(rows, baselines):
  """The per-phase table and the ratio lines (per size and over every change)."""
  print('\n| phase | t (s) | change | workers (chief\'s count) | change done after (s) | '
        'window (s) | ex/s per task | started at this size | ratio | longest gap (s) |')
  print('| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for r in rows:
    base = per_task(baselines[r['size']], r['size'])
    print('| %d | %.1f | %s | %d (%d) | %s | %s | %s | %.1f | %s | %.2f |' % (
        r['k'], r['start'], r['change'], r['size'], r['chief_count'],
        'never' if r['latency'] is None else '%.1f' % r['latency'],
        '%.1f' % r['window'] if r['rate'] is not None else 'too short',
        '%.1f' % per_task(r['rate'], r['size']) if r['rate'] is not None else '-', base,
        '%.3f' % r['ratio'] if r['ratio'] is not None else '-', r['gap']))
  timed = [r for r in rows if r['ratio'] is not None and r['k'] > 0]
  for size in sorted({r['size'] for r in timed}):
    of_size = [r for r in timed if r['size'] == size]
    print(goal_line('ex/s per task after a change to %d / job started at %d' % (size, size),
                    [per_task(r['rate'], size) for r in of_size],
                    [per_task(baselines[size], size)] * len(of_size)))
  if timed:
    print(goal_line('ex/s per task after every change / job started at that size',
                    [per_task(r['rate'], r['size']) for r in timed],
                    [per_task(baselines[r['size']], r['size']) for r in timed]))
  skipped = sum(1 for r in rows if r['k'] > 0 and r['ratio'] is None)
  if skipped:
    print('%d change(s) left no window of %.0f s after settling: no rate' % (
        skipped, FLAGS.min_window_secs))


def print_tasks(run):
  """Restarts of the kept tasks; exits and latencies of the added and removed ones.

  Returns:
    The number of restarts of kept tasks (exits before the end + restart lines).
  """
  restarts, silent = 0, []
  print('\n| task | role | first step after start (s) | SIGTERM to exit (s) | exit | '
        'sessions | restart lines |')
  print('| --- | --- | ---: | ---: | --- | ---: | ---: |')
  for task in run['tasks']:
    first = task.log.first_step_time()
    exit_secs = (task.exited - task.signalled) if task.signalled and task.exited else None
    lines = len(task.log.restarts)
    if task.role == 'kept':
      # A rebuilt session logs a restart line and starts a second session: counted once.
      restarts += max(lines, task.log.sessions - 1, 0) + (task.code is not None)
    if task.signalled and task.code not in (None, 143) and not task.log.left:
      silent.append('%s (exit %s)' % (task.name, task.code))
    print('| %s | %s | %s | %s | %s | %s | %d |' % (
        task.name, task.role, '-' if task.name.startswith('ps') else
        ('never' if first is None else '%.1f' % (first - task.started)),
        '-' if exit_secs is None else '%.1f' % exit_secs,
        'running' if task.code is None else task.code,
        '-' if task.name.startswith('ps') else task.log.sessions, lines))
    for _, text in task.log.restarts[:3]:
      print('    %s: %s' % (task.name, text))
  if silent:
    print('removed without telling the chief (SIGTERM before the training loop handled it; '
          'the chief still counts them): %s' % ', '.join(silent))
  return restarts


def compare_loss(run, fixed):
  """The mean loss of the last LOSS_TAIL of `run`'s steps against `fixed` up to the same step.

  Returns:
    (elastic mean, fixed mean, total global steps).
  """
  total = max(s for _, s in timeline.merged_advances(run['progress']))
  elastic = timeline.losses_by_step(run['progress'], total)
  same = timeline.losses_by_step(fixed['progress'], total)
  reached = max(s for _, s in timeline.merged_advances(fixed['progress']))
  low = total * (1 - LOSS_TAIL)
  means = timeline.mean_loss(elastic, low, total), timeline.mean_loss(same, low, total)
  print('\nloss over global steps 0..%d (%d examples each): mean per tenth of the steps' % (
      total, total * FLAGS.batch_size))
  print('| steps | elastic | fixed %d workers |' % FLAGS.loss_workers)
  print('| --- | ---: | ---: |')
  for i, (a, b) in enumerate(zip(timeline.loss_curve(elastic, total, 10),
                                 timeline.loss_curve(same, total, 10))):
    print('| %d-%d | %.4f | %.4f |' % (total * i // 10, total * (i + 1) // 10, a, b))
  print('mean loss over steps %d..%d: elastic %.4f, fixed-size %.4f (%d workers)%s' % (
      low, total, means[0], means[1], FLAGS.loss_workers,
      '' if reached >= total else ' (the fixed job reached only step %d)' % reached))
  return means + (total,)


def report(name, run, baselines, fixed):
  """Prints everything measured of one elastic run; returns its summary row."""
  print('\n## %s run: %d phases of %.0f s' % (name, len(run['phases']), run['phase_secs']))
  print_timeline(run)
  rows = analyse_phases(run, baselines)
  print_phases(rows, baselines)
  restarts = print_tasks(run)
  changes = [r for r in rows if r['k'] > 0]
  gap = max((r['gap'] for r in changes), default=0.0)
  print('longest gap between global steps in a phase with a membership change: %.2f s '
        '(goal <= %.0f s: %s in this run)' % (gap, FLAGS.gap_goal_secs,
                                              'within' if gap <= FLAGS.gap_goal_secs
                                              else 'over'))
  print('restarts of tasks neither added nor removed: %d (goal 0)' % restarts)
  wrong = [r['k'] for r in rows if r['chief_count'] != r['size']]
  print('chief\'s count differs from the schedule at the end of phase(s): %s' % (
      wrong or 'none'))
  elastic_loss, fixed_loss, total = compare_loss(run, fixed)
  ratios = [r['ratio'] for r in changes if r['ratio'] is not None]
  return dict(name=name, changes=len(changes), gap=gap, restarts=restarts,
              ratios=ratios, loss=(elastic_loss, fixed_loss), steps=total)


def print_summary(rows):
  print('\n## summary (%s)' % ('network namespaces' if FLAGS.netns else 'loopback'))
  print('| run | changes | longest gap at a change (s) | restarts | ex/s per task vs started '
        'at that size: median (min..max) | windows | loss last %d %%: elastic / fixed |'
        % (100 * LOSS_TAIL))
  print('| --- | ---: | ---: | ---: | --- | ---: | --- |')
  for r in rows:
    ratios = r['ratios']
    print('| %s | %d | %.2f | %d | %s | %d | %.4f / %.4f |' % (
        r['name'], r['changes'], r['gap'], r['restarts'],
        '%.3f (%.3f..%.3f)' % (bench_util.median(ratios), min(ratios), max(ratios))
        if ratios else '-', len(ratios), r['loss'][0], r['loss'][1]))


def check_netns_flag():
  """Raises a usage error naming why `--netns` cannot run here (no root, no `ip`)."""
  if FLAGS.netns:
    from deployment import netns  # noqa: PLC0415  (only --netns needs root and ip)
    reason = netns.unavailable_reason()
    if reason:
      raise app.UsageError('--netns: %s' % reason)


def task_log_dir(prefix):
  """`--task_log_dir`, made if missing, or a new temp dir named `prefix...`."""
  log_dir = FLAGS.task_log_dir or tempfile.mkdtemp(prefix=prefix)
  os.makedirs(log_dir, exist_ok=True)
  return log_dir


def write_data_and_config(log_dir):
  """The colour records and the pipeline config every job of the invocation trains on."""
  from tests.trainer import cluster_testlib  # noqa: PLC0415
  # Without label noise the tiny classifier's loss is 0.00 within 100 steps and two loss
  # curves could not differ; with 0.2 it settles near the labels' entropy (0.50 nats).
  data = cluster_testlib.write_colour_records(os.path.join(log_dir, 'data'), FLAGS.examples,
                                              label_noise=FLAGS.label_noise)
  return cluster_testlib.write_pipeline_config(
      log_dir, data, num_steps=10 ** 9, batch_size=FLAGS.batch_size,
      learning_rate=FLAGS.learning_rate, log_every_n_steps=1, save_interval_secs=3600,
      startup_timeout_secs=int(FLAGS.start_secs), chief_timeout_secs=120,
      termination_grace_secs=int(FLAGS.grace_secs))


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  if FLAGS.quick:
    FLAGS.schedule, FLAGS.phase_secs, FLAGS.duration_secs = ['1', '2', '1'], 15, 45
    FLAGS.baseline_secs, FLAGS.runs, FLAGS.bin_secs = 15, ['schedule'], 5
  schedule = [int(s) for s in FLAGS.schedule]
  if min(schedule) < 1 or set(FLAGS.runs) - {'schedule', 'churn'}:
    raise app.UsageError('--schedule needs counts >= 1; --runs is schedule and/or churn')
  if 'churn' in FLAGS.runs and max(schedule) == min(schedule):
    raise app.UsageError('the churn run moves between min and max of --schedule')
  check_netns_flag()
  plans = collections.OrderedDict()
  if 'schedule' in FLAGS.runs:
    plans['schedule'] = (timeline.schedule_sizes(schedule, FLAGS.phase_secs,
                                                 FLAGS.duration_secs), FLAGS.phase_secs)
  if 'churn' in FLAGS.runs:
    plans['churn'] = (timeline.churn_sizes(min(schedule), max(schedule), FLAGS.churn_secs,
                                           FLAGS.duration_secs), FLAGS.churn_secs)
  log_dir = task_log_dir('elastic_bench_')
  most = max(max(sizes) for sizes, _ in plans.values())
  print('task logs: %s' % log_dir)
  print('up to %d TensorFlow task processes (chief, %d ps, %d workers) on %d cores%s; '
        'load average %.1f; %s' % (
            most + 1 + NUM_PS, NUM_PS, most, os.cpu_count(),
            ': the cores are shared' if most + 1 + NUM_PS > os.cpu_count() else '',
            os.getloadavg()[0], 'network namespaces' if FLAGS.netns else 'loopback'))
  for name, (sizes, secs) in plans.items():
    print('%s: workers %s, a change every %.0f s' % (name, ','.join(map(str, sizes)), secs))
  config = write_data_and_config(log_dir)
  baselines = {}
  for size in sorted({s for sizes, _ in plans.values() for s in sizes}):
    fixed = run_fixed('baseline%d' % size, size, config, log_dir, secs=FLAGS.baseline_secs)
    baselines[size] = fixed['rate']
    print('job started at %d worker(s): %.1f global steps/sec over %.1f s = %.1f examples/sec, '
          '%.1f per training task (own steps/sec: %s)' % (
              size, fixed['rate'], fixed['window'][1] - fixed['window'][0],
              fixed['rate'] * FLAGS.batch_size, per_task(fixed['rate'], size),
              ', '.join('%s %.1f' % kv for kv in fixed['tasks'].items())), flush=True)
  runs = collections.OrderedDict()
  for name, (sizes, secs) in plans.items():
    runs[name] = run_elastic(name, sizes, secs, config, log_dir)
    runs[name]['phase_secs'] = secs
  target = max(timeline.merged_advances(r['progress'])[-1][1] for r in runs.values())
  print('fixed-size loss job: %d workers to global step %d' % (FLAGS.loss_workers, target),
        flush=True)
  fixed = run_fixed('fixed%d' % FLAGS.loss_workers, FLAGS.loss_workers, config, log_dir,
                    until_step=target)
  summary = [report(name, run, baselines, fixed) for name, run in runs.items()]
  print_summary(summary)
  print('load average at the end: %.1f' % os.getloadavg()[0])


if __name__ == '__main__':
  app.run(main)
