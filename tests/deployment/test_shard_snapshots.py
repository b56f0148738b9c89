"""deployment.shard_snapshots on a real cluster: a worker and 2 or 3 ps servers in this process.

A ps "lost and back empty" is simulated by destroying every variable
resource held on it (the model's and the snapshots it holds), which leaves
exactly what a restarted ps has: nothing. The checkpoint holds global step
40, a=1, b=2, c=3 and p=[10..13] (tests/deployment/shard_testlib.py).
"""

import logging
import sys
import threading

import pytest
import tensorflow as tf

from deployment import model_deploy
from deployment import monitored_training
from deployment import shard_restore
from deployment import shard_snapshots
from tests import test_util
from tests.deployment import shard_testlib as base

tf.compat.v1.disable_eager_execution()


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
  return base.write_checkpoint(str(tmp_path_factory.mktemp('ckpt') / 'model.ckpt'))


_SERVERS = []  # Kept alive for the whole test process.


def _cluster(num_ps):
  """A fresh in-process cluster with `num_ps` ps: (worker target, ClusterSpec)."""
  ports = test_util.pick_unused_ports(1 + num_ps)
  spec = tf.train.ClusterSpec({'worker': ['localhost:%d' % ports[0]],
                               'ps': ['localhost:%d' % p for p in ports[1:]]})
  tasks = [('worker', 0)] + [('ps', i) for i in range(num_ps)]
  servers = [tf.distribute.Server(spec, job_name=job, task_index=index, start=True)
             for job, index in tasks]
  _SERVERS.extend(servers)
  return servers[0].target, spec


def _graph(spec, num_ps=2, interval=0.0):
  """The test variables round robin on the ps tasks, and a ShardRestoringSaver."""
  with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
      ps_tasks=num_ps, worker_device='/job:worker/task:0', cluster=spec)):
    variables = base.build_variables()
  saver = shard_restore.ShardRestoringSaver(
      var_list=model_deploy.savable_variables(), snapshot_interval_secs=interval)
  return variables, saver


def _set_all(sess, value, step):
  """Every model variable to `value`, the global step to `step`."""
  step_var = tf.compat.v1.train.get_global_step()
  sess.run([tf.compat.v1.assign(v, tf.fill(tf.shape(v), tf.cast(
      step if v is step_var else value, v.dtype.base_dtype)))
            for v in tf.compat.v1.global_variables()])


def _lose(sess, task_index):
  """ps `task_index` comes back empty: every variable resource on it is destroyed."""
  handles = [op.outputs[0] for op in tf.compat.v1.get_default_graph().get_operations()
             if op.type == 'VarHandleOp' and
             tf.DeviceSpec.from_string(op.device).task == task_index and
             tf.DeviceSpec.from_string(op.device).job == 'ps']
  sess.run([tf.raw_ops.DestroyResourceOp(resource=h, ignore_lookup_error=True)
            for h in handles])


def _start_and_snapshot(num_ps, interval=3600.0):
  """A cluster, the graph, a session at values 7 / step 50 copied once, then values 9 / step 60.

  Returns:
    (variables, saver, sess, target).
  """
  target, spec = _cluster(num_ps)
  variables, saver = _graph(spec, num_ps, interval)
  sess = tf.compat.v1.Session(target)
  sess.run(tf.compat.v1.global_variables_initializer())
  _set_all(sess, 7.0, 50)
  assert set(saver.snapshots.copy(sess).values()) == {None}
  _set_all(sess, 9.0, 60)
  return variables, saver, sess, target


def test_a_lost_shard_comes_from_its_snapshot_not_the_checkpoint(checkpoint, caplog):
  with tf.Graph().as_default():
    variables, saver, sess, _ = _start_and_snapshot(2)
    with sess, caplog.at_level(logging.INFO):
      _lose(sess, 1)
      saver.restore(sess, checkpoint)
      # a, c and p's second slice (ps 1) as copied at step 50; ps 0 kept 9 and step 60.
      assert base.values(sess, variables) == {
          'global_step': 60, 'a': 7.0, 'b': 9.0, 'c': 7.0, 'p': [9., 9., 7., 7.]}
      assert sess.run(tf.compat.v1.report_uninitialized_variables()).size == 0
  messages = [r.getMessage() for r in caplog.records]
  assert any(m.startswith('restored the 3 variables of /job:ps/task:1 from its snapshot on '
                          '/job:ps/task:0 (global step 50: ') and
             ' s, 10 steps old); kept the current values '
             'of /job:ps/task:0 (3 variables)' in m for m in messages), messages


