"""Choosing variables and gradients by name, and matching them to checkpoints.

The trainer never lists variables by hand; it takes regexes from the
`TrainConfig` and asks this module:

    grads_and_vars = optimizer.compute_gradients(total_loss)
    # bias_grad_multiplier: scale the gradients of all biases.
    grads_and_vars = variables_helper.multiply_gradients_matching_regex(
        grads_and_vars, ['.*/biases'], multiplier=2.0)
    # freeze_variables: drop the gradients of the backbone.
    grads_and_vars = variables_helper.freeze_gradients_matching_regex(
        grads_and_vars, ['FeatureExtractor/.*'])
    # update_trainable_variables / freeze_variables before differentiation.
    to_train = variables_helper.filter_trainable_variables(
        tf.compat.v1.trainable_variables(),
        include_patterns=['BoxPredictor'], exclude_patterns=['.*/biases'])
    # Fine-tuning: keep what the checkpoint has, by name and shape.
    restore = variables_helper.get_variables_available_in_checkpoint(
        {'MobilenetV1/Conv2d_0/weights': var}, '/ckpts/mobilenet',
        include_global_step=False)

Regexes are matched against the variable's op name (`'scope/weights'`, no
`:0`). `filter_variables`, `multiply_gradients_matching_regex` and
`freeze_gradients_matching_regex` use `re.match` (anchored at the start, as
the OD API did); `filter_trainable_variables` uses `re.search`, as
`tf.contrib.framework.filter_variables` did.

Checkpoint paths may be a checkpoint prefix (`.../model.ckpt-1000`), a
directory holding a `checkpoint` state file (its latest checkpoint is used),
a SavedModel directory or its `variables/variables` prefix; see
`resolve_checkpoint_path`.
"""

import re

from core import logs as logging
import tensorflow as tf
from tensorflow.python.framework import indexed_slices
from tensorflow.python.ops import variables as tf_variables

from core import checkpoints

# Kept here too: fine-tuning code and configs have always found it in this module.
resolve_checkpoint_path = checkpoints.resolve_checkpoint_path


def filter_variables(variables, filter_regex_list, invert=False):
  """Drops (or, with `invert`, keeps only) variables matching any regex.

  Args:
    variables: list of variables.
    filter_regex_list: regexes matched with `re.match` against the op name;
      empty strings are ignored.
    invert: keep only the matching variables instead of removing them.

  Returns:
    The list of kept variables, in input order.
  """
  patterns = [pattern for pattern in filter_regex_list if pattern]
  kept = []
  for var in variables:
    matched = any(re.match(pattern, var.op.name) for pattern in patterns)
    if matched == invert:
      kept.append(var)
  return kept


def filter_trainable_variables(variables, include_patterns=None,
                               exclude_patterns=None):
  """Variables to train: those matching an include and no exclude pattern.

  Implements `TrainConfig.update_trainable_variables` (include) and
  `freeze_variables` (exclude) the way `tf.contrib.framework.filter_variables`
  did for the OD API: a variable is kept if `include_patterns` is empty/None
  or one of them is found (`re.search`) in its op name, and none of
  `exclude_patterns` is.

  Args:
    variables: list of variables, e.g. `tf.compat.v1.trainable_variables()`.
    include_patterns: regexes; None or empty includes every variable.
    exclude_patterns: regexes; None or empty excludes nothing.

  Returns:
    The kept variables, in input order.
  """
  include_patterns = [p for p in (include_patterns or []) if p]
  exclude_patterns = [p for p in (exclude_patterns or []) if p]
  kept = []
  for var in variables:
    name = var.op.name
    if include_patterns and not any(
        re.search(pattern, name) for pattern in include_patterns):
      continue
    if any(re.search(pattern, name) for pattern in exclude_patterns):
      continue
    kept.append(var)
  return kept


def multiply_gradients_matching_regex(grads_and_vars, regex_list, multiplier):
  """Multiplies the gradients of the variables matching any regex.

  Unlike tf_slim's `multiply_gradients`, nothing matching is not an error:
  the pairs come back unchanged and an info line says so. `None` gradients
  stay `None`; `IndexedSlices` gradients keep their indices.

  Args:
    grads_and_vars: list of (gradient, variable) pairs.
    regex_list: regexes matched with `re.match` against variable op names.
    multiplier: Python number the matching gradients are multiplied by.

  Returns:
    A new list of (gradient, variable) pairs, same order.
  """
  grads_and_vars = list(grads_and_vars)
  matching = filter_variables([v for _, v in grads_and_vars], regex_list,
                              invert=True)
  if not matching:
    logging.info('No variable matches %s: gradients left unmultiplied.',
                 regex_list)
    return grads_and_vars
  for var in matching:
    logging.info('Applying multiplier %f to variable [%s]', multiplier,
                 var.op.name)
  matching_refs = {var.ref() for var in matching}
  result = []
  with tf.name_scope('multiply_grads'):
    for grad, var in grads_and_vars:
      if grad is not None and var.ref() in matching_refs:
        grad = _scale_gradient(grad, multiplier)
      result.append((grad, var))
  return result


def _scale_gradient(grad, multiplier):
  """grad * multiplier for a Tensor or IndexedSlices, in grad's dtype."""
  if isinstance(grad, indexed_slices.IndexedSlices):
    values = grad.values * tf.constant(multiplier, dtype=grad.values.dtype)
    return indexed_slices.IndexedSlices(values, grad.indices, grad.dense_shape)
  return grad * tf.constant(multiplier, dtype=grad.dtype)


