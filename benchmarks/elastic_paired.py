r"""Examples/sec after a worker joins or leaves, side by side with a job started at that size.

Issue 29's goal: after a membership change, each training task of the running job
trains at >= 0.95 of the examples/sec it would have in a job started at the new size.
`benchmarks/elastic.py` measures windows of one long run against baselines that ran
minutes before them, which benchmarks/RESULTS.md's rule cannot resolve. Here every
repeat runs both sides back to back, in alternating order, on the same machine:

  elastic  a job (chief, 2 ps) started at 1 worker; worker 1 joins (1 -> 2 workers)
           and a window of `--window_secs` is timed once both workers have stepped
           and `--settle_secs` passed; worker 2 joins (3 workers), then leaves by
           SIGTERM (3 -> 2) and a second window is timed after its last step;
  fresh    a job started at 2 workers, its window timed after every task's first
           step, the settle and `--warmup_secs` (a job's first seconds run slower).

Both sides have 2 workers in their windows, so examples/sec per training task
(chief + workers) compares as global steps/sec does. The ratio lines follow
`bench_util.verdict`: met when every repeat reaches the goal, missed when none does.

    python -m benchmarks.elastic_paired                 # 5 repeats on loopback
    python -m benchmarks.elastic_paired --netns         # each task its own namespace
    python -m benchmarks.elastic_paired --repeats=1 --window_secs=8   # a smoke run

The tasks and their logs come from `benchmarks.elastic` (its flags, e.g.
`--batch_size`, `--settle_secs`, `--task_log_dir`, apply here too). A repeat takes about
2-3 minutes on 2 cores.

Differs on purpose from `benchmarks/elastic.py`: no schedule, no churn, no loss curve;
one change of each kind per repeat, so that each repeat's windows sit next to their
own baseline.
"""

import os
import time

from absl import app
from absl import flags

from benchmarks import elastic
from benchmarks import elastic_paired_report
from benchmarks import elastic_timeline as timeline

flags.DEFINE_integer('repeats', 5, 'Repeats of the elastic / fresh pair (alternating order).')
flags.DEFINE_float('window_secs', 20, 'Timed seconds of each window.')
flags.DEFINE_float('warmup_secs', 10, 'Seconds the fresh job runs past the settle before '
                   'its window (its first seconds are slower than its steady state).')
FLAGS = flags.FLAGS

SIZE = 2  # workers in every timed window


def _timed_rate(job, start):
  """Global steps/sec of `job` from `start` for `--window_secs` (waits for its end)."""
  end = start + FLAGS.window_secs
  job.sleep_until(end)
  job.update()
  return timeline.window_rate(timeline.merged_advances(job.progress()), start, end)


def _restart_lines(job):
  """Restart lines (rebuilt sessions, retries) of the tasks neither added nor removed."""
  return sum(len(task.log.restarts) for task in job.tasks.values() if task.role == 'kept')


def run_elastic_side(name, config, log_dir):
  """One elastic job: 1 -> 2 workers (a join), 2 -> 3 -> 2 (a leave).

  Returns:
    dict: join and leave (global steps/sec in the window after each), restarts (restart
    lines of the kept tasks), join_secs (a joiner's start to its first step).
  """
  with elastic.running_job(name, SIZE + 1, config, log_dir) as job:
    job.start(1)
    job.wait_training(job.training(), FLAGS.start_secs)
    (joiner,), _ = job.resize(SIZE)
    stepped = job.wait_training(job.training(), FLAGS.start_secs)
    join = _timed_rate(job, stepped + FLAGS.settle_secs)
    job.resize(SIZE + 1)
    job.wait_training(job.training(), FLAGS.start_secs)
    _, (leaver,) = job.resize(SIZE)
    deadline = time.time() + FLAGS.grace_secs + 30
    while leaver.poll() is None and time.time() < deadline:
      job.sleep_until(time.time() + 0.2)
    job.update()
    # Its last step (the one in flight at SIGTERM), or the signal if it made none.
    left = max(leaver.signalled, leaver.log.last_step_time() or 0)
    leave = _timed_rate(job, left + FLAGS.settle_secs)
    return dict(join=join, leave=leave, restarts=_restart_lines(job),
                join_secs=joiner.log.first_step_time() - joiner.started,
                leaver_code=leaver.code)


def run_fresh_side(name, config, log_dir):
  """A job started at SIZE workers; global steps/sec in its window.

  The window starts `--warmup_secs` after every task's first step (and the settle):
  a job's first seconds run slower than its steady state (first runs of each
  graph), which the elastic side's chief and worker 0 passed long before its windows.
  """
  with elastic.running_job(name, SIZE, config, log_dir) as job:
    job.start(SIZE)
    stepped = job.wait_training(job.training(), FLAGS.start_secs)
    return _timed_rate(job, stepped + FLAGS.settle_secs + FLAGS.warmup_secs)


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  if FLAGS.repeats < 1 or FLAGS.window_secs <= 0:
    raise app.UsageError('--repeats must be >= 1 and --window_secs > 0')
  elastic.check_netns_flag()
  log_dir = elastic.task_log_dir('elastic_paired_')
  print('task logs: %s; %d cores, load average %.1f; %s' % (
      log_dir, os.cpu_count(), os.getloadavg()[0],
      'network namespaces' if FLAGS.netns else 'loopback'), flush=True)
  config = elastic.write_data_and_config(log_dir)  # One config for both sides.
  repeats = []
  for i in range(FLAGS.repeats):
    order = ('fresh', 'elastic') if i % 2 == 0 else ('elastic', 'fresh')
    result = dict(order=' then '.join(order))
    for side in order:
      if side == 'fresh':
        result['fresh'] = run_fresh_side('fresh%d' % i, config, log_dir)
      else:
        result.update(run_elastic_side('elastic%d' % i, config, log_dir))
    print('repeat %d (%s): fresh %.1f, after the join %.1f, after the leave %.1f global '
          'steps/sec' % (i + 1, result['order'], result['fresh'], result['join'],
                         result['leave']), flush=True)
    repeats.append(result)
  print()
  print('\n'.join(elastic_paired_report.report(repeats, FLAGS.batch_size, SIZE,
                                                 elastic.RATIO_GOAL)))
  print('load average at the end: %.1f' % os.getloadavg()[0])


if __name__ == '__main__':
  app.run(main)
