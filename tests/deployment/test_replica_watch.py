"""deployment.replica_watch: sync replicas that stopped delivering gradients, named.

In-process sessions on real graphs: the stamps and heartbeats on a device, the
monitor's verdicts (late, silent, left, the end of training) and how it
follows a session the Supervisor rebuilt. The cluster tests of the same watch
(a replica killed or cut off) are in tests/trainer/test_cluster_faults.py.
"""

import logging as py_logging
import re
import sys
import threading
import time

import pytest
import tensorflow as tf

from deployment import replica_watch

tf.compat.v1.disable_eager_execution()


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


def test_a_replica_that_never_showed_up_is_missing_only_after_the_startup_timeout():
  # Worker 1 has neither delivered nor beaten: still starting (a pod pulling its
  # image, a loaded machine building its graph), as long as startup_secs allow.
  graph, global_step, progress, stamps, advance = _replica_graph()
  timed_out = threading.Event()
  timed_out_at = []

  def on_timeout(message, unused_sess):
    timed_out_at.append((time.time(), message))
    timed_out.set()

  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    sess.run(advance)
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=0.5,
                                           on_timeout=on_timeout, poll_secs=0.1,
                                           startup_secs=3.0)
    started = time.time()
    monitor.start(sess)
    assert timed_out.wait(30)
    monitor.stop()
  when, message = timed_out_at[0]
  assert when - started >= 3.0 + 0.5, when - started
  assert message.startswith('sync replicas: no gradients from /job:worker/task:1 for '
                            'global step 1 in ')


def test_a_replica_that_delivered_once_gets_no_startup_grace():
  graph, global_step, progress, stamps, advance = _replica_graph()
  timed_out = threading.Event()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(list(stamps.values()))   # worker 1 delivered for step 0, then went quiet
    sess.run(advance)
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    monitor = replica_watch.ReplicaMonitor(
        progress, global_step, timeout_secs=0.5, on_timeout=lambda *_: timed_out.set(),
        poll_secs=0.1, startup_secs=3600.0)
    monitor.start(sess)
    assert timed_out.wait(30)
    monitor.stop()


def test_replica_monitor_follows_the_session_the_supervisor_rebuilt():
  # A sync chief whose session ended by an error trains on in a new one
  # (tf-slim's retry); the monitor started with the first session must watch
  # through the new one, or a replica lost afterwards stalls the job for good.
  graph, global_step, progress, stamps, advance = _replica_graph()
  server = tf.distribute.Server.create_local_server()
  timed_out = threading.Event()
  sessions = []

  def on_timeout(unused_message, sess):
    sessions.append(sess)
    timed_out.set()

  monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=1.0,
                                         on_timeout=on_timeout, poll_secs=0.1)
  with graph.as_default():
    initialize = tf.compat.v1.global_variables_initializer()
  first = tf.compat.v1.Session(server.target, graph=graph)
  first.run(initialize)
  first.run(list(stamps.values()))
  monitor.start(first)
  first.close()
  with tf.compat.v1.Session(server.target, graph=graph) as second:
    monitor.start(second)
    second.run(advance)   # Step 1 starts; worker 1 never delivers for it.
    second.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    assert timed_out.wait(30), 'the monitor stayed on the closed first session'
    monitor.stop()
  assert sessions == [second]


def test_replica_monitor_says_when_it_cannot_read_the_progress(caplog):
  # Its reads failing for good (here: a closed session nothing replaced) left
  # the watch silent: a stalled job then gave no hint why nobody ended it.
  graph, global_step, progress, _, _ = _replica_graph()
  monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=3.0,
                                         on_timeout=lambda *_: None, poll_secs=0.1)
  sess = tf.compat.v1.Session(graph=graph)
  sess.close()
  with caplog.at_level(py_logging.WARNING):
    monitor.start(sess)
    deadline = time.time() + 30
    while time.time() < deadline and not [
        r for r in caplog.records if 'cannot read' in r.getMessage()]:
      time.sleep(0.1)
    monitor.stop()
  warnings = [r.getMessage() for r in caplog.records if 'cannot read' in r.getMessage()]
  assert warnings, 'no warning while every read failed'
  assert re.match(r'sync replicas: the replica watch cannot read the replicas\' progress '
                  r'for [0-9]+ s \(RuntimeError: .*closed.*\); it names missing replicas once '
                  r'it can again$', warnings[0]), warnings[0]


def _chief_monitor_message_while_worker0_beats(delivered_at_step_1, last_beats=()):
  """Step 1 stays stuck; returns (the chief monitor's timeout message, the heartbeats).

  Everyone delivered for step 0; for step 1 only `delivered_at_step_1` did.
  Worker 0 beats all along (alive, waiting for a token); the replicas of
  `last_beats` beat once, then never again (dead).
  """
  graph, global_step, progress, stamps, advance = _replica_graph()
  messages = []
  timed_out = threading.Event()
  alive = threading.Event()

  def on_timeout(message, unused_sess):
    messages.append(message)
    timed_out.set()

  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(list(stamps.values()))
    sess.run(advance)
    sess.run([stamps[name] for name in delivered_at_step_1])
    for name in last_beats:
      progress.beat(sess, name, 1)

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
    heartbeats = progress.heartbeats(sess)
  return messages[0], heartbeats


def test_replica_monitor_names_only_the_silent_replica_among_the_late_ones():
  # Worker 0's gradients are stale too (it waits for a token), but its
  # heartbeat goes on: only worker 1, late and never beating, is named.
  message, heartbeats = _chief_monitor_message_while_worker0_beats(['/job:chief/task:0'])
  assert heartbeats['/job:worker/task:1'] is None
  assert message.startswith('sync replicas: no gradients from /job:worker/task:1 for '
                            'global step 1 in ')


def test_replica_monitor_names_the_silent_replica_that_took_the_last_token():
  # CI's case: worker 1 took the token worker 0 waits for, delivered for the
  # current step and died; worker 0 is the only late replica but still beats.
  # The step is stuck because of worker 1, so worker 1 is named, not worker 0.
  message, _ = _chief_monitor_message_while_worker0_beats(
      ['/job:chief/task:0', '/job:worker/task:1'], last_beats=['/job:worker/task:1'])
  assert message.startswith('sync replicas: no gradients from /job:worker/task:1 for '
                            'global step 1 in ')


def test_a_replica_that_left_on_purpose_is_not_waited_for_until_it_delivers_again():
  graph, global_step, progress, stamps, advance = _replica_graph()
  timed_out = threading.Event()
  with tf.compat.v1.Session(graph=graph) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(list(stamps.values()))
    # Worker 1 is removed (a scale-down): it records that it leaves, then the job goes on.
    leaver = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=0.5,
                                          on_timeout=lambda *unused: None,
                                          replica_name='/job:worker/task:1')
    leaver.leave(sess)
    assert progress.left(sess) == {'/job:worker/task:1'}
    sess.run(advance)
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    monitor = replica_watch.ReplicaMonitor(progress, global_step, timeout_secs=0.5,
                                           on_timeout=lambda *unused: timed_out.set(),
                                           poll_secs=0.1)
    monitor.start(sess)
    assert not timed_out.wait(2.0)  # 4 timeouts long: worker 1 is not missing
    # Back in the job, it delivers: waited for again.
    sess.run(stamps['/job:worker/task:1'])
    assert progress.left(sess) == set()
    sess.run(advance)
    sess.run([stamps['/job:chief/task:0'], stamps['/job:worker/task:0']])
    assert timed_out.wait(30)
    monitor.stop()


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
