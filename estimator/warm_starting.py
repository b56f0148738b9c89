"""`WarmStartSettings`: start a new model from another model's checkpoint.

    ws = tfe.WarmStartSettings(ckpt_to_initialize_from='/models/old',
                               vars_to_warm_start='.*conv.*')
    estimator = tfe.Estimator(model_fn, model_dir='/models/new', warm_start_from=ws)

Before the first checkpoint of `model_dir` exists, `Estimator.train` (and
evaluate/predict when no checkpoint is found) initialises the selected
variables from `ckpt_to_initialize_from` (a checkpoint prefix or a directory
holding a `checkpoint` file) instead of from their initializers:

* `vars_to_warm_start` as one regex **string** selects among TRAINABLE
  variables only (tf.estimator's rule; optimizer slots and batch-norm
  statistics start fresh);
* a **list** of regex strings selects among all GLOBAL variables (use it to
  carry slots and moving averages);
* a list of `tf.Variable`s selects exactly those; None selects only the
  variables named in `var_name_to_vocab_info`.

`var_name_to_prev_var_name` maps a new variable name to the name it had in
the old checkpoint. Unlike tf.estimator, a selected variable that the
checkpoint lacks, or holds with a different shape, is skipped with a log line
rather than failing the run: warm starting a model with a new head (a
different number of classes) from a pretrained body just works.
"""

import collections
import os
import re

from core import logs as logging
import tensorflow as tf

from core import checkpoints
from core import paths
from core import variables_helper

__all__ = ['WarmStartSettings', 'warm_start']


class WarmStartSettings(collections.namedtuple('WarmStartSettings', [
    'ckpt_to_initialize_from', 'vars_to_warm_start', 'var_name_to_vocab_info',
    'var_name_to_prev_var_name'])):
  """Which variables to initialise from which checkpoint (see module docstring)."""

  def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start='.*',
              var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
    """Args: as the fields; raises ValueError when no checkpoint is given."""
    if hasattr(ckpt_to_initialize_from, '__fspath__'):
      ckpt_to_initialize_from = os.fspath(ckpt_to_initialize_from)
    if not ckpt_to_initialize_from:
      raise ValueError('`ckpt_to_initialize_from` MUST be set in WarmStartSettings')
    return super(WarmStartSettings, cls).__new__(
        cls, ckpt_to_initialize_from, vars_to_warm_start, var_name_to_vocab_info or {},
        var_name_to_prev_var_name or {})


def get_warm_start_settings(warm_start_from):
  """Normalises Estimator(warm_start_from=...) to WarmStartSettings or None.

  Args:
    warm_start_from: None, a checkpoint path / SavedModel dir, or settings.

  Returns:
    `WarmStartSettings` or None.
  """
  if warm_start_from is None:
    return None
  if hasattr(warm_start_from, '__fspath__'):
    warm_start_from = os.fspath(warm_start_from)
  if isinstance(warm_start_from, bytes):
    warm_start_from = warm_start_from.decode('utf-8')
  if isinstance(warm_start_from, str):
    variables_index = paths.join(warm_start_from, 'variables', 'variables.index')
    if paths.exists(variables_index):
      logging.info('Warm-starting from a SavedModel')
      return WarmStartSettings(paths.join(warm_start_from, 'variables', 'variables'))
    return WarmStartSettings(warm_start_from)
  if isinstance(warm_start_from, WarmStartSettings):
    return warm_start_from
  raise ValueError('warm_start_from must be a string or a WarmStartSettings, '
                   'instead got {}'.format(type(warm_start_from)))


def _resolve_checkpoint(path):
  """The checkpoint prefix `ckpt_to_initialize_from` names (see core.checkpoints)."""
  try:
    return checkpoints.resolve_checkpoint_path(path)
  except ValueError as e:
    raise ValueError('ckpt_to_initialize_from: %s' % e) from None


def _select_variables(vars_to_warm_start, var_name_to_vocab_info):
  """The graph variables chosen by `vars_to_warm_start` (module docstring rules)."""
  graph = tf.compat.v1.get_default_graph()
  if vars_to_warm_start is None:
    return [v for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
            if variables_helper.checkpoint_name(v) in var_name_to_vocab_info]
  if isinstance(vars_to_warm_start, str):
    pattern = re.compile(vars_to_warm_start)
    return [v for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
            if pattern.match(variables_helper.checkpoint_name(v))]
  if isinstance(vars_to_warm_start, (list, tuple)):
    if all(isinstance(v, str) for v in vars_to_warm_start):
      patterns = [re.compile(p) for p in vars_to_warm_start]
      return [v for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
              if any(p.match(variables_helper.checkpoint_name(v)) for p in patterns)]
    if all(isinstance(v, tf.Variable) for v in vars_to_warm_start):
      return list(vars_to_warm_start)
  raise ValueError('vars_to_warm_start must be a regex string, a list of regex strings or a '
                   'list of Variables, given: {}'.format(vars_to_warm_start))


def warm_start(settings):
  """Initialises the selected variables of the default graph from the checkpoint.

  Must run while building the graph (it changes the variables' initializers).

  Args:
    settings: a `WarmStartSettings`.

  Returns:
    The list of variable names that will be warm-started.
  """
  ckpt = _resolve_checkpoint(settings.ckpt_to_initialize_from)
  available = dict(tf.train.list_variables(ckpt))
  chosen, skipped = [], []
  for var in _select_variables(settings.vars_to_warm_start,
                               settings.var_name_to_vocab_info):
    name = variables_helper.checkpoint_name(var)
    prev = settings.var_name_to_prev_var_name.get(name, name)
    if name in settings.var_name_to_vocab_info:
      chosen.append(var)  # Shapes legitimately differ when the vocabulary changed.
    elif prev not in available:
      skipped.append('%s (not in checkpoint as %s)' % (name, prev))
    elif list(available[prev]) != variables_helper.checkpoint_shape(var):
      skipped.append('%s (shape %s, checkpoint has %s)' % (
          name, variables_helper.checkpoint_shape(var), list(available[prev])))
    else:
      chosen.append(var)
  for reason in skipped:
    logging.info('Warm-start: skipping %s', reason)
  logging.info('Warm-starting %d variable(s) from %s', len(chosen), ckpt)
  names = {variables_helper.checkpoint_name(v) for v in chosen}
  if chosen:
    # tf's warm_start rejects mapping entries it did not use: pass only ours.
    tf.compat.v1.train.warm_start(
        ckpt, vars_to_warm_start=chosen,
        var_name_to_vocab_info={k: v for k, v in settings.var_name_to_vocab_info.items()
                                if k in names},
        var_name_to_prev_var_name={k: v for k, v in settings.var_name_to_prev_var_name.items()
                                   if k in names})
  return sorted(names)
