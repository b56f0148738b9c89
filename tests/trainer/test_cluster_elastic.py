"""Workers join and leave a running asynchronous `python -m trainer.train` job (issue 29).

Real processes on loopback ports, no task of the running job restarted:

* a worker whose TF_CONFIG lists one more worker joins: the chief logs `worker:1 joined
  (2 workers)`, the joiner's first step is past the global step the job had reached
  before it started, and its steps go on; a worker whose ps list differs is refused
  (exit 1) naming the difference, while the job trains on;
* a worker removed by SIGTERM exits 143 within `termination_grace_secs` and the chief
  logs `worker:1 left (1 workers)`; another worker killed -9 mid-step is no event: the
  chief and the ps train on; a joiner removed before its first step leaves the same way;
* a sync-replicas job counts a worker removed by SIGTERM out of its rounds (`sync
  replicas: 2 replicas, a round takes 2 gradients`) and waits for it no more, then
  counts a worker that joins in;
* across network namespaces (each task its own host, `slow`): a worker joins, then
  leaves by SIGTERM, while the job trains on.

The jobs train until the test ends them, paced to a step per 0.2 s per task
(tests/trainer/paced_train_main.py) so they leave the test machine's cores to the
rest of the suite; the one whose worker is killed mid-step trains flat out, so the
kill lands inside a step.

Run them alone with `pytest -m cluster tests/trainer/test_cluster_elastic.py`.
"""

import os
import signal
import socket
import sys
import time

import pytest

from deployment import exit_codes
from tests import cluster_util
from tests import test_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster]

# Generous: the machine running the suite may be busy (a TF import alone took 30 s at
# load average 9 on 2 cores).
_START_SECS = 150
_MARGIN_SECS = 60
# What an exit may take beyond the termination grace it promises (see test_cluster_faults).
_EXIT_SECS_AFTER_DEADLINE = 10
_GRACE_SECS = 15


@pytest.fixture
def data(tmp_path):
  return lib.write_colour_records(str(tmp_path / 'data'))


def _config(tmp_path, data, **overrides):
  settings = dict(num_steps=1000000, log_every_n_steps=5, save_interval_secs=600,
                  termination_grace_secs=_GRACE_SECS)
  settings.update(overrides)
  return lib.write_pipeline_config(str(tmp_path), data, **settings)


def _start(group, cluster, job, index, config, train_dir, name=None):
  # Paced: these jobs train until the test stops them (tests/trainer/paced_train_main.py).
  return lib.start_task(group, cluster, job, index, config, train_dir, name=name,
                        pace_secs=lib.PACE_SECS)


def _last_step(process):
  steps = [s for s, _ in lib.progress(process)]
  return max(steps) if steps else 0


def _sigterm_job(group, tasks):
  """Ends the job as a pod deletion would; every task exits 143.

  Not timed here (test_cluster_faults times a whole-job SIGTERM): a ps whose worker was
  killed waits the whole grace for it, and tearing a TensorFlow process down took up to
  14 s more on the loaded test machine.
  """
  signalled = time.time()
  for task in tasks.values():
    os.killpg(task.pid, signal.SIGTERM)
  codes, exit_secs = lib.wait_all_timed(group, tasks, since=signalled,
                                        timeout=_GRACE_SECS + _MARGIN_SECS)
  print('seconds from the job\'s SIGTERM to each exit:', exit_secs)
  assert set(codes.values()) == {exit_codes.PREEMPTED}, (codes, group.logs())


