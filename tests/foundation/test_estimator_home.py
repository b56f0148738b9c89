"""The estimator package lives at the top level; its old address still works.

Issue 25 D moved `trainer/estimator/` to `estimator/`. Programs written
against the old address keep running unchanged:

    from trainer import estimator as tfe          # old
    import estimator as tfe                       # canonical

Both must yield one module per file, never two copies: a RunConfig made
through one path is accepted by an Estimator made through the other, and
isinstance agrees. And the legacy trainer must not import the estimator
package as a side effect of being imported.
"""

import ast
import importlib
import importlib.util
import os
import pkgutil
import subprocess
import sys

import pytest

import estimator

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _submodule_names():
  """Every module of the estimator package, relative to it ('canned.dnn', ...)."""
  return sorted(info.name[len('estimator.'):] for info in
                pkgutil.walk_packages(estimator.__path__, prefix='estimator.'))


def test_the_walk_finds_the_subpackages():
  # Guards the parametrization below against silently walking nothing.
  names = _submodule_names()
  assert {'canned', 'canned.dnn', 'export', 'export.export_output', 'hooks',
          'estimator', 'run_config'} <= set(names)


@pytest.mark.parametrize('name', _submodule_names())
def test_every_module_is_one_object_under_both_names(name):
  old = importlib.import_module('trainer.estimator.' + name)
  new = importlib.import_module('estimator.' + name)
  assert old is new
  # The module keeps its own identity: the name, spec and file of estimator/.
  assert (old.__name__, old.__spec__.name) == ('estimator.' + name, 'estimator.' + name)
  assert os.path.dirname(old.__file__).startswith(os.path.join(_ROOT, 'estimator'))


def test_the_old_import_statements_give_the_new_modules():
  from trainer import estimator as tfe
  import trainer.estimator as tfe_too
  from trainer.estimator import Estimator, RunConfig
  from trainer.estimator.canned import dnn
  from trainer.estimator.hooks import LoggingTensorHook
  import trainer.estimator.export

  assert tfe is tfe_too is estimator
  assert (Estimator, RunConfig) == (estimator.Estimator, estimator.RunConfig)
  assert dnn is estimator.canned.dnn
  assert dnn.DNNClassifier is estimator.DNNClassifier
  assert LoggingTensorHook is estimator.hooks.LoggingTensorHook
  assert trainer.estimator.export is estimator.export
  assert trainer.estimator.export.ServingInputReceiver is estimator.export.ServingInputReceiver


def test_a_module_the_package_lacks_is_missing_under_the_name_asked_for():
  with pytest.raises(ModuleNotFoundError, match="'trainer.estimator.no_such_module'"):
    importlib.import_module('trainer.estimator.no_such_module')
  assert importlib.util.find_spec('trainer.estimator.no_such_module') is None


def test_objects_cross_between_the_paths(tmp_path):
  from trainer import estimator as old_tfe
  from trainer.estimator.canned import heads as old_heads
  from estimator.canned import heads

  config = old_tfe.RunConfig(tf_random_seed=3, save_checkpoints_steps=5)
  assert isinstance(config, estimator.RunConfig)
  assert isinstance(old_heads.RegressionHead(), heads.RegressionHead)

  def model_fn(features, labels, mode):
    del features, labels
    raise AssertionError('not built: only the constructor is checked, mode %s' % mode)

  # Estimator refuses a config that is not its RunConfig: a second copy of the
  # class would fail right here.
  made = estimator.Estimator(model_fn, model_dir=str(tmp_path), config=config)
  assert made.config.tf_random_seed == 3
  assert isinstance(made, old_tfe.Estimator)


def _run_fresh(program):
  """Runs `program` in a new interpreter from the repository root; returns its stdout."""
  result = subprocess.run([sys.executable, '-c', program], cwd=_ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def test_the_legacy_trainer_does_not_import_the_estimator_package():
  out = _run_fresh(
      'import sys\n'
      'import trainer, trainer.trainer, trainer.train, trainer.evaluator, trainer.eval\n'
      'import trainer.exporter, trainer.export\n'
      'print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] == "estimator"\n'
      '                       or m.startswith("trainer.estimator")))\n'
      # Asked for, the old attribute path loads it (as an imported subpackage did).
      'print("LATER", trainer.estimator.Estimator is sys.modules["estimator"].Estimator)\n')
  assert 'LOADED []' in out
  assert 'LATER True' in out


def test_a_fresh_import_of_the_new_package_then_the_workflow_has_no_cycle():
  # The Estimator workflow's programs import the package; the package imports
  # neither them nor the alias, so either order works in a new process.
  out = _run_fresh('import estimator\n'
                   'import trainer.model_lib, trainer.model_main\n'
                   'import trainer.estimator\n'
                   'print("SAME", trainer.estimator is estimator)\n')
  assert 'SAME True' in out


def _top_level_imports(path):
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name.split('.')[0]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      yield node.module.split('.')[0]


def test_the_estimator_package_never_imports_the_programs_above_it():
  # trainer/ imports estimator/ (model_lib, the alias); the reverse would make a cycle.
  above = {'trainer', 'benchmarks', 'tools'}
  offenders = []
  for folder, _, files in os.walk(os.path.join(_ROOT, 'estimator')):
    for name in sorted(f for f in files if f.endswith('.py')):
      path = os.path.join(folder, name)
      bad = sorted(set(_top_level_imports(path)) & above)
      if bad:
        offenders.append('%s imports %s' % (os.path.relpath(path, _ROOT), ', '.join(bad)))
  assert not offenders, offenders


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
