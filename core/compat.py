"""The one place where slimtrain makes tf-slim 1.1.0 work on TensorFlow 2.21.

tf-slim has not been released since 2020. Its 1.1.0 wheel reaches into
TensorFlow internals that TF 2.21 moved, so parts of it that slimtrain relies
on fail on first call. All but one breakage is a *name lookup* on a TF module
at call time; TF still has the code, under a new module:

| tf-slim looks up                      | TF 2.21 keeps it as                          |
| ------------------------------------- | -------------------------------------------- |
| `framework.ops.Tensor`                | `framework.tensor.Tensor`                    |
| `framework.ops.IndexedSlices`         | `framework.indexed_slices.IndexedSlices`     |
| `ops.control_flow_ops.cond`           | `ops.cond.cond`                              |
| `ops.control_flow_ops.case`           | `ops.control_flow_case.case`                 |
| `ops.control_flow_ops.Assert`         | `ops.control_flow_assert.Assert`             |
| `ops.control_flow_ops.while_loop`     | `ops.while_loop.while_loop`                  |
| `ops.array_ops.stack` / `unstack`     | `ops.array_ops_stack.stack` / `unstack`      |
| `ops.variable_scope.variable`         | `ops.variable_v1.VariableV1`                 |
| module `tf_keras.legacy_tf_layers[.*]` | module `tf_keras.src.legacy_tf_layers[.*]`  |

`FIXES` below says, for each row, which tf-slim functions need it (and so which
slimtrain features break without it).

One tf-slim function is wrong on numpy 2 itself, not through a moved name:
`slim.assign_from_checkpoint` indexes the checkpoint array with a *list* of
slices for partitioned variables, which numpy >= 1.23 rejects (IndexError).
For that one `apply()` installs a corrected replacement (fix id
`variables.assign_from_checkpoint`, see `_assign_from_checkpoint`), only
while the installed tf-slim is 1.1.0 and numpy rejects that indexing.

`slim.learning.train` with a `sync_optimizer` never ends cleanly on TF 2.21
(the chief hangs 120 s after its last step, then exits 1; a ps in
`server.join()` serves for ever): `core/compat_learning.py` wraps it (fix ids
`learning.sync_replicas_stop`, `learning.sync_replicas_ps_exit`).

A program that imports tf_slim without importing slimtrain still gets this
module: the `slimtrain_tf_slim_hook.pth` that installing slimtrain puts into
site-packages imports it when tf_slim is imported (slimtrain_tf_slim_hook.py;
`SLIMTRAIN_TF_SLIM_HOOK=0` turns that off).

Why restore names instead of shipping corrected copies of the tf-slim
functions: the lookups are spread over dozens of tf-slim functions (learning,
training, layers, data, metrics). Putting each name back where tf-slim looks
for it fixes every call site at once, keeps tf-slim's own code (and its
shipped tests, run by `tests/compat/test_tf_slim_shipped.py`) as the behaviour
we run, and shrinks to nothing when tf-slim is fixed upstream. Each alias is
the very object TF 2.21 itself exports (e.g. `ops.cond.cond is
tf.compat.v1.cond`), so nothing changes for TF's own code. A name fix only
fills a name that is missing, so on a TF that still has the name it does
nothing.

Usage: every slimtrain package imports this module first (see each
`__init__.py`), so user code needs nothing more than

    from deployment import model_deploy   # compat is active from here on
    import tf_slim as slim

`applied_fixes()` lists what was patched in this process; `needed_fixes()`
lists the fixes the installed versions still need (whether applied or not).
core/COMPAT.md has, per fix, the tests that fail without it.

Checking an upgrade: set `SLIMTRAIN_DISABLE_COMPAT=1` (or `all`) and `apply()`
does nothing, so the process sees TF and tf-slim exactly as installed; run
`tests/compat` that way to see which fixes a new TF or tf-slim still needs
(core/COMPAT.md lists the tests that fail without the layer today). To
disable only some fixes, give their ids comma-separated, e.g.
`SLIMTRAIN_DISABLE_COMPAT=array_ops.stack,variable_scope.variable`. The
variable is read when `apply()` runs, i.e. when `core` is first imported.
"""