def test_a_new_graph_after_the_loss_finds_the_snapshot_taken_by_the_old_one(checkpoint):
  # A new graph finds the copies an earlier graph took (same variable names).
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    _, saver = _graph(spec, interval=3600.0)
    with tf.compat.v1.Session(target) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      _set_all(sess, 7.0, 50)
      saver.snapshots.copy(sess)
      _lose(sess, 1)
  with tf.Graph().as_default():
    variables, saver = _graph(spec, interval=3600.0)
    with tf.compat.v1.Session(target) as sess:
      saver.restore(sess, checkpoint)
      assert base.values(sess, variables) == {
          'global_step': 50, 'a': 7.0, 'b': 7.0, 'c': 7.0, 'p': [7., 7., 7., 7.]}


def test_the_global_step_shard_lost_rolls_the_step_back_to_the_snapshot(checkpoint, caplog):
  with tf.Graph().as_default():
    variables, saver, sess, _ = _start_and_snapshot(2)
    with sess, caplog.at_level(logging.INFO):
      _lose(sess, 0)
      saver.restore(sess, checkpoint)
      assert base.values(sess, variables) == {
          'global_step': 50, 'a': 9.0, 'b': 7.0, 'c': 9.0, 'p': [7., 7., 9., 9.]}
  assert any('snapshot on /job:ps/task:1 (global step 50: ' in r.getMessage() and
             ' s old); kept the current values of /job:ps/task:1' in
             r.getMessage() for r in caplog.records)


def test_the_copy_a_lost_holder_held_is_the_first_of_the_next_rounds(checkpoint, caplog):
  # ps 0 holds ps 1's copy: after ps 0 is lost, ps 1's copy goes first until written.
  with tf.Graph().as_default():
    _, saver, sess, _ = _start_and_snapshot(2)
    snapshots = saver.snapshots
    assert snapshots.copy_order() == ['/job:ps/task:0', '/job:ps/task:1']
    # On slimtrain's logger itself: another test of this process may have left it at WARNING.
    with sess, caplog.at_level(logging.INFO, logger='tensorflow'):
      _lose(sess, 0)
      saver.restore(sess, checkpoint)
      assert snapshots.copy_order() == ['/job:ps/task:1', '/job:ps/task:0']
      assert not sess.run(snapshots._shards['/job:ps/task:1'].stamped)
      _lose(sess, 1)  # A copy that fails stays first.
      assert list(snapshots.copy(sess).items())[0][0] == '/job:ps/task:1'
      assert snapshots.copy_order() == ['/job:ps/task:1', '/job:ps/task:0']
  assert any(r.getMessage() == 'the snapshots of /job:ps/task:1 were lost with their '
             'holder: copied first from now on' for r in caplog.records)
  with tf.Graph().as_default():
    _, saver, sess, _ = _start_and_snapshot(2)
    with sess:
      _lose(sess, 0)
      saver.restore(sess, checkpoint)
      outcome = saver.snapshots.copy(sess)
      assert list(outcome.items()) == [('/job:ps/task:1', None), ('/job:ps/task:0', None)]
      assert sess.run(saver.snapshots._shards['/job:ps/task:1'].stamped)
      assert saver.snapshots.copy_order() == ['/job:ps/task:0', '/job:ps/task:1']


def test_a_shard_whose_holder_was_lost_too_comes_from_the_checkpoint(checkpoint, caplog):
  # Three ps: the shard of ps 1 is held on ps 2, that of ps 2 on ps 0.
  with tf.Graph().as_default():
    variables, saver, sess, _ = _start_and_snapshot(3)
    assert [saver.snapshots.holder_of('/job:ps/task:%d' % i) for i in range(3)] == [
        '/job:ps/task:1', '/job:ps/task:2', '/job:ps/task:0']
    with sess, caplog.at_level(logging.INFO):
      _lose(sess, 1)
      _lose(sess, 2)
      saver.restore(sess, checkpoint)
      # Round robin on 3 ps: global_step ps0, a ps1, b ps2, c ps0, p's slices ps1 and ps2.
      assert base.values(sess, variables) == {
          'global_step': 60, 'a': 1.0, 'b': 7.0, 'c': 9.0, 'p': [10., 11., 7., 7.]}
  messages = [r.getMessage() for r in caplog.records]
  assert any(m.startswith('restored the 2 variables of /job:ps/task:1 from %s; ' % checkpoint)
             and m.endswith('(no live snapshot: /job:ps/task:2 was lost too)')
             for m in messages), messages
  assert any(m.startswith('restored the 2 variables of /job:ps/task:2 from its snapshot on '
                          '/job:ps/task:0') for m in messages), messages


