"""The local launcher adds and removes workers of a running job (issue 29, item 3).

The tasks are `tests/deployment/launch_task_main.py` (no TensorFlow: a job starts in
about a second), each running until SIGTERM; what a real asynchronous job does with an
added or removed worker is tested in tests/trainer/test_cluster_elastic.py.
"""

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from deployment import launch
from deployment import replicas
from tests import cluster_util

_PROGRAM = [sys.executable, '-m', 'tests.deployment.launch_task_main']
_ALL = 'chief:0,worker:0,worker:1,worker:2,ps:0'
_WAIT_SECS = 60


def _records(record_dir, task):
  path = os.path.join(str(record_dir), '%s.txt' % task.replace(':', '-'))
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return f.read().split('\n')[:-1]


def _wait_for_record(record_dir, task, line, count=1, log=lambda: ''):
  deadline = time.time() + _WAIT_SECS
  while _records(record_dir, task).count(line) < count:
    if time.time() > deadline:
      raise TimeoutError('%s did not record %r %d time(s)\n%s' % (task, line, count, log()))
    time.sleep(0.05)


def _tf_config(log, task, attempt=-1):
  """The TF_CONFIG `task` printed (its last attempt's by default)."""
  printed = re.findall(r'^\[%s\] TF_CONFIG=(.*)$' % task, log, re.M)
  return json.loads(printed[attempt])


@pytest.fixture
def running_job(tmp_path):
  """A chief, one worker and a ps that run until SIGTERM, launched in a thread."""
  args = ['--record_dir=%s' % tmp_path, '--until_sigterm=%s' % _ALL]
  specs = [replicas.ReplicaSpec(t, 1, _PROGRAM + args) for t in ('chief', 'worker', 'ps')]
  out = io.StringIO()
  launcher = launch.Launcher(specs, out=out, grace_secs=20, cwd=cluster_util.REPO_ROOT,
                             env={'CUDA_VISIBLE_DEVICES': ''})
  result = {}
  thread = threading.Thread(target=lambda: result.update(code=launcher.run(
      handle_signals=False)), daemon=True)
  thread.start()
  for task in ('chief:0', 'worker:0', 'ps:0'):
    _wait_for_record(tmp_path, task, 'waiting', log=out.getvalue)
  yield launcher, out, tmp_path
  launcher.request_stop()
  thread.join(_WAIT_SECS)
  assert not thread.is_alive(), out.getvalue()
  assert result['code'] == 143, out.getvalue()


def test_an_added_worker_gets_the_grown_cluster_and_the_others_keep_theirs(running_job):
  launcher, out, record_dir = running_job
  before = dict(launcher.tasks)
  launcher.request_resize(+1)
  _wait_for_record(record_dir, 'worker:1', 'waiting', log=out.getvalue)
  log = out.getvalue()
  config = _tf_config(log, 'worker:1')
  assert config['task'] == {'type': 'worker', 'index': 1}
  assert len(config['cluster']['worker']) == 2
  assert config['cluster']['worker'][0] == _tf_config(log, 'worker:0')['cluster']['worker'][0]
  assert {k: config['cluster'][k] for k in ('chief', 'ps')} == {
      k: _tf_config(log, 'chief:0')['cluster'][k] for k in ('chief', 'ps')}
  assert re.search(r'\[launch\] adding worker:1 at 127\.0\.0\.1:\d+ \(2 workers\)', log)
  # The running tasks keep the TF_CONFIG they started with.
  assert {name: launcher.tasks[name] for name in before} == before


def test_a_removed_worker_gets_sigterm_and_neither_restarts_nor_ends_the_job(running_job):
  launcher, out, record_dir = running_job
  launcher.request_resize(+1)
  _wait_for_record(record_dir, 'worker:1', 'waiting', log=out.getvalue)
  address = _tf_config(out.getvalue(), 'worker:1')['cluster']['worker'][1]
  launcher.request_resize(-1)
  _wait_for_record(record_dir, 'worker:1', 'sigterm', log=out.getvalue)
  deadline = time.time() + _WAIT_SECS
  while 'worker:1 removed: exited with code 143' not in out.getvalue():
    assert time.time() < deadline, out.getvalue()
    time.sleep(0.05)
  log = out.getvalue()
  assert '[launch] removing worker:1 (SIGTERM; 1 workers)' in log
  assert 'restarting' not in log and 'the job fails' not in log
  assert all(task.running for task in launcher._tasks if task.name != 'worker:1')
  # Added again: the same index and address, as a Kubernetes pod keeps its name.
  launcher.request_resize(+1)
  _wait_for_record(record_dir, 'worker:1', 'waiting', count=2, log=out.getvalue)
  assert _tf_config(out.getvalue(), 'worker:1')['cluster']['worker'][1] == address


