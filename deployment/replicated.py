"""Replicated variables: every clone trains its own copy of the model.

In TF-Slim's scheme (`variable_update='parameter_server'`) there is one copy
of each variable, on the variables device; every clone reads it across the
bus each step, and the per-clone gradients are summed on that device. With
`variable_update='replicated'` (the scheme that made tf_cnn_benchmarks scale)
each clone keeps its own copy of the *trainable* variables on its own device:

* clone 0's copy is the ordinary variable, with the original name, a global
  variable like any other: checkpoints, `restore_map`, summaries and
  `tf.compat.v1.trainable_variables()` only ever see it;
* clone i > 0 gets `copy_<i>/<original name>`, a *local* variable on clone
  i's device whose initial value is copy 0's (initialised) value. Local
  variables are initialised after global ones are initialised or restored
  (Supervisor, `slim.learning.train` and MonitoredSession all do this), so
  the copies start bit-identical to copy 0 whether it was initialised, fine
  tuned or restored from a checkpoint;
* the gradients of each variable are all-reduced across clones (NCCL
  `all_sum` when every clone is a GPU, otherwise a tree of `add_n` followed by
  a copy of the sum to every device) and each copy applies the very same
  summed gradient with the same optimizer, so the copies stay bit-identical;
* optimizer slots of the copies (momentum, Adam's m/v, ...) are local
  variables initialised from copy 0's slots in the same way; copy 0's slots
  keep their usual global names. So the default `tf.compat.v1.train.Saver()`
  saves exactly one copy under the original names, and a checkpoint written in
  either mode restores into the other.

Non-trainable variables (batch-norm moving statistics, the global step) stay
shared on the variables device, as in slim. Variables that are not created
through `tf.compat.v1.get_variable` (plain `tf.Variable` inside `model_fn`)
are not replicated: as in slim, each clone then simply owns its own.

Replicated mode is for one machine: `DeploymentConfig` rejects it together
with ps tasks.

This module holds the machinery; users go through `model_deploy`:

    config = model_deploy.DeploymentConfig(num_clones=4,
                                           variable_update='replicated')
    clones = model_deploy.create_clones(config, model_fn, [input_queue])
    with tf.compat.v1.device(config.optimizer_device()):
      total_loss, grads_and_vars = model_deploy.optimize_clones(clones, opt)
      # grads_and_vars: (all-reduced gradient, copy-0 variable) pairs, exactly
      # like parameter-server mode; transform them freely (clip, multiply,
      # freeze), then update every copy with one op:
      update = model_deploy.apply_gradients(clones, opt, grads_and_vars,
                                            global_step=global_step)
    saver = tf.compat.v1.train.Saver(model_deploy.savable_variables())
"""

import collections
import re

from core import logs as logging
import tensorflow as tf

ALL_REDUCE_ALGORITHMS = ('auto', 'nccl', 'add_n')
COPY_PREFIX = 'copy_%d/'
_COPY_NAME = re.compile(r'^copy_(\d+)/(.+)$')
_INIT_SCOPE = 'replicated_init/'

_Reduced = collections.namedtuple('_Reduced', ['per_device', 'algorithm'])


def copy_name(original_name, clone_index):
  """The op name of clone `clone_index`'s copy of variable `original_name`."""
  if clone_index == 0:
    return original_name
  return COPY_PREFIX % clone_index + original_name


def parse_copy_name(name):
  """Returns (clone_index, original_name) for a copy's name, else None."""
  match = _COPY_NAME.match(name or '')
  if not match:
    return None
  return int(match.group(1)), match.group(2)


def _physical_gpus_are_split():
  """True when some physical GPU was carved into several logical GPUs."""
  for gpu in tf.config.list_physical_devices('GPU'):
    logical = tf.config.get_logical_device_configuration(gpu)
    if logical and len(logical) > 1:
      return True
  return False


def choose_all_reduce(devices, requested='auto'):
  """Picks the all-reduce algorithm for clones on `devices`.

  'auto' means NCCL when there are several clones, all on GPUs, and no
  physical GPU is split into logical ones (NCCL refuses two ranks on one
  GPU); otherwise a tree of `add_n`.

  Args:
    devices: the clone device strings.
    requested: 'auto', 'nccl' or 'add_n'.

  Returns:
    'nccl' or 'add_n'.

  Raises:
    ValueError: for an unknown algorithm.
  """
  if requested not in ALL_REDUCE_ALGORITHMS:
    raise ValueError('all_reduce must be one of %s, got %r' % (
        ', '.join(repr(a) for a in ALL_REDUCE_ALGORITHMS), requested))
  if requested != 'auto':
    return requested
  all_gpus = all(tf.DeviceSpec.from_string(d).device_type == 'GPU' for d in devices)
  if len(devices) > 1 and all_gpus and not _physical_gpus_are_split():
    return 'nccl'
  return 'add_n'