def test_a_worker_joins_a_running_job_and_trains_a_stale_ps_list_is_refused(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = _config(tmp_path, data)
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  new_worker, stale_worker = cluster_util.local_cluster(num_workers=2)['worker']
  grown = dict(cluster, worker=cluster['worker'] + [new_worker])
  # A ps list of two: the job's ps and a port that accepts connections (so the stale
  # worker gets past its wait for the ps tasks to the cluster check).
  listener = socket.socket()
  listener.bind(('127.0.0.1', test_util.pick_unused_ports(1)[0]))
  listener.listen()
  stale = dict(cluster, worker=cluster['worker'] + [stale_worker],
               ps=cluster['ps'] + ['127.0.0.1:%d' % listener.getsockname()[1]])
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = {name: _start(group, cluster, job, 0, config, train_dir)
             for name, job in (('ps0', 'ps'), ('chief0', 'chief'), ('worker0', 'worker'))}
    lib.wait_for_step(group, tasks['chief0'], 5, timeout=_START_SECS)
    lib.wait_for_step(group, tasks['worker0'], 5, timeout=_START_SECS)
    step_before_join = _last_step(tasks['chief0'])
    tasks['worker1'] = _start(group, grown, 'worker', 1, config, train_dir)
    refused = _start(group, stale, 'worker', 1, config, train_dir, name='stale_worker1')

    assert group.wait(refused, timeout=_START_SECS) == exit_codes.PERMANENT, group.logs()
    assert ('job "ps" has 2 task(s) here and 1 at the chief' in refused.output()
            ), refused.output()[-3000:]
    group.wait_for_output(tasks['chief0'], r'worker:1 joined \(2 workers\)', _START_SECS)
    first = lib.wait_for_step(group, tasks['worker1'], 1, timeout=_START_SECS)
    joiner_steps = [s for s, _ in lib.progress(tasks['worker1'])]
    # It started from the step the job had reached, not from 0.
    assert joiner_steps[0] > step_before_join, (joiner_steps[:5], step_before_join)
    lib.wait_for_step(group, tasks['worker1'], first + 20, timeout=_START_SECS)
    assert 'worker:1 is new to the running job: joining it' in tasks['worker1'].output()
    assert 'ps task 0: worker 1 joined' in tasks['ps0'].output(), tasks['ps0'].output()
    # The job trains on with three tasks, none restarted.
    after_join = _last_step(tasks['chief0'])
    lib.wait_for_step(group, tasks['chief0'], after_join + 10, timeout=_START_SECS)
    assert all(task.poll() is None for task in tasks.values()), group.logs()
    _sigterm_job(group, tasks)
  listener.close()


def test_a_worker_leaves_by_sigterm_another_by_kill_and_the_job_trains_on(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = _config(tmp_path, data)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir)
    for name in ('chief0', 'worker0', 'worker1'):
      lib.wait_for_step(group, tasks[name], 5, timeout=_START_SECS)

    # A scale-down: SIGTERM to worker 1 alone.
    signalled = time.time()
    os.killpg(tasks['worker1'].pid, signal.SIGTERM)
    code = group.wait(tasks['worker1'], timeout=_GRACE_SECS + _MARGIN_SECS)
    exit_secs = time.time() - signalled
    print('worker1: seconds from SIGTERM to its exit: %.1f' % exit_secs)
    assert code == exit_codes.PREEMPTED, group.logs()
    assert exit_secs <= _GRACE_SECS + _EXIT_SECS_AFTER_DEADLINE
    group.wait_for_output(tasks['chief0'], r'worker:1 left \(1 workers\)', _MARGIN_SECS)
    left_at = _last_step(tasks['chief0'])
    lib.wait_for_step(group, tasks['chief0'], left_at + 10, timeout=_START_SECS)
    lib.wait_for_step(group, tasks['worker0'], left_at + 10, timeout=_START_SECS)

    # A worker dying mid-step is no event for the others.
    del tasks['worker1']
    os.killpg(tasks['worker0'].pid, signal.SIGKILL)
    assert group.wait(tasks['worker0'], timeout=_MARGIN_SECS) == -signal.SIGKILL
    killed_at = _last_step(tasks['chief0'])
    lib.wait_for_step(group, tasks['chief0'], killed_at + 20, timeout=_START_SECS)
    assert tasks['chief0'].poll() is None and tasks['ps0'].poll() is None, group.logs()
    assert 'worker:0 left' not in tasks['chief0'].output()
    for name in ('chief0', 'ps0'):
      output = tasks[name].output()
      assert not lib.restart_lines(output), output[-3000:]
    del tasks['worker0']
    _sigterm_job(group, tasks)


def test_a_joiner_removed_before_its_first_step_says_it_left(tmp_path, data):
  """A scale-down that lands while the joiner builds its graph (before the training loop
  hears SIGTERM itself): it exits 143 and the chief stops counting it."""
  train_dir = str(tmp_path / 'train')
  config = _config(tmp_path, data)
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  grown = dict(cluster, worker=cluster['worker'] + cluster_util.local_cluster(
      num_workers=1)['worker'])
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir, pace_secs=lib.PACE_SECS)
    lib.wait_for_step(group, tasks['chief0'], 5, timeout=_START_SECS)
    joiner = _start(group, grown, 'worker', 1, config, train_dir)
    group.wait_for_output(joiner, r'told the chief that worker 1 joined', _START_SECS)
    signalled = time.time()
    os.killpg(joiner.pid, signal.SIGTERM)
    code = group.wait(joiner, timeout=_GRACE_SECS + _MARGIN_SECS)
    exit_secs = time.time() - signalled
    print('joiner: seconds from SIGTERM to its exit: %.1f' % exit_secs)
    assert code == exit_codes.PREEMPTED, group.logs()
    assert exit_secs <= _GRACE_SECS + _EXIT_SECS_AFTER_DEADLINE
    assert lib.progress(joiner) == [], joiner.output()[-3000:]  # It never trained.
    assert 'SIGTERM before the first training step of this worker' in joiner.output()
    group.wait_for_output(tasks['chief0'], r'worker:1 left \(1 workers\)', _MARGIN_SECS)
    left_at = _last_step(tasks['chief0'])
    lib.wait_for_step(group, tasks['chief0'], left_at + 10, timeout=_START_SECS)
    assert all(task.poll() is None for task in tasks.values()), group.logs()
    _sigterm_job(group, tasks)


