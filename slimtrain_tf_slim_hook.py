"""Makes `import tf_slim` apply slimtrain's compat layer, in programs that import nothing of ours.

slimtrain's packages import `core.compat` first, which makes tf-slim 1.1.0 work
on TensorFlow 2.21. A program written for TF-Slim alone (research/slim's
`eval_image_classifier.py` imports just `tensorflow`, `tf_slim` and its nets)
never imports them, and fails deep inside tf-slim, e.g. with "module
'tensorflow.python.ops.control_flow_ops' has no attribute 'case'".

Installing slimtrain puts `slimtrain_tf_slim_hook.pth` into site-packages
(setup.py writes it, for editable and normal installs alike). Its one line
imports this module and calls `install()`, which adds a finder to
`sys.meta_path` that waits for `tf_slim`. When a program imports tf_slim, the
finder lets the usual finder locate it, lets its loader run tf_slim as usual,
and then imports `core.compat` (which applies the fixes) before the import
statement returns. The finder then leaves `sys.meta_path`, and tf_slim's
module keeps its own loader.

The hook costs nothing at interpreter start: this module imports only `os` and
`sys` (never TensorFlow), and until tf_slim is imported the finder only
compares a module name. Where `core.compat` is imported before tf_slim (every
slimtrain package does that) the hook does nothing: compat itself imports
tf_slim.

    SLIMTRAIN_TF_SLIM_HOOK=0 python eval_image_classifier.py ...   # the hook off

With `SLIMTRAIN_TF_SLIM_HOOK=0` (or `false`, `no`, `off`) `install()` adds no
finder, so the program sees tf_slim exactly as installed (and fails as it did
before); `import core.compat` in the program still applies the fixes.
`SLIMTRAIN_DISABLE_COMPAT` keeps working as before: the hook imports
`core.compat`, which reads it. See core/COMPAT.md, "The tf_slim import hook".
"""

import os
import sys

ENV = 'SLIMTRAIN_TF_SLIM_HOOK'
# The module whose import applies the compat layer, and the one that triggers it.
COMPAT_MODULE = 'core.compat'
TRIGGER_MODULE = 'tf_slim'


def enabled(environ=None):
  """Whether SLIMTRAIN_TF_SLIM_HOOK lets the hook run (default: yes).

  Args:
    environ: the environment to read (default `os.environ`).

  Returns:
    False when the variable is '0', 'false', 'no' or 'off' (any case).
  """
  value = (os.environ if environ is None else environ).get(ENV, '1')
  return value.strip().lower() not in ('0', 'false', 'no', 'off')


def _apply_compat():
  """Imports core.compat (its import applies the fixes) unless it is already imported.

  A failure does not fail the user's `import tf_slim`: it becomes a warning
  that names the line to add to the program instead.
  """
  if COMPAT_MODULE in sys.modules:
    return
  try:
    __import__(COMPAT_MODULE)
  except Exception as e:  # pylint: disable=broad-except
    import warnings  # pylint: disable=import-outside-toplevel
    warnings.warn('slimtrain could not apply its tf-slim fixes on `import tf_slim` (%s: %s); '
                  'add `import core.compat` before `import tf_slim` to see why'
                  % (type(e).__name__, e), RuntimeWarning, stacklevel=2)


class _LoaderThenCompat(object):
  """tf_slim's own loader, followed by the compat layer once tf_slim has run."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    # tf_slim keeps its own loader: nothing of the hook stays on the module.
    module.__loader__ = self._loader
    if getattr(module, '__spec__', None) is not None:
      module.__spec__.loader = self._loader
    self._loader.exec_module(module)
    _TfSlimFinder.uninstall()
    _apply_compat()

  def __getattr__(self, name):
    return getattr(self._loader, name)


class _TfSlimFinder(object):
  """A meta-path finder that answers only for `tf_slim`, with the other finders' spec."""

  @classmethod
  def find_spec(cls, fullname, path=None, target=None):
    """The spec the other finders give `tf_slim`, its loader followed by compat; else None."""
    if fullname != TRIGGER_MODULE:
      return None
    for finder in list(sys.meta_path):
      if finder is cls or not hasattr(finder, 'find_spec'):
        continue
      spec = finder.find_spec(fullname, path, target)
      if spec is None:
        continue
      if spec.loader is not None and hasattr(spec.loader, 'exec_module'):
        spec.loader = _LoaderThenCompat(spec.loader)
      return spec
    return None

  @classmethod
  def uninstall(cls):
    """Removes the finder from `sys.meta_path` (a no-op when it is not there)."""
    while cls in sys.meta_path:
      sys.meta_path.remove(cls)


def install():
  """Adds the finder to `sys.meta_path`, unless turned off, tf_slim is imported, or present.

  Returns:
    True when this call added it.
  """
  if not enabled() or TRIGGER_MODULE in sys.modules or _TfSlimFinder in sys.meta_path:
    return False
  sys.meta_path.insert(0, _TfSlimFinder)
  return True


def installed():
  """Whether the finder is waiting for tf_slim in this process."""
  return _TfSlimFinder in sys.meta_path