import collections
import importlib
import importlib.metadata
import os
import sys

import numpy as np

from tensorflow.python.framework import indexed_slices as _indexed_slices
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import tensor as _tensor
from tensorflow.python.ops import array_ops as _array_ops
from tensorflow.python.ops import array_ops_stack as _array_ops_stack
from tensorflow.python.ops import cond as _cond
from tensorflow.python.ops import control_flow_assert as _control_flow_assert
from tensorflow.python.ops import control_flow_case as _control_flow_case
from tensorflow.python.ops import control_flow_ops as _control_flow_ops
from tensorflow.python.ops import variable_scope as _variable_scope
from tensorflow.python.ops import variable_v1 as _variable_v1
from tensorflow.python.ops import while_loop as _while_loop
from tensorflow.python.platform import tf_logging as _logging
from tensorflow.python.training import py_checkpoint_reader as _checkpoint_reader
from tensorflow.python.training import supervisor as _supervisor

from core import compat_learning as _compat_learning

DISABLE_ENV = 'SLIMTRAIN_DISABLE_COMPAT'

# One restored name. `fix_id` is what SLIMTRAIN_DISABLE_COMPAT takes;
# `module.name` is filled with `value` when missing; `users` names the tf-slim
# code that looks the name up (the justification of the fix).
Fix = collections.namedtuple('Fix', ['fix_id', 'module', 'name', 'value', 'users'])

FIXES = (
    # isinstance checks and IndexedSlices construction in the gradient
    # helpers: learning.clip_gradient_norms / multiply_gradients,
    # training.create_train_op (clip_gradient_norm, gradient_multipliers,
    # summarize_gradients) and layers.optimizers.optimize_loss.
    Fix('ops.IndexedSlices', _ops, 'IndexedSlices', _indexed_slices.IndexedSlices,
        'learning.clip_gradient_norms/multiply_gradients, training.create_train_op '
        'gradient transforms, layers.optimizers'),
    # isinstance(x, ops.Tensor) in layers.utils.constant_value, which
    # slim.batch_norm calls on its own fused path (updates_collections=None,
    # 2-D inputs such as after fully_connected, zero_debias_moving_mean, or
    # any is_training Tensor there); also learning.multiply_gradients (Tensor
    # multipliers) and layers.optimizers.optimize_loss (Tensor learning rates).
    Fix('ops.Tensor', _ops, 'Tensor', _tensor.Tensor,
        'layers.utils.constant_value (slim.batch_norm fused path), '
        'learning.multiply_gradients, layers.optimizers'),
    # layers.utils.smart_cond (the same batch_norm path with a Tensor
    # is_training) and tfexample_decoder.Image (jpeg vs. other formats).
    Fix('control_flow_ops.cond', _control_flow_ops, 'cond', _cond.cond,
        'layers.utils.smart_cond (slim.batch_norm fused path), tfexample_decoder.Image, '
        'metrics.metric_ops'),
    # tfexample_decoder.Image picks the decoder (jpeg/png/raw) with case().
    Fix('control_flow_ops.case', _control_flow_ops, 'case', _control_flow_case.case,
        'tfexample_decoder.Image'),
    # metrics.histogram_ops (streaming_auc_using_histogram) shape checks.
    Fix('control_flow_ops.Assert', _control_flow_ops, 'Assert',
        _control_flow_assert.Assert, 'metrics.histogram_ops'),
    # losses.metric_learning (clustering losses).
    Fix('control_flow_ops.while_loop', _control_flow_ops, 'while_loop',
        _while_loop.while_loop, 'losses.metric_learning'),
    # tfexample_decoder.Tensor with shape_keys and SparseTensor handlers,
    # layers.spatial_softmax, metrics.metric_ops.
    Fix('array_ops.stack', _array_ops, 'stack', _array_ops_stack.stack,
        'tfexample_decoder (Tensor with shape_keys, SparseTensor), '
        'layers.spatial_softmax, metrics.metric_ops'),
    Fix('array_ops.unstack', _array_ops, 'unstack', _array_ops_stack.unstack,
        'layers.spatial_softmax'),
    # slim.local_variable / slim.global_variable (ops/variables.py), public
    # slim API that ported user code creates counters and flags with. The old
    # function forwarded every argument to VariableV1, the class
    # tf.compat.v1.Variable is; calling the class is the same call.
    Fix('variable_scope.variable', _variable_scope, 'variable', _variable_v1.VariableV1,
        'slim.local_variable, slim.global_variable'),
)