@pytest.mark.slow
def test_across_network_namespaces_a_worker_joins_then_leaves(tmp_path, data, netns_network):
  # Every task its own host on a private subnet (deployment/netns.py): the joiner is a
  # new machine, as a pod added by a TFJob or JobSet resize is.
  network = netns_network(['chief0', 'worker0', 'worker1', 'ps0'],
                          time_limit_secs=_START_SECS * 3 + _MARGIN_SECS * 2)
  grown = cluster_util.netns_cluster(network)
  cluster = dict(grown, worker=grown['worker'][:1])
  train_dir = str(tmp_path / 'train')
  config = _config(tmp_path, data)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir, pace_secs=lib.PACE_SECS)
    lib.wait_for_step(group, tasks['worker0'], 5, timeout=_START_SECS)
    step_before_join = _last_step(tasks['chief0'])
    tasks['worker1'] = _start(group, grown, 'worker', 1, config, train_dir)
    group.wait_for_output(tasks['chief0'], r'worker:1 joined \(2 workers\)', _START_SECS)
    first = lib.wait_for_step(group, tasks['worker1'], 1, timeout=_START_SECS)
    assert [s for s, _ in lib.progress(tasks['worker1'])][0] > step_before_join
    lib.wait_for_step(group, tasks['worker1'], first + 10, timeout=_START_SECS)

    signalled = time.time()
    os.killpg(tasks['worker1'].pid, signal.SIGTERM)
    assert group.wait(tasks['worker1'], timeout=_GRACE_SECS + _MARGIN_SECS) == (
        exit_codes.PREEMPTED), group.logs()
    assert time.time() - signalled <= _GRACE_SECS + _EXIT_SECS_AFTER_DEADLINE
    group.wait_for_output(tasks['chief0'], r'worker:1 left \(1 workers\)', _MARGIN_SECS)
    left_at = _last_step(tasks['chief0'])
    lib.wait_for_step(group, tasks['worker0'], left_at + 10, timeout=_START_SECS)
    del tasks['worker1']
    assert all(task.poll() is None for task in tasks.values()), group.logs()
    _sigterm_job(group, tasks)


def test_a_sync_job_counts_a_worker_that_leaves_and_one_that_joins(tmp_path, data):
  """Sync replicas, 3 replicas of 3: worker 1 is removed, then worker 2 joins."""
  train_dir = str(tmp_path / 'train')
  replica_timeout = 10
  # A replica's batch is batch_size / replicas_to_aggregate as configured (2), whatever
  # the count later.
  config = _config(tmp_path, data, sync_replicas=True, replicas_to_aggregate=3, batch_size=6,
                   replica_timeout_secs=replica_timeout)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1, chief=True)
  grown = dict(cluster, worker=cluster['worker'] + cluster_util.local_cluster(
      num_workers=1)['worker'])
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = lib.start_tasks(group, cluster, config, train_dir, pace_secs=lib.PACE_SECS)
    for name in ('chief0', 'worker0', 'worker1'):
      lib.wait_for_step(group, tasks[name], 5, timeout=_START_SECS)
    chief = tasks['chief0']
    assert 'sync replicas: 3 replicas, a round takes 3 gradients' in chief.output()

    # A scale-down: worker 1 leaves; the rounds take 2 gradients from then on, and no
    # task waits for it (well past replica_timeout_secs, nobody exits).
    os.killpg(tasks.pop('worker1').pid, signal.SIGTERM)
    group.wait_for_output(chief, r'worker:1 left \(1 workers\)', _GRACE_SECS + _MARGIN_SECS)
    group.wait_for_output(chief, r'sync replicas: 2 replicas, a round takes 2 gradients',
                          _MARGIN_SECS)
    left_at = _last_step(chief)
    time.sleep(2 * replica_timeout)
    lib.wait_for_step(group, chief, left_at + 10, timeout=_START_SECS)
    lib.wait_for_step(group, tasks['worker0'], left_at + 10, timeout=_START_SECS)
    assert all(task.poll() is None for task in tasks.values()), group.logs()

    # A scale-up: worker 2 joins; the rounds take its gradients too.
    tasks['worker2'] = _start(group, grown, 'worker', 2, config, train_dir)
    group.wait_for_output(chief, r'worker:2 joined \(2 workers\)', _START_SECS)
    group.wait_for_output(chief, r'sync replicas: 3 replicas, a round takes 3 gradients'
                          r'(?s:.*)sync replicas: 3 replicas', _MARGIN_SECS)
    first = lib.wait_for_step(group, tasks['worker2'], 1, timeout=_START_SECS)
    lib.wait_for_step(group, tasks['worker2'], first + 10, timeout=_START_SECS)
    joined_at = _last_step(chief)
    lib.wait_for_step(group, chief, joined_at + 10, timeout=_START_SECS)
    for task in tasks.values():
      assert task.poll() is None, group.logs()
      assert 'no gradients from' not in task.output(), task.output()[-3000:]
    assert not lib.restart_lines(chief.output()), chief.output()[-3000:]
    _sigterm_job(group, tasks)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
