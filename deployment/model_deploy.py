"""Deploy a slim model on several clones, workers and parameter servers.

TF-Slim's `model_deploy`, kept name for name, argument for argument and error
text for error text, for TensorFlow 2.21 in graph mode. A *clone* is one copy
of the model graph on one device (a GPU, or the CPU); every clone gets its own
slice of the batch, computes its loss and gradients, and the gradients are
combined into one update:

* `DeploymentConfig` says how many clones, on which devices, with how many
  parameter-server (ps) tasks and worker replicas. Clone i is
  `/device:GPU:i` (or `/device:CPU:0` with `clone_on_cpu`) under name scope
  `clone_i` (no scope for a single clone); with ps tasks every device is
  prefixed by `/job:<worker_job_name>` and variables go round-robin (or
  greedily by size) to `/job:ps/task:k/device:CPU:0`.
* `create_clones(config, model_fn, args, kwargs)` calls `model_fn` once per
  clone. `model_fn` adds its losses to `tf.compat.v1.GraphKeys.LOSSES`
  (e.g. via `tf.compat.v1.losses.*`); variables are shared between clones.
* `optimize_clones(clones, optimizer)` divides each clone's loss by the
  number of clones, adds the regularization losses once (to the first clone),
  and sums the gradients per variable (`<var>/sum_grads`).
* `deploy(...)` does all of it and returns the train op (`train_op`), the
  loss (`total_loss`) and a summary op (`summary_op`); update ops (batch-norm
  moving averages) and summaries are taken from the first clone only.

Where slimtrain differs from slim, on purpose:

* Resource variables (`VarHandleOp`, the TF2 default) are placed on the ps;
  slim's chooser only matched `Variable*` ops, so they silently stayed on the
  worker. Every variable created through `tf.compat.v1.get_variable` in a
  clone (not only slim's `model_variable`) gets the variables device.
* `ps_strategy='greedy'` balances ps tasks by bytes.
* `check_clone_devices(config)` refuses more GPU clones than visible GPUs;
  slim built them anyway and soft placement silently put the extra clones
  on a shared device. The trainers call it before building clones.
* `variable_update='replicated'` gives every clone its own copy of the
  trainable variables on its device, all-reduces the gradients (NCCL or a
  tree of `add_n`) and updates every copy identically; see
  `deployment/replicated.py` for the details.

Usage, the way the Object Detection legacy trainer drives it:

    config = model_deploy.DeploymentConfig(num_clones=2)
    with tf.compat.v1.device(config.variables_device()):
      global_step = slim.create_global_step()
    with tf.compat.v1.device(config.inputs_device()):
      queue = make_input_queue()
    clones = model_deploy.create_clones(config, model_fn, [queue])
    update_ops = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.UPDATE_OPS, clones[0].scope)
    with tf.compat.v1.device(config.optimizer_device()):
      total_loss, grads_and_vars = model_deploy.optimize_clones(clones, opt)
      # ... clip / multiply / freeze grads_and_vars ...
      update_ops.append(model_deploy.apply_gradients(
          clones, opt, grads_and_vars, global_step=global_step))
      with tf.control_dependencies([tf.group(*update_ops)]):
        train_op = tf.identity(total_loss, name='train_op')
    saver = tf.compat.v1.train.Saver(model_deploy.savable_variables())

Replicated mode needs only `variable_update='replicated'` in the config; the
two calls the trainer must use (they also work in parameter-server mode) are

* `apply_gradients(clones, optimizer, grads_and_vars, global_step)`: one op
  applying the same update to every copy (plain `optimizer.apply_gradients`
  would only update copy 0);
* `savable_variables()`: the Saver var_list, {original name: copy 0}; the
  other copies are local variables, never saved, re-initialised from copy 0 by
  the local init op after every restore.

Device functions (what `variables_device()` returns with ps tasks) must be
entered with `tf.compat.v1.device`; TF 2.21's `tf.device` rejects functions.
"""

import collections

import tensorflow as tf
import tf_slim as slim

from deployment import device_setters
from deployment import replicated

