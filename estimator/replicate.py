"""Training an Estimator's model_fn on several clones (GPUs) with model_deploy.

What `tf.contrib.estimator.replicate_model_fn` did for tf.estimator users,
on `deployment.model_deploy`. Turned on by the RunConfig:

    config = tfe.RunConfig(num_clones=2)          # clones on /device:GPU:0 and :1
    config = tfe.RunConfig(deployment_config=model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1']))
    tfe.Estimator(model_fn, config=config).train(input_fn, max_steps=1000)

How one training step is built (TRAIN mode only; evaluate, predict and
export call the model_fn once, as usual):

1. The input_fn's batch is the *global* batch: features and labels are split
   along their first dimension into `num_clones` equal slices on the inputs
   device (the batch size must be divisible by num_clones: the check of
   `deployment.clone_batch`, when the graph is built if the batch dimension
   is static, else when the step runs).
2. `model_deploy.create_clones` calls the model_fn once per clone, on the
   clone's device and under name scope `clone_<i>`, with variables shared
   (created on the variables device by clone 0, reused by the others).
3. The model_fn builds its train op through a `TowerOptimizer` wrapping its
   usual optimizer: `optimizer.minimize(loss, global_step)` (or
   `compute_gradients` + clipping + `apply_gradients`, or
   `slim.learning.create_train_op`) still computes that clone's gradients on
   the clone's device, but while a clone is being built the wrapper records
   `(optimizer, grads_and_vars)` and returns a no-op instead of updating
   variables. Outside clone building (one clone, evaluation, a plain
   Estimator) the wrapper is transparent. No per-clone optimizer slots are
   created.
4. The recorded gradients are averaged over clones per variable (the
   gradient of the mean loss over the global batch, so N clones train like
   one clone on the whole batch) and applied once with clone 0's optimizer
   via `model_deploy.apply_gradients`, incrementing the global step once.
   A model_fn that trains with several optimizers (DNNLinearCombined: one
   for the DNN, one for the linear part) records one entry per
   `apply_gradients` call; the k-th entries of all clones are averaged per
   variable and applied with clone 0's k-th optimizer, and the global step
   is incremented once after all of them.
   Update ops (batch-norm statistics) of clone 0 run with it, like
   model_deploy's `deploy()`; update ops the model_fn put in control
   dependencies of its own `minimize` run for every clone.
5. The spec the Estimator trains with has `loss` = mean of the clones'
   losses and the training hooks, chief hooks and scaffold of clone 0;
   summaries of clones 1..N-1 are dropped (model_deploy keeps clone 0's).

    def model_fn(features, labels, mode, params):
      ...
      optimizer = tfe.TowerOptimizer(tf.compat.v1.train.MomentumOptimizer(0.01, 0.9))
      train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())

Requirements: the model_fn wraps its `tf.compat.v1.train.Optimizer` in
`TowerOptimizer`, as `tf.contrib.estimator.replicate_model_fn` required.
variable_update='replicated' is not supported here.

Differs on purpose from tf.contrib: the model_fn is called once per clone by
`model_deploy.create_clones` (not wrapped by `replicate_model_fn`), and the
gradients are averaged, so the loss need not be rescaled by the user.
"""

import contextlib

import tensorflow as tf

from deployment import clone_batch
from estimator import model_fn as model_fn_lib

_Optimizer = tf.compat.v1.train.Optimizer


# The record of the clone being built (a list), or None outside clone building.
_recording = []


@contextlib.contextmanager
def _recording_gradients(record):
  """While the block runs, `TowerOptimizer.apply_gradients` appends to `record`.

  Args:
    record: a list receiving (optimizer, grads_and_vars, global_step) tuples.
  """
  _recording.append(record)
  try:
    yield
  finally:
    _recording.pop()


