"""Each shared training piece has one home; the old import paths still reach it.

User programs and older slimtrain code import these names from where they used
to live (`trainer.trainer.transform_gradients`, `trainer.numerics`,
`builders.learning_schedules`, ...). Those paths must hand out the very objects
of the new home, not copies that could drift apart. And the layering that
makes the homes neutral must hold: nothing in `core/` or `deployment/` imports
`trainer/` (or `builders/`, which sits above them).
"""

import ast
import os
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_legacy_trainer_names_are_the_shared_functions():
  from core import fine_tune
  from core import gradient_surgery
  from trainer import trainer

  assert trainer.transform_gradients is gradient_surgery.transform_gradients
  assert trainer.build_init_fn is fine_tune.build_init_fn
  assert trainer.fine_tune_checkpoint_type is fine_tune.fine_tune_checkpoint_type


def test_trainer_numerics_is_core_numerics():
  from core import numerics as core_numerics
  from trainer import numerics

  for name in ('GRADIENT_NORM_MESSAGE', 'check_gradient_norm', 'gate_gradients',
               'inject_nan_loss'):
    assert getattr(numerics, name) is getattr(core_numerics, name), name


def test_builders_learning_schedules_is_utils_learning_schedules():
  from builders import learning_schedules as old_home
  from utils import learning_schedules

  for name in old_home.__all__:
    assert getattr(old_home, name) is getattr(learning_schedules, name), name
  assert sorted(old_home.__all__) == sorted(
      name for name in dir(learning_schedules)
      if callable(getattr(learning_schedules, name)) and not name.startswith('_')
      and getattr(learning_schedules, name).__module__ == learning_schedules.__name__)


def test_an_old_style_schedule_call_through_the_old_path():
  import tensorflow as tf
  from builders import learning_schedules

  with tf.Graph().as_default():
    step = tf.compat.v1.placeholder(tf.int64, [])
    rate = learning_schedules.manual_stepping(step, [10, 20], [1.0, 0.1, 0.01])
    with tf.compat.v1.Session() as sess:
      assert [round(float(sess.run(rate, {step: s})), 6) for s in (0, 10, 25)] == [
          1.0, 0.1, 0.01]


def _imported_packages(path):
  """The top-level package of every module `path` imports (absolute imports)."""
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name.split('.')[0]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      yield node.module.split('.')[0]


@pytest.mark.parametrize('package', ['core', 'deployment', 'utils'])
def test_lower_packages_never_import_the_training_programs(package):
  higher = {'trainer', 'estimator', 'builders', 'models', 'benchmarks', 'tools'}
  if package == 'core':
    higher.add('deployment')
  offenders = []
  folder = os.path.join(_ROOT, package)
  for name in sorted(os.listdir(folder)):
    if name.endswith('.py'):
      bad = sorted(set(_imported_packages(os.path.join(folder, name))) & higher)
      if bad:
        offenders.append('%s/%s imports %s' % (package, name, ', '.join(bad)))
  assert not offenders, offenders


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
