"""A ps cut off by the network, on the multi-host harness (issue 12 item B4).

Each task runs in its own network namespace (`netns_network`); a partition
brings the ps's link down, so its peers see silence, not an error: a step
that needs the ps simply waits.

* healed before `recovery_timeout_secs`: the waiting step finishes and
  training goes on in the same session; no task exits or rebuilds;
* longer: every training task exits retryable within the timeout, naming the
  unreachable ps (`deployment.step_watch`), and a restart of the whole job
  resumes from the last checkpoint.
"""

import re
import sys
import time

import pytest
import tensorflow as tf

from deployment import exit_codes
from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster]

_HOSTS = ['chief0', 'worker0', 'ps0', 'ps1']
_START_SECS = 150
_EXIT_SECS = 150
_MARGIN_SECS = 60
# What an assertion allows a task beyond a deadline it promises: acting on the
# deadline (polled every second), telling its peers (one call each) and leaving
# the process. Measured 2.7-3.3 s past a recovery deadline at load average 12
# on 2 cores (2026-11-26); a pause like the one of issue 18 (30-60 s) still fails.
_EXIT_SECS_AFTER_DEADLINE = 10


@pytest.fixture
def data(tmp_path):
  return lib.write_colour_records(str(tmp_path / 'data'))


def _restored_step(process):
  steps = re.findall(r'Restoring parameters from \S*model\.ckpt-(\d+)', process.output())
  return int(steps[-1]) if steps else None


def test_ps_partition_healed_within_the_recovery_timeout_training_goes_on(
    tmp_path, data, netns_network):
  train_dir = str(tmp_path / 'train')
  num_steps = 400
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=num_steps,
                                     log_every_n_steps=5, save_interval_secs=2,
                                     recovery_timeout_secs=60)
  network = netns_network(_HOSTS, time_limit_secs=2 * _START_SECS + _EXIT_SECS)
  cluster = cluster_util.netns_cluster(network)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    lib.wait_for_step(group, tasks['chief0'], 20, timeout=_START_SECS)
    network.partition('ps1')
    # Steps already past their last ps1 exchange may still finish and be
    # logged just after the cut (CI once saw 6 of them: two workers, one line
    # every 5 steps); after that nothing can finish until the link is back.
    time.sleep(3)
    settled_at = max(s for s, _ in lib.progress(tasks['chief0']))
    time.sleep(6)
    stalled_at = max(s for s, _ in lib.progress(tasks['chief0']))
    network.heal('ps1')
    codes = lib.wait_all(group, tasks, timeout=_EXIT_SECS)
  assert set(codes.values()) == {0}, (codes, group.logs())
  # The partition did stop training: not one step in six seconds.
  assert stalled_at == settled_at, (settled_at, stalled_at)
  for name in ('chief0', 'worker0'):
    output = tasks[name].output()
    assert 'starting a new session on the training graph' not in output, group.logs()
    assert 'no training step finished' not in output, group.logs()
  assert num_steps <= lib.latest_checkpoint_step(train_dir) <= num_steps + 1


def test_ps_partitioned_past_the_recovery_timeout_tasks_exit_retryable_and_restart_resumes(
    tmp_path, data, netns_network):
  train_dir = str(tmp_path / 'train')
  recovery_timeout = 15
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     log_every_n_steps=5, save_interval_secs=2,
                                     recovery_timeout_secs=recovery_timeout,
                                     chief_timeout_secs=20)
  network = netns_network(_HOSTS, time_limit_secs=3 * _START_SECS + 2 * _EXIT_SECS)
  cluster = cluster_util.netns_cluster(network)
  ps1_address = cluster['ps'][1]
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    lib.wait_until(lambda: lib.checkpoint_steps(train_dir) and max(
        lib.checkpoint_steps(train_dir)) >= 20, _START_SECS, group, 'a checkpoint >= 20')
    # Both past their first step, so each waits out `recovery_timeout` (before
    # the first step the deadline is the longer start-up one, see
    # test_cluster_faults.py); an async worker's steps alone can make that
    # checkpoint while its peer still starts.
    for name in ('chief0', 'worker0'):
      lib.wait_for_step(group, tasks[name], 1, timeout=_START_SECS)
    cut = time.time()
    network.partition('ps1')
    training = {n: tasks[n] for n in ('chief0', 'worker0')}
    codes, exit_secs = lib.wait_all_timed(group, training, since=cut,
                                          timeout=recovery_timeout + _MARGIN_SECS)
    assert codes == {'chief0': exit_codes.RETRYABLE, 'worker0': exit_codes.RETRYABLE}, (
        codes, group.logs())
    # Each task's step watch counts from its last step, before the cut: both are
    # out within recovery_timeout_secs of it, plus the exit itself.
    print('seconds from the cut to each exit:', exit_secs)
    assert max(exit_secs.values()) <= recovery_timeout + _EXIT_SECS_AFTER_DEADLINE, (
        exit_secs, group.logs())
    # The first task to reach the deadline exits through its step watch and the
    # chief tells ps0 the job failed; a task still waiting may then lose ps0
    # (or, a worker, see the chief go) first. Whichever way a task exits, its
    # message names the unreachable ps1.
    watch_fired = r'no training step finished for 15 s since global step \d+; '
    ps1_unreachable = r'unreachable(?: too)?: [^;]*/job:ps/task:1 \(%s\)' % re.escape(
        ps1_address)
    for task in training.values():
      assert re.search(ps1_unreachable + r'.*exiting', task.output()), group.logs()
    assert any(re.search(watch_fired + ps1_unreachable + r'.*recovery_timeout_secs=15',
                         task.output()) for task in training.values()), group.logs()
    # ps0 hears the chief's FAILED (ps1 is skipped: unreachable); ps1 loses the chief.
    others = {n: tasks[n] for n in ('ps0', 'ps1')}
    ps_codes = lib.wait_all(group, others, timeout=20 + _MARGIN_SECS)
    assert all(exit_codes.is_retryable(c) for c in ps_codes.values()), (ps_codes, group.logs())
    assert 'ps task 0: the chief ended the job: no training step finished' in (
        tasks['ps0'].output()), group.logs()
    network.heal('ps1')
    # The step in the name: what a restart restores and logs.
    latest = int(tf.train.latest_checkpoint(train_dir).rsplit('-', 1)[1])
    assert latest >= 20

    target = latest + 10
    restarted = {}
    for job, count in (('ps', 2), ('chief', 1), ('worker', 1)):
      for index in range(count):
        name = '%s%d_restarted' % (job, index)
        restarted[name] = lib.start_task(group, cluster, job, index, config, train_dir,
                                         extra=['--num_train_steps=%d' % target], name=name)
    codes = lib.wait_all(group, restarted, timeout=_START_SECS + _EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
  # The chief's whole log: one CI run found no restore line in it (not reproduced since).
  assert _restored_step(restarted['chief0_restarted']) == latest, (
      latest, restarted['chief0_restarted'].output())
  assert target <= lib.latest_checkpoint_step(train_dir) <= target + 1, group.logs()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
