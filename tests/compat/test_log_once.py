"""Command lines print each log message once, in absl's format (compat fix logging.one_format).

Runs `python -m trainer.train` and `python -m trainer.export` as real
processes and counts a message TF itself logs (its SessionManager's, the
SavedModel builder's) and one slimtrain logs.
"""

import os
import subprocess
import sys

import pytest

from tests.trainer import cluster_testlib as lib

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(module, *args, env_extra=None):
  env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PYTHONPATH=_ROOT, **(env_extra or {}))
  proc = subprocess.run([sys.executable, '-m', module] + list(args), cwd=_ROOT, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return proc.stdout + proc.stderr


def _lines_with(output, text):
  return [line for line in output.splitlines() if text in line]


@pytest.fixture
def trained(tmp_path):
  data = lib.write_colour_records(str(tmp_path / 'data'), num_examples=8)
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=2)
  train_dir = str(tmp_path / 'train')
  return config, train_dir, _run(lib.MODULE, *lib.train_args(config, train_dir))


def test_train_prints_each_message_once_in_one_format(trained):
  _, _, output = trained
  assert len(_lines_with(output, 'Done running local_init_op.')) == 1, output  # TF's.
  assert len(_lines_with(output, 'Writing pipeline config file to')) == 1, output  # slimtrain.
  assert not _lines_with(output, 'INFO:tensorflow:'), output


def test_export_prints_each_message_once_in_one_format(trained, tmp_path):
  config, train_dir, _ = trained
  output = _run('trainer.export', '--pipeline_config_path=%s' % config,
                '--trained_checkpoint_prefix=%s' % os.path.join(train_dir, 'model.ckpt-2'),
                '--output_directory=%s' % (tmp_path / 'export'), '--input_type=image_tensor')
  assert len(_lines_with(output, 'SavedModel written to')) == 1, output  # TF's builder.
  assert not _lines_with(output, 'INFO:tensorflow:'), output


def test_without_the_fix_tf_messages_were_printed_twice(tmp_path):
  # Guards the test itself: the duplicate it looks for is real.
  data = lib.write_colour_records(str(tmp_path / 'data'), num_examples=8)
  config = lib.write_pipeline_config(str(tmp_path), data, num_steps=2)
  output = _run(lib.MODULE, *lib.train_args(config, str(tmp_path / 'train')),
                env_extra={'SLIMTRAIN_DISABLE_COMPAT': 'logging.one_format'})
  assert len(_lines_with(output, 'Done running local_init_op.')) == 2, output


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
