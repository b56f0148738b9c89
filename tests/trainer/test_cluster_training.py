"""Real `python -m trainer.train` clusters on loopback: finishing, ps lifetime, startup.

Each test writes a tiny classifier config and TFRecords into tmp_path, starts
one process per task with its own TF_CONFIG and checks exit codes, logs and
checkpoints. Run them alone with `pytest -m cluster tests/trainer`.
"""

import os
import sys
import time

import numpy as np
import pytest

from deployment import exit_codes
from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# Generous: the machine running the suite may be busy.
_EXIT_SECS = 240
# From a task's last step to its telling the ps: what a correct run needs (at
# most 5 s measured, 2026-11-23..26) plus a fixed 10 s for a loaded machine.
_END_PAUSE_SECS = 15


@pytest.fixture
def data(tmp_path):
  return lib.write_colour_records(str(tmp_path / 'data'))


def _wait_all(group, tasks, timeout=_EXIT_SECS):
  """Waits for every task; returns {name: exit code}."""
  deadline = time.time() + timeout
  return {name: group.wait(task, timeout=max(deadline - time.time(), 1))
          for name, task in sorted(tasks.items())}


def _finished_step(process):
  found = lib.progress(process)
  text = process.output()
  marker = 'training finished at global step '
  if marker in text:
    return int(text.rsplit(marker, 1)[1].split()[0])
  return found[-1][0] if found else None


def test_sync_replicas_two_workers_all_finish_and_exit(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=40, sync_replicas=True,
                                     replicas_to_aggregate=2, log_every_n_steps=5)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    workers = [tasks['worker0'], tasks['worker1']]
    for worker in workers:
      assert group.wait(worker, timeout=_EXIT_SECS) == 0, group.logs()
    last_worker_done = time.time()
    # The ps follows within seconds (not a hang, not a kill).
    assert group.wait(tasks['ps0'], timeout=60) == 0, group.logs()
    assert time.time() - last_worker_done < 60
  for worker in workers:
    assert _finished_step(worker) == 40, group.logs()
  assert 'every worker finished' in tasks['ps0'].output()
  assert lib.latest_checkpoint_step(train_dir) == 40
  # The chief wrote the config it trained with.
  assert os.path.exists(os.path.join(train_dir, 'pipeline.config'))


@pytest.mark.parametrize('sync', [True, False], ids=['sync', 'async'])
def test_two_workers_with_two_clones_each(tmp_path, data, sync):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=30, num_clones=2,
                                     sync_replicas=sync, replicas_to_aggregate=2,
                                     log_every_n_steps=5)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    codes = _wait_all(group, tasks)
  assert codes == {'ps0': 0, 'worker0': 0, 'worker1': 0}, group.logs()
  step = lib.latest_checkpoint_step(train_dir)
  # Async workers may each finish the step they were running.
  assert step == 30 if sync else 30 <= step <= 32, step
  # Both clones ran on each worker (clone_1 scope exists in the graph).
  assert 'clone_1' in open(os.path.join(train_dir, 'graph.pbtxt')).read()


