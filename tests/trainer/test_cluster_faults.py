"""Faults a real `python -m trainer.train` cluster must survive (issue 12 part B, issue 18).

Each test starts one process per task on loopback ports, injects one fault and
checks exit codes (deployment/exit_codes.py), logs and checkpoints:

* the whole job gets SIGTERM within a millisecond (a pod deletion): the ps
  tasks keep serving until the chief wrote its checkpoint, every task exits
  143 within the termination grace, and a restart resumes at that step;
* a sync-replicas worker is killed: every remaining task exits retryable
  within `replica_timeout_secs`, naming the missing task, and a restart
  resumes;
* a ps is killed -9 and restarted on its address: chief and worker rebuild
  their sessions from the latest checkpoint and train to `num_steps`; a ps
  that stays away makes them exit retryable after `recovery_timeout_secs`;
* the chief is killed in a ps cluster: the worker and the ps exit retryable
  within `chief_timeout_secs` (never 0 with unsaved work);
* a ps hangs (stopped: it accepts connections, never answers) before the
  first step: the chief exits retryable within `startup_timeout_secs +
  recovery_timeout_secs` instead of waiting for ever, and ps0 hears why.

Loopback is enough where a killed process is the fault; the cut-off sync
replica also runs on the network-namespace harness (`netns_network`, skipped
with the reason where namespaces cannot be created), its link brought down.
Run them alone with `pytest -m cluster tests/trainer`.
"""

import os
import re
import signal
import sys
import time

import pytest

from deployment import cluster_runtime
from deployment import exit_codes
from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster]

# Generous: the machine running the suite may be busy.
_START_SECS = 150
_EXIT_SECS = 150
# Beyond a timeout under test: time for a loaded machine to act on it (how
# long the test waits before failing with the logs).
_MARGIN_SECS = 60
# What an assertion allows a task beyond a deadline it promises: acting on the
# deadline (polled every second), telling its peers (one call each) and leaving
# the process. Measured 2.7-3.3 s past a recovery deadline at load average 12
# on 2 cores (2026-11-26); a pause like the one of issue 18 (30-60 s) still fails.
_EXIT_SECS_AFTER_DEADLINE = 10


@pytest.fixture
def data(tmp_path):
  return lib.write_colour_records(str(tmp_path / 'data'))


def _start_job(group, config, train_dir, num_workers, num_ps, suffix='', extra=(),
               pace_secs=None):
  """Starts chief + workers + ps of a fresh loopback cluster; returns {name: process}.

  `pace_secs`: see cluster_testlib.start_task (for jobs that would train flat
  out while the test waits).
  """
  cluster = cluster_util.local_cluster(num_workers=num_workers, num_ps=num_ps, chief=True)
  tasks = {}
  for job in ('ps', 'chief', 'worker'):
    for index in range(len(cluster.get(job, []))):
      name = '%s%d%s' % (job, index, suffix)
      tasks[name] = lib.start_task(group, cluster, job, index, config, train_dir,
                                   extra=extra, name=name, pace_secs=pace_secs)
  return cluster, tasks


def _restored_step(process):
  """The step of the checkpoint a (re)started chief restored, or None."""
  steps = re.findall(r'Restoring parameters from \S*model\.ckpt-(\d+)', process.output())
  return int(steps[-1]) if steps else None


def _resume_and_finish(group, config, train_dir, num_workers, num_ps, target):
  """Restarts the whole job up to step `target`; returns the new chief after exit 0."""
  _, tasks = _start_job(group, config, train_dir, num_workers, num_ps, suffix='_restarted',
                        extra=['--num_train_steps=%d' % target])
  codes = lib.wait_all(group, tasks, timeout=_EXIT_SECS + _START_SECS)
  assert set(codes.values()) == {0}, (codes, group.logs())
  return tasks['chief0_restarted']


