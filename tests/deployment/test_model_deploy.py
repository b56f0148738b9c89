"""deployment/model_deploy.py: where clones, variables and gradients are placed.

Three layers, tested bottom-up:
* `DeploymentConfig` answers "which device" for a clone, the inputs, the
  optimizer and the variables: a table of configurations and the devices a
  user would expect for each, plus the errors that name a bad argument;
* `create_clones` / `optimize_clones` build the per-clone towers and the
  summed gradients: op names carry the clone scope, variables live once (on
  the CPU or the ps tasks), each clone owns its losses and update ops;
* `deploy` trains a tiny batch-norm classifier end to end on CPU clones
  (both variable updates), and keeps every summary input on the CPU.

Variables are TF2 resource variables: `v.device` is the handle's device, the
initializer is pinned to it, and a read made with `v.value()` carries no
device of its own (the placer puts it next to the handle).
"""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy

tf.compat.v1.disable_eager_execution()

_WORKER = '/job:worker'


def _device(name):
  """`name` in the form TF writes op devices ('GPU:0' -> '/device:GPU:0')."""
  return tf.DeviceSpec.from_string(name).to_string()


def _ps(task):
  return _device('/job:ps/task:%d/device:CPU:0' % task)


def _separable_batch():
  """16 one-hot rows: label 0 lights column 0 or 1, label 1 column 2 or 3."""
  labels = np.arange(16) % 2
  columns = 2 * labels + (np.arange(16) // 2) % 2
  inputs = np.eye(4, dtype=np.float32)[columns]
  return inputs, labels.astype(np.float32).reshape(16, 1)


_INPUTS, _LABELS = _separable_batch()


def _logit_model(inputs, labels):
  """Two variables (weights, biases), one loss, no update ops."""
  with tf.compat.v1.variable_scope('Logit'):
    logits = slim.fully_connected(inputs, 1, activation_fn=None, scope='dense')
    tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    return tf.sigmoid(logits, name='probability')


def _normalized_logit_model(inputs, labels):
  """Five variables (beta, moving mean and variance, weights, biases), one loss,
  two update ops (the moving statistics)."""
  with tf.compat.v1.variable_scope('NormLogit'):
    normalized = slim.batch_norm(inputs, decay=0.1, fused=True)
    logits = slim.fully_connected(normalized, 1, activation_fn=None, scope='dense')
    tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    return tf.sigmoid(logits, name='probability')


_MODELS = {
    # name: (model_fn, global variables, update ops per clone)
    'logit': (_logit_model, 2, 0),
    'normalized': (_normalized_logit_model, 5, 2),
}


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    tf.compat.v1.set_random_seed(0)
    yield g


def _clones(model, **config):
  model_fn = _MODELS[model][0]
  batch = (tf.constant(_INPUTS), tf.constant(_LABELS))
  return model_deploy.create_clones(model_deploy.DeploymentConfig(**config), model_fn, batch)


# --- DeploymentConfig: the device plan ---------------------------------------

# config -> (clone devices, clone scopes, inputs and optimizer device)
_PLANS = {
    'one GPU clone': (
        {}, ['GPU:0'], [''], 'CPU:0'),
    'clone on CPU': (
        dict(clone_on_cpu=True), ['CPU:0'], [''], 'CPU:0'),
    'two GPU clones': (
        dict(num_clones=2), ['GPU:0', 'GPU:1'], ['clone_0', 'clone_1'], 'CPU:0'),
    'named clone devices': (
        dict(num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1']),
        ['CPU:0', 'CPU:1'], ['clone_0', 'clone_1'], 'CPU:0'),
    'named clone devices, ps': (
        dict(num_clones=2, num_ps_tasks=1, clone_devices=['/device:CPU:0', '/device:CPU:1']),
        [_WORKER + '/device:CPU:0', _WORKER + '/device:CPU:1'], ['clone_0', 'clone_1'],
        _WORKER + '/device:CPU:0'),
    'one clone, ps': (
        dict(num_ps_tasks=1), [_WORKER + '/device:GPU:0'], [''], _WORKER + '/device:CPU:0'),
    'two clones, ps': (
        dict(num_clones=2, num_ps_tasks=1),
        [_WORKER + '/device:GPU:0', _WORKER + '/device:GPU:1'], ['clone_0', 'clone_1'],
        _WORKER + '/device:CPU:0'),
    'replicas, ps': (
        dict(num_replicas=2, num_ps_tasks=2),
        [_WORKER + '/device:GPU:0'], [''], _WORKER + '/device:CPU:0'),
    'replicas, two clones, ps': (
        dict(num_replicas=2, num_clones=2, num_ps_tasks=2),
        [_WORKER + '/device:GPU:0', _WORKER + '/device:GPU:1'], ['clone_0', 'clone_1'],
        _WORKER + '/device:CPU:0'),
    # deployment.cluster hands over a job name that already names the task.
    'worker job name with its task': (
        dict(num_replicas=2, replica_id=1, num_ps_tasks=1, worker_job_name='worker/task:1'),
        ['/job:worker/task:1/device:GPU:0'], [''], '/job:worker/task:1/device:CPU:0'),
}


@pytest.mark.parametrize('name', sorted(_PLANS))
def test_device_plan(name):
  kwargs, clone_devices, scopes, host = _PLANS[name]
  config = model_deploy.DeploymentConfig(**kwargs)
  assert [_device(config.clone_device(i)) for i in range(len(clone_devices))] == [
      _device(d) for d in clone_devices]
  assert [config.clone_scope(i) for i in range(len(scopes))] == scopes
  assert _device(config.inputs_device()) == _device(host)
  assert _device(config.optimizer_device()) == _device(host)
  if not kwargs.get('num_ps_tasks'):
    # Without ps tasks variables stay on the local CPU and nothing is cached.
    assert _device(config.variables_device()) == _device('CPU:0')
    assert config.caching_device() is None


def test_defaults_are_parameter_server_and_round_robin():
  config = model_deploy.DeploymentConfig()
  assert (config.num_clones, config.num_replicas, config.num_ps_tasks) == (1, 1, 0)
  assert config.variable_update == 'parameter_server'
  assert config.ps_strategy == 'round_robin'


def test_with_ps_tasks_reads_are_cached_where_the_placer_puts_them(graph):
  caching = model_deploy.DeploymentConfig(num_clones=2, num_ps_tasks=1).caching_device()
  assert caching(tf.no_op()) == ''


@pytest.mark.parametrize('num_ps_tasks, tasks', [(1, [0, 0, 0]), (2, [0, 1, 0])])
def test_variables_go_round_robin_over_ps_tasks(graph, num_ps_tasks, tasks):
  config = model_deploy.DeploymentConfig(num_ps_tasks=num_ps_tasks)
  with tf.compat.v1.device(config.variables_device()):
    first = tf.compat.v1.Variable(0)
    second = tf.compat.v1.Variable(0)
    plain_op = tf.no_op()
    slim_var = slim.variable('slim_var', [], caching_device=config.caching_device())
  placed = [first, second, slim_var]
  assert [v.device for v in placed] == [_ps(t) for t in tasks]
  assert first.op.type == 'VarHandleOp'
  for variable in placed:
    assert variable.initializer.device == variable.device
    assert variable.value().device == ''
  assert plain_op.device == ''  # only variables are sent to the ps


def test_greedy_strategy_puts_each_variable_on_the_least_loaded_ps(graph):
  config = model_deploy.DeploymentConfig(num_ps_tasks=2, ps_strategy='greedy')
  with tf.compat.v1.device(config.variables_device()):
    sizes = {'w1000': [100, 10], 'w10': [10], 'w20': [20], 'w1000b': [100, 10]}
    placed = {name: tf.compat.v1.get_variable(name, shape) for name, shape in sizes.items()}
  # Task 0 takes the first 1000 floats; everything after fits beside it on task 1.
  assert {name: v.device for name, v in placed.items()} == {
      'w1000': _ps(0), 'w10': _ps(1), 'w20': _ps(1), 'w1000b': _ps(1)}


@pytest.mark.parametrize('kwargs, message', [
    (dict(num_replicas=2), 'When using replicas num_ps_tasks must be positive'),
    (dict(num_replicas=2, num_ps_tasks=1, worker_job_name=''),
     'Must specify worker_job_name when using replicas'),
    (dict(num_ps_tasks=1, ps_job_name=''), 'Must specify ps_job_name when using parameter server'),
    (dict(replica_id=1), 'replica_id must be less than num_replicas'),
    (dict(variable_update='mirrored'), 'variable_update must be one of'),
    (dict(variable_update='replicated', num_ps_tasks=1), 'cannot use ps tasks'),
    (dict(ps_strategy='random'), 'ps_strategy must be one of'),
    (dict(all_reduce='ring'), 'all_reduce must be one of'),
    (dict(num_clones=2, clone_devices=['/device:CPU:0']), 'clone_devices must list'),
], ids=lambda v: ','.join(sorted(v)) if isinstance(v, dict) else None)
def test_bad_config_is_refused_naming_the_argument(kwargs, message):
  with pytest.raises(ValueError, match=message):
    model_deploy.DeploymentConfig(**kwargs)


@pytest.mark.parametrize('method', ['clone_device', 'clone_scope'])
def test_clone_index_past_the_last_clone_is_refused(method):
  config = model_deploy.DeploymentConfig(num_clones=2)
  getattr(config, method)(1)
  with pytest.raises(ValueError, match='clone_index must be less than num_clones'):
    getattr(config, method)(2)


def test_more_gpu_clones_than_gpus_is_refused_with_both_counts():
  visible = len(tf.config.list_physical_devices('GPU'))
  with pytest.raises(ValueError, match=r'num_clones=%d needs one GPU per clone, but %d '
                     r'GPU\(s\) are visible' % (visible + 2, visible)):
    model_deploy.check_clone_devices(model_deploy.DeploymentConfig(num_clones=visible + 2))
  with pytest.raises(ValueError, match=r'num_clones=4 .* but 2 GPU'):
    model_deploy.check_clone_devices(model_deploy.DeploymentConfig(num_clones=4), num_gpus=2)


@pytest.mark.parametrize('kwargs, num_gpus', [
    (dict(num_clones=1), 0),
    (dict(num_clones=4, clone_on_cpu=True), 0),
    (dict(num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1']), 0),
    (dict(num_clones=2), 2),
])
def test_clones_that_each_get_a_device_pass_the_check(kwargs, num_gpus):
  model_deploy.check_clone_devices(model_deploy.DeploymentConfig(**kwargs), num_gpus=num_gpus)


# --- create_clones ------------------------------------------------------------

@pytest.mark.parametrize('model, num_clones, num_ps_tasks', [
    ('logit', 1, 0), ('normalized', 1, 0), ('normalized', 4, 0),
    ('normalized', 1, 1), ('normalized', 2, 2)])
def test_clones_share_one_set_of_variables(graph, model, num_clones, num_ps_tasks):
  clones = _clones(model, num_clones=num_clones, num_ps_tasks=num_ps_tasks)
  _, num_variables, updates_per_clone = _MODELS[model]
  worker = _WORKER if num_ps_tasks else ''
  scope_name = {'logit': 'Logit', 'normalized': 'NormLogit'}[model]

  assert len(clones) == num_clones
  for i, clone in enumerate(clones):
    scope = 'clone_%d/' % i if num_clones > 1 else ''
    assert clone.scope == scope
    assert clone.device == _device('%s/device:GPU:%d' % (worker, i))
    assert clone.outputs.op.name == scope + scope_name + '/probability'
    # Losses and update ops are found per clone through its scope.
    assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES, scope)) == 1
    assert len(tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.UPDATE_OPS, scope)) == updates_per_clone

  variables = slim.get_variables()
  assert len(variables) == num_variables  # created by clone 0, reused by the others
  for i, variable in enumerate(variables):
    assert variable.op.type == 'VarHandleOp'
    expected = _ps(i % num_ps_tasks) if num_ps_tasks else _device('CPU:0')
    assert variable.device == expected
    assert variable.initializer.device == expected


def test_variables_made_outside_slim_go_to_the_ps_too(graph):
  def model_fn():
    weights = tf.compat.v1.get_variable('w', [3, 2])
    tf.compat.v1.losses.add_loss(tf.reduce_sum(weights))

  model_deploy.create_clones(
      model_deploy.DeploymentConfig(num_clones=2, num_ps_tasks=2), model_fn)
  (weights,) = tf.compat.v1.global_variables()
  assert weights.device == _ps(0)


def test_replicated_clones_train_their_own_local_copies(graph):
  clones = _clones('normalized', num_clones=4, variable_update='replicated')
  # What is saved is unchanged: five global variables, copy 0 of each.
  assert len(slim.get_variables()) == 5
  copies = model_deploy.variable_copies(clones)
  assert sorted(v.op.name for v in copies) == [
      'NormLogit/BatchNorm/beta', 'NormLogit/dense/biases', 'NormLogit/dense/weights']
  local = set(tf.compat.v1.local_variables())
  for original, per_clone in copies.items():
    assert per_clone[0] is original
    assert [v.device for v in per_clone] == [_device('GPU:%d' % i) for i in range(4)]
    assert [v.op.name for v in per_clone[1:]] == [
        'copy_%d/%s' % (i, original.op.name) for i in range(1, 4)]
    assert local.issuperset(per_clone[1:])
  # Moving statistics are not trained: one global copy on the CPU.
  for statistic in slim.get_variables_by_name('moving_'):
    assert statistic.device == _device('CPU:0')
  assert [c.outputs.op.name for c in clones] == [
      'clone_%d/NormLogit/probability' % i for i in range(4)]


# --- optimize_clones ----------------------------------------------------------

# config -> (model, gradient device, variable device, gradients named .../sum_grads)
_GRADIENTS = {
    'one clone': (dict(), 'logit', 'GPU:0', 'CPU:0', False),
    'one clone, batch norm': (dict(), 'normalized', 'GPU:0', 'CPU:0', False),
    'four GPU clones': (dict(num_clones=4), 'normalized', '', 'CPU:0', True),
    'four CPU clones': (dict(num_clones=4, clone_on_cpu=True), 'normalized', '', 'CPU:0', True),
    'one clone, ps': (dict(num_ps_tasks=1), 'normalized', _WORKER + '/device:GPU:0', _ps(0),
                      False),
    # Replicated: the all-reduced gradient of copy 0 lives with copy 0 on clone 0.
    'four replicated clones': (dict(num_clones=4, variable_update='replicated', all_reduce='add_n'),
                               'normalized', 'GPU:0', 'GPU:0', True),
}


@pytest.mark.parametrize('name', sorted(_GRADIENTS))
def test_one_gradient_per_trainable_variable_placed_for_the_deployment(graph, name):
  kwargs, model, gradient_device, variable_device, summed = _GRADIENTS[name]
  clones = _clones(model, **kwargs)
  num_clones = kwargs.get('num_clones', 1)
  assert len(slim.get_variables()) == _MODELS[model][1]
  assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)) == (
      _MODELS[model][2] * num_clones)
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=1.0)
  total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
  assert total_loss.op.name == 'total_loss'
  assert len(grads_and_vars) == len(tf.compat.v1.trainable_variables())
  for gradient, variable in grads_and_vars:
    assert gradient.device == (_device(gradient_device) if gradient_device else '')
    assert variable.device == _device(variable_device)
    if summed:
      assert gradient.op.name == variable.op.name + '/sum_grads'