def initialized_value(variable):
  """Copy 0's value if it is initialised, else its initial value (a Tensor).

  Evaluating it in the same `Session.run` as the variable's initializer is
  safe: both branches then yield the same number.
  """
  return tf.cond(tf.compat.v1.is_variable_initialized(variable),
                 variable.read_value, lambda: variable.initial_value)


def _is_trainable(kwargs):
  trainable = kwargs.get('trainable')
  if trainable is None:
    return kwargs.get('synchronization') != tf.VariableSynchronization.ON_READ
  return bool(trainable)


def _densify(grad):
  if isinstance(grad, tf.IndexedSlices):
    return tf.convert_to_tensor(grad)
  return grad


class Replicator(object):
  """Owns the per-clone copies of one `create_clones` call."""

  def __init__(self, clone_devices, variables_device, all_reduce='auto'):
    """Creates the replicator.

    Args:
      clone_devices: device string of each clone.
      variables_device: device (string or function) for shared variables.
      all_reduce: 'auto', 'nccl' or 'add_n' (see `choose_all_reduce`).
    """
    self._devices = list(clone_devices)
    self._variables_device = variables_device
    self.algorithm = choose_all_reduce(self._devices, all_reduce)
    self._copies = collections.OrderedDict()  # original.ref() -> [copies]
    self._originals = {}  # copy.ref() -> original
    self._reduced = {}  # original.ref() -> _Reduced
    self._globals_by_name = {}

  @property
  def num_clones(self):
    return len(self._devices)

  @property
  def devices(self):
    return list(self._devices)

  def copies(self):
    """Returns an OrderedDict {original variable: [copy_0, ..., copy_n-1]}."""
    return collections.OrderedDict(
        (copies[0], list(copies)) for copies in self._copies.values())

  def original_of(self, variable):
    """The copy-0 variable of `variable` (itself when it is not a copy)."""
    return self._originals.get(variable.ref(), variable)

  def copy_of(self, variable, clone_index):
    """Clone `clone_index`'s copy of `variable` (itself when not replicated)."""
    copies = self._copies.get(variable.ref())
    return copies[clone_index] if copies else variable

  def custom_getter(self, clone_index):
    """A variable-scope custom getter for clone `clone_index`.

    Trainable variables get a copy on the clone's device; everything else is
    shared and placed on the variables device.

    Args:
      clone_index: the clone being built.

    Returns:
      A function `getter(getter, name, *args, **kwargs)`.
    """
    def getter(getter, name, *args, **kwargs):
      if not _is_trainable(kwargs):
        with tf.compat.v1.device(self._variables_device):
          return getter(name, *args, **kwargs)
      with tf.compat.v1.device(self._devices[0]):
        variable = getter(name, *args, **kwargs)
      if not isinstance(variable, tf.Variable):
        return variable  # e.g. a PartitionedVariable: left shared.
      return self._copy(variable, clone_index)
    return getter

  def _copy(self, variable, clone_index):
    copies = self._copies.get(variable.ref())
    if copies is None:
      copies = [variable] + [None] * (self.num_clones - 1)
      self._copies[variable.ref()] = copies
      self._originals[variable.ref()] = variable
    if copies[clone_index] is None:
      name = copy_name(variable.op.name, clone_index)
      copy = self._new_local_copy(variable, name, self._devices[clone_index])
      copies[clone_index] = copy
      self._originals[copy.ref()] = variable
    return copies[clone_index]

  def _initial_value(self, source, name, device):
    """A tensor on `device` holding `source`'s initialised value."""
    graph = tf.compat.v1.get_default_graph()
    with tf.compat.v1.init_scope(), \
        graph.colocate_with(None, ignore_existing=True), \
        graph.name_scope(None):
      with graph.name_scope(_INIT_SCOPE + name + '/'):
        value = initialized_value(source)
      with tf.compat.v1.device(device):
        return tf.identity(value, name=_INIT_SCOPE + name + '/value')

  def _new_local_copy(self, variable, name, device):
    """Creates the local variable `name` on `device`, initialised from `variable`."""
    graph = tf.compat.v1.get_default_graph()
    initial_value = self._initial_value(variable, name, device)
    with tf.compat.v1.init_scope(), \
        graph.colocate_with(None, ignore_existing=True), \
        graph.name_scope(None), tf.compat.v1.device(device):
      copy = tf.compat.v1.Variable(
          initial_value, trainable=False, name=name, use_resource=True,
          collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
          dtype=variable.dtype.base_dtype)
    if copy.op.name != name:
      raise ValueError('replicated copy of %s was named %s instead of %s: the name '
                       'is taken in the graph' % (variable.op.name, copy.op.name, name))
    return copy

  def _reads_a_copy(self, tensor):
    """True when `tensor` is computed from a copy of clones 1..n-1."""
    handles = set()
    for copies in self._copies.values():
      handles.update(c.handle.op.name for c in copies[1:] if c is not None)
    seen, stack = set(), [tensor.op]
    while stack:
      op = stack.pop()
      if op.name in handles:
        return True
      if op.name in seen:
        continue
      seen.add(op.name)
      stack.extend(t.op for t in op.inputs)
    return False

  def drop_copy_regularizers(self, known):
    """Removes regularization losses added for copies while building a clone.

    A layer (e.g. the Keras legacy layers under `slim.fully_connected`) adds a
    weight regularizer when the variable it gets is not yet a global
    variable; a copy is a local variable, so clones 1..n-1 would add their
    own. Slim counts regularization once, on the original variables.

    Args:
      known: the regularization losses that existed before the clone was built.
    """
    losses = tf.compat.v1.get_collection_ref(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    known_ids = set(id(t) for t in known)
    losses[:] = [t for t in losses
                 if id(t) in known_ids or not self._reads_a_copy(t)]

  def var_list(self, clone_index, var_list=None):
    """The variables clone `clone_index` differentiates, in a common order.

    Args:
      clone_index: the clone.
      var_list: optional list of copy-0 variables (default: the trainable
        variables, as `Optimizer.compute_gradients` would use).

    Returns:
      A list of variables (copies where they exist).
    """
    if var_list is None:
      var_list = (tf.compat.v1.trainable_variables() + tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.TRAINABLE_RESOURCE_VARIABLES))
    return [self.copy_of(self.original_of(v), clone_index) for v in var_list]

  def reduce_gradients(self, clone_grads):
    """All-reduces the gradients of every replicated variable.

    Args:
      clone_grads: list of (clone_index, grads_and_vars) for the clones that
        have a loss; every list covers the same variables in the same order.

    Returns:
      A list of (gradient, copy-0 variable): the all-reduced gradient as seen
      on clone 0's device (op name `<var>/sum_grads` when several clones
      contributed). Variables without any gradient are left out.
    """
    result = []
    indices = [index for index, _ in clone_grads]
    for pairs in zip(*[grads for _, grads in clone_grads]):
      original = self.original_of(pairs[0][1])
      for _, var in pairs:
        if self.original_of(var) is not original:
          raise ValueError('clones list different variables: %s vs %s' % (
              original.op.name, var.op.name))
      grads = [(i, g) for i, (g, _) in zip(indices, pairs) if g is not None]
      if not grads:
        continue
      name = original.op.name + '/sum_grads'
      if original.ref() not in self._copies:
        if len(grads) > 1:
          total = tf.add_n([_densify(g) for _, g in grads], name=name)
        else:
          total = grads[0][1]
        result.append((total, original))
        continue
      per_device, algorithm = self._all_reduce(grads, name)
      self._reduced[original.ref()] = _Reduced(per_device, algorithm)
      result.append((per_device[0], original))
    return result

  def _all_reduce(self, grads, name):
    """Returns ([sum on device i for every clone i], algorithm)."""
    n = self.num_clones
    if n == 1:
      return [grads[0][1]], 'none'
    if self.algorithm == 'nccl' and len(grads) == n:
      from tensorflow.python.ops import nccl_ops  # pylint: disable=g-import-not-at-top
      inputs = []
      for i, g in grads:
        with tf.compat.v1.device(self._devices[i]):
          inputs.append(tf.identity(_densify(g)))
      outputs = nccl_ops.all_sum(inputs)
      with tf.compat.v1.device(self._devices[0]):
        root = tf.identity(outputs[0], name=name)
      return [root] + list(outputs[1:]), 'nccl'
    level = []
    for i, g in grads:
      with tf.compat.v1.device(self._devices[i]):
        level.append((i, _densify(g)))
    while len(level) > 1:
      merged = []
      for k in range(0, len(level), 2):
        if k + 1 == len(level):
          merged.append(level[k])
          continue
        (i, a), (_, b) = level[k], level[k + 1]
        with tf.compat.v1.device(self._devices[i]):
          merged.append((i, tf.add_n([a, b], name=name if len(level) == 2 else None)))
      level = merged
    root_index, root = level[0]
    per_device = []
    for i in range(n):
      if i == root_index:
        per_device.append(root)
      else:
        with tf.compat.v1.device(self._devices[i]):
          per_device.append(tf.identity(root))
    return per_device, 'add_n'

  def _broadcast(self, grad, reduced):
    """Copies a (transformed) gradient to every clone device."""
    grad = _densify(grad)
    per_device = [grad]
    for i in range(1, self.num_clones):
      deps = []
      if reduced is not None and reduced.algorithm == 'nccl':
        # Every rank of an NCCL collective must run, even if unused.
        deps = [reduced.per_device[i]]
      with tf.compat.v1.device(self._devices[i]), tf.control_dependencies(deps):
        per_device.append(tf.identity(grad))
    return per_device

  def _slot_creator(self, next_creator, **kwargs):
    """Makes the optimizer slots of copies local, initialised from copy 0's."""
    name = (kwargs.get('name') or '').rstrip('/')  # slots pass a scope name
    parsed = parse_copy_name(name)
    if parsed is None or parsed[0] >= self.num_clones:
      return next_creator(**kwargs)
    clone_index, original_name = parsed
    source = self._find_global(original_name)
    kwargs['collections'] = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
    kwargs['trainable'] = False
    if source is None:
      logging.warning('replicated: no copy-0 variable %s for %s; the slot keeps its '
                      'own initializer', original_name, name)
    else:
      kwargs['initial_value'] = self._initial_value(
          source, name, self._devices[clone_index])
    return next_creator(**kwargs)

  def _find_global(self, name):
    found = self._globals_by_name.get(name)
    if found is None:
      self._globals_by_name = {
          v.op.name: v for v in tf.compat.v1.global_variables()}
      found = self._globals_by_name.get(name)
    return found

  def apply_gradients(self, optimizer, grads_and_vars, global_step=None, name=None):
    """Applies copy-0 gradients to every copy; returns one op.

    A gradient that is still the all-reduced tensor `reduce_gradients`
    returned is taken on each device as computed by the all-reduce; a
    gradient the caller transformed (clipped, scaled, ...) is copied from where
    it is to every device. Either way every copy receives identical values.

    Args:
      optimizer: a `tf.compat.v1.train.Optimizer`.
      grads_and_vars: (gradient, copy-0 variable) pairs.
      global_step: optional variable incremented once.
      name: optional name of the returned op.

    Returns:
      The update op of `optimizer.apply_gradients`.
    """
    main, extra = [], [[] for _ in range(self.num_clones)]
    for grad, var in grads_and_vars:
      copies = self._copies.get(var.ref())
      if grad is None or copies is None or self.num_clones == 1:
        main.append((grad, var))
        continue
      reduced = self._reduced.get(var.ref())
      if reduced is not None and grad is reduced.per_device[0]:
        per_device = reduced.per_device
      else:
        per_device = self._broadcast(grad, reduced)
      main.append((per_device[0], var))
      for i in range(1, self.num_clones):
        extra[i].append((per_device[i], copies[i]))
    pairs = main + [pair for clone_pairs in extra[1:] for pair in clone_pairs]
    with tf.compat.v1.variable_creator_scope(self._slot_creator):
      return optimizer.apply_gradients(pairs, global_step=global_step, name=name)

  def max_copy_difference(self):
    """A scalar: the largest |copy_i - copy_0| over all variables (0 if none)."""
    diffs = [tf.constant(0.0)]
    for copies in self._copies.values():
      base = copies[0].read_value()
      for copy in copies[1:]:
        if copy is not None:
          diffs.append(tf.reduce_max(tf.abs(
              tf.cast(copy.read_value() - base, tf.float32))))
    return tf.reduce_max(tf.stack(diffs))


def find(clones):
  """The Replicator that created `clones`, or None in parameter-server mode.

  `model_deploy.create_clones` attaches its Replicator to every clone it
  returns (`Clone.replicator`), so the mode travels with the clones.

  Args:
    clones: the list `create_clones` returned (all of it).

  Returns:
    A `Replicator`, or None.

  Raises:
    ValueError: when the clones come from different `create_clones` calls,
      or are only some of the clones of a replicated call (updating only
      those copies would let the others drift apart).
  """
  owners = [getattr(clone, 'replicator', None) for clone in clones]
  replicator = owners[0] if owners else None
  if any(owner is not replicator for owner in owners):
    raise ValueError('clones come from different create_clones calls; pass the whole list '
                     'one call returned')
  if replicator is not None and len(clones) != replicator.num_clones:
    raise ValueError("variable_update='replicated' needs all %d clones create_clones "
                     "returned, got %d" % (replicator.num_clones, len(clones)))
  return replicator