def test_no_snapshot_taken_yet_comes_from_the_checkpoint(checkpoint, caplog):
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    variables, saver = _graph(spec, interval=3600.0)
    with tf.compat.v1.Session(target) as sess, caplog.at_level(logging.INFO):
      sess.run(tf.compat.v1.global_variables_initializer())
      _lose(sess, 1)
      saver.restore(sess, checkpoint)
      assert base.values(sess, variables)['a'] == 1.0
  assert any(m.getMessage().endswith('(no snapshot on /job:ps/task:0 yet)')
             for m in caplog.records)


def test_a_snapshot_older_than_the_checkpoint_gives_way_to_it(checkpoint, caplog):
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    variables, saver = _graph(spec, interval=3600.0)
    with tf.compat.v1.Session(target) as sess, caplog.at_level(logging.INFO):
      sess.run(tf.compat.v1.global_variables_initializer())
      _set_all(sess, 7.0, 30)  # The checkpoint is of global step 40.
      saver.snapshots.copy(sess)
      _set_all(sess, 9.0, 60)
      _lose(sess, 1)
      saver.restore(sess, checkpoint)
      assert base.values(sess, variables) == {
          'global_step': 60, 'a': 1.0, 'b': 9.0, 'c': 3.0, 'p': [9., 9., 12., 13.]}
  assert any(m.getMessage().endswith(
      '(its snapshot on /job:ps/task:0 is of global step 30, older)') for m in caplog.records)


def test_disabled_snapshots_build_nothing_and_restore_from_the_checkpoint(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    variables, saver = _graph(spec, interval=0)
    assert saver.snapshots is None
    assert not any('shard_snapshot' in op.name
                   for op in tf.compat.v1.get_default_graph().get_operations())
    with tf.compat.v1.Session(target) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      _set_all(sess, 9.0, 60)
      _lose(sess, 1)
      saver.restore(sess, checkpoint)
      assert base.values(sess, variables) == {
          'global_step': 60, 'a': 1.0, 'b': 9.0, 'c': 3.0, 'p': [9., 9., 12., 13.]}


def test_sync_replicas_and_a_single_ps_take_no_snapshots():
  with tf.Graph().as_default():
    _, spec = _cluster(2)
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(ps_tasks=2, cluster=spec)):
      base.build_variables()
    everything = shard_restore.ShardRestore(tf.compat.v1.global_variables(), partial=False,
                                            snapshot_interval_secs=5)
    assert everything.snapshots is None
  with tf.Graph().as_default():
    with tf.compat.v1.device('/job:ps/task:0'):
      base.build_variables()
    one_ps = shard_restore.ShardRestore(tf.compat.v1.global_variables(),
                                        snapshot_interval_secs=5)
    assert one_ps.snapshots is None


def test_snapshots_stay_out_of_checkpoints_and_the_ready_op(tmp_path):
  with tf.Graph().as_default():
    variables, saver, sess, _ = _start_and_snapshot(2)
    snapshot_vars = [op.name for op in tf.compat.v1.get_default_graph().get_operations()
                     if op.type == 'VarHandleOp' and op.name.startswith('shard_snapshot/')]
    # Each shard: a copy per variable (3 each) plus the step and the wall time.
    assert len(snapshot_vars) == 10, snapshot_vars
    with sess:
      path = saver.save(sess, str(tmp_path / 'model.ckpt'), global_step=60)
      # Drop the snapshots held on ps 1: the ready op still has nothing to report.
      _lose_snapshots_only(sess, 1)
      assert sess.run(tf.compat.v1.report_uninitialized_variables()).size == 0
    del variables
  names = [name for name, _ in tf.train.list_variables(path)]
  assert names and not any('shard_snapshot' in name for name in names), names
  for key in (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES):
    assert not any('shard_snapshot' in v.name for v in tf.compat.v1.get_collection(key))