class TowerOptimizer(_Optimizer):
  """Wraps a model_fn's optimizer so that clones can share one update.

  While `build_clones` builds a clone, `apply_gradients` records the clone's
  gradients and returns a no-op; `build_clones` then applies their average
  once. At any other time every call goes to the wrapped optimizer.
  """

  def __init__(self, optimizer):
    """Wraps `optimizer`.

    Args:
      optimizer: a `tf.compat.v1.train.Optimizer`.

    Raises:
      TypeError: if `optimizer` is not a v1 Optimizer.
    """
    if not isinstance(optimizer, _Optimizer):
      raise TypeError('TowerOptimizer wraps a tf.compat.v1.train.Optimizer, got %r'
                      % (optimizer,))
    super().__init__(use_locking=False, name='TowerOptimizer')
    self._optimizer = optimizer

  def compute_gradients(self, *args, **kwargs):
    return self._optimizer.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    if not _recording:
      return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                             name=name)
    _recording[-1].append((self._optimizer, list(grads_and_vars), global_step))
    return tf.no_op(name='deferred_apply_gradients')

  def get_slot(self, *args, **kwargs):
    return self._optimizer.get_slot(*args, **kwargs)

  def get_slot_names(self, *args, **kwargs):
    return self._optimizer.get_slot_names(*args, **kwargs)

  def variables(self):
    return self._optimizer.variables()


def _split_one(value, num_splits):
  """Splits a Tensor / SparseTensor along dimension 0 into `num_splits` parts."""
  if isinstance(value, tf.SparseTensor):
    return tf.sparse.split(sp_input=value, num_split=num_splits, axis=0)
  value = tf.convert_to_tensor(value)
  batch = tf.compat.dimension_value(value.shape[0]) if value.shape.rank else None
  per_clone = clone_batch.per_clone_batch_size(
      tf.shape(value)[0] if batch is None else batch, num_splits,
      batch_name='the batch of %s' % value.name)
  if batch is not None:
    return tf.split(value, num_splits, axis=0)
  with tf.control_dependencies([per_clone]):
    return tf.split(value, num_splits, axis=0)


def split_batch(structure, num_splits):
  """Splits every tensor of a nested structure along dimension 0.

  Args:
    structure: features or labels (tensor, dict, tuple ...; None allowed).
    num_splits: number of slices.

  Returns:
    A list of `num_splits` structures like `structure`.
  """
  if structure is None:
    return [None] * num_splits
  flat = tf.nest.flatten(structure, expand_composites=False)
  parts = [_split_one(t, num_splits) for t in flat]
  return [tf.nest.pack_sequence_as(structure, [p[i] for p in parts])
          for i in range(num_splits)]


def _average_gradients(per_clone_grads, num_clones):
  """[(mean gradient over clones, var)] in clone 0's variable order.

  Args:
    per_clone_grads: list (one per clone) of lists of (grad, var).
    num_clones: divisor (a variable that gets no gradient in some clone
      still counts that clone as zero).

  Returns:
    A list of (gradient, variable), variables without gradient dropped.
  """
  order, grads = [], {}
  for clone_grads in per_clone_grads:
    for grad, var in clone_grads:
      key = var.ref()
      if key not in grads:
        order.append(var)
        grads[key] = []
      if grad is not None:
        grads[key].append(grad)
  averaged = []
  scale = 1.0 / num_clones
  for var in order:
    clone_grads = grads[var.ref()]
    if not clone_grads:
      continue
    with tf.compat.v1.name_scope(var.op.name + '/avg_grads'):
      if any(isinstance(g, tf.IndexedSlices) for g in clone_grads):
        slices = [g if isinstance(g, tf.IndexedSlices) else
                  tf.IndexedSlices(g, tf.range(tf.shape(g)[0])) for g in clone_grads]
        grad = tf.IndexedSlices(tf.concat([s.values for s in slices], 0) * scale,
                                tf.concat([s.indices for s in slices], 0),
                                slices[0].dense_shape)
      else:
        grad = tf.math.add_n(clone_grads) * scale if len(clone_grads) > 1 else (
            clone_grads[0] * scale)
    averaged.append((grad, var))
  return averaged


