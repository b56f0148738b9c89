"""`import tf_slim` applies core.compat in programs that import nothing of slimtrain.

The installed `slimtrain_tf_slim_hook.pth` (setup.py) makes every interpreter
of this environment import `slimtrain_tf_slim_hook` at start, which waits for
tf_slim. `slim_eval_script.py` is shaped like research/slim's
`eval_image_classifier.py` and imports only TensorFlow and tf_slim: it runs in
a fresh interpreter (never the fork server, which has imported core.compat
already), from a temporary directory, without PYTHONPATH, so nothing but the
installation can make it work. With `SLIMTRAIN_TF_SLIM_HOOK=0` it fails as it
did before the hook, deep in tf_slim's image decoder.
"""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

from core import compat
from tests.compat import slim_eval_script

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'slim_eval_script.py')
_HOOK_ENV = 'SLIMTRAIN_TF_SLIM_HOOK'
_BEFORE_THE_HOOK = "module 'tensorflow.python.ops.control_flow_ops' has no attribute 'case'"


def _fresh_env(**extra):
  dropped = {'PYTHONPATH', _HOOK_ENV, 'SLIMTRAIN_DISABLE_COMPAT'}
  if compat.LEGACY_KERAS_FIX in compat.applied_fixes():
    dropped.add('TF_USE_LEGACY_KERAS')  # set by compat in this process, not by the user
  env = {k: v for k, v in os.environ.items() if k not in dropped}
  env.update(CUDA_VISIBLE_DEVICES='', TF_CPP_MIN_LOG_LEVEL='2', **extra)
  return env


def _python(args, cwd, timeout=300, **env):
  """Runs a fresh interpreter; returns (exit code, stdout + stderr)."""
  proc = subprocess.run([sys.executable] + list(args), cwd=cwd, env=_fresh_env(**env),
                        capture_output=True, text=True, timeout=timeout)
  return proc.returncode, proc.stdout + proc.stderr


_STATE_AT_START = ('import json, sys; import slimtrain_tf_slim_hook as hook; '
                   'print(json.dumps({"installed": hook.installed(), '
                   '"loaded": sorted(m for m in ("tensorflow", "tf_slim", "core") '
                   'if m in sys.modules), "hook_file": hook.__file__}))')


def _state_at_start(tmp_path, **env):
  code, output = _python(['-c', _STATE_AT_START], cwd=str(tmp_path), timeout=60, **env)
  assert code == 0, output
  return json.loads(output.strip().splitlines()[-1])


def test_the_pth_file_is_in_site_packages():
  path = os.path.join(sysconfig.get_paths()['purelib'], 'slimtrain_tf_slim_hook.pth')
  assert os.path.isfile(path), 'slimtrain is installed without its tf_slim hook: run make venv'
  with open(path) as pth:
    assert pth.read().strip() == (
        'import slimtrain_tf_slim_hook; slimtrain_tf_slim_hook.install()')


def test_the_hook_waits_for_tf_slim_and_imports_nothing_at_start(tmp_path):
  state = _state_at_start(tmp_path)
  assert state['installed'], state
  assert state['loaded'] == [], state  # neither TensorFlow nor slimtrain at interpreter start


def test_the_switch_turns_the_hook_off(tmp_path):
  for value in ('0', 'off', 'False'):
    assert not _state_at_start(tmp_path, **{_HOOK_ENV: value})['installed'], value


@pytest.fixture(scope='module')
def eval_inputs(tmp_path_factory):
  """(dataset file, checkpoint path) for slim_eval_script, made in this process."""
  root = tmp_path_factory.mktemp('eval_inputs')
  dataset = str(root / 'data.tfrecord')
  slim_eval_script.write_records(dataset)
  return dataset, slim_eval_script.write_checkpoint(str(root / 'model' / 'model.ckpt'))


def _eval_args(eval_inputs, eval_dir):
  dataset, checkpoint = eval_inputs
  return [_SCRIPT, '--dataset_file=%s' % dataset, '--checkpoint_path=%s' % checkpoint,
          '--eval_dir=%s' % eval_dir]


def _lines(output, prefix):
  return [line[len(prefix):] for line in output.splitlines() if line.startswith(prefix)]


def test_an_eval_script_that_imports_only_tf_slim_runs(eval_inputs, tmp_path):
  code, output = _python(_eval_args(eval_inputs, tmp_path / 'eval') + ['--import_slimtrain_after'],
                         cwd=str(tmp_path))
  assert code == 0, output[-6000:]
  applied = _lines(output, 'COMPAT ')[0].split(',')
  # The hook imported core.compat, which applied what this version pair needs.
  assert set(applied) <= set(compat.needed_fixes()), (applied, compat.needed_fixes())
  for fix_id in ('control_flow_ops.case', compat.KERAS_LEGACY_LAYERS_FIX,
                 'learning.sync_replicas_stop'):
    assert fix_id in applied, (fix_id, applied)
  evals = _lines(output, 'EVAL ')
  assert len(evals) == 2 and evals[0] == evals[1], output[-6000:]
  assert 'accuracy=' in evals[0] and 'recall_at_1=' in evals[0], evals
  # Importing slimtrain afterwards changes nothing: every fix is in place already.
  assert _lines(output, 'REAPPLIED ') == ['-'], output[-6000:]


def test_with_the_hook_off_the_script_fails_as_before(eval_inputs, tmp_path):
  code, output = _python(_eval_args(eval_inputs, tmp_path / 'eval'), cwd=str(tmp_path),
                         **{_HOOK_ENV: '0'})
  assert code != 0, output[-6000:]
  assert _BEFORE_THE_HOOK in output, output[-6000:]
  assert _lines(output, 'COMPAT ') == ['-'], output[-6000:]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
