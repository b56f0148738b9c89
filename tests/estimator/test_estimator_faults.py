"""Faults a `tfe.train_and_evaluate` ps cluster must survive (issue 12, Estimator path).

Each test starts chief, worker and ps as real processes on loopback ports
(tests/estimator/fault_task_main.py, each with its own TF_CONFIG), injects one
fault and checks exit codes (deployment/exit_codes.py), logs and checkpoints:

* the ps is killed -9 and restarted on its address: chief and worker rebuild
  their sessions (the chief restores the latest checkpoint), log the lost ps
  and train to max_steps; every task exits 0; a worker and a ps started
  after that see the finished job in model_dir and exit 0 at once;
* the ps is killed for good: chief and worker exit 129 within
  `RunConfig.recovery_timeout_secs`, naming the ps; also when it is lost
  after the last step (in a hook's `end()`);
* the ps is cut off by the network (each task in its own network namespace,
  tests/netns_fixture.py): chief and worker exit 129 when no step finished
  for `recovery_timeout_secs`, naming the unreachable ps;
* the chief is killed: worker and ps exit 129 within
  `RunConfig.chief_timeout_secs`;
* the ps hangs (stopped) before the first step: the chief exits 129 within
  `session_creation_timeout_secs + recovery_timeout_secs`;
* the whole job gets SIGTERM at once: the chief checkpoints the step it
  reached, every task exits 143, and the restarted job resumes there; the
  same with `python -m trainer.model_main`, which takes the two timeouts
  from the pipeline's deploy_config; a master (which evaluates in process)
  does not evaluate or export the preemption checkpoint as the final one.

Run them alone with `pytest -m cluster tests/estimator/test_estimator_faults.py`.
"""

import os
import re
import signal
import sys
import time

import pytest
import tensorflow as tf

from deployment import cluster_runtime
from deployment import exit_codes
from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster]

_MODULE = 'tests.estimator.fault_task_main'
# Generous, as in the legacy trainer's tests: starting a task is not what these
# tests time, and the machine running the suite may be busy.
_START_SECS = 150
_EXIT_SECS = 90
# Beyond a timeout under test: time for a loaded machine to act on it (how
# long a test waits before failing with the logs).
_MARGIN_SECS = 30
# What an assertion allows a task beyond a deadline it promises: acting on the
# deadline (polled every second), telling its peers (one call each) and leaving
# the process. Measured 2.7-3.3 s past a recovery deadline at load average 12
# on 2 cores (2026-11-26); a pause like the one of issue 18 (30-60 s) still fails.
_EXIT_SECS_AFTER_DEADLINE = 10
# A task started after the end of training, from its Estimator's construction
# to its exit: 1.1-1.3 s measured (2026-11-26), plus a fixed margin; a task
# that waited for its (finished) peers would wait out a start-up deadline.
_LATE_TASK_SECS = 10
# One LoggingTensorHook line of the chief (log_step_count_steps=1): the step just run.
_STEP_RE = r'loss = [0-9.naif]+, step = (\d+)'


def _start(group, cluster, job, index, model_dir, name=None, extra=()):
  """Starts one task of `cluster` running the fault task main."""
  return group.start(name or '%s%d' % (job, index), cluster_util.tf_config(cluster, job, index),
                     module=_MODULE, args=['--model_dir=%s' % model_dir] + list(extra))


def _start_job(group, model_dir, suffix='', extra=()):
  """Starts ps, chief and worker of a fresh loopback cluster; returns (cluster, {name: task})."""
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  tasks = {}
  for job in ('ps', 'chief', 'worker'):
    name = '%s0%s' % (job, suffix)
    tasks[name] = _start(group, cluster, job, 0, model_dir, name=name, extra=extra)
  return cluster, tasks


def _steps(process):
  """Global steps of the chief's step log lines, in order."""
  return [int(s) for s in re.findall(_STEP_RE, process.output())]