def test_whole_job_sigterm_checkpoints_the_step_reached_and_restart_resumes(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  grace = 20
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     log_every_n_steps=5, termination_grace_secs=grace)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, config, train_dir, num_workers=1, num_ps=2)
    lib.wait_for_step(group, tasks['chief0'], 10, timeout=_START_SECS)
    lib.wait_for_step(group, tasks['worker0'], 10, timeout=_START_SECS)
    signalled = time.time()
    for task in tasks.values():  # A pod deletion: every task at once.
      os.killpg(task.pid, signal.SIGTERM)
    codes, exit_secs = lib.wait_all_timed(group, tasks, since=signalled,
                                          timeout=grace + _MARGIN_SECS)
    print('seconds from SIGTERM to each exit:', exit_secs)
    assert codes == {'chief0': 143, 'worker0': 143, 'ps0': 143, 'ps1': 143}, (
        codes, group.logs())
    # The promise (README): every task exits within termination_grace_secs of
    # the signal; a process's own exit adds at most _EXIT_SECS_AFTER_DEADLINE.
    assert max(exit_secs.values()) <= grace + _EXIT_SECS_AFTER_DEADLINE, (
        exit_secs, group.logs())
    chief = tasks['chief0']
    match = re.search(r'SIGTERM: wrote checkpoint \S*model\.ckpt-(\d+)', chief.output())
    assert match, group.logs()
    written = int(match.group(1))
    assert written >= 10
    assert max(s for s, _ in lib.progress(chief)) <= written
    # Async: the worker may finish the step it was running after the chief's
    # checkpoint; the chief's last save keeps that step too.
    latest = lib.checkpoint_steps(train_dir)[-1]
    assert written <= latest <= written + 1, (written, latest)
    assert lib.latest_checkpoint_step(train_dir) == latest
    for name in ('ps0', 'ps1'):
      assert 'chief wrote its final checkpoint' in tasks[name].output(), group.logs()

    target = latest + 10
    resumed = _resume_and_finish(group, config, train_dir, 1, 2, target)
  assert _restored_step(resumed) == latest, resumed.output()[-3000:]
  assert all(s > latest for s, _ in lib.progress(resumed))
  # Async: the worker may finish the step it was running.
  assert target <= lib.latest_checkpoint_step(train_dir) <= target + 1


def test_sync_replica_killed_every_task_exits_retryable_naming_it(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  replica_timeout = 20
  config = lib.write_pipeline_config(
      str(tmp_path), data, num_steps=100000, batch_size=6, sync_replicas=True,
      replicas_to_aggregate=3, log_every_n_steps=5, save_interval_secs=600,
      replica_timeout_secs=replica_timeout)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, config, train_dir, num_workers=2, num_ps=1)
    lib.wait_for_step(group, tasks['chief0'], 10, timeout=_START_SECS)
    # Worker 1 takes part before it goes: one that never showed up is still starting.
    lib.wait_for_step(group, tasks['worker1'], 10, timeout=_START_SECS)
    os.killpg(tasks['worker1'].pid, signal.SIGKILL)
    group.wait(tasks['worker1'], timeout=30)
    remaining = {n: t for n, t in tasks.items() if n != 'worker1'}
    codes = lib.wait_all(group, remaining, timeout=replica_timeout + _MARGIN_SECS)
    assert all(exit_codes.is_retryable(code) for code in codes.values()), (
        codes, group.logs())
    for name, task in remaining.items():
      assert re.search(r'no gradients from /job:worker/task:1 .*replica_timeout_secs=20',
                       task.output()), (name, group.logs())
    chief = tasks['chief0']
    # A failure, never a normal end of training.
    assert 'OutOfRangeError' not in chief.output()
    assert 'training finished' not in chief.output()
    stuck_at = lib.latest_checkpoint_step(train_dir)
    assert stuck_at is not None and stuck_at >= 10, group.logs()

    target = stuck_at + 6
    resumed = _resume_and_finish(group, config, train_dir, 2, 1, target)
  assert _restored_step(resumed) == stuck_at
  assert lib.latest_checkpoint_step(train_dir) == target