# tf-keras 2.21 moved its legacy tf.layers from `tf_keras.legacy_tf_layers` to
# `tf_keras.src.legacy_tf_layers`, but TF's lazy `tensorflow.python.layers`
# modules (which slim.batch_norm builds its BatchNormalization from) still
# import the old path, so every slim net with batch norm fails with
# `No module named 'tf_keras.legacy_tf_layers'`.
KERAS_LEGACY_LAYERS_FIX = 'tf_keras.legacy_tf_layers'
_KERAS_LEGACY_SUBMODULES = ('base', 'convolutional', 'core', 'normalization', 'pooling',
                            'variable_scope_shim')

# The corrected tf-slim function (see the module docstring): its fix id and
# the tf-slim modules that export it.
ASSIGN_FROM_CHECKPOINT_FIX = 'variables.assign_from_checkpoint'
_ASSIGN_FROM_CHECKPOINT_MODULES = ('tf_slim.ops.variables', 'tf_slim')

# slim.learning.train runs a tf.compat.v1.train.Supervisor, whose summary,
# step-counter and checkpoint threads are new Python threads. Under TF 2
# behaviour a new thread starts in eager mode, so the step counter's first
# `training_util.global_step(sess, step)` takes the eager branch, calls
# `.numpy()` on the graph's global step and kills training with "global_step:0
# is out of scope" (after the last step, or at the first summary interval).
# The fix runs each of those threads inside the Supervisor's own graph, which
# is what TF 1 did implicitly.
SUPERVISOR_THREADS_FIX = 'supervisor.threads_in_graph'
_SUPERVISOR_THREADS = (_supervisor.SVSummaryThread, _supervisor.SVStepCounterThread,
                       _supervisor.SVTimerCheckpointThread)

# TF 2.21 routes `tf.keras` and `tf.compat.v1.layers` to Keras 3 unless
# TF_USE_LEGACY_KERAS is set, and Keras 3 refuses the v1 layers user model_fns
# are written with (`tf.compat.v1.layers.dense` raises "`dense` is not
# available with Keras 3") and has no graph mode. TF reads the variable when
# `tf.keras` / `tf.compat.v1.layers` is first touched, so setting it here (only
# when the user has not set it) routes both to tf-keras 2.21, the Keras that
# graph-mode TF 1 code was written for. TF_USE_LEGACY_KERAS=0 keeps Keras 3.
LEGACY_KERAS_FIX = 'keras.legacy_for_v1_layers'
_LEGACY_KERAS_ENV = 'TF_USE_LEGACY_KERAS'

# TF's Python logger ('tensorflow') has its own stderr handler and also
# propagates to the root logger, where absl's `app.run` installs its handler:
# in every command line each message of TF or tf-slim (checkpoints, exports,
# Supervisor) printed twice, as `INFO:tensorflow:...` and as an absl line. Once
# absl has initialised (`app.call_after_init`), the TF handler is removed so
# every message is printed once, in absl's format. Library use without
# `app.run` keeps TF's handler (there is no absl handler to take over), and
# nothing here touches the root logger. slimtrain's own lines go through the
# same 'tensorflow' logger (core/logs.py says why), so they follow both cases.
ONE_LOG_FORMAT_FIX = 'logging.one_format'

_APPLIED = []


