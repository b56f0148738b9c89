"""cluster_runtime's done signal: what a ps does with FINISHED, PREEMPTED and FAILED tokens.

In-process TF servers (a chief and a ps) on loopback; the ps loop runs in a
thread (so SIGTERM handling, main thread only, stays out of these tests; the
cluster tests in tests/trainer/test_cluster_faults.py cover it).
"""

import sys
import threading

import pytest
import tensorflow as tf

from deployment import cluster as cluster_lib
from deployment import cluster_runtime
from deployment import exit_codes
from tests import cluster_util

tf.compat.v1.disable_eager_execution()


@pytest.fixture(scope='module')
def cluster():
  """A started chief and ps; returns (chief ClusterConfig, ps ClusterConfig, ps server)."""
  jobs = cluster_util.local_cluster(num_workers=0, num_ps=1, chief=True)
  chief = cluster_lib.ClusterConfig(jobs, 'chief', 0)
  ps = cluster_lib.ClusterConfig(jobs, 'ps', 0)
  chief.start_server()
  return chief, ps, ps.start_server()


def _serve_in_thread(ps, server):
  """Runs the ps loop in a thread; returns (thread, {'code' or 'error': ...})."""
  outcome = {}

  def serve():
    try:
      outcome['code'] = cluster_runtime.serve_until_training_done(
          server, ps, chief_timeout_secs=60, startup_timeout_secs=60)
    except Exception as e:  # pylint: disable=broad-except
      outcome['error'] = e
  thread = threading.Thread(target=serve, daemon=True)
  thread.start()
  return thread, outcome


def _signal(chief, status, reason=''):
  cluster_runtime.signal_training_done(chief.master, chief, timeout_secs=20, status=status,
                                       reason=reason)


def test_preempted_chief_alone_keeps_the_ps_serving_and_finished_ends_it(cluster):
  chief, ps, server = cluster
  thread, outcome = _serve_in_thread(ps, server)
  _signal(chief, cluster_runtime.PREEMPTED)
  thread.join(6)  # Three polls of the ps.
  assert thread.is_alive(), outcome
  _signal(chief, cluster_runtime.FINISHED)
  thread.join(30)
  assert not thread.is_alive()
  assert outcome == {'code': exit_codes.DONE}


def test_failed_token_ends_the_ps_with_the_chiefs_reason(cluster):
  chief, ps, server = cluster
  thread, outcome = _serve_in_thread(ps, server)
  _signal(chief, cluster_runtime.FAILED, 'no gradients from /job:worker/task:1')
  thread.join(30)
  assert not thread.is_alive()
  assert isinstance(outcome.get('error'), cluster_runtime.JobFailedError), outcome
  assert str(outcome['error']) == (
      'ps task 0: the chief ended the job: no gradients from /job:worker/task:1')


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
