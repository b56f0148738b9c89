"""The one place where slimtrain makes tf-slim 1.1.0 work on TensorFlow 2.21.

tf-slim has not been released since 2020. Its 1.1.0 wheel reaches into
TensorFlow internals that TF 2.21 moved or deleted, so parts of it that
slimtrain relies on fail on import or on first call:

* `tensorflow.python.framework.ops.Tensor` and `ops.IndexedSlices` are gone
  (they now live in `framework.tensor` and `framework.indexed_slices`).
  `learning.clip_gradient_norms`, `learning.multiply_gradients`,
  `training.create_train_op`'s gradient transforms, `layers.optimizers` and
  `layers.utils` (hence `slim.batch_norm(..., is_training=True)`) all look
  these names up on `ops` at call time.
* `slim.batch_norm` builds `tensorflow.python.layers.normalization`, which
  lazily imports `tf_keras.legacy_tf_layers.normalization`; tf-keras 2.21 ships
  that code as `tf_keras.src.legacy_tf_layers`, so every slim net with batch
  norm fails with `No module named 'tf_keras.legacy_tf_layers'`.
* `slim.tfexample_decoder.Image` calls `control_flow_ops.case`, which TF 2.21
  keeps only in `control_flow_case`.

Why restore names instead of shipping corrected copies of the tf-slim
functions: every breakage above is a *name lookup* on a TF module at call
time, spread over a dozen tf-slim functions. Putting the name back where
tf-slim looks for it fixes all call sites at once, keeps tf-slim's own code
(and its shipped tests) as the behaviour we run, and shrinks to nothing when
tf-slim is fixed upstream. Each alias points at the very class or function TF
2.21 uses under its new name, so no behaviour changes for TF itself. Every
fix is idempotent and only fills a name that is missing.

Usage: every slimtrain package imports this module first (see each
`__init__.py`), so user code needs nothing more than

    from deployment import model_deploy   # compat is active from here on
    import tf_slim as slim

`applied_fixes()` lists what was patched in this process.
"""

import importlib
import sys

from tensorflow.python.framework import indexed_slices as _indexed_slices
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import tensor as _tensor
from tensorflow.python.ops import control_flow_case as _control_flow_case
from tensorflow.python.ops import control_flow_ops as _control_flow_ops

_APPLIED = []


def _restore_attribute(module, name, value):
  """Sets `module.name = value` unless the module already has the name."""
  if not hasattr(module, name):
    setattr(module, name, value)
    _APPLIED.append('%s.%s' % (module.__name__, name))


def _alias_tf_keras_legacy_layers():
  """Makes `tf_keras.legacy_tf_layers[.*]` resolve to `tf_keras.src...`."""
  try:
    importlib.import_module('tf_keras.legacy_tf_layers')
    return
  except ImportError:
    pass
  try:
    source = importlib.import_module('tf_keras.src.legacy_tf_layers')
  except ImportError:
    return  # tf-keras not installed: slim layers without batch norm still work.
  sys.modules['tf_keras.legacy_tf_layers'] = source
  for submodule in ('base', 'convolutional', 'core', 'normalization',
                    'pooling', 'variable_scope_shim'):
    try:
      module = importlib.import_module(
          'tf_keras.src.legacy_tf_layers.' + submodule)
    except ImportError:
      continue
    sys.modules['tf_keras.legacy_tf_layers.' + submodule] = module
  _APPLIED.append('tf_keras.legacy_tf_layers')


def apply():
  """Applies every fix; safe to call any number of times."""
  _restore_attribute(_ops, 'Tensor', _tensor.Tensor)
  _restore_attribute(_ops, 'IndexedSlices', _indexed_slices.IndexedSlices)
  _restore_attribute(_control_flow_ops, 'case', _control_flow_case.case)
  _alias_tf_keras_legacy_layers()


def applied_fixes():
  """Returns the names this process restored, e.g. `'...ops.Tensor'`."""
  return list(_APPLIED)


apply()
