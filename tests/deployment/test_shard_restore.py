"""deployment.shard_restore on a real cluster: one worker and two ps servers in this process.

A ps that "came back empty" is a ps whose variables this test leaves
uninitialised in a fresh cluster; the checkpoint is written beforehand from
a plain local graph with the same variable names.
"""

import logging
import sys

import pytest
import tensorflow as tf

from deployment import model_deploy
from deployment import monitored_training
from deployment import shard_restore
from tests import test_util
from tests.deployment import shard_testlib

tf.compat.v1.disable_eager_execution()

_CHECKPOINT_VALUES = shard_testlib.CHECKPOINT_VALUES
_build_variables = shard_testlib.build_variables
_values = shard_testlib.values


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
  return shard_testlib.write_checkpoint(str(tmp_path_factory.mktemp('ckpt') / 'model.ckpt'))


def _cluster():
  """A fresh in-process cluster: (worker target, ClusterSpec)."""
  ports = test_util.pick_unused_ports(3)
  spec = tf.train.ClusterSpec({'worker': ['localhost:%d' % ports[0]],
                               'ps': ['localhost:%d' % p for p in ports[1:]]})
  servers = [tf.distribute.Server(spec, job_name=job, task_index=index, start=True)
             for job, index in (('worker', 0), ('ps', 0), ('ps', 1))]
  _cluster.servers.extend(servers)  # Kept alive for the whole test process.
  return servers[0].target, spec


_cluster.servers = []


def _cluster_graph(spec, partial=True):
  """The variables placed round robin on the two ps, and their saver."""
  with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
      ps_tasks=2, worker_device='/job:worker/task:0', cluster=spec)):
    variables = _build_variables()
  saver = shard_restore.ShardRestoringSaver(
      var_list=model_deploy.savable_variables(), partial=partial)
  return variables, saver


def _task(variable):
  return tf.DeviceSpec.from_string(variable.device).task


def _initialise_ps0_only(sess, variables):
  """ps 0 kept its variables (now -1 each), ps 1 came back empty."""
  on_ps0 = [v for v in tf.compat.v1.global_variables() if _task(v) == 0]
  sess.run(tf.compat.v1.variables_initializer(on_ps0))
  sess.run([tf.compat.v1.assign(v, tf.fill(tf.shape(v), tf.cast(-1, v.dtype.base_dtype)))
            for v in on_ps0])
  return on_ps0


def test_the_variables_are_split_over_both_ps():
  with tf.Graph().as_default():
    _, spec = _cluster()
    variables, saver = _cluster_graph(spec)
    # Round robin: global_step, b and p's first slice on ps 0; a, c and p's second on ps 1.
    assert [_task(variables[n]) for n in ('global_step', 'a', 'b', 'c')] == [0, 1, 0, 1]
    assert [_task(v) for v in variables['p']] == [0, 1]
    assert saver._shard_restore.tasks == ['/job:ps/task:0', '/job:ps/task:1']


def test_a_ps_back_empty_gets_its_variables_and_the_other_keeps_its_values(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, saver = _cluster_graph(spec)
    with tf.compat.v1.Session(target) as sess:
      _initialise_ps0_only(sess, variables)
      saver.restore(sess, checkpoint)
      assert _values(sess, variables) == {
          'global_step': -1, 'a': 1.0, 'b': -1.0, 'c': 3.0, 'p': [-1., -1., 12., 13.]}
      assert sess.run(tf.compat.v1.report_uninitialized_variables()).size == 0


def test_every_ps_empty_restores_the_whole_checkpoint(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, saver = _cluster_graph(spec)
    with tf.compat.v1.Session(target) as sess:
      saver.restore(sess, checkpoint)
      assert _values(sess, variables) == dict(_CHECKPOINT_VALUES, p=[10., 11., 12., 13.])


def test_every_ps_holding_its_variables_restores_nothing(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, saver = _cluster_graph(spec)
    with tf.compat.v1.Session(target) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.restore(sess, checkpoint)
      assert _values(sess, variables) == {
          'global_step': 0, 'a': 0.0, 'b': 0.0, 'c': 0.0, 'p': [0., 0., 0., 0.]}


def test_not_partial_restores_every_variable_as_the_saver_does(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, saver = _cluster_graph(spec, partial=False)
    assert saver._shard_restore.tasks == []
    with tf.compat.v1.Session(target) as sess:
      _initialise_ps0_only(sess, variables)
      saver.restore(sess, checkpoint)
      assert _values(sess, variables) == dict(_CHECKPOINT_VALUES, p=[10., 11., 12., 13.])


def test_the_session_manager_of_a_chief_restores_by_shard_through_saver_for(checkpoint):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, _ = _cluster_graph(spec)
    plain = tf.compat.v1.train.Saver()
    restore = shard_restore.ShardRestore(tf.compat.v1.global_variables())
    with tf.compat.v1.Session(target) as sess:
      _initialise_ps0_only(sess, variables)
    manager = tf.compat.v1.train.SessionManager()
    sess = manager.prepare_session(target, saver=restore.saver_for(plain),
                                   checkpoint_filename_with_path=checkpoint)
    try:
      assert _values(sess, variables)['a'] == 1.0
      assert _values(sess, variables)['b'] == -1.0
    finally:
      sess.close()


def test_variables_off_any_ps_keep_the_plain_restore():
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('local', [], initializer=tf.zeros_initializer())
    assert shard_restore.ShardRestore(tf.compat.v1.global_variables()).tasks == []


def test_the_restore_is_logged_with_the_tasks(checkpoint, caplog):
  with tf.Graph().as_default():
    target, spec = _cluster()
    variables, saver = _cluster_graph(spec)
    with tf.compat.v1.Session(target) as sess, caplog.at_level(logging.INFO):
      _initialise_ps0_only(sess, variables)
      restored = saver._shard_restore.restore(sess, checkpoint, lambda s, p: None)
  assert restored == ['/job:ps/task:1']
  messages = [r.getMessage() for r in caplog.records]
  assert any(m.startswith('restored the 3 variables of /job:ps/task:1 from %s; kept the '
                          'current values of /job:ps/task:0 (3 variables)' % checkpoint)
             for m in messages), messages


def _estimator_chief_choice(make_graph):
  """What the Estimator's chief restores with, for the graph `make_graph` builds."""
  with tf.Graph().as_default():
    _, spec = _cluster()
    scaffold = make_graph(spec)
    choice = monitored_training._shard_restore_for(scaffold)
    return None if choice is None else choice.tasks


def test_the_estimator_chief_restores_by_shard_with_the_default_saver():
  def graph(spec):
    _cluster_graph(spec)
    return tf.compat.v1.train.Scaffold()
  assert _estimator_chief_choice(graph) == ['/job:ps/task:0', '/job:ps/task:1']


def test_the_estimator_chief_restores_everything_with_a_saver_of_its_own_var_list():
  def graph(spec):
    variables, _ = _cluster_graph(spec)
    return tf.compat.v1.train.Scaffold(saver=tf.compat.v1.train.Saver([variables['a']]))
  assert _estimator_chief_choice(graph) is None


def test_the_estimator_chief_restores_everything_with_sync_replicas():
  def graph(spec):
    variables, _ = _cluster_graph(spec)
    optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2)
    with tf.compat.v1.device('/job:ps/task:0'):
      optimizer.apply_gradients([(tf.ones([]), variables['a'])],
                                global_step=variables['global_step'])
    return tf.compat.v1.train.Scaffold()
  assert _estimator_chief_choice(graph) is None


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