def freeze_gradients_matching_regex(grads_and_vars, regex_list):
  """Drops the (gradient, variable) pairs whose variable matches any regex.

  Args:
    grads_and_vars: list of (gradient, variable) pairs.
    regex_list: regexes matched with `re.match` against variable op names.

  Returns:
    The pairs of the variables that keep training, same order.
  """
  grads_and_vars = list(grads_and_vars)
  frozen = filter_variables([v for _, v in grads_and_vars], regex_list,
                            invert=True)
  frozen_refs = {var.ref() for var in frozen}
  for var in frozen:
    logging.info('Freezing variable [%s]', var.op.name)
  return [(g, v) for g, v in grads_and_vars if v.ref() not in frozen_refs]


def variables_to_checkpoint_names(variables):
  """Maps each variable to the name a Saver stores it under.

  Plain variables map by op name. The partitions of a partitioned variable
  (`'w/part_0'`, `'w/part_1'`) are stored as slices of one tensor `'w'`, so
  they are grouped into one list under that name; a `PartitionedVariable`
  maps to the list of its partitions.

  Args:
    variables: list of variables, partitions or PartitionedVariables.

  Returns:
    A dict {checkpoint name: variable or list of partitions}, accepted as
    `var_list` by `tf.compat.v1.train.Saver`.
  """
  names = {}
  for var in variables:
    if isinstance(var, tf_variables.PartitionedVariable):
      names[var.name] = list(var)
    elif getattr(var, '_save_slice_info', None):
      names.setdefault(checkpoint_name(var), []).append(var)
    else:
      names[checkpoint_name(var)] = var
  return names


def checkpoint_name(variable):
  """The name a Saver stores `variable` under.

  Args:
    variable: a variable, one partition of a partitioned variable, a
      `PartitionedVariable`, or a list of partitions.

  Returns:
    The op name of a plain variable; the full name (`'w'` for `'w/part_0'`)
    of a partitioned one or of any of its partitions.
  """
  return _checkpoint_name_and_shape(variable)[0]


def checkpoint_shape(variable):
  """The shape `variable` has in a checkpoint (the full shape for a partition)."""
  return _checkpoint_name_and_shape(variable)[1]


def _checkpoint_name_and_shape(variable):
  """(name in a checkpoint, full shape) of a variable-like value."""
  if isinstance(variable, tf_variables.PartitionedVariable):
    return variable.name, variable.get_shape().as_list()
  if isinstance(variable, (list, tuple)):
    variable = variable[0]
  slice_info = getattr(variable, '_save_slice_info', None)
  if slice_info:
    return slice_info.full_name, list(slice_info.full_shape)
  return variable.op.name, variable.shape.as_list()


def get_variables_available_in_checkpoint(variables, checkpoint_path,
                                          include_global_step=True):
  """Keeps the variables that a checkpoint has under their name and shape.

  A variable is kept if its checkpoint name (the dict key; for a list, the op
  name, or the full name of a partitioned variable or of a partition) is in
  the checkpoint **and** the stored shape equals the variable's (full)
  shape. Every other variable is dropped with a warning.

  Args:
    variables: a list of variables (or PartitionedVariables), or a dict
      {checkpoint name: variable}.
    checkpoint_path: checkpoint prefix, directory or SavedModel path (see
      `resolve_checkpoint_path`).
    include_global_step: whether `global_step` may be restored.

  Returns:
    A list (for list input, in sorted name order) or a dict (for dict input)
    of the available variables.

  Raises:
    ValueError: if `variables` is neither a list nor a dict, or no checkpoint
      is found at `checkpoint_path`.
  """
  if isinstance(variables, dict):
    variable_names_map = dict(variables)
    entries = sorted(variable_names_map.items())
  elif isinstance(variables, (list, tuple)):
    entries = sorted(
        ((checkpoint_name(v), v) for v in variables),
        key=lambda entry: entry[0])
  else:
    raise ValueError('`variables` is expected to be a list or dict, got %s.' %
                     type(variables).__name__)
  checkpoint_path = resolve_checkpoint_path(checkpoint_path)
  reader = tf.compat.v1.train.NewCheckpointReader(checkpoint_path)
  ckpt_vars_to_shape_map = reader.get_variable_to_shape_map()

  available = []
  for name, variable in entries:
    if not include_global_step and name == tf.compat.v1.GraphKeys.GLOBAL_STEP:
      logging.info('Not restoring [%s]: include_global_step is False.', name)
      continue
    if name not in ckpt_vars_to_shape_map:
      logging.warning('Variable [%s] is not available in checkpoint %s',
                      name, checkpoint_path)
      continue
    shape = checkpoint_shape(variable)
    if list(ckpt_vars_to_shape_map[name]) != shape:
      logging.warning(
          'Variable [%s] is available in checkpoint %s, but has an '
          'incompatible shape with model variable. Checkpoint shape: %s, '
          'model variable shape: %s. This variable will not be '
          'initialized from the checkpoint.', name, checkpoint_path,
          list(ckpt_vars_to_shape_map[name]), shape)
      continue
    available.append((name, variable))

  if isinstance(variables, dict):
    return dict(available)
  return [variable for _, variable in available]