def _assign_from_checkpoint(model_path, var_list, ignore_missing_vars=False):
  """`slim.assign_from_checkpoint` that also restores partitioned variables on numpy 2.

  Same contract as tf-slim 1.1.0's function: one placeholder per variable,
  fed with the checkpoint value (for a slice of a partitioned variable, the
  slice given by its save-slice info), so the big values travel in the feed
  dict instead of the graph. Only the slicing differs: a tuple of slices,
  which numpy accepts, instead of a list.

  Args:
    model_path: checkpoint path, e.g. `.../model.ckpt-100`.
    var_list: a list of variables (each restored from the checkpoint entry
      named by `slim.get_variable_full_name`, so every slice of a partitioned
      variable reads the full entry), or a dict from checkpoint name to a
      variable or a list of variables.
    ignore_missing_vars: log a warning instead of raising when an entry is
      missing from the checkpoint.

  Returns:
    (assign_op, feed_dict): run `assign_op` with `feed_dict` to restore.

  Raises:
    ValueError: when an entry is missing (and not ignored), or an unsliced
      variable's shape differs from the checkpoint's.
  """
  reader = _checkpoint_reader.NewCheckpointReader(model_path)
  # First decide every (variable, value) pair, then build the graph pieces.
  restores = []
  for entry, variables in _variables_by_entry(var_list).items():
    if not reader.has_tensor(entry):
      _report_missing_entry(entry, ignore_missing_vars)
      continue
    whole = reader.get_tensor(entry)
    restores.extend((variable, _part_held_by(variable, whole, entry))
                    for variable in variables)
  feed_dict = {}
  assigns = []
  for variable, value in restores:
    # The value reaches the graph through the feed, never as a constant.
    feed = _array_ops.placeholder(dtype=variable.dtype.base_dtype,
                                  shape=variable.get_shape(),
                                  name='placeholder/' + variable.op.name)
    feed_dict[feed] = value
    assigns.append(variable.assign(feed))
  return _control_flow_ops.group(*assigns), feed_dict


def _variables_by_entry(var_list):
  """Maps each checkpoint entry to the variables restored from it.

  Args:
    var_list: `_assign_from_checkpoint`'s argument (list or dict).

  Returns:
    An OrderedDict from entry name to a list of variables; the slices of a
    partitioned variable share their full variable's entry.
  """
  if hasattr(var_list, 'items'):
    return collections.OrderedDict(
        (entry, list(value) if isinstance(value, (list, tuple)) else [value])
        for entry, value in var_list.items())
  full_name = importlib.import_module('tf_slim.ops.variables').get_variable_full_name
  grouped = collections.OrderedDict()
  for variable in var_list:
    grouped.setdefault(full_name(variable), []).append(variable)
  return grouped


def _report_missing_entry(entry, ignore_missing_vars):
  """Raises for a checkpoint entry that is not there, or only warns when asked."""
  message = 'Checkpoint is missing variable [%s]' % entry
  if not ignore_missing_vars:
    raise ValueError(message)
  _logging.warning(message)


def _part_held_by(variable, whole, entry):
  """The part of checkpoint array `whole` that `variable` holds.

  Args:
    variable: a variable, possibly one slice of a partitioned variable.
    whole: the checkpoint's numpy value of `entry`.
    entry: the checkpoint entry name, for the error text.

  Returns:
    `whole` itself, or for a slice the window its save-slice info names.

  Raises:
    ValueError: when an unsliced variable's shape is not `whole`'s.
  """
  info = variable._save_slice_info  # pylint: disable=protected-access
  if info:
    # Indexing with a tuple of slices: numpy >= 1.23 rejects tf-slim's list.
    ends = [offset + size for offset, size in zip(info.var_offset, info.var_shape)]
    return whole[tuple(map(slice, info.var_offset, ends))].reshape(info.var_shape)
  if variable.get_shape() != whole.shape:
    raise ValueError('Total size of new array must be unchanged for %s '
                     'lh_shape: [%s], rh_shape: [%s]'
                     % (entry, str(whole.shape), str(variable.get_shape())))
  return whole


def _assign_from_checkpoint_needs_fix():
  """True when tf-slim 1.1.0's assign_from_checkpoint breaks on this numpy.

  Returns:
    True when the installed tf-slim is 1.1.0 and numpy rejects indexing with
    a list of slices (numpy >= 1.23).
  """
  try:
    if importlib.metadata.version('tf-slim') != '1.1.0':
      return False
  except importlib.metadata.PackageNotFoundError:
    return False
  try:
    np.zeros((1, 1))[[slice(0, 1), slice(0, 1)]]
    return False
  except (IndexError, TypeError):
    return True


