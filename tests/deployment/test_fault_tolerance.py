"""fault_tolerance and replica_watch: watchdogs, SIGTERM in a blocked run, replica stamps."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import tensorflow as tf

from deployment import exit_codes
from deployment import fault_tolerance
from deployment import replica_watch
from tests import cluster_util

tf.compat.v1.disable_eager_execution()

# A python program blocked for good inside TensorFlow (a dequeue on an empty queue).
_BLOCKED_PROGRAM = textwrap.dedent('''
    import signal, sys, tensorflow as tf
    from deployment import fault_tolerance
    tf.compat.v1.disable_eager_execution()
    queue = tf.queue.FIFOQueue(1, [tf.int32], shapes=[[]])
    dequeue = queue.dequeue()
    %s
    print('BLOCKING', flush=True)
    with tf.compat.v1.Session() as sess:
      sess.run(dequeue)
    print('UNBLOCKED', flush=True)
''')


def _run_blocked(tmp_path, setup, send_sigterm=False, timeout=60):
  """Runs _BLOCKED_PROGRAM with `setup` inserted; returns (exit code, output)."""
  script = tmp_path / 'blocked.py'
  script.write_text(_BLOCKED_PROGRAM % setup)
  env = dict(os.environ, PYTHONPATH=cluster_util.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL='2',
             CUDA_VISIBLE_DEVICES='')
  process = subprocess.Popen([sys.executable, '-u', str(script)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env, cwd=cluster_util.REPO_ROOT)
  lines = []
  try:
    for line in process.stdout:
      lines.append(line.decode(errors='replace'))
      if 'BLOCKING' in line.decode(errors='replace'):
        break
    if send_sigterm:
      time.sleep(0.5)
      process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=timeout)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  lines.append(process.stdout.read().decode(errors='replace'))
  return code, ''.join(lines)


@pytest.mark.cluster
def test_watchdog_ends_a_process_blocked_in_a_session_run(tmp_path):
  code, output = _run_blocked(
      tmp_path, "fault_tolerance.Watchdog(1.0, 129, 'stuck; giving up').start()")
  assert code == exit_codes.RETRYABLE, output
  assert 'stuck; giving up' in output
  assert 'UNBLOCKED' not in output


def test_cancelled_watchdog_does_nothing():
  fired = []
  watchdog = fault_tolerance.Watchdog(0.3, 129, 'x', last_words=lambda: fired.append(1))
  watchdog.start()
  assert watchdog.active
  watchdog.cancel()
  time.sleep(0.6)
  assert not watchdog.active and not fired


@pytest.mark.cluster
def test_signal_watch_hears_sigterm_while_the_main_thread_is_blocked(tmp_path):
  # The Python handler would only run after the blocked run returns (never);
  # the watch's thread acts at once.
  setup = textwrap.dedent('''
      signal.signal(signal.SIGTERM, lambda *unused: print('HANDLER', flush=True))
      fault_tolerance.SignalWatch(
          lambda signum: fault_tolerance.exit_now(128 + signum, 'got signal %d' % signum)
      ).install()''')
  code, output = _run_blocked(tmp_path, setup, send_sigterm=True)
  assert code == 143, output
  assert 'got signal 15' in output
  assert 'HANDLER' not in output and 'UNBLOCKED' not in output


def test_task_names_come_from_error_messages():
  message = ('Socket closed ... /job:ps/replica:0/task:1 and then '
             '/job:worker/replica:0/task:0 and /job:ps/replica:0/task:1 again')
  assert fault_tolerance.task_names(message) == ['/job:ps/task:1', '/job:worker/task:0']
  assert fault_tolerance.task_names('') == []


def test_recovery_logs_restored_step_and_lost_steps(caplog):
  recovery = fault_tolerance.Recovery(timeout_secs=60)
  error = tf.errors.UnavailableError(None, None, 'Connection reset by peer from '
                                     '/job:ps/replica:0/task:1')
  recovery.lost(error, last_step=57)
  assert recovery.recovering
  with socket.socket() as listener:  # The peer "is back".
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    recovery.wait_for(['127.0.0.1:%d' % listener.getsockname()[1]], ['/job:ps/task:1'])
  with caplog.at_level('WARNING'):
    recovery.resumed(50)
  assert not recovery.recovering
  assert ('recovered from a lost peer: restored global step 50, 7 step(s) lost '
          '(/job:ps/task:1 was lost at global step 57)') in caplog.text
  recovery.resumed(51)  # Not recovering any more: nothing logged twice.
  assert caplog.text.count('recovered from a lost peer') == 1


def _replica_graph():
  graph = tf.Graph()
  with graph.as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    names = ['/job:chief/task:0', '/job:worker/task:0', '/job:worker/task:1']
    progress = replica_watch.ReplicaProgress(names, device='/cpu:0')
    stamps = {n: progress.stamp(n, global_step.read_value(), after=[]) for n in names}
    advance = global_step.assign_add(1)
  return graph, global_step, progress, stamps, advance


def test_replica_progress_reads_stamps_and_never_delivered():
  graph, _, progress, stamps, advance = _replica_graph()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    assert progress.read(sess) == dict.fromkeys(progress.replica_names)
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:1']])
    sess.run(advance)
    sess.run(stamps['/job:chief/task:0'])
    assert progress.read(sess) == {'/job:chief/task:0': 1, '/job:worker/task:0': None,
                                   '/job:worker/task:1': 0}
    # The stamps are no variables of the graph: savers and initialisers skip them.
    assert len(graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)) == 1


def test_replica_monitor_names_the_missing_replica_after_the_timeout():
  graph, global_step, progress, stamps, advance = _replica_graph()
  timed_out = threading.Event()
  messages = []

  def on_timeout(message, unused_sess):
    messages.append(message)
    timed_out.set()

  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(advance)
    sess.run(list(stamps.values()))   # Everyone delivered for step 1...
    sess.run(advance)                 # ...step 2 starts, worker 1 never delivers.
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=1.0,
                                             on_timeout=on_timeout, poll_secs=0.1)
    monitor.start(sess)
    assert timed_out.wait(30)
    monitor.stop()
  assert len(messages) == 1
  assert messages[0].startswith('sync replicas: no gradients from /job:worker/task:1 for '
                                'global step 2 in ')
  assert 'deploy_config.replica_timeout_secs=1)' in messages[0]


def test_replica_monitor_names_only_the_silent_replica_among_the_late_ones():
  # Worker 0's gradients are stale too (it waits for a token), but its
  # heartbeat goes on: only worker 1, silent, is named.
  graph, global_step, progress, stamps, advance = _replica_graph()
  messages = []
  timed_out = threading.Event()
  alive = threading.Event()

  def on_timeout(message, unused_sess):
    messages.append(message)
    timed_out.set()

  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(list(stamps.values()))   # Everyone delivered for step 0...
    sess.run(advance)                 # ...step 1: only the chief delivers.
    sess.run(stamps['/job:chief/task:0'])

    def worker0_heartbeat():
      count = 0
      while not alive.is_set():
        count += 1
        progress.beat(sess, '/job:worker/task:0', count)
        time.sleep(0.05)
    beating = threading.Thread(target=worker0_heartbeat, daemon=True)
    beating.start()
    monitor = replica_watch.ReplicaMonitor(
        progress, global_step, timeout_secs=1.0, on_timeout=on_timeout, poll_secs=0.1,
        replica_name='/job:chief/task:0', silent_secs=0.5)
    monitor.start(sess)
    assert timed_out.wait(30)
    monitor.stop()
    alive.set()
    beating.join()
    assert progress.heartbeats(sess)['/job:worker/task:1'] is None
  assert messages[0].startswith('sync replicas: no gradients from /job:worker/task:1 for '
                                'global step 1 in ')


def test_replica_monitor_ignores_the_end_of_training():
  graph, global_step, progress, _, advance = _replica_graph()
  timed_out = threading.Event()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(advance)
    monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=0.5,
                                             on_timeout=lambda *unused: timed_out.set(),
                                             final_step=1, poll_secs=0.1)
    monitor.start(sess)
    assert not timed_out.wait(2.0)
    monitor.stop()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
