"""CPU seconds of each task of the cluster tests' smallest job, forked and fresh.

What one real-process cluster test costs at least: a chief, a worker and a ps
of `python -m trainer.train` train the cluster tests' small_cnn on their
colour records (tests/trainer/cluster_testlib.py) for `--steps` steps, the
tasks started as the tests start them, forked from a process that has
imported TensorFlow (a server of tests/fork_server.py), then again as fresh
interpreters (as with `SLIMTRAIN_TEST_FORK_SERVER=0`). Prints each task's user + system CPU
seconds per repeat; the difference between the two is what a fresh import
costs.

    .venv/bin/python tools/task_cpu.py --steps=20 --repeats=2

A forked task's seconds come from the fork server, which reaps it; a fresh
one's from this process's reaped children. Run it with nothing else on the
machine only if wall times matter to you; CPU seconds move little with load.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO_ROOT)

from tests import cluster_util  # noqa: E402
from tests import fork_server  # noqa: E402
from tests.trainer import cluster_testlib as lib  # noqa: E402

TASKS = ('ps0', 'chief0', 'worker0')


def _children_cpu():
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _task_environment():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')


def _job_cpu(work_dir, steps, server):
  """Runs one chief + worker + ps job; returns {task: CPU seconds}.

  Args:
    work_dir: a folder for the job's data, checkpoints and logs.
    steps: training steps.
    server: a `fork_server.ForkServer` to fork the tasks from, or None to start
      each as a fresh interpreter.
  """
  data = lib.write_colour_records(os.path.join(work_dir, 'data'))
  config = lib.write_pipeline_config(work_dir, data, num_steps=steps)
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  processes = {}
  for name in TASKS:
    job, index = name[:-1], int(name[-1])
    env = dict(_task_environment(), TF_CONFIG=cluster_util.tf_config(cluster, job, index))
    args = [sys.executable, '-u', '-m', lib.MODULE] + lib.train_args(
        config, os.path.join(work_dir, 'train'))
    with open(os.path.join(work_dir, name + '.log'), 'w') as log:
      std = (subprocess.DEVNULL, log, subprocess.STDOUT)
      if server is None:
        processes[name] = subprocess.Popen(args, cwd=_REPO_ROOT, env=env, stdin=std[0],
                                           stdout=std[1], stderr=std[2],
                                           start_new_session=True)
      else:
        processes[name] = server.start(args, ('module', lib.MODULE), _REPO_ROOT, env, std,
                                       unbuffered=True)
  cpu = {}
  for name in ('chief0', 'worker0', 'ps0'):  # The ps ends once the chief says so.
    before = fork_server.reaped_cpu_seconds() + _children_cpu()
    code = processes[name].wait(timeout=600)
    if code != 0:
      with open(os.path.join(work_dir, name + '.log')) as log:
        sys.exit('%s exited with %s:\n%s' % (name, code, log.read()[-3000:]))
    cpu[name] = fork_server.reaped_cpu_seconds() + _children_cpu() - before
  return cpu


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps', type=int, default=20, help='Training steps of each job.')
  parser.add_argument('--repeats', type=int, default=2, help='Jobs of each kind.')
  args = parser.parse_args(argv)
  print('| start | repeat | %s | job |' % ' | '.join(TASKS))
  print('| --- | --- |%s --- |' % (' --- |' * len(TASKS)))
  # A server of its own: the tests' shared ones are limited in number
  # (fork_server.MAX_SERVERS), and a full pool would quietly start fresh tasks.
  server = fork_server.ForkServer(_task_environment())
  try:
    for repeat in range(1, args.repeats + 1):
      for forked in (True, False):
        work_dir = tempfile.mkdtemp(prefix='task_cpu_')
        try:
          cpu = _job_cpu(work_dir, args.steps, server if forked else None)
        finally:
          shutil.rmtree(work_dir, ignore_errors=True)
        print('| %s | %d | %s | %.1f |' % ('forked' if forked else 'fresh', repeat, ' | '.join(
            '%.1f' % cpu[name] for name in TASKS), sum(cpu.values())), flush=True)
  finally:
    server.stop()

if __name__ == '__main__':
  main()