def _replace_assign_from_checkpoint():
  """Installs `_assign_from_checkpoint` where tf-slim exports the original.

  Returns:
    True when this call replaced it.
  """
  if not _assign_from_checkpoint_needs_fix():
    return False
  original = importlib.import_module('tf_slim.ops.variables').assign_from_checkpoint
  if original is _assign_from_checkpoint:
    return False
  for module_name in _ASSIGN_FROM_CHECKPOINT_MODULES:
    module = importlib.import_module(module_name)
    if getattr(module, 'assign_from_checkpoint', None) is original:
      module.assign_from_checkpoint = _assign_from_checkpoint
  return True


def _run_in_supervisor_graph(original_run):
  """Wraps a Supervisor thread's `run` to enter the Supervisor's graph."""
  def run(self):
    with self._sv._graph.as_default():  # pylint: disable=protected-access
      original_run(self)
  run.slimtrain_compat = True
  return run


def _supervisor_threads_need_fix():
  """True when new threads start eagerly (TF 2 behaviour) and the fix is absent."""
  from tensorflow.python import tf2  # pylint: disable=import-outside-toplevel
  return tf2.enabled() and not all(
      getattr(thread.run, 'slimtrain_compat', False) for thread in _SUPERVISOR_THREADS)


def _run_supervisor_threads_in_graph():
  """Makes the Supervisor's service threads build and run in its graph.

  Returns:
    True when this call installed the wrappers.
  """
  if not _supervisor_threads_need_fix():
    return False
  for thread in _SUPERVISOR_THREADS:
    if not getattr(thread.run, 'slimtrain_compat', False):
      thread.run = _run_in_supervisor_graph(thread.run)
  return True


def _legacy_keras_needs_fix():
  """True when TF would pick Keras 3 (no TF_USE_LEGACY_KERAS) and tf-keras is installed."""
  if os.environ.get(_LEGACY_KERAS_ENV) is not None:
    return False
  try:
    keras_major = int(importlib.metadata.version('keras').split('.')[0])
    importlib.metadata.version('tf-keras')
  except (importlib.metadata.PackageNotFoundError, ValueError):
    return False
  return keras_major >= 3


def _select_legacy_keras():
  """Sets TF_USE_LEGACY_KERAS=1 when needed; returns True when this call set it."""
  if not _legacy_keras_needs_fix():
    return False
  os.environ[_LEGACY_KERAS_ENV] = '1'
  return True


def _tf_log_handlers():
  """The handlers TF installed on its own 'tensorflow' logger."""
  return list(_logging.get_logger().handlers)


def _drop_tf_log_handlers():
  """Leaves TF's messages to the root logger's absl handler."""
  logger = _logging.get_logger()
  for handler in _tf_log_handlers():
    logger.removeHandler(handler)
  logger.propagate = True


def _print_logs_once():
  """Registers `_drop_tf_log_handlers` to run once absl's app is initialised.

  Returns:
    True when registered (TF's logger had a handler of its own).
  """
  if ONE_LOG_FORMAT_FIX in _APPLIED or not _tf_log_handlers():
    return False
  from absl import app as _absl_app  # absl ships with TF; imported only here.
  _absl_app.call_after_init(_drop_tf_log_handlers)
  return True


def _disabled_fix_ids():
  """Reads SLIMTRAIN_DISABLE_COMPAT.

  Returns:
    None when every fix is disabled ('1' or 'all'), else the set of fix ids
    to skip (empty when the variable is unset or empty).
  """
  value = os.environ.get(DISABLE_ENV, '').strip()
  if value.lower() in ('1', 'all', 'true'):
    return None
  return {part.strip() for part in value.split(',') if part.strip() and part.strip() != '0'}


def _keras_legacy_layers_missing():
  """Returns True when `tf_keras.legacy_tf_layers` cannot be imported but `.src` can."""
  try:
    importlib.import_module('tf_keras.legacy_tf_layers')
    return False
  except ImportError:
    pass
  try:
    importlib.import_module('tf_keras.src.legacy_tf_layers')
  except ImportError:
    return False  # tf-keras not installed: slim layers without batch norm still work.
  return True