def test_worker_whose_ps_and_chief_ended_the_job_exits_retryable_at_once(tmp_path, data):
  # As CI saw it: the chief's replica timeout fires first, it tells the ps the
  # job failed and exits; the ps exits; a worker whose own replica watch had
  # not fired yet lost its ps and then waited for it (and for the chief) until
  # chief_timeout_secs. Here the worker's replica timeout is long on purpose.
  train_dir = str(tmp_path / 'train')
  replica_timeout, chief_timeout = 20, 240
  settings = dict(num_steps=100000, batch_size=6, sync_replicas=True, replicas_to_aggregate=3,
                  log_every_n_steps=5, save_interval_secs=600,
                  chief_timeout_secs=chief_timeout)
  config = lib.write_pipeline_config(str(tmp_path), data, replica_timeout_secs=replica_timeout,
                                     **settings)
  patient = lib.write_pipeline_config(str(tmp_path), data, replica_timeout_secs=600,
                                      name='patient.config', **settings)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = {'ps0': lib.start_task(group, cluster, 'ps', 0, config, train_dir),
             'chief0': lib.start_task(group, cluster, 'chief', 0, config, train_dir),
             'worker0': lib.start_task(group, cluster, 'worker', 0, patient, train_dir),
             'worker1': lib.start_task(group, cluster, 'worker', 1, config, train_dir)}
    lib.wait_for_step(group, tasks['chief0'], 10, timeout=_START_SECS)
    # Worker 1 takes part before it goes: one that never showed up is still starting.
    lib.wait_for_step(group, tasks['worker1'], 10, timeout=_START_SECS)
    os.killpg(tasks['worker1'].pid, signal.SIGKILL)
    group.wait(tasks['worker1'], timeout=30)
    ended = {n: tasks[n] for n in ('chief0', 'ps0')}
    codes = lib.wait_all(group, ended, timeout=replica_timeout + _MARGIN_SECS)
    assert set(codes.values()) == {exit_codes.RETRYABLE}, (codes, group.logs())
    # Far sooner than chief_timeout_secs: nobody is left to recover with.
    code = group.wait(tasks['worker0'], timeout=_MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, group.logs()
    assert re.search(r'lost /job:ps/task:0 and the chief /job:chief/task:0 is unreachable too',
                     tasks['worker0'].output()), group.logs()


def test_tasks_restarted_after_the_job_finished_exit_0_within_seconds(tmp_path, data):
  # Issue 18 item 4: a restarted worker used to wait startup_timeout_secs for
  # ps tasks that had exited, then fail.
  train_dir = str(tmp_path / 'train')
  num_steps = 20
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=num_steps,
                                     log_every_n_steps=5, startup_timeout_secs=120,
                                     chief_timeout_secs=120)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    cluster, tasks = _start_job(group, config, train_dir, num_workers=1, num_ps=1)
    codes = lib.wait_all(group, tasks, timeout=_START_SECS + _EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    finished_at = lib.latest_checkpoint_step(train_dir)
    assert finished_at >= num_steps
    checkpoints_before = lib.checkpoint_steps(train_dir)
    # One at a time, alone: each would wait for peers that are gone.
    for job in ('worker', 'ps', 'chief'):
      late = lib.start_task(group, cluster, job, 0, config, train_dir, name=job + '_late')
      # Seconds: the time to import TensorFlow on a busy machine, far below
      # the 120 s startup and chief timeouts.
      assert group.wait(late, timeout=_MARGIN_SECS) == 0, group.logs()
      assert re.search(r'training already finished: %s holds a checkpoint at global step '
                       r'%d >= num_steps=%d; nothing to do' % (
                           re.escape(train_dir), finished_at, num_steps),
                       late.output()), late.output()[-3000:]
  assert lib.checkpoint_steps(train_dir) == checkpoints_before


def test_sync_replica_cut_off_by_a_partition_every_task_exits_retryable(tmp_path, data,
                                                                      netns_network):
  # Issue 18 item 3 as measured: the worker's link goes down for good.
  train_dir = str(tmp_path / 'train')
  replica_timeout = 20
  config = lib.write_pipeline_config(
      str(tmp_path), data, num_steps=100000, batch_size=6, sync_replicas=True,
      replicas_to_aggregate=3, log_every_n_steps=5, save_interval_secs=600,
      replica_timeout_secs=replica_timeout)
  network = netns_network(['chief0', 'worker0', 'worker1', 'ps0'],
                          time_limit_secs=_START_SECS + replica_timeout + 2 * _MARGIN_SECS)
  cluster = cluster_util.netns_cluster(network)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    lib.wait_for_step(group, tasks['chief0'], 10, timeout=_START_SECS)
    # Worker 1 takes part before it goes: one that never showed up is still starting.
    lib.wait_for_step(group, tasks['worker1'], 10, timeout=_START_SECS)
    network.partition('worker1')
    remaining = {n: t for n, t in tasks.items() if n != 'worker1'}
    codes = lib.wait_all(group, remaining, timeout=replica_timeout + _MARGIN_SECS)
    assert all(exit_codes.is_retryable(code) for code in codes.values()), (
        codes, group.logs())
    for name, task in remaining.items():
      assert re.search(r'no gradients from /job:worker/task:1 .*replica_timeout_secs=20',
                       task.output()), (name, group.logs())
    assert 'OutOfRangeError' not in tasks['chief0'].output()
  assert lib.latest_checkpoint_step(train_dir) >= 10


@pytest.mark.parametrize('lost_ps,snapshot_secs', [(1, 0), (0, 0), (1, 1)],
                         ids=['ps1-checkpoint', 'ps0-checkpoint', 'ps1-snapshot'])
def test_ps_killed_and_restarted_only_its_shard_is_restored_and_training_reaches_num_steps(
    tmp_path, data, lost_ps, snapshot_secs):
  # Issue 28 items 1 and 2. replica_device_setter places the global step on ps 0.
  train_dir = str(tmp_path / 'train')
  # Long enough that the kill lands mid-training even on a fast machine. Not paced:
  # a paced chief sleeps between steps, so a ps restarted within a second is back
  # before its next step, which then fails with AbortedError (another device
  # incarnation) and recovers through the Supervisor's retry instead of the
  # lost-peer path this test checks (seen under bazel, 2026-11-28).
  num_steps = 800
  # The recovery waits for the restarted ps and for gRPC's reconnection
  # backoff to it, which grows with the time the ps was down: 77 s seen when
  # the restarted ps took 38 s to start on a loaded machine. With snapshots
  # the Supervisor writes its checkpoint at the start only (600 s), which
  # the snapshot must beat.
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=num_steps,
                                     save_interval_secs=600 if snapshot_secs else 1,
                                     log_every_n_steps=5, recovery_timeout_secs=180,
                                     snapshot_interval_secs=snapshot_secs)
  lost, kept = '/job:ps/task:%d' % lost_ps, '/job:ps/task:%d' % (1 - lost_ps)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    cluster, tasks = _start_job(group, config, train_dir, num_workers=1, num_ps=2)
    chief = tasks['chief0']
    lib.wait_until(lambda: lib.checkpoint_steps(train_dir) and max(
        lib.checkpoint_steps(train_dir)) >= (0 if snapshot_secs else 20), _START_SECS, group,
        'a checkpoint')
    for name in ('chief0', 'worker0'):  # Both training, not one still starting.
      lib.wait_for_step(group, tasks[name], 1, timeout=_START_SECS)
    if snapshot_secs:
      lib.wait_for_step(group, chief, 40, timeout=_START_SECS)
      time.sleep(3 * snapshot_secs)  # A few rounds of copies past the checkpoint.
    saved_before_kill = max(lib.checkpoint_steps(train_dir))
    os.killpg(tasks['ps%d' % lost_ps].pid, signal.SIGKILL)
    group.wait(tasks['ps%d' % lost_ps], timeout=30)
    restarted = lib.start_task(group, cluster, 'ps', lost_ps, config, train_dir,
                               name='ps%d_restarted' % lost_ps)
    remaining = {n: t for n, t in tasks.items() if n != 'ps%d' % lost_ps}
    remaining['ps%d_restarted' % lost_ps] = restarted
    codes = lib.wait_all(group, remaining, timeout=180 + _EXIT_SECS + _MARGIN_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    match = re.search(r'recovered from a lost peer: restored global step (\d+), '
                      r'(\d+) step\(s\) lost \((?:[^()]+) was lost at global step (\d+)\)',
                      chief.output())
    # (A loss seen outside a step, e.g. by the Supervisor's saver, logs the
    # step as None; the chief's next step fails as well, first in every run seen.)
    assert match, group.logs()
    restored, steps_lost, lost_at = (int(g) for g in match.groups())
    for task in (chief, tasks['worker0']):
      # The recovery ran the graph built at the start in a new session.
      assert task.output().count('building the training graph') == 1, group.logs()
      assert 'starting a new session on the training graph' in task.output(), group.logs()
    # The first loss line may name ps0 beside ps1 (the error named both).
    before_loss = chief.output().split('; rebuilding the session')[0]
    logged = [int(s) for s, _ in re.findall(lib.PROGRESS_RE, before_loss)]
    assert logged and lost_at >= max(logged), (lost_at, logged)
    if snapshot_secs:
      # The lost shard came from its copy on ps 0, younger than the checkpoint.
      shard = re.search(r'restored the \d+ variables of %s from its snapshot on %s \(global '
                        r'step (\d+): [0-9.]+ s, (\d+) steps old\); kept the current values '
                        r'of %s \(\d+ variables\)' % (lost, kept, kept), chief.output())
      assert shard, group.logs()
      snapshot_step, steps_old = int(shard.group(1)), int(shard.group(2))
      # (The worker's steps go on after the chief's last: the copy may be newer.)
      assert saved_before_kill < snapshot_step <= restored, (
          saved_before_kill, snapshot_step, restored)
      assert steps_old < lost_at - saved_before_kill, (steps_old, lost_at, saved_before_kill)
    else:
      # Only the lost ps's variables came from the checkpoint.
      shard = re.search(r'restored the \d+ variables of %s from \S*model\.ckpt-(\d+); kept '
                        r'the current values of %s \(\d+ variables\)' % (lost, kept),
                        chief.output())
      assert shard, group.logs()
      assert int(shard.group(1)) >= saved_before_kill, (shard.group(1), saved_before_kill)
    if lost_ps == 1:
      # The global step lives on ps 0, which kept it: no step is lost.
      assert steps_lost == 0 and restored >= lost_at, (restored, steps_lost, lost_at)
    else:
      # The global step came from the checkpoint. The Supervisor names a
      # checkpoint by the step it read just before saving while async training
      # goes on, so model.ckpt-N holds N or the steps the workers finished
      # during the save (4 seen on a loaded CI machine; no fixed bound).
      assert restored >= int(shard.group(1)), (restored, shard.group(1))
      assert steps_lost == max(0, lost_at - restored), (steps_lost, lost_at, restored)
  # Async: the worker may finish the step it was running.
  assert num_steps <= lib.latest_checkpoint_step(train_dir) <= num_steps + 1


def test_ps_lost_for_good_training_tasks_exit_retryable(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  recovery_timeout = 15
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     log_every_n_steps=5,
                                     recovery_timeout_secs=recovery_timeout)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, config, train_dir, num_workers=1, num_ps=1)
    lib.wait_for_step(group, tasks['chief0'], 10, timeout=_START_SECS)
    # Both training: a worker still starting when its ps dies is bounded by the
    # start-up deadline and the chief watch instead (its message names the ps,
    # but not this recovery timeout).
    lib.wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    os.killpg(tasks['ps0'].pid, signal.SIGKILL)
    group.wait(tasks['ps0'], timeout=30)
    training = {n: tasks[n] for n in ('chief0', 'worker0')}
    codes = lib.wait_all(group, training, timeout=recovery_timeout + _MARGIN_SECS)
    assert codes == {'chief0': exit_codes.RETRYABLE, 'worker0': exit_codes.RETRYABLE}, (
        codes, group.logs())
    for task in training.values():
      assert re.search(r'/job:ps/task:0 .*recovery_timeout_secs=15', task.output()), (
          group.logs())