def build_clones(estimator, features, labels, deploy_config, split=True, setting=None):
  """Builds the multi-clone TRAIN graph; returns the EstimatorSpec to train with.

  Args:
    estimator: the `Estimator` (its model_fn is called once per clone).
    features: the global batch's features; with `split=False`, a list of
      each clone's features.
    labels: the global batch's labels (or None); with `split=False`, a list
      of each clone's labels.
    deploy_config: a `model_deploy.DeploymentConfig`.
    split: whether to split the global batch into the clones' slices.
    setting: the RunConfig setting that asked for the clones, for errors
      (default 'num_clones=N'; e.g. 'train_distribute=MirroredStrategy').

  Returns:
    An `EstimatorSpec` (TRAIN) whose train_op applies the averaged update.

  Raises:
    ValueError: for replicated variable updates, or a model_fn that does not
      train through a tf.compat.v1.train.Optimizer.
  """
  from deployment import model_deploy  # Heavy (tf_slim); only multi-clone needs it.
  if deploy_config.variable_update != 'parameter_server':
    raise ValueError("Estimator supports DeploymentConfig(variable_update='parameter_server') "
                     'only, got %r' % deploy_config.variable_update)
  model_deploy.check_clone_devices(deploy_config)
  num_clones = deploy_config.num_clones
  setting = setting or 'num_clones=%d' % num_clones
  if split:
    with tf.compat.v1.device(deploy_config.inputs_device()):
      feature_parts = split_batch(features, num_clones)
      label_parts = split_batch(labels, num_clones)
  else:
    feature_parts, label_parts = list(features), list(labels)
  specs, records = [], []

  def clone_fn():
    index = len(specs)
    record = []
    with _recording_gradients(record):
      spec = estimator._call_model_fn(  # pylint: disable=protected-access
          feature_parts[index], label_parts[index], model_fn_lib.ModeKeys.TRAIN,
          estimator.config)
    if not record:
      raise ValueError(
          'Estimator with %s: the model_fn built its train_op without '
          'TowerOptimizer.apply_gradients/minimize in clone %d, so the clones\' gradients '
          'cannot be combined. Wrap the model_fn\'s optimizer: '
          'tfe.TowerOptimizer(optimizer).minimize(loss, global_step).' % (setting, index))
    if records and len(record) != len(records[0]):
      raise ValueError(
          'Estimator with %s: clone %d applied gradients %d times but clone 0 '
          '%d times; every clone must call its optimizers the same way.' % (
              setting, index, len(record), len(records[0])))
    specs.append(spec)
    records.append(list(record))
    return spec

  clones = model_deploy.create_clones(deploy_config, clone_fn)
  global_step = tf.compat.v1.train.get_global_step()
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, clones[0].scope)
  with tf.compat.v1.device(deploy_config.optimizer_device()):
    apply_op = _apply_recorded(clones, records, num_clones, global_step)
    total_loss = tf.math.add_n([s.loss for s in specs]) / float(num_clones)
    train_op = tf.group(apply_op, *update_ops, name='train_op')
  _drop_summaries_of_other_clones(clones)
  first = specs[0]
  return model_fn_lib.EstimatorSpec(
      model_fn_lib.ModeKeys.TRAIN, predictions=first.predictions, loss=total_loss,
      train_op=train_op, training_chief_hooks=first.training_chief_hooks,
      training_hooks=first.training_hooks, scaffold=first.scaffold)


def _apply_recorded(clones, records, num_clones, global_step):
  """Applies every optimizer the clones recorded; increments `global_step` once.

  Args:
    clones: the list returned by `model_deploy.create_clones`.
    records: one list per clone of (optimizer, grads_and_vars, global_step)
      entries, all lists of the same length (one entry per `apply_gradients`).
    num_clones: number of clones.
    global_step: the global step variable (or None).

  Returns:
    The op that applies all updates.
  """
  from deployment import model_deploy  # Heavy (tf_slim); only multi-clone needs it.
  if len(records[0]) == 1:
    grads_and_vars = _average_gradients([r[0][1] for r in records], num_clones)
    return model_deploy.apply_gradients(clones, records[0][0][0], grads_and_vars,
                                        global_step=global_step)
  applies = []
  for k, (optimizer, _, _) in enumerate(records[0]):
    grads_and_vars = _average_gradients([r[k][1] for r in records], num_clones)
    applies.append(model_deploy.apply_gradients(clones, optimizer, grads_and_vars))
  if global_step is None:
    return tf.group(*applies)
  with tf.control_dependencies(applies), tf.compat.v1.colocate_with(global_step):
    return tf.compat.v1.assign_add(global_step, 1).op


def _drop_summaries_of_other_clones(clones):
  """Keeps clone 0's summaries only (model_deploy's rule)."""
  collection = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.SUMMARIES)
  prefixes = tuple(c.scope for c in clones[1:] if c.scope)
  if prefixes:
    collection[:] = [s for s in collection if not s.op.name.startswith(prefixes)]
