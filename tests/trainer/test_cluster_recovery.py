"""Crash, preemption and NaN recovery of `python -m trainer.train`, with real processes.

* kill -9 a worker of a ps cluster and restart it with the same TF_CONFIG;
* SIGTERM the chief: checkpoint at the current step, exit 143, resume there;
* kill -9 the chief: the restart restores the latest complete checkpoint,
  also when the kill lands while a checkpoint is being written;
* a NaN loss stops with `LossTensor is inf or nan` and the step, exit 1,
  and the last good checkpoint stays the latest one.

Run them alone with `pytest -m cluster tests/trainer`.
"""

import os
import re
import signal
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests import cluster_util
from tests.trainer import cluster_testlib as lib

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

_EXIT_SECS = 240


@pytest.fixture
def data(tmp_path):
  return lib.write_colour_records(str(tmp_path / 'data'))


def _restores_completely(train_dir):
  """Reads every tensor of the latest checkpoint; returns its global step."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  for name in reader.get_variable_to_shape_map():
    assert np.all(np.isfinite(reader.get_tensor(name))), name
  return int(reader.get_tensor('global_step'))


def _train_to(group, name, config, train_dir, target):
  """Starts a chief training in `train_dir` up to step `target`; waits for exit 0."""
  process = group.start(name, None, module=lib.MODULE,
                        args=lib.train_args(config, train_dir, '--num_train_steps=%d' % target))
  assert group.wait(process, timeout=_EXIT_SECS) == 0, group.logs()
  return process


def _restored_step(process):
  """The step of the checkpoint a (re)started chief restored, or None."""
  match = re.search(r'Restoring parameters from \S*model\.ckpt-(\d+)', process.output())
  return int(match.group(1)) if match else None


def test_worker_killed_and_restarted_training_reaches_num_steps(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=600, learning_rate=0.02,
                                     save_interval_secs=1, log_every_n_steps=5,
                                     chief_timeout_secs=60)
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  seen_steps = []

  def record_checkpoint_step():
    try:
      step = lib.latest_checkpoint_step(train_dir)
    except (tf.errors.OpError, ValueError):  # Old files being rotated away.
      return None
    if step is not None and (not seen_steps or seen_steps[-1] != step):
      seen_steps.append(step)
    return step

  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    # worker0 (the chief) paced: alone it would need about 2 minutes for the steps left
    # after the kill, far longer than the restarted worker takes to start, so the
    # restarted worker (unpaced, as the killed one, whose kill lands mid-step) trains
    # most of them rather than finding the job done.
    tasks = lib.start_tasks(group, cluster, config, train_dir, skip=('worker0',))
    tasks['worker0'] = lib.start_task(group, cluster, 'worker', 0, config, train_dir,
                                      pace_secs=lib.PACE_SECS)
    killed_at = lib.wait_for_step(group, tasks['worker1'], 20, timeout=_EXIT_SECS)
    os.killpg(tasks['worker1'].pid, signal.SIGKILL)
    assert group.wait(tasks['worker1'], timeout=30) == -signal.SIGKILL
    restarted = lib.start_task(group, cluster, 'worker', 1, config, train_dir,
                               name='worker1_restarted')
    remaining = (tasks['worker0'], restarted, tasks['ps0'])

    def all_exited():
      record_checkpoint_step()
      return all(p.poll() is not None for p in remaining)
    lib.wait_until(all_exited, _EXIT_SECS, group, 'every task exiting', interval=0.2)
    assert [p.poll() for p in remaining] == [0, 0, 0], group.logs()
  record_checkpoint_step()
  # Checkpoints never went backwards, and training went on after the crash.
  assert seen_steps == sorted(seen_steps), seen_steps
  # The restarted worker trained: progress lines of its own, past the step of the kill.
  restarted_steps = [s for s, _ in lib.progress(restarted)]
  assert restarted_steps, restarted.output()[-3000:]
  assert min(restarted_steps) > killed_at, (restarted_steps[:5], killed_at)
  final_step = _restores_completely(train_dir)
  assert 600 <= final_step <= 602, final_step


def test_sigterm_checkpoints_the_current_step_and_restart_resumes_there(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     log_every_n_steps=5)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    chief = group.start('chief', None, module=lib.MODULE, args=lib.train_args(config, train_dir))
    lib.wait_for_step(group, chief, 15, timeout=_EXIT_SECS)
    os.killpg(chief.pid, signal.SIGTERM)
    assert group.wait(chief, timeout=60) == 143, group.logs()
    match = re.search(r'SIGTERM: wrote checkpoint \S*model\.ckpt-(\d+)', chief.output())
    assert match, chief.output()[-3000:]
    preempted_at = int(match.group(1))
    assert preempted_at >= 15
    assert max(s for s, _ in lib.progress(chief)) <= preempted_at
    assert lib.latest_checkpoint_step(train_dir) == preempted_at

    target = preempted_at + 10
    resumed = _train_to(group, 'chief_resumed', config, train_dir, target)
  assert _restored_step(resumed) == preempted_at
  assert min(s for s, _ in lib.progress(resumed)) > preempted_at
  assert _restores_completely(train_dir) == target


def test_chief_killed_restores_the_latest_complete_checkpoint(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     save_interval_secs=1, log_every_n_steps=5)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    chief = group.start('chief', None, module=lib.MODULE, args=lib.train_args(config, train_dir))
    # Let it write a few periodic checkpoints, then kill it in the middle of work.
    lib.wait_until(lambda: len(lib.checkpoint_steps(train_dir)) >= 3, _EXIT_SECS, group,
                   'three checkpoints')
    os.killpg(chief.pid, signal.SIGKILL)
    group.wait(chief, timeout=30)
    latest = tf.train.latest_checkpoint(train_dir)
    latest_step = int(latest.rsplit('-', 1)[1])
    # The state file points at a complete checkpoint.
    assert os.path.exists(latest + '.index') and os.path.exists(
        latest + '.data-00000-of-00001')

    target = latest_step + 10
    restarted = _train_to(group, 'chief_restarted', config, train_dir, target)
  assert _restored_step(restarted) == latest_step
  assert _restores_completely(train_dir) == target


def _half_written(name):
  return name.startswith('model.ckpt-') and ('_temp' in name or '.tempstate' in name)


def _kill_while_writing_a_checkpoint(process, train_dir, timeout):
  """SIGKILLs `process` the moment a checkpoint is being written; returns the half-written
  entries left in train_dir (empty when the write finished before the kill landed)."""
  deadline = time.time() + timeout
  while time.time() < deadline and process.poll() is None:
    # The saver writes `model.ckpt-N.data-*.tempstate*` (sharded: `model.ckpt-N_temp/`)
    # and renames it when complete.
    if any(_half_written(name) for name in os.listdir(train_dir)):
      os.killpg(process.pid, signal.SIGKILL)
      process.popen.wait(timeout=30)
      return [name for name in os.listdir(train_dir) if _half_written(name)]
    # Yield the core between looks: a write takes milliseconds, so a 2 ms
    # nap still lands inside some of them, and the trainer being watched
    # (on a shared 2-core machine) gets the CPU a busy loop would take.
    time.sleep(0.002)
  raise AssertionError('no checkpoint write seen within %ss\n%s' % (timeout, process.output()))


def test_chief_killed_while_writing_a_checkpoint_restarts_from_the_previous_one(tmp_path,
                                                                             data):
  # Issue 12 B7. The write takes milliseconds; a few tries land one inside it.
  train_dir = str(tmp_path / 'train')
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=100000,
                                     save_interval_secs=1, log_every_n_steps=5)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    for attempt in range(8):
      chief = group.start('chief%d' % attempt, None, module=lib.MODULE,
                          args=lib.train_args(config, train_dir))
      lib.wait_until(lambda: max(lib.checkpoint_steps(train_dir) or [0]) > 0, _EXIT_SECS,
                     group, 'a checkpoint past step 0')
      half_written = _kill_while_writing_a_checkpoint(chief, train_dir, _EXIT_SECS)
      if half_written:
        break
    assert half_written, 'no kill landed inside a checkpoint write in 8 tries'
    latest = tf.train.latest_checkpoint(train_dir)
    latest_step = int(latest.rsplit('-', 1)[1])
    assert latest_step > 0
    # The state file names a complete checkpoint: the previous step, or the same
    # step written before (a restarted chief saves its restored step again; the
    # rename of the new files is what makes a write complete).
    assert os.path.exists(latest + '.index'), os.listdir(train_dir)
    assert os.path.exists(latest + '.data-00000-of-00001'), os.listdir(train_dir)
    target = latest_step + 10
    restarted = _train_to(group, 'chief_restarted', config, train_dir, target)
  assert _restored_step(restarted) == latest_step
  assert _restores_completely(train_dir) == target


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path, data):
  train_dir = str(tmp_path / 'train')
  good = lib.write_pipeline_config(str(tmp_path), data, num_steps=10, name='good.config')
  # A NaN at a chosen step, on any CPU (a huge learning rate overflows only on some).
  bad = lib.write_pipeline_config(str(tmp_path), data, num_steps=50, debug_nan_loss_at_step=13,
                                  name='nan.config')
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    first = group.start('good', None, module=lib.MODULE, args=lib.train_args(good, train_dir))
    assert group.wait(first, timeout=_EXIT_SECS) == 0, group.logs()
    weights = _restores_completely(train_dir)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
    before = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    nan = group.start('nan', None, module=lib.MODULE, args=lib.train_args(bad, train_dir))
    assert group.wait(nan, timeout=_EXIT_SECS) == 1, group.logs()
  match = re.search(r'LossTensor is inf or nan\. Training stopped at global step (\d+)',
                    nan.output())
  assert match, nan.output()[-3000:]
  assert int(match.group(1)) == 13
  assert weights == 10
  assert tf.train.latest_checkpoint(train_dir).endswith('model.ckpt-10')
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  for name, value in before.items():
    np.testing.assert_array_equal(value, reader.get_tensor(name), err_msg=name)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