def _wait_for_step(group, process, step, timeout):
  """Waits until `process` logged global step >= `step`; returns the last step logged."""
  def reached():
    if process.poll() is not None:
      raise RuntimeError('%s exited with %s before step %d\n%s' % (
          process.name, process.poll(), step, group.logs()))
    steps = _steps(process)
    return steps[-1] if steps and steps[-1] >= step else None
  return lib.wait_until(reached, timeout, group, '%s reaching step %d' % (process.name, step))


def _checkpoint_step(model_dir):
  """The global step in the checkpoint the state file names (None without one)."""
  path = tf.train.latest_checkpoint(model_dir)
  return None if path is None else int(tf.train.load_variable(path, 'global_step'))


def _restored_steps(process):
  """Steps of the checkpoints a chief restored, in order."""
  return [int(s) for s in re.findall(r'Restoring parameters from \S*model\.ckpt-(\d+)',
                                     process.output())]


def _line_to_exit_secs(group, tasks, text, timeout):
  """Times each task from the first output line containing `text` to its exit.

  Polls every 0.1 s, so the time counts from when the task printed the line
  (its state reached), not from when it was started or signalled.

  Returns:
    ({name: exit code}, {name: seconds from the line to the exit, or None
    for a task that exited without printing it}).

  Raises:
    TimeoutError: some task still running `timeout` s from the first call.
  """
  start = time.time()
  seen, codes, seconds = {}, {}, {}
  while len(codes) < len(tasks):
    for name, task in tasks.items():
      if name not in seen and text in task.output():
        seen[name] = time.time()
      if name not in codes and task.poll() is not None:
        codes[name] = task.poll()
        seconds[name] = time.time() - seen[name] if name in seen else None
    if time.time() - start > timeout:
      raise TimeoutError('%s still running after %ss\n%s' % (
          sorted(set(tasks) - set(codes)), timeout, group.logs()))
    time.sleep(0.1)
  return codes, seconds


def _sigterm_all(group, tasks, grace):
  """SIGTERMs every task at once (a pod deletion); returns wait_all_timed's (codes, seconds).

  The seconds count from the signal: README promises every task exits
  within termination_grace_secs of it.
  """
  signalled = time.time()
  for task in tasks.values():
    os.killpg(task.pid, signal.SIGTERM)
  codes, exit_secs = lib.wait_all_timed(group, tasks, since=signalled,
                                        timeout=grace + _MARGIN_SECS)
  print('seconds from SIGTERM to each exit:', exit_secs)
  return codes, exit_secs