def test_ps_hung_before_the_first_step_chief_exits_retryable_within_the_startup_bound(
    tmp_path, data):
  # A ps that accepts connections but never answers (here: stopped) once the
  # start-up checks have passed: the session's initialisation waits for it.
  # The step deadline only ran from the first finished step, so the chief,
  # and with it the whole job, waited forever.
  train_dir = str(tmp_path / 'train')
  startup_timeout, recovery_timeout = 20, 10
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     startup_timeout_secs=startup_timeout,
                                     recovery_timeout_secs=recovery_timeout)
  cluster = cluster_util.local_cluster(num_workers=0, num_ps=2, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = {'ps%d' % i: lib.start_task(group, cluster, 'ps', i, config, train_dir)
             for i in range(2)}
    lib.wait_until(lambda: all(cluster_runtime.reachable(a) for a in cluster['ps']),
                   _START_SECS, group, 'both ps servers up')
    os.killpg(tasks['ps1'].pid, signal.SIGSTOP)
    tasks['chief0'] = lib.start_task(group, cluster, 'chief', 0, config, train_dir)
    code = group.wait(tasks['chief0'], timeout=_START_SECS + startup_timeout + _MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, group.logs()
    assert re.search(
        r'no training step finished within 30 s of starting the session; every ps accepts '
        r'connections, but a peer does not answer; past deploy_config.startup_timeout_secs '
        r'\+ recovery_timeout_secs=30, exiting retryable', tasks['chief0'].output()), (
            group.logs())
    assert not lib.checkpoint_steps(train_dir)
    # ps0 heard why the job failed.
    assert group.wait(tasks['ps0'], timeout=_MARGIN_SECS) == exit_codes.RETRYABLE, (
        group.logs())
    assert 'ps task 0: the chief ended the job: no training step finished within' in (
        tasks['ps0'].output()), group.logs()
    os.killpg(tasks['ps1'].pid, signal.SIGCONT)


def test_chief_killed_workers_and_ps_exit_retryable_within_chief_timeout(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  chief_timeout = 15
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     log_every_n_steps=5, chief_timeout_secs=chief_timeout)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    # Paced: the worker trains on until it gives the chief up.
    _, tasks = _start_job(group, config, train_dir, num_workers=1, num_ps=1,
                          pace_secs=lib.PACE_SECS)
    lib.wait_for_step(group, tasks['worker0'], 10, timeout=_START_SECS)
    os.killpg(tasks['chief0'].pid, signal.SIGKILL)
    group.wait(tasks['chief0'], timeout=30)
    # Never 0: the worker's steps since the last checkpoint are lost. The
    # worker gives up first and names the chief alone (its ps is still up).
    code = group.wait(tasks['worker0'], timeout=chief_timeout + _MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, (code, group.logs())
    assert tasks['ps0'].poll() is None, ('the ps exited before the worker', group.logs())
    assert re.search(r'chief /job:chief/task:0\S* unreachable for \d+ s \(limit 15 s, '
                     r'deploy_config\.chief_timeout_secs\); exiting', tasks['worker0'].output()), (
                         group.logs())
    ps_limit = chief_timeout + cluster_runtime.PS_CHIEF_TIMEOUT_MARGIN_SECS
    code = group.wait(tasks['ps0'], timeout=ps_limit + _MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, (code, group.logs())
    assert re.search(r'chief /job:chief/task:0\S* unreachable for \d+ s \(limit %d s, '
                     r'deploy_config\.chief_timeout_secs \+ 10 s ps margin\)' % ps_limit,
                     tasks['ps0'].output()), group.logs()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