def test_a_removed_worker_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
  args = ['--record_dir=%s' % tmp_path, '--until_sigterm=%s' % _ALL,
          '--ignore_sigterm=worker:1']
  specs = [replicas.ReplicaSpec(t, 1, _PROGRAM + args) for t in ('chief', 'worker', 'ps')]
  out = io.StringIO()
  launcher = launch.Launcher(specs, out=out, grace_secs=2, cwd=cluster_util.REPO_ROOT,
                             env={'CUDA_VISIBLE_DEVICES': ''})
  thread = threading.Thread(target=lambda: launcher.run(handle_signals=False), daemon=True)
  thread.start()
  try:
    launcher.request_resize(+1)
    _wait_for_record(tmp_path, 'worker:1', 'ignoring', log=out.getvalue)
    launcher.request_resize(-1)
    launcher.request_resize(+1)  # its index is still taken by the leaving process
    deadline = time.time() + _WAIT_SECS
    while 'worker:1 removed: exited with code 137' not in out.getvalue():
      assert time.time() < deadline, out.getvalue()
      time.sleep(0.05)
  finally:
    launcher.request_stop()
    thread.join(_WAIT_SECS)
  log = out.getvalue()
  assert 'cannot add a worker: worker:1 is still leaving' in log
  assert 'worker:1 still running 2s after its removal: SIGKILL' in log


def test_worker_zero_of_a_job_without_a_chief_is_not_removed(tmp_path):
  args = ['--record_dir=%s' % tmp_path, '--until_sigterm=%s' % _ALL]
  specs = [replicas.ReplicaSpec('worker', 1, _PROGRAM + args),
           replicas.ReplicaSpec('ps', 1, _PROGRAM + args)]
  out = io.StringIO()
  launcher = launch.Launcher(specs, out=out, grace_secs=20, cwd=cluster_util.REPO_ROOT,
                             env={'CUDA_VISIBLE_DEVICES': ''})
  launcher.request_resize(-1)
  launcher.request_stop()
  assert launcher.run(handle_signals=False) == 143
  assert '[launch] cannot remove a worker: worker:0 is the chief of this job' in out.getvalue()


def test_sigusr1_and_sigusr2_resize_a_launcher_process(tmp_path):
  command = [sys.executable, '-m', 'deployment.launch', '--chief', '--workers=1', '--ps=1',
             '--module=tests.deployment.launch_task_main', '--grace_secs=20', '--',
             '--record_dir=%s' % tmp_path, '--until_sigterm=%s' % _ALL]
  log_path = str(tmp_path / 'launch.log')
  with open(log_path, 'wb') as log:
    process = subprocess.Popen(command, cwd=cluster_util.REPO_ROOT, stdout=log,
                               stderr=subprocess.STDOUT,
                               env=dict(os.environ, CUDA_VISIBLE_DEVICES=''))
  read = lambda: open(log_path, encoding='utf-8', errors='replace').read()
  try:
    for task in ('chief:0', 'worker:0', 'ps:0'):
      _wait_for_record(tmp_path, task, 'waiting', log=read)
    process.send_signal(signal.SIGUSR1)
    _wait_for_record(tmp_path, 'worker:1', 'waiting', log=read)
    process.send_signal(signal.SIGUSR2)
    _wait_for_record(tmp_path, 'worker:1', 'sigterm', log=read)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=_WAIT_SECS) == 143, read()
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  output = read()
  assert 'worker:1 removed: exited with code 143' in output
  assert _records(tmp_path, 'worker:0')[-1] == 'sigterm'


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
