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

`optimize_clones`, `apply_gradients` and `variable_copies` find the mode on the
clones themselves (`Clone.replicator`), so pass them the whole list
`create_clones` returned.

Device functions (what `variables_device()` returns with ps tasks) must be
entered with `tf.compat.v1.device`; TF 2.21's `tf.device` rejects functions.
"""

import collections
import functools

import tensorflow as tf
import tf_slim as slim

from core import variables_helper
from deployment import device_setters
from deployment import replicated

__all__ = ['create_clones', 'deploy', 'optimize_clones', 'apply_gradients',
           'savable_variables', 'variable_copies', 'check_clone_devices', 'DeployedModel',
           'DeploymentConfig', 'Clone']

VARIABLE_UPDATES = ('parameter_server', 'replicated')


class Clone(collections.namedtuple('Clone', ['outputs', 'scope', 'device'])):
  """One clone: what model_fn returned, its name scope and its device.

  The 3-tuple of TF-Slim. In replicated mode `create_clones` also hands each
  clone the `replicated.Replicator` that owns its variable copies
  (`replicator`; None otherwise, and for a Clone built by hand), which
  `optimize_clones`, `apply_gradients` and `variable_copies` read: the mode
  travels with the clones, not through state kept per graph.
  """

  def __new__(cls, outputs, scope, device, replicator=None):
    clone = super().__new__(cls, outputs, scope, device)
    clone._replicator = replicator
    return clone

  @property
  def replicator(self):
    # namedtuple's _make builds instances without __new__'s keyword.
    return self.__dict__.get('_replicator')

  def _replace(self, **changes):
    return type(self)(*super()._replace(**changes), replicator=self.replicator)


# What deploy() returns.
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])

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
  """Builds the model once per clone that `config` asks for.

  Each call `model_fn(*args, **kwargs)` runs on the clone's device and inside
  the clone's name scope, and shares the variables of the first call. The
  losses `model_fn` should leave in `tf.compat.v1.GraphKeys.LOSSES`; later,
  `tf.compat.v1.get_collection(key, clone.scope)` finds one clone's losses,
  summaries or update ops. With ps tasks the variables land on the ps job
  and the clone's ops on this worker.

  Args:
    config: the `DeploymentConfig`.
    model_fn: the function that builds the model; its return value becomes
      `Clone.outputs`.
    args: positional arguments for every call of `model_fn` (default none).
    kwargs: keyword arguments for every call of `model_fn` (default none).

  Returns:
    One `Clone(outputs, scope, device)` per clone, in clone order.
  """
  build_model = functools.partial(model_fn, *(args or ()), **(kwargs or {}))
  variables_device = config.variables_device()
  replicator = None
  if config.variable_update == 'replicated':
    replicator = replicated.Replicator(
        [config.clone_device(i) for i in range(config.num_clones)],
        variables_device, all_reduce=config.all_reduce)
  # slim.variable / slim.model_variable take their device from this arg_scope;
  # plain get_variable calls get theirs from each clone's custom getter.
  with slim.arg_scope([slim.model_variable, slim.variable], device=variables_device):
    return [_build_clone(config, index, build_model, replicator, variables_device)
            for index in range(config.num_clones)]


def _build_clone(config, index, build_model, replicator, variables_device):
  """Calls `build_model()` for clone `index` under its scope and device.

  Args:
    config: the `DeploymentConfig`.
    index: the clone's position; clone 0 creates the variables, the later
      clones reuse them.
    build_model: `model_fn` with its arguments bound.
    replicator: the `replicated.Replicator` in replicated mode, else None.
    variables_device: `config.variables_device()`, computed once.

  Returns:
    The clone's `Clone`.
  """
  device = config.clone_device(index)
  if replicator:
    getter = replicator.custom_getter(index)
  else:
    getter = _variables_getter(variables_device)
  reuse = True if index > 0 else None
  with tf.compat.v1.name_scope(config.clone_scope(index)) as scope, \
      tf.compat.v1.device(device):
    regularizers_before = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), reuse=reuse,
                                     custom_getter=getter):
      outputs = build_model()
    if replicator and index > 0:
      # Each replica's copy re-registers the regularizers; keep clone 0's only.
      replicator.drop_copy_regularizers(regularizers_before)
  return Clone(outputs, scope, device, replicator=replicator)


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """One clone's share of the objective, or None when it has no losses at all.

  The clone's own losses count 1/num_clones each (their sum is the mean over
  clones); the regularization losses are added in full, by the caller to one
  clone only.

  Args:
    clone: a `Clone`.
    num_clones: how many clones share the batch.
    regularization_losses: losses to add to this clone's (possibly empty).

  Returns:
    A scalar tensor, or None.
  """
  with tf.compat.v1.device(clone.device):
    share = _own_loss_share(clone, num_clones)
    regularization = None
    if regularization_losses:
      regularization = tf.add_n(regularization_losses, name='regularization_loss')
    terms = [term for term in (share, regularization) if term is not None]
    clone_total = tf.add_n(terms) if terms else None
  # tf.summary.scalar has CPU kernels only: keep it off the clone's GPU.
  if share is not None:
    tf.compat.v1.summary.scalar('Losses/clone_loss', share)
  if regularization is not None:
    tf.compat.v1.summary.scalar('Losses/regularization_loss', regularization)
  return clone_total


def _own_loss_share(clone, num_clones):
  """The sum of the clone's LOSSES divided by `num_clones`, or None if it has none.

  Summing the shares of all clones gives the mean loss over the clones.
  """
  own = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES, clone.scope)
  if not own:
    return None
  summed = tf.add_n(own, name='clone_loss')
  if num_clones == 1:
    return summed
  return tf.compat.v1.div(summed, 1.0 * num_clones, name='scaled_clone_loss')


def _clone_losses_and_gradients(clones, regularization_losses, gradient_fn=None):
  """Walks the clones in order; returns [(clone index, loss, gradients or None)].

  Regularization goes to the first clone only, whether or not it has losses
  of its own, so it is counted exactly once.
  """
  results = []
  for index, clone in enumerate(clones):
    with tf.compat.v1.name_scope(clone.scope):
      loss = _gather_clone_loss(clone, len(clones), regularization_losses)
      regularization_losses = None
      if loss is None:
        continue
      grads = None
      if gradient_fn is not None:
        with tf.compat.v1.device(clone.device):
          grads = gradient_fn(index, loss)
      results.append((index, loss, grads))
  return results


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """Losses and gradients of every clone, combined into one update.

  Each clone's gradients are computed on its own device from its share of
  the loss (see `create_clones`); the regularization losses are added once,
  to the first clone.

  Args:
    clones: the list `create_clones` returned.
    optimizer: the optimizer whose `compute_gradients` is used.
    regularization_losses: losses added once; None takes the whole
      `tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES` collection, `[]` none.
    **kwargs: passed on to `optimizer.compute_gradients` (e.g. `var_list`).

  Returns:
    `(total_loss, grads_and_vars)`: the loss of the whole batch (mean of the
    clones' losses plus the regularization), and one `(gradient, variable)`
    pair per variable with the gradients summed over clones. In replicated
    mode the variables are clone 0's copies (the original variables) and each
    gradient is the all-reduced one; pass the list to `apply_gradients`.
  """
  replicator = replicated.find(clones)
  if regularization_losses is None:
    regularization_losses = tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)

  def gradients(index, loss):
    clone_kwargs = dict(kwargs)
    if replicator is not None:
      clone_kwargs['var_list'] = replicator.var_list(index, kwargs.get('var_list'))
    return optimizer.compute_gradients(loss, **clone_kwargs)

  results = _clone_losses_and_gradients(clones, regularization_losses, gradients)
  total_loss = tf.add_n([loss for _, loss, _ in results], name='total_loss')
  if replicator is not None:
    return total_loss, replicator.reduce_gradients(
        [(index, grads) for index, _, grads in results])
  return total_loss, _sum_clones_gradients([grads for _, _, grads in results])


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
  var_list = collections.OrderedDict(variables_helper.variables_to_checkpoint_names(
      graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)))
  for saveable in graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS):
    var_list[saveable.name] = saveable
  return var_list


def variable_copies(clones):
  """{copy-0 variable: [copy_0, ..., copy_n-1]} in replicated mode, else {}."""
  replicator = replicated.find(clones)
  return replicator.copies() if replicator else collections.OrderedDict()


def _sum_clones_gradients(clone_grads):
  """Adds up the clones' gradients variable by variable.

  The clones' losses are already divided by the number of clones, so the sum
  is the gradient of the mean loss.

  Args:
    clone_grads: one list of (gradient, variable) per clone, all in the same
      variable order.

  Returns:
    One (gradient, variable) per variable that got a gradient from any clone.

  Raises:
    ValueError: if the clones list their variables differently.
  """
  summed = []
  for per_clone in zip(*clone_grads):
    variable = per_clone[0][1]
    if any(v is not variable for _, v in per_clone):
      other = next(v for _, v in per_clone if v is not variable)
      raise ValueError('clones list different variables: %s vs %s' % (
          variable.op.name, other.op.name))
    grads = [g for g, _ in per_clone if g is not None]
    if len(grads) == 1:
      summed.append((grads[0], variable))
    elif grads:
      summed.append((tf.add_n(grads, name=variable.op.name + '/sum_grads'), variable))
  return summed


def _add_gradients_summaries(grads_and_vars):
  """Histograms of each gradient (`<var>:gradient`) and its norm (`:gradient_norm`).

  Returns:
    The summary ops (they are in the SUMMARIES collection too).
  """
  summaries = []
  for grad, var in grads_and_vars:
    if grad is None:
      tf.compat.v1.logging.info('Var %s has no gradient', var.op.name)
      continue
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    summaries.append(tf.compat.v1.summary.histogram(var.op.name + ':gradient', values))
    summaries.append(tf.compat.v1.summary.histogram(
        var.op.name + ':gradient_norm', tf.linalg.global_norm([values])))
  return summaries


def _training_op(config, clones, optimizer, update_ops, summaries, summarize_gradients):
  """The train op of `deploy`: every update, then the total loss.

  Returns:
    (train_op or None when nothing has gradients, total_loss).
  """
  with tf.compat.v1.device(config.variables_device()):
    global_step = slim.get_or_create_global_step()
  total_loss, grads_and_vars = optimize_clones(clones, optimizer)
  if not grads_and_vars:
    return None, total_loss
  if summarize_gradients:
    summaries.update(_add_gradients_summaries(grads_and_vars))
  updates = update_ops + [apply_gradients(clones, optimizer, grads_and_vars,
                                          global_step=global_step)]
  with tf.control_dependencies([tf.group(*updates)]):
    return tf.identity(total_loss, name='train_op'), total_loss


def _evaluation_loss(clones):
  """The total loss of all clones without gradients (deploy without optimizer)."""
  regularization_losses = tf.compat.v1.get_collection(
      tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
  losses = [loss for _, loss, _ in _clone_losses_and_gradients(clones, regularization_losses)]
  return tf.add_n(losses, name='total_loss') if losses else None


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False):
  """Builds the clones and, with an optimizer, the op that trains them.

  `create_clones` builds the model once per clone. With `optimizer` the
  clones' gradients are combined by `optimize_clones` and applied together
  with the first clone's update ops (batch-norm statistics) by one op named
  `train_op`; without it only the total loss is built, e.g. for evaluation.
  The summary op merges the summaries made before the call, the first
  clone's, the total loss and, on request, the gradient histograms.

  Args:
    config: the `DeploymentConfig`.
    model_fn: builds the model; called as `model_fn(*args, **kwargs)` per clone.
    args: positional arguments for `model_fn`.
    kwargs: keyword arguments for `model_fn`.
    optimizer: a `tf.compat.v1.train.Optimizer`, or None for no training op.
    summarize_gradients: add histograms of the gradients and their norms.

  Returns:
    `DeployedModel(train_op, summary_op, total_loss, clones)`; `train_op`
    is None without an optimizer, `summary_op` None when there is nothing
    to summarize.
  """
  summaries = set(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))
  clones = create_clones(config, model_fn, args, kwargs)
  first_scope = clones[0].scope
  # Update ops of one clone suffice: every clone would apply the same
  # statistics updates to the shared variables.
  update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, first_scope)
  train_op = None
  with tf.compat.v1.device(config.optimizer_device()):
    if optimizer:
      train_op, total_loss = _training_op(config, clones, optimizer, update_ops, summaries,
                                          summarize_gradients)
    else:
      total_loss = _evaluation_loss(clones)
    summaries.update(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES,
                                                 first_scope))
    if total_loss is not None:
      summaries.add(tf.compat.v1.summary.scalar('total_loss', total_loss))
    summary_op = (tf.compat.v1.summary.merge(list(summaries), name='summary_op')
                  if summaries else None)
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
    """Describes a deployment; checks the arguments as slim did.

    Without ps tasks everything runs in this process (device strings have no
    job); several worker processes (`num_replicas` > 1) need ps tasks.

    Args:
      num_clones: copies of the model per worker, each on its own device.
      clone_on_cpu: put every clone on the CPU instead of one GPU each.
      replica_id: this worker's index among the `num_replicas` (0 = chief).
      num_replicas: worker processes training together.
      num_ps_tasks: parameter-server tasks holding the variables; 0 keeps
        them on this worker.
      worker_job_name: job of the workers in the cluster spec (may carry the
        task, e.g. 'worker/task:1').
      ps_job_name: job of the parameter servers.
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
      ValueError: naming the first inconsistent argument.
    """
    distributed = num_replicas > 1 or num_ps_tasks > 0
    if num_replicas > 1 and num_ps_tasks < 1:
      raise ValueError('When using replicas num_ps_tasks must be positive')
    if distributed and not worker_job_name:
      raise ValueError('Must specify worker_job_name when using replicas')
    if distributed and not ps_job_name:
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
    # Where the clones run and how their variables are kept in step.
    self._num_clones, self._clone_on_cpu = num_clones, clone_on_cpu
    self._clone_devices = clone_devices
    self._variable_update, self._all_reduce = variable_update, all_reduce
    # This replica among the cluster's, and the ps tasks it shares.
    self._replica_id, self._num_replicas = replica_id, num_replicas
    self._num_ps_tasks, self._ps_strategy = num_ps_tasks, ps_strategy
    # Device strings name a job only when there is a ps job to tell apart.
    with_jobs = num_ps_tasks > 0
    self._ps_device = '/job:%s' % ps_job_name if with_jobs else ''
    self._worker_device = '/job:%s' % worker_job_name if with_jobs else ''

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
    """Where ps variables are cached: None locally, else where they are read.

    With ps tasks, a worker reading a variable several times in one step
    fetches it once and keeps the copy next to the op that reads it.
    """
    return (lambda op: op.device) if self._num_ps_tasks > 0 else None

  def _check_clone_index(self, clone_index):
    if clone_index >= self._num_clones:
      raise ValueError('clone_index must be less than num_clones')

  def _on_worker(self, device):
    """`device` prefixed by this worker's job when there is a ps job."""
    return (self._worker_device if self._num_ps_tasks > 0 else '') + device

  def clone_device(self, clone_index):
    """Device string of clone `clone_index` and of all the ops inside it.

    Raises:
      ValueError: if `clone_index` >= num_clones.
    """
    self._check_clone_index(clone_index)
    if self._clone_devices is not None:
      return self._on_worker(self._clone_devices[clone_index])
    if self._clone_on_cpu:
      return self._on_worker('/device:CPU:0')
    return self._on_worker('/device:GPU:%d' % clone_index)

  def clone_scope(self, clone_index):
    """Name scope of clone `clone_index` ('' for a single clone).

    Raises:
      ValueError: if `clone_index` >= num_clones.
    """
    self._check_clone_index(clone_index)
    return 'clone_%d' % clone_index if self._num_clones > 1 else ''

  def optimizer_device(self):
    """Device string for the optimizer (the worker CPU)."""
    if self._num_ps_tasks == 0 and self._num_clones <= 0:
      return ''
    return self._worker_device + '/device:CPU:0'

  def inputs_device(self):
    """Device string for the input pipeline (the worker CPU)."""
    return self._on_worker('/device:CPU:0')

  def variables_device(self):
    """'/device:CPU:0', or with ps tasks a fresh ps device function.

    Use the result with `tf.compat.v1.device` (a function with ps tasks).
    """
    if self._num_ps_tasks == 0:
      return '/device:CPU:0'
    chooser = device_setters.PSDeviceChooser(self._ps_device + '/device:CPU:0',
                                             self._num_ps_tasks, strategy=self._ps_strategy)
    return chooser.choose