__all__ = ['create_clones', 'deploy', 'optimize_clones', 'apply_gradients',
           'savable_variables', 'variable_copies', 'check_clone_devices', 'DeployedModel',
           'DeploymentConfig', 'Clone']

VARIABLE_UPDATES = ('parameter_server', 'replicated')

# One clone: what model_fn returned, its name scope and its device.
Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device'])

# What deploy() returns.
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])

# Default parameters for DeploymentConfig (as in slim).
_deployment_params = {'num_clones': 1,
                      'clone_on_cpu': False,
                      'replica_id': 0,
                      'num_replicas': 1,
                      'num_ps_tasks': 0,
                      'worker_job_name': 'worker',
                      'ps_job_name': 'ps'}


def _variables_getter(variables_device):
  """A custom getter creating every variable under `variables_device`."""
  def getter(getter, name, *args, **kwargs):
    with tf.compat.v1.device(variables_device):
      return getter(name, *args, **kwargs)
  return getter


def check_clone_devices(config, num_gpus=None):
  """Raises unless every GPU clone of `config` gets a GPU of its own.

  Clone i goes to `/device:GPU:i`; without that GPU, soft placement would
  move it onto a device another clone already uses, which is slower than
  one clone and looks like data parallelism. One clone without a GPU is
  fine (it runs on the CPU), as are `clone_on_cpu` and `clone_devices`.

  Args:
    config: a `DeploymentConfig`.
    num_gpus: GPUs this process can use; None counts the visible ones
      (`tf.config.list_physical_devices('GPU')`, which honours
      CUDA_VISIBLE_DEVICES).

  Raises:
    ValueError: naming num_clones and the number of visible GPUs.
  """
  if config.clone_on_cpu or config._clone_devices is not None or config.num_clones <= 1:
    return
  if num_gpus is None:
    num_gpus = len(tf.config.list_physical_devices('GPU'))
  if config.num_clones > num_gpus:
    raise ValueError(
        'num_clones=%d needs one GPU per clone, but %d GPU(s) are visible; the extra '
        'clones would silently share a device. Use num_clones<=%d, or clone_on_cpu=True '
        'to run the clones on the CPU on purpose.' % (config.num_clones, num_gpus,
                                                       max(num_gpus, 1)))


def create_clones(config, model_fn, args=None, kwargs=None):
  """Creates `config.num_clones` clones by calling `model_fn`.

  Losses made by `model_fn` must go to `tf.compat.v1.GraphKeys.LOSSES`; a
  clone's losses, summaries and update ops are
  `tf.compat.v1.get_collection(key, clone.scope)`.

  Args:
    config: A `DeploymentConfig` object.
    model_fn: A callable. Called as `model_fn(*args, **kwargs)`.
    args: Optional list of arguments to pass to `model_fn`.
    kwargs: Optional dict of keyword arguments to pass to `model_fn`.

  Returns:
    A list of namedtuples `Clone`.
  """
  clones = []
  args = args or []
  kwargs = kwargs or {}
  variables_device = config.variables_device()
  replicator = None
  if config.variable_update == 'replicated':
    replicator = replicated.Replicator(
        [config.clone_device(i) for i in range(config.num_clones)],
        variables_device, all_reduce=config.all_reduce)
  with slim.arg_scope([slim.model_variable, slim.variable], device=variables_device):
    # Create clones.
    for i in range(0, config.num_clones):
      with tf.compat.v1.name_scope(config.clone_scope(i)) as clone_scope:
        clone_device = config.clone_device(i)
        getter = (replicator.custom_getter(i) if replicator
                  else _variables_getter(variables_device))
        with tf.compat.v1.device(clone_device):
          known = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
          with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                           reuse=True if i > 0 else None,
                                           custom_getter=getter):
            outputs = model_fn(*args, **kwargs)
          if replicator and i > 0:
            replicator.drop_copy_regularizers(known)
          clones.append(Clone(outputs, clone_scope, clone_device))
  if replicator:
    replicated.register(clones, replicator)
  return clones


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """Returns clone loss / num_clones (+ regularization_losses), or None."""
  sum_loss = None
  clone_loss = None
  regularization_loss = None
  with tf.compat.v1.device(clone.device):
    all_losses = []
    clone_losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES, clone.scope)
    if clone_losses:
      clone_loss = tf.add_n(clone_losses, name='clone_loss')
      if num_clones > 1:
        clone_loss = tf.compat.v1.div(clone_loss, 1.0 * num_clones, name='scaled_clone_loss')
      all_losses.append(clone_loss)
    if regularization_losses:
      regularization_loss = tf.add_n(regularization_losses, name='regularization_loss')
      all_losses.append(regularization_loss)
    if all_losses:
      sum_loss = tf.add_n(all_losses)
  # Summaries stay off the clone device.
  if clone_loss is not None:
    tf.compat.v1.summary.scalar('Losses/clone_loss', clone_loss)
  if regularization_loss is not None:
    tf.compat.v1.summary.scalar('Losses/regularization_loss', regularization_loss)
  return sum_loss