def test_async_two_workers_converge_like_single_process(tmp_path, data):
  single_dir, cluster_dir = str(tmp_path / 'single'), str(tmp_path / 'cluster')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100, learning_rate=0.02,
                                     log_every_n_steps=1)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    single = group.start('single', None, module=lib.MODULE,
                         args=lib.train_args(config, single_dir))
    tasks = lib.start_tasks(group, cluster, config, cluster_dir)
    tasks['single'] = single
    codes = _wait_all(group, tasks)
  assert set(codes.values()) == {0}, group.logs()
  # Issue 18 item 6, the documented bound: async training stops within
  # num_steps .. num_steps + (training tasks - 1), each task finishing the
  # step it was running; one process stops exactly.
  assert lib.latest_checkpoint_step(single_dir) == 100
  assert 100 <= lib.latest_checkpoint_step(cluster_dir) <= 101
  for name in ('worker0', 'worker1'):
    # A worker that starts late may log no progress at all: the other trained.
    last_step = max((s for s, _ in lib.progress(tasks[name])), default=0)
    assert last_step <= 101, tasks[name].output()[-2000:]
    # Issue 18 item 5: no silent pause at the end (the defect: 32-56 s of
    # silence). Correct runs take 0.1-5 s from the last step to telling the ps
    # (closing the session: TF waits for its ps tasks), measured between the
    # two lines the task prints; the bound sits below the close's own give-up
    # (termination_grace_secs=25), so a close that hangs until then fails too.
    pause = lib.seconds_between(tasks[name], 'training finished at global step',
                                'finished training')
    print('%s: %.1f s from the last step to telling the ps' % (name, pause))
    assert pause < _END_PAUSE_SECS, (pause, tasks[name].output()[-3000:])

  def final_loss(processes):
    # The median: one hard batch among the last steps (async workers read
    # parameters at different moments) moves a mean of a few losses tenfold.
    losses = sorted(p for process in processes for p in lib.progress(process))
    return np.median([loss for _, loss in losses[-10:]]), losses[0][1]
  single_loss, single_first = final_loss([single])
  cluster_loss, _ = final_loss([tasks['worker0'], tasks['worker1']])
  # Chance level is ln(2) ~ 0.69 (the first logged loss about 2.5). Correct runs end
  # (last logged losses) at 0.0002-0.0015 for both the single process and the async
  # pair (3 runs on a loaded 2-core machine, 2026-11-23); once the async pair's mean of
  # the last 6 was 0.0099 in a correct run (2026-11-25), hence the median of 10, and
  # once that median was 0.0056 against the single process's 0.00045 (bazel,
  # 2026-11-27): the async pair's end varies over a range 10 times the single
  # process's, so the check is that each ends far below chance, not that they match.
  assert single_loss < 0.01, (single_loss, single_first)
  assert cluster_loss < 0.02, (cluster_loss, single_loss, single_first)


def test_ps_exits_retryable_when_the_chief_disappears(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     chief_timeout_secs=4, log_every_n_steps=5)
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    lib.wait_for_step(group, tasks['worker0'], 10, timeout=_EXIT_SECS)
    os.killpg(tasks['worker0'].pid, 9)
    # A lost chief is retryable (deployment/exit_codes.py): a restart resumes.
    assert group.wait(tasks['ps0'], timeout=90) == exit_codes.RETRYABLE, group.logs()
  output = tasks['ps0'].output()
  assert 'chief /job:worker/task:0/device:CPU:0 unreachable for' in output
  assert 'chief_timeout_secs' in output


def test_workers_wait_for_a_late_ps(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=20, log_every_n_steps=5,
                                     startup_timeout_secs=120)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir, skip=('ps0',))
    for name in ('worker0', 'worker1'):
      group.wait_for_output(tasks[name], r'waiting for ps tasks 127\.0\.0\.1:\d+ \(\d+ s of '
                            r'120 s\)', timeout=_EXIT_SECS)
    tasks['ps0'] = lib.start_task(group, cluster, 'ps', 0, config, train_dir)
    codes = _wait_all(group, tasks)
  assert codes == {'ps0': 0, 'worker0': 0, 'worker1': 0}, group.logs()
  assert lib.latest_checkpoint_step(train_dir) >= 20


def test_missing_ps_is_a_clear_error_after_the_startup_timeout(tmp_path, data):
  config = lib.write_pipeline_config(str(tmp_path), data, startup_timeout_secs=3)
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    worker = lib.start_task(group, cluster, 'worker', 0, config, str(tmp_path / 'train'))
    # A peer unreachable past its timeout: a restart may find it (issue 12 C).
    assert group.wait(worker, timeout=_EXIT_SECS) == exit_codes.RETRYABLE, group.logs()
  assert 'still unreachable after' in worker.output()
  assert 'deploy_config.startup_timeout_secs=3' in worker.output()


def test_a_worker_with_a_different_cluster_exits_permanently_naming_the_difference(
    tmp_path, data):
  # An asynchronous job lets its worker list grow or shrink at the end (a worker
  # joining, deployment/elastic.py), but an address that moved is a stale cluster.
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=30)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1, chief=True)
  stale = dict(cluster, worker=[cluster['worker'][0], '127.0.0.1:1'])
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    lib.start_task(group, cluster, 'ps', 0, config, train_dir)
    lib.start_task(group, cluster, 'chief', 0, config, train_dir)
    worker = lib.start_task(group, stale, 'worker', 0, config, train_dir)
    assert group.wait(worker, timeout=_EXIT_SECS) == 1, group.logs()
  assert ('does not match the chief\'s cluster: job "worker" task 1: this task has '
          '127.0.0.1:1, the chief has %s' % cluster['worker'][1]) in worker.output(), (
              group.logs())

if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
