"""cluster_runtime's done signal: what a ps does with FINISHED, PREEMPTED and FAILED tokens.

In-process TF servers (a chief and a ps) on loopback; the ps loop runs in a
thread (so SIGTERM handling, main thread only, stays out of these tests; the
cluster tests in tests/trainer/test_cluster_faults.py cover it).
"""

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from deployment import cluster as cluster_lib
from deployment import cluster_runtime
from deployment import exit_codes
from tests import cluster_util
from tests import test_util

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


def test_last_words_to_a_ps_that_exits_before_the_close_neither_raise_nor_hang(caplog):
  # A whole job ending: a worker tells a ps it stopped, and the ps exits before the
  # worker's session closes. That close waited for the ps for good (the
  # operation timeout does not bound it), holding a removed worker until its
  # termination grace ran out.
  local_port, ps_port = test_util.pick_unused_ports(2)
  spec = {'worker': ['127.0.0.1:%d' % local_port], 'ps': ['127.0.0.1:%d' % ps_port]}
  ps = subprocess.Popen(
      [sys.executable, '-c', 'import time, tensorflow as tf\n'
       'tf.distribute.Server(tf.train.ClusterSpec(%r), job_name="ps", task_index=0)\n'
       'print("serving", flush=True)\ntime.sleep(600)\n' % spec],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    assert ps.stdout.readline().strip() == 'serving'
    server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name='worker',
                                  task_index=0)

    def ps_exits():  # runs on this task once the enqueue on the ps is done
      time.sleep(1)  # the ps's answer to its part of the run has arrived by then
      ps.kill()
      ps.wait()
      return np.int64(0)

    with tf.Graph().as_default() as graph:
      with tf.compat.v1.device('/job:ps/task:0'):
        told = tf.queue.FIFOQueue(1, tf.string, shared_name='done').enqueue(['stopped'])
      with tf.compat.v1.device('/job:worker/task:0'), tf.control_dependencies([told]):
        fetch = tf.compat.v1.py_func(ps_exits, [], tf.int64)
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=2000)
    outcome = []
    abandoned_before = len(cluster_runtime.abandoned_closes)
    # In a thread: the unbounded close hung this test for good (6 runs of 7).
    call = threading.Thread(target=lambda: outcome.append(cluster_runtime.run_once_quietly(
        server.target, graph, config, fetch, 'could not tell the ps')), daemon=True)
    start = time.time()
    call.start()
    call.join(60)
    assert not call.is_alive(), 'still closing after 60 s (the bound is 2 s)'
    assert outcome == [True], caplog.text
    assert time.time() - start < 30
    # When the close did not finish (most runs), it says so and goes on.
    closed_late = 'could not tell the ps (closing its session): no answer within 2 s'
    if len(cluster_runtime.abandoned_closes) > abandoned_before:
      assert closed_late in caplog.text
  finally:
    ps.kill()
    ps.wait()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