def _optimize_clone(optimizer, clone, num_clones, regularization_losses, **kwargs):
  """Returns (clone loss or None, its grads_and_vars or None)."""
  sum_loss = _gather_clone_loss(clone, num_clones, regularization_losses)
  clone_grad = None
  if sum_loss is not None:
    with tf.compat.v1.device(clone.device):
      clone_grad = optimizer.compute_gradients(sum_loss, **kwargs)
  return sum_loss, clone_grad


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """Compute clone losses and gradients for the given list of `Clones`.

  Note: The regularization_losses are added to the first clone losses.

  Args:
   clones: List of `Clones` created by `create_clones()`.
   optimizer: An `Optimizer` object.
   regularization_losses: Optional list of regularization losses. If None it
     will gather them from tf.GraphKeys.REGULARIZATION_LOSSES. Pass `[]` to
     exclude them.
   **kwargs: Optional list of keyword arguments to pass to `compute_gradients`.

  Returns:
   A tuple (total_loss, grads_and_vars).
     - total_loss: A Tensor containing the average of the clone losses including
       the regularization loss.
     - grads_and_vars: A List of tuples (gradient, variable) containing the sum
       of the gradients for each variable. In replicated mode the variables are
       clone 0's copies (the original variables) and each gradient is the
       all-reduced one; pass the list to `apply_gradients`.
  """
  grads_and_vars = []
  clones_losses = []
  num_clones = len(clones)
  replicator = replicated.find(clones)
  if regularization_losses is None:
    regularization_losses = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  for index, clone in enumerate(clones):
    with tf.compat.v1.name_scope(clone.scope):
      clone_kwargs = dict(kwargs)
      if replicator is not None:
        clone_kwargs['var_list'] = replicator.var_list(index, kwargs.get('var_list'))
      clone_loss, clone_grad = _optimize_clone(
          optimizer, clone, num_clones, regularization_losses, **clone_kwargs)
      if clone_loss is not None:
        clones_losses.append(clone_loss)
        grads_and_vars.append((index, clone_grad))
      # Only use regularization_losses for the first clone
      regularization_losses = None
  # Compute the total_loss summing all the clones_losses.
  total_loss = tf.add_n(clones_losses, name='total_loss')
  # Sum the gradients across clones.
  if replicator is not None:
    grads_and_vars = replicator.reduce_gradients(grads_and_vars)
  else:
    grads_and_vars = _sum_clones_gradients([grads for _, grads in grads_and_vars])
  return total_loss, grads_and_vars


def apply_gradients(clones, optimizer, grads_and_vars, global_step=None, name=None):
  """Applies `grads_and_vars` from `optimize_clones`; works in both modes.

  In parameter-server mode this is `optimizer.apply_gradients`. In replicated
  mode the (possibly transformed) gradient of each copy-0 variable is applied
  to every copy of that variable on its own device, in one op, so the copies
  stay identical; `global_step` is incremented once.

  Args:
    clones: the list returned by `create_clones`.
    optimizer: the optimizer given to `optimize_clones`.
    grads_and_vars: list of (gradient, variable) pairs.
    global_step: optional variable to increment by one.
    name: optional name for the returned op.

  Returns:
    The op that applies the update.
  """
  replicator = replicated.find(clones)
  if replicator is None:
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
  return replicator.apply_gradients(optimizer, grads_and_vars,
                                    global_step=global_step, name=name)