def _lose_snapshots_only(sess, task_index):
  handles = [op.outputs[0] for op in tf.compat.v1.get_default_graph().get_operations()
             if op.type == 'VarHandleOp' and op.name.startswith('shard_snapshot/') and
             tf.DeviceSpec.from_string(op.device).task == task_index]
  sess.run([tf.raw_ops.DestroyResourceOp(resource=h) for h in handles])


def test_the_copy_thread_refreshes_skips_a_lost_ps_and_stops(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    variables, saver = _graph(spec, interval=0.05)
    snapshots = saver.snapshots
    with tf.compat.v1.Session(target) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      _set_all(sess, 5.0, 45)  # Past the checkpoint's 40: the snapshot is the younger.
      snapshots.start(sess)
      thread = snapshots._thread
      snapshots.start(sess)  # Already running on this session: the same thread.
      assert snapshots._thread is thread and snapshots.running
      _wait_for(lambda: snapshots.rounds >= 2)
      # ps 1 lost while the thread runs: its copies fail, the thread goes on.
      _lose(sess, 1)
      rounds = snapshots.rounds
      _wait_for(lambda: snapshots.rounds >= rounds + 2)
      assert snapshots.running
      # ps 1's shard cannot be read; ps 0's is copied onto the empty ps 1 anew.
      outcome = snapshots.copy(sess)
      assert outcome['/job:ps/task:0'] is None and outcome['/job:ps/task:1'], outcome
      assert snapshots.stop() is True
      assert not snapshots.running and not thread.is_alive()
      assert snapshots.stop() is True  # Twice is harmless.
      saver.restore(sess, checkpoint)
      # ps 1's shard as the thread copied it (5), ps 0's untouched.
      assert base.values(sess, variables) == {
          'global_step': 45, 'a': 5.0, 'b': 5.0, 'c': 5.0, 'p': [5., 5., 5., 5.]}
  assert not any(t.name == 'shard_snapshots' and t is thread
                 for t in threading.enumerate())


def test_the_copy_thread_ends_when_its_session_is_closed():
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    _, saver = _graph(spec, interval=0.05)
    sess = tf.compat.v1.Session(target)
    sess.run(tf.compat.v1.global_variables_initializer())
    saver.snapshots.start(sess)
    thread = saver.snapshots._thread
    sess.close()  # As the Supervisor closes a session broken by a lost ps.
    thread.join(30)
    assert not thread.is_alive()
    assert saver.snapshots.stop() is True


def test_the_estimator_chief_copies_on_each_session_it_creates(tmp_path):
  with tf.Graph().as_default():
    target, spec = _cluster(2)
    _graph(spec)  # The variables; the chief's ShardRestore comes from the scaffold.
    scaffold = tf.compat.v1.train.Scaffold()
    restore = monitored_training._shard_restore_for(scaffold, snapshot_interval_secs=3600)
    assert restore.snapshots is not None
    creator = monitored_training._ChiefSessionCreator(scaffold, target, None, str(tmp_path),
                                                      restore_by_shard=restore)
    first = creator.create_session()
    thread = restore.snapshots._thread
    assert restore.snapshots.running and thread.sess is first
    second = creator.create_session()  # As after a lost ps: the old copies stop first.
    assert not thread.is_alive() and restore.snapshots._thread.sess is second
    creator.stop_snapshots()
    assert not restore.snapshots.running
    for sess in (first, second):
      sess.close()


def _wait_for(condition, timeout=60.0):
  """Polls `condition` (the thread's own progress) with a generous bound."""
  deadline = threading.Event()
  for _ in range(int(timeout / 0.01)):
    if condition():
      return
    deadline.wait(0.01)
  raise AssertionError('condition not met within %g s' % timeout)


def test_stamps_name_the_global_step_of_the_copy():
  with tf.Graph().as_default():
    _, saver, sess, _ = _start_and_snapshot(2)
    with sess:
      snapshot, why = saver.snapshots.restore(sess, '/job:ps/task:1', [])
      assert why == '' and isinstance(snapshot, shard_snapshots.Snapshot)
      assert (snapshot.holder, snapshot.step) == ('/job:ps/task:0', 50)
      assert 0 <= snapshot.age_secs < 60


def test_rounds_start_one_interval_apart_and_a_long_round_is_followed_at_once():
  assert shard_snapshots.pause_after(0.25, 5.0) == 4.75
  assert shard_snapshots.pause_after(5.0, 5.0) == 0.0
  assert shard_snapshots.pause_after(12.0, 5.0) == 0.0


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