def test_ps_killed_and_restarted_training_reaches_max_steps(tmp_path):
  model_dir = str(tmp_path / 'model')
  max_steps = 1200
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    cluster, tasks = _start_job(group, model_dir, extra=['--max_steps=%d' % max_steps,
                                                         '--recovery_timeout_secs=60'])
    chief = tasks['chief0']
    lib.wait_until(lambda: (_checkpoint_step(model_dir) or 0) >= 100, _START_SECS, group,
                   'a checkpoint at step >= 100')
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    os.killpg(tasks['ps0'].pid, signal.SIGKILL)
    group.wait(tasks['ps0'], timeout=30)
    restarted = _start(group, cluster, 'ps', 0, model_dir, name='ps0_restarted',
                       extra=['--max_steps=%d' % max_steps])
    remaining = {'chief0': chief, 'worker0': tasks['worker0'], 'ps0_restarted': restarted}
    codes = lib.wait_all(group, remaining, timeout=_EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    for name in ('chief0', 'worker0'):
      assert re.search(r'lost /job:ps/task:0 at global step \d+ \(\w+Error',
                       remaining[name].output()), (name, group.logs())
    match = re.search(r'recovered from a lost peer: restored global step (\d+)',
                      chief.output())
    assert match, group.logs()
    restored = int(match.group(1))
    # The chief restored the latest checkpoint into the fresh ps. A checkpoint's
    # contents may run ahead of its name: the saver reads the global step, then
    # saves while the async worker keeps stepping, so no upper bound holds
    # (the legacy path's twin test saw 4 on CI).
    assert _restored_steps(chief)[-1] >= 100
    assert restored >= _restored_steps(chief)[-1], (restored, _restored_steps(chief))
    assert 'every worker finished; exiting' in restarted.output(), group.logs()
    assert 'Traceback' not in chief.output() + tasks['worker0'].output(), group.logs()
    # Async, W = 2 training tasks, each stopped by tf's StopAtStepHook
    # (README: max_steps .. max_steps + 2W - 1 on the Estimator path).
    assert max_steps <= _checkpoint_step(model_dir) <= max_steps + 3

    # A worker and a ps restarted after the job finished see it in model_dir.
    late = {name: _start(group, cluster, job, 0, model_dir, name=name,
                         extra=['--max_steps=%d' % max_steps])
            for job, name in (('worker', 'worker0_late'), ('ps', 'ps0_late'))}
    # No wait for peers: timed from the line each prints once its Estimator is
    # built (TensorFlow imported) to its exit.
    codes, took = _line_to_exit_secs(group, late, 'Using config:', timeout=_EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    print('seconds from the Estimator to the exit of a late task:', took)
    assert all(t is not None and t < _LATE_TASK_SECS for t in took.values()), (
        took, group.logs())
    for task in late.values():
      assert re.search(r'training already finished: \S+ holds a checkpoint at global step '
                       r'\d+ >= TrainSpec\.max_steps=%d' % max_steps, task.output()), (
                           group.logs())


def test_ps_lost_for_good_chief_and_worker_exit_retryable_naming_it(tmp_path):
  model_dir = str(tmp_path / 'model')
  recovery_timeout = 15
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, model_dir, extra=[
        '--max_steps=100000', '--recovery_timeout_secs=%d' % recovery_timeout])
    _wait_for_step(group, tasks['chief0'], 50, timeout=_START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    os.killpg(tasks['ps0'].pid, signal.SIGKILL)
    group.wait(tasks['ps0'], timeout=30)
    training = {n: tasks[n] for n in ('chief0', 'worker0')}
    # The chief waits out its deadline, no less and not much more, timed from
    # the line naming the loss (its deadline starts there) to its exit.
    codes, waited = _line_to_exit_secs(group, training, 'lost /job:ps/task:0 at global step',
                                       timeout=recovery_timeout + _MARGIN_SECS)
    assert codes == {'chief0': exit_codes.RETRYABLE, 'worker0': exit_codes.RETRYABLE}, (
        codes, group.logs())
    print('seconds from the loss to the exit:', waited)
    # (Less 2 s: the test sees the line up to a poll late on a loaded machine.)
    assert waited['chief0'] is not None and (recovery_timeout - 2 <= waited['chief0']
            <= recovery_timeout + _EXIT_SECS_AFTER_DEADLINE), (waited, group.logs())
    assert re.search(r'lost /job:ps/task:0 and could not rebuild the session within '
                     r'RunConfig\.recovery_timeout_secs=15 \(unreachable: /job:ps/task:0',
                     tasks['chief0'].output()), group.logs()
    # The worker names the ps too: by its own deadline, or at once when the chief is gone.
    assert re.search(r'lost /job:ps/task:0 and (could not rebuild|the chief)',
                     tasks['worker0'].output()), group.logs()


def test_ps_lost_after_the_last_step_chief_and_worker_exit_retryable_naming_it(tmp_path):
  # MonitoredSession recovers inside steps only: a ps lost when training has
  # ended (a hook's end(), the final checkpoint, the close) must still end in a
  # retryable exit that names it, not in a traceback and exit 1.
  model_dir = str(tmp_path / 'model')
  go = tmp_path / 'ps_killed'
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    # Enough steps that the worker (which starts 5 s late) trains before the end.
    _, tasks = _start_job(group, model_dir, extra=[
        '--max_steps=400', '--end_hook_waits_for=%s' % go])
    training = {n: tasks[n] for n in ('chief0', 'worker0')}
    lib.wait_until(lambda: all('END HOOK WAITING' in t.output() for t in training.values()),
                   _START_SECS + _EXIT_SECS, group, 'both training tasks ending')
    os.killpg(tasks['ps0'].pid, signal.SIGKILL)
    group.wait(tasks['ps0'], timeout=30)
    go.write_text('')
    codes = lib.wait_all(group, training, timeout=_EXIT_SECS)
    assert codes == {'chief0': exit_codes.RETRYABLE, 'worker0': exit_codes.RETRYABLE}, (
        codes, group.logs())
    for name, task in training.items():
      assert re.search(r'lost /job:ps/task:0 at global step \d+ after the last training step',
                       task.output()), (name, group.logs())
      assert 'Traceback' not in task.output(), (name, group.logs())


def test_ps_hung_before_the_first_step_chief_exits_retryable_within_the_start_bound(tmp_path):
  # The ps accepts connections but never answers (stopped): creating the
  # chief's session waits for it; without a start deadline, forever.
  model_dir = str(tmp_path / 'model')
  cluster = cluster_util.local_cluster(num_workers=0, num_ps=1, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    ps = _start(group, cluster, 'ps', 0, model_dir)
    lib.wait_until(lambda: cluster_runtime.reachable(cluster['ps'][0]), _START_SECS, group,
                   'the ps server up')
    os.killpg(ps.pid, signal.SIGSTOP)
    chief = _start(group, cluster, 'chief', 0, model_dir,
                   extra=['--session_creation_timeout_secs=20', '--recovery_timeout_secs=10'])
    assert group.wait(chief, timeout=_START_SECS + 30 + _MARGIN_SECS) == exit_codes.RETRYABLE, (
        group.logs())
    assert re.search(
        r'no training step finished within 30 s of starting the session; every ps accepts '
        r'connections, but a peer does not answer; past '
        r'RunConfig\.session_creation_timeout_secs \+ recovery_timeout_secs=30, exiting '
        r'retryable', chief.output()), group.logs()
    os.killpg(ps.pid, signal.SIGCONT)


def test_chief_killed_worker_and_ps_exit_retryable_within_the_chief_timeout(tmp_path):
  model_dir = str(tmp_path / 'model')
  chief_timeout = 10
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, model_dir, extra=[
        '--max_steps=100000', '--chief_timeout_secs=%d' % chief_timeout])
    _wait_for_step(group, tasks['chief0'], 30, timeout=_START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    os.killpg(tasks['chief0'].pid, signal.SIGKILL)
    killed_at = time.time()
    # The worker gives up first, naming the chief alone: its ps is still up.
    code = group.wait(tasks['worker0'], timeout=chief_timeout + _MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, (code, group.logs())
    assert tasks['ps0'].poll() is None, ('the ps exited before the worker', group.logs())
    assert re.search(r'worker task 0: chief /job:chief/task:0/device:CPU:0 unreachable for '
                     r'\d+ s \(limit 10 s, RunConfig\.chief_timeout_secs\); exiting',
                     tasks['worker0'].output()), group.logs()
    # Then the ps, after its margin; it names the Estimator's setting, not the pipeline's.
    ps_limit = chief_timeout + cluster_runtime.PS_CHIEF_TIMEOUT_MARGIN_SECS
    code = group.wait(tasks['ps0'], timeout=ps_limit + _MARGIN_SECS)
    assert code == exit_codes.RETRYABLE, (code, group.logs())
    assert time.time() - killed_at >= ps_limit - 2 * cluster_runtime._POLL_SECS, group.logs()
    assert re.search(r'ps task 0: chief \S+ unreachable for \d+ s \(limit %d s, '
                     r'RunConfig\.chief_timeout_secs \+ 10 s ps margin\); exiting' % ps_limit,
                     tasks['ps0'].output()), group.logs()
    assert 'deploy_config' not in tasks['ps0'].output(), group.logs()


def test_ps_partitioned_training_tasks_exit_retryable_naming_it(tmp_path, netns_network):
  model_dir = str(tmp_path / 'model')
  recovery_timeout = 15
  network = netns_network(['chief0', 'worker0', 'ps0'], time_limit_secs=4 * 60)
  cluster = cluster_util.netns_cluster(network)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs'), network=network) as group:
    tasks = {name: _start(group, cluster, name[:-1], 0, model_dir, name=name, extra=[
        '--max_steps=100000', '--recovery_timeout_secs=%d' % recovery_timeout,
        '--chief_timeout_secs=20']) for name in ('ps0', 'chief0', 'worker0')}
    _wait_for_step(group, tasks['chief0'], 30, timeout=_START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    cut_at = time.time()
    network.partition('ps0')
    training = {n: tasks[n] for n in ('chief0', 'worker0')}
    codes, exit_secs = lib.wait_all_timed(group, training, since=cut_at,
                                          timeout=recovery_timeout + _MARGIN_SECS)
    assert codes == {'chief0': exit_codes.RETRYABLE, 'worker0': exit_codes.RETRYABLE}, (
        codes, group.logs())
    # The step watch counts from the last step before the cut.
    assert max(exit_secs.values()) <= recovery_timeout + _EXIT_SECS_AFTER_DEADLINE, (
        exit_secs, group.logs())
    for task in training.values():
      assert re.search(r'no training step finished for 15 s since global step \d+; '
                       r'unreachable: /job:ps/task:0 \(%s\).*RunConfig\.recovery_timeout_secs'
                       r'=15, exiting retryable' % re.escape(cluster['ps'][0]),
                       task.output()), group.logs()
    # Cut off, the ps loses its chief.
    codes = lib.wait_all(group, {'ps0': tasks['ps0']}, timeout=20 + _MARGIN_SECS)
    assert codes == {'ps0': exit_codes.RETRYABLE}, (codes, group.logs())


def test_whole_job_sigterm_checkpoints_the_step_reached_and_restart_resumes(tmp_path):
  model_dir = str(tmp_path / 'model')
  grace = 20
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    _, tasks = _start_job(group, model_dir, extra=[
        '--max_steps=100000', '--termination_grace_secs=%d' % grace])
    chief = tasks['chief0']
    _wait_for_step(group, chief, 30, timeout=_START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    codes, exit_secs = _sigterm_all(group, tasks, grace)
    assert codes == {'chief0': 143, 'worker0': 143, 'ps0': 143}, (codes, group.logs())
    assert max(exit_secs.values()) <= grace + _EXIT_SECS_AFTER_DEADLINE, (
        exit_secs, group.logs())
    match = re.search(r'SIGTERM: wrote checkpoint \S*model\.ckpt-(\d+)', chief.output())
    assert match, group.logs()
    written = int(match.group(1))
    # The step the chief reached. A step line shows the global step read beside
    # the train op (before its update, mostly); the worker's step in flight may add one.
    last_logged = _steps(chief)[-1]
    assert last_logged <= written <= last_logged + 2, (last_logged, written)
    latest = _checkpoint_step(model_dir)
    assert written <= latest <= written + 2, (written, latest)
    assert 'chief wrote its final checkpoint' in tasks['ps0'].output(), group.logs()
    assert 'at most RunConfig.termination_grace_secs=%d' % grace in tasks['ps0'].output(), (
        group.logs())

    target = latest + 20
    _, resumed = _start_job(group, model_dir, suffix='_restarted',
                            extra=['--max_steps=%d' % target])
    codes = lib.wait_all(group, resumed, timeout=_EXIT_SECS)
    assert set(codes.values()) == {0}, (codes, group.logs())
    chief = resumed['chief0_restarted']
  assert _restored_steps(chief)[0] == latest, chief.output()[-3000:]
  # A step line shows the global step read beside the train op: the first is `latest`.
  assert _steps(chief)[0] >= latest and min(_steps(chief)) >= latest, _steps(chief)[:5]
  assert target <= _checkpoint_step(model_dir) <= target + 3  # README: + 2W - 1, W = 2.


def test_master_style_job_sigterm_skips_the_final_evaluation_and_exits_143(tmp_path):
  # A master evaluates in process; the checkpoint of a preemption is not the final one.
  model_dir = str(tmp_path / 'model')
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, master=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = {name: _start(group, cluster, job, 0, model_dir, name=name,
                          extra=['--max_steps=100000', '--termination_grace_secs=20'])
             for name, job in (('ps0', 'ps'), ('master0', 'master'), ('worker0', 'worker'))}
    _wait_for_step(group, tasks['master0'], 30, timeout=_START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    codes, exit_secs = _sigterm_all(group, tasks, 20)
    assert codes == {'master0': 143, 'worker0': 143, 'ps0': 143}, (codes, group.logs())
    assert max(exit_secs.values()) <= 20 + _EXIT_SECS_AFTER_DEADLINE, (exit_secs, group.logs())
    output = tasks['master0'].output()
    match = re.search(r'SIGTERM: wrote checkpoint \S*model\.ckpt-(\d+)', output)
    assert match, group.logs()
    assert re.search(r'SIGTERM: step \d+ is not the end of training; no final evaluation',
                     output), group.logs()
    assert 'Starting evaluation' not in output.split('SIGTERM: wrote checkpoint')[1]


def _write_ssd_config(directory, deploy_settings):
  """configs/ssd_shapes.config, tiny, on generated shapes, with `deploy_settings`."""
  from core import config_util
  from tools import create_shapes_tf_record
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=8, num_val=2, height=64, width=64)
  overrides = {'train_config.batch_size': 2, 'train_config.num_steps': 100000,
               'train_input_reader.tf_record_input_reader.input_path': [data['train_pattern']],
               'train_input_reader.label_map_path': data['label_map_path'],
               'train_input_reader.num_readers': 1, 'eval_config.batch_size': 1}
  overrides.update(('deploy_config.' + k, v) for k, v in deploy_settings.items())
  pipeline = config_util.load_pipeline_config(
      os.path.join(cluster_util.REPO_ROOT, 'configs', 'ssd_shapes.config'))
  config_util.apply_overrides(pipeline, overrides=overrides)
  del pipeline.eval_input_reader[1:]
  del pipeline.eval_input_reader[0].tf_record_input_reader.input_path[:]
  pipeline.eval_input_reader[0].tf_record_input_reader.input_path.append(data['val_pattern'])
  pipeline.eval_input_reader[0].label_map_path = data['label_map_path']
  pipeline.model.ssd.feature_extractor.depth_multiplier = 0.25
  return config_util.save_pipeline_config(pipeline, directory)


def test_model_main_takes_deploy_config_timeouts_and_exits_143_on_whole_job_sigterm(tmp_path):
  model_dir = str(tmp_path / 'model')
  config_path = _write_ssd_config(str(tmp_path), {'termination_grace_secs': 15,
                                                  'recovery_timeout_secs': 40})
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=1, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = group.start_cluster(cluster, 'trainer.model_main', args=[
        '--model_dir=' + model_dir, '--pipeline_config_path=' + config_path])
    # The SSD's graph takes far longer to build than the MNIST model's: on a
    # loaded 2-core machine its chief was still saving checkpoint 0 after 150 s.
    _wait_for_step(group, tasks['chief0'], 5, timeout=2 * _START_SECS)
    _wait_for_step(group, tasks['worker0'], 1, timeout=_START_SECS)
    codes, exit_secs = _sigterm_all(group, tasks, 15)
    assert codes == {'chief0': 143, 'worker0': 143, 'ps0': 143}, (codes, group.logs())
    assert max(exit_secs.values()) <= 15 + _EXIT_SECS_AFTER_DEADLINE, (exit_secs, group.logs())
    for name in ('chief0', 'worker0'):
      assert ('RunConfig.recovery_timeout_secs=40; SIGTERM ends it within '
              'RunConfig.termination_grace_secs=15') in tasks[name].output(), group.logs()
    match = re.search(r'SIGTERM: wrote checkpoint \S*model\.ckpt-(\d+)',
                      tasks['chief0'].output())
    assert match and int(match.group(1)) >= 5, group.logs()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
