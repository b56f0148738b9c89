"""tests/cluster_util.ProcessGroup keeps a failed test's task logs where bazel keeps outputs.

Bazel deletes a test's temporary directory; a cluster failure seen only under
`bazel test` needs each task's whole log to be diagnosed.
"""

import os
import sys

import pytest

from tests import cluster_util
from tests import fork_server


@pytest.fixture
def task_script(tmp_path, monkeypatch):
  # A plain process: the fork server's TensorFlow import would only slow this down.
  monkeypatch.setenv(fork_server.DISABLE_ENV, '0')
  script = tmp_path / 'task.py'
  script.write_text('print("task output line")\n')
  return str(script)


def _run_group(log_dir, script, fail):
  with cluster_util.ProcessGroup(log_dir) as group:
    task = group.start('worker0', script=script)
    assert group.wait(task, timeout=60) == 0
    if fail:
      raise AssertionError('the test failed here')


def test_a_failed_group_copies_its_logs_to_the_bazel_outputs(tmp_path, task_script,
                                                             monkeypatch):
  outputs = tmp_path / 'outputs'
  outputs.mkdir()
  monkeypatch.setenv('TEST_UNDECLARED_OUTPUTS_DIR', str(outputs))
  with pytest.raises(AssertionError, match='the test failed here'):
    _run_group(str(tmp_path / 'case' / 'logs'), task_script, fail=True)
  kept = outputs / 'failed_task_logs' / ('case-%d' % os.getpid()) / 'worker0.log'
  assert kept.read_text() == 'task output line\n'


def test_a_passing_group_or_one_outside_bazel_copies_nothing(tmp_path, task_script,
                                                             monkeypatch):
  outputs = tmp_path / 'outputs'
  outputs.mkdir()
  monkeypatch.setenv('TEST_UNDECLARED_OUTPUTS_DIR', str(outputs))
  _run_group(str(tmp_path / 'passed' / 'logs'), task_script, fail=False)
  assert not os.listdir(outputs)
  monkeypatch.delenv('TEST_UNDECLARED_OUTPUTS_DIR')
  with pytest.raises(AssertionError):
    _run_group(str(tmp_path / 'failed' / 'logs'), task_script, fail=True)
  assert not os.listdir(outputs)


def test_a_timeout_message_starts_with_each_processes_last_lines_without_tf_noise(tmp_path,
                                                                                 monkeypatch):
  # CI keeps the head of a long failure: the lines that say where a task hung
  # must come before the whole logs, TensorFlow's start-up chatter left out.
  monkeypatch.setenv(fork_server.DISABLE_ENV, '0')
  script = tmp_path / 'hang.py'
  script.write_text(
      'import sys, time\n'
      'print("step 1 done")\n'
      'print("W deprecation.py:50] From x: batch is deprecated")\n'
      'print("Instructions for updating:")\n'
      'print("waiting for the ps", flush=True)\n'
      'time.sleep(60)\n')
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    task = group.start('chief0', script=str(script))
    group.wait_for_output(task, 'waiting for the ps', timeout=30)
    with pytest.raises(TimeoutError) as raised:
      group.wait(task, timeout=0.5)
  message = str(raised.value)
  head = message[:message.index('=====')]
  assert head.splitlines()[1:] == [
      '--- chief0 (exit None), last lines:', 'step 1 done', 'waiting for the ps']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
