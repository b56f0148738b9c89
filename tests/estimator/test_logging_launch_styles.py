"""Each log line is printed once, however a user program is launched (issue 44, items C and G).

tests/estimator/logging_program_main.py trains and evaluates an Estimator in a
process of its own, started in the four ways users start TensorFlow programs:
a plain script, `tf.compat.v1.app.run(main)`, `absl.app.run(main)` and a
notebook-like `python -c`. The tests count lines of its stderr:

* a line TensorFlow logs ('Saving checkpoints for 4 into') and lines
  slimtrain logs ('Loss for final step', 'Saving dict for global step 4')
  appear exactly once, and no log line is printed twice in a row (two
  handlers printing one record);
* with `tf.compat.v1.logging.set_verbosity(INFO)` slimtrain's INFO lines are
  shown, and without it (a plain script) they are not, as with tf.estimator,
  whose INFO lines went through the 'tensorflow' logger;
* a tf.contrib.learn program (learn_runner over an experiment_fn, the shape of
  the TF 1 CIFAR-10 Estimator tutorial) logs each evaluation's results once.

A last test checks that importing slimtrain's packages and running an
Estimator leave the root logger's and the 'tensorflow' logger's handlers as
they were.
"""

import os
import re
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PROGRAM = os.path.join(_ROOT, 'tests', 'estimator', 'logging_program_main.py')
_STYLES = ('plain', 'tf_app', 'absl_app', 'inline')
# The styles under absl's app: absl's handler prints at absl's --verbosity (INFO by default).
_APP_STYLES = ('tf_app', 'absl_app')

_TF_LINE = 'Saving checkpoints for 4 into'  # TensorFlow's CheckpointSaverHook.
_FINAL_LOSS = 'Loss for final step'  # slimtrain's Estimator.train.
_EVAL_RESULTS = 'Saving dict for global step'  # slimtrain's Estimator.evaluate.


def _run(style, workload, verbosity, model_dir):
  """Runs the program in `style`; returns its stderr (after checking it succeeded)."""
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='2')
  if style == 'inline':
    command = [sys.executable, '-c',
               'from tests.estimator import logging_program_main as program\n'
               'program.run_inline(%r, %r, %r)\n' % (workload, verbosity, model_dir)]
  else:
    command = [sys.executable, _PROGRAM, style, workload, verbosity, model_dir]
  proc = subprocess.run(command, cwd=_ROOT, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return proc.stderr


def _lines_with(output, text):
  return [line for line in output.splitlines() if text in line]


def _repeated_lines(output):
  """Log lines printed twice in a row: one record through two handlers."""
  lines = output.splitlines()
  return [a for a, b in zip(lines, lines[1:]) if a == b and a.strip()]


@pytest.mark.parametrize('style', _STYLES)
def test_each_line_is_printed_once_with_verbosity_info(style, tmp_path):
  output = _run(style, 'estimator', 'info', str(tmp_path / 'model'))
  assert len(_lines_with(output, _TF_LINE)) == 1, output
  assert len(_lines_with(output, _FINAL_LOSS)) == 1, output
  assert len(_lines_with(output, _EVAL_RESULTS + ' 4:')) == 1, output
  assert not _repeated_lines(output), output


@pytest.mark.parametrize('style', ['plain', 'inline'])
def test_info_lines_stay_hidden_at_the_default_verbosity(style, tmp_path):
  output = _run(style, 'estimator', 'default', str(tmp_path / 'model'))
  for text in (_TF_LINE, _FINAL_LOSS, _EVAL_RESULTS):
    assert not _lines_with(output, text), output
  assert not _repeated_lines(output), output


@pytest.mark.parametrize('style', _APP_STYLES)
def test_under_absl_app_info_lines_follow_absl_verbosity(style, tmp_path):
  # absl's --verbosity (INFO when not given) sets the level of its root handler,
  # and the 'tensorflow' logger inherits it: tf.estimator programs printed their
  # INFO lines under app.run without calling set_verbosity.
  output = _run(style, 'estimator', 'default', str(tmp_path / 'model'))
  for text in (_TF_LINE, _FINAL_LOSS, _EVAL_RESULTS + ' 4:'):
    assert len(_lines_with(output, text)) == 1, output
  assert not _repeated_lines(output), output


def _evaluation_result_lines(output):
  """Lines that carry an evaluation's metrics (the model's 'mae' metric)."""
  return [line for line in output.splitlines() if re.search(r'\bmae = ', line)]


@pytest.mark.parametrize('style', ['plain', 'absl_app'])
def test_a_contrib_learn_program_logs_each_evaluation_once(style, tmp_path):
  # Checkpoints at steps 2 and 4 (train_steps), each evaluated once.
  output = _run(style, 'contrib', 'info', str(tmp_path / 'model'))
  results = _evaluation_result_lines(output)
  assert len(results) == 2, output
  assert _EVAL_RESULTS + ' 2: ' in results[0], results
  assert _EVAL_RESULTS + ' 4: ' in results[1], results
  # tf.estimator's layout: name = value, sorted by name.
  assert re.search(r'global step 4: global_step = 4, loss = [-0-9.e]+, mae = [-0-9.e]+$',
                   results[1]), results
  assert not _repeated_lines(output), output


_HANDLERS_PROGRAM = r'''
import logging
import tensorflow as tf

def handlers():
  return (list(logging.getLogger().handlers), list(tf.get_logger().handlers),
          tf.get_logger().propagate, logging.getLogger().level)

before = handlers()
import core, deployment, estimator, builders, models, utils, trainer
from trainer import model_lib, trainer as legacy_trainer
from tests.estimator import logging_program_main as program
after_import = handlers()
program.run_inline('estimator', 'info', %r)
after_use = handlers()
print('IMPORT', before == after_import, before, after_import)
print('USE', before == after_use, before, after_use)
'''


def test_imports_and_use_leave_the_log_handlers_alone(tmp_path):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=_ROOT)
  proc = subprocess.run([sys.executable, '-c', _HANDLERS_PROGRAM % str(tmp_path / 'model')],
                        cwd=_ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert 'IMPORT True' in proc.stdout, proc.stdout
  assert 'USE True' in proc.stdout, proc.stdout


_PACKAGES = ('builders', 'core', 'deployment', 'estimator', 'models', 'trainer', 'utils')


def _library_sources():
  for package in _PACKAGES:
    for folder, _, names in os.walk(os.path.join(_ROOT, package)):
      for name in sorted(names):
        if name.endswith('.py'):
          path = os.path.join(folder, name)
          with open(path) as source:
            yield os.path.relpath(path, _ROOT), source.read()


def test_the_library_logs_only_through_core_logs():
  # absl.logging's calls put a handler on the root logger (logging.basicConfig)
  # in every program not run by absl.app.run.
  users = [path for path, text in _library_sources()
           if re.search(r'^\s*(from absl import logging|import absl\.logging)', text, re.M)]
  assert not users, users


def test_every_log_function_the_library_calls_exists_and_flush_works():
  from core import logs  # pylint: disable=g-import-not-at-top
  called = set()
  for path, text in _library_sources():
    if path != os.path.join('core', 'logs.py') and 'from core import logs as logging' in text:
      called.update(re.findall(r'\blogging\.([a-z_]+)\(', text))
  assert called and all(callable(getattr(logs, name, None)) for name in called), called
  logs.flush()  # TensorFlow's own flush raises NotImplementedError.
  assert logs.logger().name == 'tensorflow'


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