def test_regularization_is_added_once_not_per_clone(graph):
  def model_fn():
    weights = slim.model_variable('w', [2], initializer=tf.compat.v1.ones_initializer(),
                                  regularizer=slim.l2_regularizer(1.0))
    tf.compat.v1.losses.add_loss(tf.reduce_sum(weights))

  clones = model_deploy.create_clones(
      model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True), model_fn)
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(1.0)
  with_l2, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
  without_l2, _ = model_deploy.optimize_clones(clones, optimizer, regularization_losses=[])
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    losses, gradient = sess.run([(with_l2, without_l2), grads_and_vars[0][0]])
  # Each clone's loss sum(w) = 2 counts half; l2 = 0.5 * |w|^2 = 1 counts once.
  np.testing.assert_allclose(losses, [3.0, 2.0])
  np.testing.assert_allclose(gradient, [2.0, 2.0])  # 1 from the losses, w from l2


# --- deploy -------------------------------------------------------------------

@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_deployed_model_trains_and_keeps_batch_norm_statistics(graph, variable_update):
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                         variable_update=variable_update)
  model = model_deploy.deploy(
      config, _normalized_logit_model, (tf.constant(_INPUTS), tf.constant(_LABELS)),
      optimizer=tf.compat.v1.train.GradientDescentOptimizer(learning_rate=1.0))
  assert len(model.clones) == 2
  assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)) == 4
  assert (model.total_loss.op.name, model.train_op.op.name, model.summary_op.op.name) == (
      'total_loss', 'train_op', 'summary_op/summary_op')
  statistics = [slim.get_variables_by_name(n)[0] for n in ('moving_mean', 'moving_variance')]

  with tf.compat.v1.Session() as sess:
    sess.run([tf.compat.v1.global_variables_initializer(),
              tf.compat.v1.local_variables_initializer()])
    first_loss, (mean, variance) = sess.run([model.total_loss, statistics])
    np.testing.assert_allclose(mean, np.zeros(4))
    np.testing.assert_allclose(variance, np.ones(4))
    for _ in range(10):
      sess.run(model.train_op)
    last_loss, (mean, variance), step = sess.run(
        [model.total_loss, statistics, tf.compat.v1.train.get_global_step()])
    sess.run(model.summary_op)

  assert step == 10
  assert last_loss < first_loss / 5
  # decay=0.1 and 20 updates (two clones x 10 steps): the moving statistics
  # are the batch's, the variance with Bessel's correction (n - 1).
  np.testing.assert_allclose(mean, _INPUTS.mean(axis=0), rtol=1e-5)
  np.testing.assert_allclose(variance, _INPUTS.var(axis=0, ddof=1), rtol=1e-5)


def _regularized_layer():
  slim.fully_connected(tf.ones((10, 20)), 30, weights_regularizer=slim.l2_regularizer(0.001))


@pytest.mark.parametrize('training', [True, False], ids=['train', 'eval'])
def test_every_summary_input_is_on_the_cpu(graph, training):
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(1.0) if training else None
  model = model_deploy.deploy(model_deploy.DeploymentConfig(num_clones=2), _regularized_layer,
                              optimizer=optimizer)
  assert (model.train_op is None) == (not training)
  inputs = list(model.summary_op.op.inputs)
  assert inputs
  assert {t.device for t in inputs} == {'/device:CPU:0'}


def test_summarize_gradients_adds_gradient_norms(graph):
  model = model_deploy.deploy(
      model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True), _logit_model,
      (tf.constant(_INPUTS), tf.constant(_LABELS)),
      optimizer=tf.compat.v1.train.GradientDescentOptimizer(1.0), summarize_gradients=True)
  names = [t.op.name for t in model.summary_op.op.inputs]
  assert any('gradient_norm' in n for n in names), names


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