def _alias_tf_keras_legacy_layers():
  """Makes `tf_keras.legacy_tf_layers[.*]` resolve to `tf_keras.src.legacy_tf_layers[.*]`.

  Returns:
    True when the alias was installed by this call.
  """
  if not _keras_legacy_layers_missing():
    return False
  sys.modules['tf_keras.legacy_tf_layers'] = importlib.import_module(
      'tf_keras.src.legacy_tf_layers')
  for submodule in _KERAS_LEGACY_SUBMODULES:
    try:
      module = importlib.import_module('tf_keras.src.legacy_tf_layers.' + submodule)
    except ImportError:
      continue
    sys.modules['tf_keras.legacy_tf_layers.' + submodule] = module
  return True


def needed_fixes():
  """Lists the fixes the installed TF / tf-keras / tf-slim / numpy still need.

  A name fix is needed when the name it restores is missing as installed; the
  assign_from_checkpoint replacement while tf-slim is 1.1.0 and numpy rejects
  list-of-slices indexing. After `apply()` the names are present, so this
  answers from what `apply()` recorded plus what is still missing.

  Returns:
    A list of fix ids (see `FIXES` and `KERAS_LEGACY_LAYERS_FIX`).
  """
  needed = [fix.fix_id for fix in FIXES
            if fix.fix_id in _APPLIED or not hasattr(fix.module, fix.name)]
  if KERAS_LEGACY_LAYERS_FIX in _APPLIED or _keras_legacy_layers_missing():
    needed.append(KERAS_LEGACY_LAYERS_FIX)
  if _assign_from_checkpoint_needs_fix():
    needed.append(ASSIGN_FROM_CHECKPOINT_FIX)
  if SUPERVISOR_THREADS_FIX in _APPLIED or _supervisor_threads_need_fix():
    needed.append(SUPERVISOR_THREADS_FIX)
  if LEGACY_KERAS_FIX in _APPLIED or _legacy_keras_needs_fix():
    needed.append(LEGACY_KERAS_FIX)
  if ONE_LOG_FORMAT_FIX in _APPLIED or _tf_log_handlers():
    needed.append(ONE_LOG_FORMAT_FIX)
  needed.extend(_compat_learning.needed())
  return needed


def apply():
  """Applies every fix that is needed and not disabled; safe to call repeatedly.

  Does nothing when SLIMTRAIN_DISABLE_COMPAT is '1' (see the module docstring).

  Returns:
    The ids of the fixes this call applied (empty when nothing was missing).
  """
  disabled = _disabled_fix_ids()
  if disabled is None:
    return []
  applied = []
  for fix in FIXES:
    if fix.fix_id in disabled or hasattr(fix.module, fix.name):
      continue
    setattr(fix.module, fix.name, fix.value)
    applied.append(fix.fix_id)
  if KERAS_LEGACY_LAYERS_FIX not in disabled and _alias_tf_keras_legacy_layers():
    applied.append(KERAS_LEGACY_LAYERS_FIX)
  if ASSIGN_FROM_CHECKPOINT_FIX not in disabled and _replace_assign_from_checkpoint():
    applied.append(ASSIGN_FROM_CHECKPOINT_FIX)
  if SUPERVISOR_THREADS_FIX not in disabled and _run_supervisor_threads_in_graph():
    applied.append(SUPERVISOR_THREADS_FIX)
  if LEGACY_KERAS_FIX not in disabled and _select_legacy_keras():
    applied.append(LEGACY_KERAS_FIX)
  if ONE_LOG_FORMAT_FIX not in disabled and _print_logs_once():
    applied.append(ONE_LOG_FORMAT_FIX)
  applied.extend(_compat_learning.apply(disabled))
  _APPLIED.extend(applied)
  return applied


def applied_fixes():
  """Returns the ids of the fixes applied in this process, e.g. `'ops.Tensor'`."""
  return list(_APPLIED)


apply()
