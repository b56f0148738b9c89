"""No task outlives `python -m deployment.launch`, however the launcher ends.

What an operator checks after stopping a launcher by hand: `kill -9` of the
launcher (or its crash) leaves no task running with PPID 1, and `kill -HUP`
(a closed terminal or ssh session) stops the job like SIGTERM does, each task
getting SIGTERM and the launcher exiting 143. Tasks are the tiny program of
tests/deployment/launch_task_main.py, which runs until SIGTERM.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests import cluster_util

pytestmark = pytest.mark.cluster

_TASKS = ('chief:0', 'worker:0', 'ps:0')


def _start_launcher(tmp_path):
  """Starts a chief + worker + ps launcher whose tasks run until SIGTERM."""
  log_path = str(tmp_path / 'launch.out')
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=cluster_util.REPO_ROOT)
  env.pop('TF_CONFIG', None)
  with open(log_path, 'wb') as log:
    process = subprocess.Popen(
        [sys.executable, '-m', 'deployment.launch', '--workers=1', '--ps=1',
         '--module=tests.deployment.launch_task_main', '--grace_secs=30', '--',
         '--record_dir=%s' % tmp_path, '--until_sigterm=%s' % ','.join(_TASKS)],
        cwd=cluster_util.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
  return process, log_path


def _read(path):
  with open(path, encoding='utf-8', errors='replace') as f:
    return f.read()


def _wait_until_tasks_wait(process, log_path, timeout=120):
  """Waits until every task can take SIGTERM; returns {task: pid}."""
  deadline = time.time() + timeout
  waiting = ['[%s] %s waiting for SIGTERM' % (t, t) for t in _TASKS]
  while not all(line in _read(log_path) for line in waiting):
    if process.poll() is not None or time.time() > deadline:
      _kill_group(process.pid)
      raise AssertionError('tasks did not start\n%s' % _read(log_path))
    time.sleep(0.1)
  return {m.group(1): int(m.group(2)) for m in re.finditer(
      r'^\[launch\] started (\w+:\d) \(pid (\d+),', _read(log_path), re.M)}


def _stat(pid):
  """(state, ppid, pgid) of a process from /proc, or None when it is gone."""
  try:
    with open('/proc/%d/stat' % pid) as f:
      fields = f.read().rsplit(')', 1)[1].split()
  except (FileNotFoundError, ProcessLookupError):
    return None
  return fields[0], int(fields[1]), int(fields[2])


def _live_members(pgids):
  """pids of processes (zombies aside) whose process group is one of `pgids`."""
  members = []
  for name in os.listdir('/proc'):
    if name.isdigit():
      stat = _stat(int(name))
      if stat and stat[0] != 'Z' and stat[2] in pgids:
        members.append(int(name))
  return members


def _kill_group(pgid):
  try:
    os.killpg(pgid, signal.SIGKILL)
  except ProcessLookupError:
    pass


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='needs PR_SET_PDEATHSIG')
def test_sigkill_to_the_launcher_takes_every_task_with_it(tmp_path):
  process, log_path = _start_launcher(tmp_path)
  pids = _wait_until_tasks_wait(process, log_path)
  try:
    assert sorted(pids) == sorted(_TASKS), _read(log_path)
    for task, pid in pids.items():
      # Each task is a child of the launcher, leading a process group of its own.
      assert _stat(pid)[1:] == (process.pid, pid), task
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    deadline = time.time() + 10
    while _live_members(set(pids.values())) and time.time() < deadline:
      time.sleep(0.1)
    left = _live_members(set(pids.values()))
    assert not left, 'still running after the launcher died: %s' % {
        pid: _stat(pid) for pid in left}
    # Killed outright: none of them went through its SIGTERM handler.
    for task in _TASKS:
      path = tmp_path / ('%s.txt' % task.replace(':', '-'))
      assert path.read_text().split() == ['start', 'waiting'], task
  finally:
    for pid in pids.values():
      _kill_group(pid)


def test_sighup_to_the_launcher_stops_the_job_like_sigterm(tmp_path):
  process, log_path = _start_launcher(tmp_path)
  pids = _wait_until_tasks_wait(process, log_path)
  try:
    process.send_signal(signal.SIGHUP)
    try:
      code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
      _kill_group(process.pid)
      raise AssertionError('launcher still running 60s after SIGHUP\n%s' % _read(log_path))
    log = _read(log_path)
    assert code == 143, log
    assert '[launch] got SIGHUP: sending SIGTERM to every task, SIGKILL after 30s' in log
    for task in _TASKS:
      path = tmp_path / ('%s.txt' % task.replace(':', '-'))
      assert path.read_text().split() == ['start', 'waiting', 'sigterm'], task
      assert '[launch] %s exited with code 143' % task in log
    assert '[launch] job finished with exit code 143' in log
    assert not _live_members(set(pids.values()))
  finally:
    for pid in pids.values():
      _kill_group(pid)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