def savable_variables(graph=None):
  """The Saver var_list {checkpoint name: variable} of `graph`.

  Every global variable and saveable object under its own name (partitioned
  variables as the list of their slices under the full name). In replicated
  mode the copies of clones 1..N-1 are local variables, so this maps each
  original name to copy 0, and checkpoints restore across modes.

  Args:
    graph: a `tf.Graph` (default: the default graph).

  Returns:
    A dict usable as `tf.compat.v1.train.Saver(var_list=...)`.
  """
  graph = graph or tf.compat.v1.get_default_graph()
  var_list = collections.OrderedDict()
  for var in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
    slice_info = getattr(var, '_save_slice_info', None)
    if slice_info is not None:
      var_list.setdefault(slice_info.full_name, []).append(var)
    else:
      var_list[var.op.name] = var
  for saveable in graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS):
    var_list[saveable.name] = saveable
  return var_list


def variable_copies(clones):
  """{copy-0 variable: [copy_0, ..., copy_n-1]} in replicated mode, else {}."""
  replicator = replicated.find(clones)
  return replicator.copies() if replicator else collections.OrderedDict()


def _sum_clones_gradients(clone_grads):
  """Sums each variable's gradients over clones (already scaled by 1/N).

  Args:
    clone_grads: one list of (gradient, variable) per clone, same order.

  Returns:
    List of (summed gradient, variable); variables without gradient dropped.
  """
  sum_grads = []
  for grad_and_vars in zip(*clone_grads):
    grads = []
    var = grad_and_vars[0][1]
    for g, v in grad_and_vars:
      if v is not var:
        raise ValueError('clones list different variables: %s vs %s' % (
            var.op.name, v.op.name))
      if g is not None:
        grads.append(g)
    if grads:
      if len(grads) > 1:
        sum_grad = tf.add_n(grads, name=var.op.name + '/sum_grads')
      else:
        sum_grad = grads[0]
      sum_grads.append((sum_grad, var))
  return sum_grads


def _add_gradients_summaries(grads_and_vars):
  """Adds (and returns) histograms of each gradient and of its norm."""
  summaries = []
  for grad, var in grads_and_vars:
    if grad is not None:
      if isinstance(grad, tf.IndexedSlices):
        grad_values = grad.values
      else:
        grad_values = grad
      summaries.append(tf.compat.v1.summary.histogram(
          var.op.name + ':gradient', grad_values))
      summaries.append(tf.compat.v1.summary.histogram(
          var.op.name + ':gradient_norm', tf.linalg.global_norm([grad_values])))
    else:
      tf.compat.v1.logging.info('Var %s has no gradient', var.op.name)
  return summaries


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False):
  """Deploys a Slim-constructed model across multiple clones.

  `model_fn` is called `config.num_clones` times as `model_fn(*args,
  **kwargs)`. With an `optimizer` the model is set up for training (train op
  named `train_op`); without one only `total_loss` is built (evaluation).

  Args:
    config: A `DeploymentConfig` object.
    model_fn: A callable. Called as `model_fn(*args, **kwargs)`.
    args: Optional list of arguments to pass to `model_fn`.
    kwargs: Optional dict of keyword arguments to pass to `model_fn`.
    optimizer: Optional `Optimizer` object. If passed the model is deployed
      for training with that optimizer.
    summarize_gradients: Whether or not add summaries to the gradients.

  Returns:
    A `DeployedModel` namedtuple.
  """
  # Gather initial summaries.
  summaries = set(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))

  # Create Clones.
  clones = create_clones(config, model_fn, args, kwargs)
  first_clone = clones[0]

  # Gather update_ops from the first clone. These contain, for example,
  # the updates for the batch_norm variables created by model_fn.
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS,
                                           first_clone.scope)

  train_op = None
  total_loss = None
  with tf.compat.v1.device(config.optimizer_device()):
    if optimizer:
      # Place the global step on the device storing the variables.
      with tf.compat.v1.device(config.variables_device()):
        global_step = slim.get_or_create_global_step()

      # Compute the gradients for the clones.
      total_loss, clones_gradients = optimize_clones(clones, optimizer)

      if clones_gradients:
        if summarize_gradients:
          summaries |= set(_add_gradients_summaries(clones_gradients))
        grad_updates = apply_gradients(clones, optimizer, clones_gradients,
                                       global_step=global_step)
        update_ops.append(grad_updates)
        update_op = tf.group(*update_ops)
        with tf.control_dependencies([update_op]):
          train_op = tf.identity(total_loss, name='train_op')
    else:
      clones_losses = []
      regularization_losses = tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
      for clone in clones:
        with tf.compat.v1.name_scope(clone.scope):
          clone_loss = _gather_clone_loss(clone, len(clones), regularization_losses)
          if clone_loss is not None:
            clones_losses.append(clone_loss)
          regularization_losses = None  # first clone only
      if clones_losses:
        total_loss = tf.add_n(clones_losses, name='total_loss')

    # Summaries of the first clone (model_fn's and the clone loss).
    summaries |= set(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES,
                                                 first_clone.scope))
    if total_loss is not None:
      summaries.add(tf.compat.v1.summary.scalar('total_loss', total_loss))
    if summaries:
      summary_op = tf.compat.v1.summary.merge(list(summaries), name='summary_op')
    else:
      summary_op = None

  return DeployedModel(train_op, summary_op, total_loss, clones)


