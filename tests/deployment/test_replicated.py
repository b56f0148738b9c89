"""Numerical equivalence of clones, replicated copies and checkpoints across modes.

Clones run on virtual CPU devices (`session_config(num_cpus=N)`), so the
cross-device copies, the add_n all-reduce tree and the per-device updates are
really exercised.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy
from deployment import replicated
from tests import test_util
from tests.deployment import deploy_testlib

tf.compat.v1.disable_eager_execution()

MODES = ('parameter_server', 'replicated')


def _cpus(n):
  return ['/device:CPU:%d' % i for i in range(n)]


@pytest.mark.parametrize('variable_update', MODES)
@pytest.mark.parametrize('num_clones', [2, 4])
def test_clones_match_one_big_batch(num_clones, variable_update):
  base_losses, base_vars, losses, values, identical = deploy_testlib.run_equivalence(
      num_clones, variable_update, _cpus(num_clones),
      test_util.session_config(num_cpus=num_clones))
  assert len(losses) == 5
  np.testing.assert_allclose(losses, base_losses, rtol=0, atol=1e-5)
  assert losses[-1] < losses[0]
  assert sorted(values) == sorted(base_vars)
  for name in base_vars:
    np.testing.assert_allclose(values[name], base_vars[name], rtol=0, atol=1e-5,
                               err_msg=name)
  assert identical


def _trained(num_clones, variable_update, steps, transform=True, optimizer='momentum'):
  x, y = deploy_testlib.make_data(4 * num_clones)
  graph = tf.Graph()
  with graph.as_default():
    ops = deploy_testlib.build(x, y, num_clones, variable_update=variable_update,
                               clone_devices=_cpus(num_clones), optimizer=optimizer,
                               transform=transform)
    sess = tf.compat.v1.Session(graph=graph,
                                config=test_util.session_config(num_cpus=num_clones))
    deploy_testlib.initialize(sess)
    losses = deploy_testlib.train(sess, ops, steps)
  return graph, sess, ops, losses


def test_copies_stay_bit_identical_with_momentum_and_transformed_gradients():
  graph, sess, ops, _ = _trained(4, 'replicated', steps=5)
  with graph.as_default(), sess:
    copies = model_deploy.variable_copies(ops['clones'])
    assert len(copies) == 4  # weights and biases of two layers
    for original, var_copies in copies.items():
      assert len(var_copies) == 4
      for i, copy in enumerate(var_copies[1:], 1):
        assert copy.device.endswith('CPU:%d' % i)
    slots = [v for v in tf.compat.v1.local_variables() if v.op.name.endswith('/Momentum')]
    assert len(slots) == 12  # 3 copies x 4 variables; copy 0's slots are global
    assert deploy_testlib.copies_identical(sess, ops['clones'])
    replicator = replicated.find(ops['clones'])
    assert sess.run(replicator.max_copy_difference()) == 0.0
    # And the updates are the ones parameter-server mode computes.
    values = deploy_testlib.variable_values(sess)
  ps_graph, ps_sess, _, _ = _trained(4, 'parameter_server', steps=5)
  with ps_graph.as_default(), ps_sess:
    ps_values = deploy_testlib.variable_values(ps_sess)
  assert sorted(values) == sorted(ps_values)
  for name in values:
    np.testing.assert_allclose(values[name], ps_values[name], atol=1e-5, err_msg=name)


def test_replicated_graph_layout():
  x, y = deploy_testlib.make_data(8)
  with tf.Graph().as_default():
    ops = deploy_testlib.build(x, y, 2, variable_update='replicated',
                               clone_devices=_cpus(2), optimizer='momentum')
    names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert not [n for n in names if n.startswith('copy_')]
    saved = model_deploy.savable_variables()
    assert sorted(saved) == sorted(names)
    for name, var in saved.items():
      assert var.op.name == name
    local = sorted(v.op.name for v in tf.compat.v1.local_variables())
    assert 'copy_1/hidden/weights' in local
    assert 'copy_1/hidden/weights/Momentum' in local
    assert not tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, 'copy_')
    sum_grads = [op.name for op in tf.compat.v1.get_default_graph().get_operations()
                 if op.name.endswith('/sum_grads')]
    assert 'hidden/weights/sum_grads' in sum_grads
    assert ops['train_op'].op.name == 'train_op'


def _checkpoint_names(path):
  return sorted(name for name, _ in tf.train.list_variables(path))


def _restore_with_session_manager(graph, saver, path, num_cpus):
  """What Supervisor / slim.learning.train do: restore, then local init."""
  with graph.as_default():
    manager = tf.compat.v1.train.SessionManager(
        local_init_op=tf.compat.v1.local_variables_initializer(),
        ready_op=tf.compat.v1.report_uninitialized_variables(),
        ready_for_local_init_op=tf.compat.v1.report_uninitialized_variables(
            tf.compat.v1.global_variables()),
        graph=graph)
    return manager.prepare_session(
        '', saver=saver, checkpoint_filename_with_path=path,
        config=test_util.session_config(num_cpus=num_cpus))


@pytest.mark.parametrize('source_mode, target_mode', [
    ('parameter_server', 'replicated'), ('replicated', 'parameter_server')])
def test_checkpoint_restores_across_modes(tmp_path, source_mode, target_mode):
  num_clones = 2
  x, y = deploy_testlib.make_data(4 * num_clones)
  # Train 3 steps in the source mode and save.
  src_graph, src_sess, src_ops, _ = _trained(num_clones, source_mode, steps=3,
                                             transform=False)
  path = os.path.join(str(tmp_path), 'model.ckpt')
  with src_graph.as_default(), src_sess:
    saver = tf.compat.v1.train.Saver(model_deploy.savable_variables())
    path = saver.save(src_sess, path, global_step=3)
    saved = deploy_testlib.variable_values(src_sess)
    src_next = deploy_testlib.train(src_sess, src_ops, 2)
  names = _checkpoint_names(path)
  assert 'global_step' in names and 'hidden/weights/Momentum' in names
  assert not [n for n in names if 'copy_' in n]

  # Restore into the other mode and continue: same numbers.
  graph = tf.Graph()
  with graph.as_default():
    ops = deploy_testlib.build(x, y, num_clones, variable_update=target_mode,
                               clone_devices=_cpus(num_clones), optimizer='momentum')
    saver = tf.compat.v1.train.Saver(model_deploy.savable_variables())
  sess = _restore_with_session_manager(graph, saver, path, num_clones)
  with graph.as_default(), sess:
    restored = deploy_testlib.variable_values(sess)
    assert sorted(restored) == sorted(saved)
    for name in saved:
      np.testing.assert_array_equal(restored[name], saved[name], err_msg=name)
    assert deploy_testlib.copies_identical(sess, ops['clones'])
    next_losses = deploy_testlib.train(sess, ops, 2)
    np.testing.assert_allclose(next_losses, src_next, atol=1e-5)
    assert deploy_testlib.copies_identical(sess, ops['clones'])


def _slim_train(logdir, steps, variable_update):
  """slim.learning.train (Supervisor: restore or init, then local init)."""
  x, y = deploy_testlib.make_data(8)
  graph = tf.Graph()
  with graph.as_default():
    ops = deploy_testlib.build(x, y, 2, variable_update=variable_update,
                               clone_devices=_cpus(2), optimizer='momentum')
    check = {}

    def train_step(sess, train_op, global_step, unused_kwargs):
      loss = sess.run(train_op)
      check['identical'] = deploy_testlib.copies_identical(sess, ops['clones'])
      should_stop = sess.run(global_step) >= steps
      return loss, should_stop

    saver = tf.compat.v1.train.Saver(model_deploy.savable_variables())
    slim.learning.train(ops['train_op'], logdir, train_step_fn=train_step,
                        number_of_steps=steps, saver=saver,
                        session_config=test_util.session_config(num_cpus=2),
                        save_summaries_secs=3600, save_interval_secs=3600)
  return check['identical']


def test_slim_learning_train_resumes_replicated_from_ps_checkpoint(tmp_path):
  logdir = str(tmp_path)
  assert _slim_train(logdir, 2, 'parameter_server')
  # Resume the parameter-server run in replicated mode: the Supervisor restores
  # copy 0, the local init op copies it to the other clones.
  assert _slim_train(logdir, 4, 'replicated')
  latest = tf.train.latest_checkpoint(logdir)
  assert latest.endswith('-4')
  names = _checkpoint_names(latest)
  assert not [n for n in names if 'copy_' in n]


def test_copies_follow_copy_zero_set_by_init_fn():
  # Fine-tuning: init_fn overwrites copy 0 after init; local init then copies it.
  x, y = deploy_testlib.make_data(8)
  graph = tf.Graph()
  with graph.as_default():
    ops = deploy_testlib.build(x, y, 2, variable_update='replicated',
                               clone_devices=_cpus(2))
    weights = [v for v in tf.compat.v1.global_variables()
               if v.op.name == 'hidden/weights'][0]
    assign = weights.assign(tf.fill(weights.shape, 0.25))
    with tf.compat.v1.Session(graph=graph, config=test_util.session_config(2)) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(assign)  # what an init_fn restoring a checkpoint does
      sess.run(tf.compat.v1.local_variables_initializer())
      copy = model_deploy.variable_copies(ops['clones'])[weights][1]
      np.testing.assert_array_equal(sess.run(copy), np.full(weights.shape, 0.25))


def test_global_and_local_init_in_one_run():
  x, y = deploy_testlib.make_data(8)
  graph = tf.Graph()
  with graph.as_default():
    ops = deploy_testlib.build(x, y, 2, variable_update='replicated',
                               clone_devices=_cpus(2))
    with tf.compat.v1.Session(graph=graph, config=test_util.session_config(2)) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer()])
      assert deploy_testlib.copies_identical(sess, ops['clones'])


def test_all_reduce_choice():
  assert replicated.choose_all_reduce(['/device:CPU:0', '/device:CPU:1']) == 'add_n'
  assert replicated.choose_all_reduce(['/device:GPU:0']) == 'add_n'
  # All clones on GPUs: NCCL (unless a physical GPU is split into logical ones).
  assert replicated.choose_all_reduce(['/device:GPU:0', '/device:GPU:1']) == 'nccl'
  assert replicated.choose_all_reduce(['/device:GPU:0', '/device:CPU:0']) == 'add_n'
  assert replicated.choose_all_reduce(['/device:GPU:0', '/device:GPU:1'], 'add_n') == 'add_n'
  assert replicated.choose_all_reduce(['/device:CPU:0'], 'nccl') == 'nccl'
  with pytest.raises(ValueError, match="all_reduce must be one of 'auto', 'nccl', 'add_n', "
                                       "got 'ring'"):
    replicated.choose_all_reduce([], 'ring')


def test_nccl_graph_is_built_for_gpu_clones():
  # Only graph construction: the NCCL ops run where GPUs exist.
  x, y = deploy_testlib.make_data(8)
  with tf.Graph().as_default():
    deploy_testlib.build(x, y, 2, variable_update='replicated',
                         clone_devices=['/device:GPU:0', '/device:GPU:1'],
                         all_reduce='nccl')
    ops = tf.compat.v1.get_default_graph().get_operations()
    nccl = [op for op in ops if op.type == 'NcclAllReduce']
    assert len(nccl) == 2 * 4  # one per clone for each of the 4 variables
    assert sorted(set(op.device for op in nccl)) == ['/device:GPU:0', '/device:GPU:1']


def test_plain_apply_gradients_still_works_in_ps_mode():
  x, y = deploy_testlib.make_data(8)
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_devices=_cpus(2))
    batches = iter(zip(np.split(x, 2), np.split(y, 2)))
    clones = model_deploy.create_clones(config, deploy_testlib.mlp_model_fn(batches))
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    _, grads_and_vars = model_deploy.optimize_clones(clones, opt)
    assert model_deploy.variable_copies(clones) == {}
    update = model_deploy.apply_gradients(clones, opt, grads_and_vars)
    assert update.type == 'NoOp'


def _replicated_clones(num_clones, scope):
  """Replicated clones of the MLP under `scope` (variables of their own) in the default graph."""
  x, y = deploy_testlib.make_data(4 * num_clones)
  config = model_deploy.DeploymentConfig(num_clones=num_clones, clone_devices=_cpus(num_clones),
                                         variable_update='replicated')
  batches = iter(zip(np.split(x, num_clones), np.split(y, num_clones)))
  with tf.compat.v1.variable_scope(scope):
    return model_deploy.create_clones(config, deploy_testlib.mlp_model_fn(batches))


def test_the_replicated_mode_travels_on_the_clones():
  with tf.Graph().as_default():
    first = _replicated_clones(2, 'first')
    second = _replicated_clones(3, 'second')
    # Two calls in one graph: each list finds its own replicator, from the clones alone.
    assert replicated.find(first) is first[0].replicator
    assert replicated.find(second) is second[0].replicator
    assert replicated.find(first) is not replicated.find(second)
    assert replicated.find(second).num_clones == 3
    # Still TF-Slim's 3-tuple, and _replace keeps the replicator.
    outputs, scope, device = first[1]
    assert (scope, device) == ('first/clone_1/', '/device:CPU:1')
    moved = [clone._replace(outputs=None) for clone in first]
    assert replicated.find(moved) is replicated.find(first)
    # Clones built by hand are parameter-server clones.
    assert model_deploy.Clone(None, '', '/device:CPU:0').replicator is None


def test_part_or_a_mix_of_replicated_clones_is_refused():
  with tf.Graph().as_default():
    first = _replicated_clones(2, 'first')
    second = _replicated_clones(2, 'second')
    opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match='needs all 2 clones create_clones returned, got 1'):
      model_deploy.optimize_clones(first[:1], opt)
    with pytest.raises(ValueError, match='clones come from different create_clones calls'):
      model_deploy.variable_copies([first[0], second[1]])


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__, '-q']))
