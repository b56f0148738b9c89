"""Startup agreement on the cluster and the exposure warning, with real gRPC servers."""

import json
import logging as std_logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from core import logs
from deployment import cluster as cluster_lib
from deployment import cluster_check
from deployment import cluster_runtime
from tests import cluster_util


_config = cluster_util.cluster_config
_addresses = cluster_util.loopback_addresses


@pytest.fixture(scope='module')
def published_cluster():
  """A chief that has started its server and published its cluster."""
  chief, worker, ps = _addresses(3)
  cluster = {'chief': [chief], 'worker': [worker], 'ps': [ps]}
  cluster_check.start_server_and_agree(_config(cluster, 'chief'), timeout_secs=10)
  return cluster


def test_a_task_with_the_chiefs_cluster_agrees(published_cluster):
  for task_type in ('worker', 'ps'):
    config = _config(published_cluster, task_type)
    chiefs = cluster_check.read_chiefs_cluster(config, 10)
    assert chiefs == published_cluster
    cluster_check.agree_with_chief(config, None, 10)


def test_a_different_worker_address_is_named_with_both_values(published_cluster):
  stale = dict(published_cluster, worker=['127.0.0.1:1'])
  config = _config(stale, 'worker')
  with pytest.raises(cluster_check.ClusterMismatchError) as error:
    cluster_check.agree_with_chief(config, None, 10)
  message = str(error.value)
  assert ('job "worker" task 0: this task has 127.0.0.1:1, the chief has %s'
          % published_cluster['worker'][0]) in message
  assert 'task worker:0' in message


def test_a_missing_ps_job_and_an_extra_worker_are_both_named(published_cluster):
  other = {'chief': published_cluster['chief'],
           'worker': published_cluster['worker'] + ['127.0.0.1:2']}
  config = _config(other, 'worker', 1)
  with pytest.raises(cluster_check.ClusterMismatchError) as error:
    cluster_check.agree_with_chief(config, None, 10)
  message = str(error.value)
  assert 'job "ps" is in the chief\'s cluster only' in message
  assert 'job "worker" has 2 task(s) here and 1 at the chief' in message


def test_an_absent_chief_is_a_startup_timeout_naming_its_address():
  chief, worker = _addresses(2)
  config = _config({'chief': [chief], 'worker': [worker]}, 'worker')
  with pytest.raises(cluster_runtime.StartupTimeoutError, match=chief):
    cluster_check.agree_with_chief(config, None, 1)


def test_a_chief_that_never_publishes_is_a_timeout():
  chief, worker = _addresses(2)
  cluster = {'chief': [chief], 'worker': [worker]}
  _config(cluster, 'chief').start_server()  # up, but publishes nothing
  with pytest.raises(TimeoutError, match='did not publish its cluster within 2 s'):
    cluster_check.read_chiefs_cluster(_config(cluster, 'worker'), 2)


# A chief that starts its server, then publishes its cluster once a line comes on stdin.
_LATE_CHIEF = """
import sys
from deployment import cluster_check
from tests import cluster_util
config = cluster_util.cluster_config(%r, 'chief')
server = config.start_server()
print('up', flush=True)
sys.stdin.readline()
cluster_check.publish(config, server)
print('published', flush=True)
sys.stdin.readline()
"""


@pytest.mark.cluster
def test_a_chief_that_answers_a_poll_late_is_asked_again(monkeypatch, caplog):
  # 2026-11-28: a ps restarted while the chief restored a checkpoint died of one late
  # answer (DeadlineExceededError) instead of asking again within its startup timeout.
  chief, ps = _addresses(2)
  cluster = {'chief': [chief], 'ps': [ps]}
  process = subprocess.Popen(
      [sys.executable, '-c', _LATE_CHIEF % cluster], cwd=cluster_util.REPO_ROOT,
      env=dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2'),
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    assert process.stdout.readline().strip() == 'up'
    monkeypatch.setattr(cluster_check, '_RPC_TIMEOUT_MS', 1000)
    read = {}
    reader = threading.Thread(target=lambda: read.update(cluster=(
        cluster_check.read_chiefs_cluster(_config(cluster, 'ps'), 60))), daemon=True)
    with caplog.at_level(std_logging.INFO, logger='tensorflow'):
      reader.start()
      time.sleep(2.0)  # The reader's session is up and polling an unpublished chief.
      os.kill(process.pid, signal.SIGSTOP)  # Its polls now go unanswered for 3 s.
      time.sleep(3.0)
      os.kill(process.pid, signal.SIGCONT)
      process.stdin.write('publish\n')
      process.stdin.flush()
      reader.join(60)
    assert read == {'cluster': cluster}
    assert 'did not answer within 1000 ms; asking again' in caplog.text
  finally:
    process.kill()
    process.wait()


def test_the_evaluator_is_left_out_of_the_comparison():
  cluster = {'chief': ['127.0.0.1:5'], 'worker': ['127.0.0.1:6'],
             'evaluator': ['127.0.0.1:7']}
  assert json.loads(cluster_check.canonical_cluster(_config(cluster, 'worker'))) == {
      'chief': ['127.0.0.1:5'], 'worker': ['127.0.0.1:6']}
  # The evaluator holds no server and checks nothing (no chief is running here).
  cluster_check.agree_with_chief(_config(cluster, 'evaluator'), None, 1)


def test_no_differences_for_equal_clusters():
  cluster = {'chief': ['a:1'], 'worker': ['b:1', 'c:1'], 'ps': ['d:1']}
  assert cluster_check.describe_differences(cluster, json.loads(json.dumps(cluster))) == []


class _Records(std_logging.Handler):

  def __init__(self):
    super().__init__()
    self.messages = []

  def emit(self, record):
    self.messages.append(record.getMessage())


@pytest.fixture
def warnings_logged():
  handler = _Records()
  logger = logs.logger()
  logger.addHandler(handler)
  yield handler.messages
  logger.removeHandler(handler)


def test_a_cluster_beyond_loopback_logs_one_warning_naming_the_port(warnings_logged):
  config = _config({'chief': ['10.1.2.3:2222'], 'worker': ['10.1.2.4:2223']}, 'worker')
  assert cluster_lib.warn_if_exposed(config)
  assert len(warnings_logged) == 1
  message = warnings_logged[0]
  assert 'port 2223 of every interface' in message
  assert '10.1.2.3:2222, 10.1.2.4:2223' in message
  assert 'docs/security.md' in message


def test_a_loopback_cluster_logs_nothing(warnings_logged):
  for hosts in (['127.0.0.1:1', 'localhost:2'], ['[::1]:3', '127.0.0.2:4']):
    config = _config({'chief': hosts[:1], 'worker': hosts[1:]}, 'chief')
    assert not cluster_lib.warn_if_exposed(config)
  assert cluster_lib.is_loopback_host('[::1]:2222')
  assert not cluster_lib.is_loopback_host('10.0.0.1:2222')
  assert warnings_logged == []


def test_start_server_warns_for_an_exposed_cluster(warnings_logged):
  # 127.0.0.1 for this task (it must bind), a documentation address for a peer.
  own, = _addresses(1)
  config = _config({'chief': [own], 'worker': ['192.0.2.10:2222']}, 'chief')
  config.start_server()
  assert any('listens on port %s' % own.rsplit(':', 1)[1] in m for m in warnings_logged)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