class DeploymentConfig(object):
  """Where clones, inputs, optimizer and variables of a deployment live."""

  def __init__(self,
               num_clones=1,
               clone_on_cpu=False,
               replica_id=0,
               num_replicas=1,
               num_ps_tasks=0,
               worker_job_name='worker',
               ps_job_name='ps',
               variable_update='parameter_server',
               ps_strategy='round_robin',
               all_reduce='auto',
               clone_devices=None):
    """Create a DeploymentConfig.

    With `num_replicas` > 1 (several worker processes) `num_ps_tasks` must be
    positive; device strings get job prefixes only when there are ps tasks.

    Args:
      num_clones: Number of model clones to deploy in each replica.
      clone_on_cpu: If True clones would be placed on CPU.
      replica_id: Integer.  Index of the replica for which the model is
        deployed.  Usually 0 for the chief replica.
      num_replicas: Number of replicas to use.
      num_ps_tasks: Number of tasks for the `ps` job. 0 to not use replicas.
      worker_job_name: A name for the worker job (may carry the task, e.g.
        'worker/task:1').
      ps_job_name: A name for the parameter server job.
      variable_update: 'parameter_server' (slim: one copy of the variables on
        the variables device) or 'replicated' (one copy per clone, gradients
        all-reduced; single machine only).
      ps_strategy: 'round_robin' (slim) or 'greedy' (fewest bytes first):
        how variables are spread over ps tasks.
      all_reduce: replicated mode only: 'auto', 'nccl' or 'add_n'.
      clone_devices: optional list of `num_clones` device strings replacing
        the GPU/CPU choice, e.g. ['/device:CPU:0', '/device:CPU:1'] for clones
        on virtual CPU devices. Prefixed by the worker job with ps tasks.

    Raises:
      ValueError: If the arguments are invalid.
    """
    if num_replicas > 1:
      if num_ps_tasks < 1:
        raise ValueError('When using replicas num_ps_tasks must be positive')
    if num_replicas > 1 or num_ps_tasks > 0:
      if not worker_job_name:
        raise ValueError('Must specify worker_job_name when using replicas')
      if not ps_job_name:
        raise ValueError('Must specify ps_job_name when using parameter server')
    if replica_id >= num_replicas:
      raise ValueError('replica_id must be less than num_replicas')
    if variable_update not in VARIABLE_UPDATES:
      raise ValueError('variable_update must be one of %s, got %r' % (
          ', '.join(repr(v) for v in VARIABLE_UPDATES), variable_update))
    if variable_update == 'replicated' and num_ps_tasks > 0:
      raise ValueError("variable_update='replicated' keeps the variables on the "
                       "clones of one machine and cannot use ps tasks, got "
                       "num_ps_tasks=%d" % num_ps_tasks)
    if ps_strategy not in device_setters.PS_STRATEGIES:
      raise ValueError('ps_strategy must be one of %s, got %r' % (
          ', '.join(repr(s) for s in device_setters.PS_STRATEGIES), ps_strategy))
    replicated.choose_all_reduce([], all_reduce)  # validates the name
    if clone_devices is not None:
      clone_devices = list(clone_devices)
      if len(clone_devices) != num_clones:
        raise ValueError('clone_devices must list num_clones=%d devices, got %r' % (
            num_clones, clone_devices))
    self._num_clones = num_clones
    self._clone_on_cpu = clone_on_cpu
    self._replica_id = replica_id
    self._num_replicas = num_replicas
    self._num_ps_tasks = num_ps_tasks
    self._ps_device = '/job:' + ps_job_name if num_ps_tasks > 0 else ''
    self._worker_device = '/job:' + worker_job_name if num_ps_tasks > 0 else ''
    self._variable_update = variable_update
    self._ps_strategy = ps_strategy
    self._all_reduce = all_reduce
    self._clone_devices = clone_devices

  @property
  def num_clones(self):
    return self._num_clones

  @property
  def clone_on_cpu(self):
    return self._clone_on_cpu

  @property
  def replica_id(self):
    return self._replica_id

  @property
  def num_replicas(self):
    return self._num_replicas

  @property
  def num_ps_tasks(self):
    return self._num_ps_tasks

  @property
  def ps_device(self):
    return self._ps_device

  @property
  def worker_device(self):
    return self._worker_device

  @property
  def variable_update(self):
    return self._variable_update

  @property
  def ps_strategy(self):
    return self._ps_strategy

  @property
  def all_reduce(self):
    return self._all_reduce

  def caching_device(self):
    """None, or with ps tasks a function caching variables where they are read."""
    if self._num_ps_tasks > 0:
      return lambda op: op.device
    else:
      return None

  def clone_device(self, clone_index):
    """Device string of clone `clone_index` and of all the ops inside it.

    Raises:
      ValueError: if `clone_index` >= num_clones.
    """
    if clone_index >= self._num_clones:
      raise ValueError('clone_index must be less than num_clones')
    device = ''
    if self._num_ps_tasks > 0:
      device += self._worker_device
    if self._clone_devices is not None:
      device += self._clone_devices[clone_index]
    elif self._clone_on_cpu:
      device += '/device:CPU:0'
    else:
      device += '/device:GPU:%d' % clone_index
    return device

  def clone_scope(self, clone_index):
    """Name scope of clone `clone_index` ('' for a single clone).

    Raises:
      ValueError: if `clone_index` >= num_clones.
    """
    if clone_index >= self._num_clones:
      raise ValueError('clone_index must be less than num_clones')
    scope = ''
    if self._num_clones > 1:
      scope = 'clone_%d' % clone_index
    return scope

  def optimizer_device(self):
    """Device string for the optimizer (the worker CPU)."""
    if self._num_ps_tasks > 0 or self._num_clones > 0:
      return self._worker_device + '/device:CPU:0'
    else:
      return ''

  def inputs_device(self):
    """Device string for the input pipeline (the worker CPU)."""
    device = ''
    if self._num_ps_tasks > 0:
      device += self._worker_device
    device += '/device:CPU:0'
    return device

  def variables_device(self):
    """'/device:CPU:0', or with ps tasks a fresh ps device function.

    Use the result with `tf.compat.v1.device` (a function with ps tasks).
    """
    device = ''
    if self._num_ps_tasks > 0:
      device += self._ps_device
    device += '/device:CPU:0'
    if self._num_ps_tasks > 0:
      chooser = device_setters.PSDeviceChooser(device, self._num_ps_tasks,
                                               strategy=self._ps_strategy)
      return chooser.choose
    return device
