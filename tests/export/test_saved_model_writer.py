"""Tests for core.saved_model_writer: staged writes, renames, modes, cleanup."""

import os
import stat
import sys

import pytest
import tensorflow as tf

from core import saved_model_writer

tf.compat.v1.disable_eager_execution()


def _write_files(staging_dir):
  with open(os.path.join(staging_dir, 'saved_model.pb'), 'w') as f:
    f.write('model')
  os.makedirs(os.path.join(staging_dir, 'variables'))


def test_target_appears_whole_with_the_umask_mode(tmp_path):
  target = str(tmp_path / 'base' / '7')
  previous = os.umask(0o027)
  try:
    assert saved_model_writer.write_atomically(target, _write_files) == target
  finally:
    os.umask(previous)
  assert sorted(os.listdir(target)) == ['saved_model.pb', 'variables']
  assert stat.S_IMODE(os.stat(target).st_mode) == 0o750
  assert os.listdir(str(tmp_path / 'base')) == ['7']


def test_staging_dir_is_hidden_and_not_numeric(tmp_path):
  seen = []
  saved_model_writer.write_atomically(str(tmp_path / '12'), seen.append)
  name = os.path.basename(seen[0])
  assert name.startswith('.12.tmp-') and not name.isdigit()
  assert os.path.dirname(seen[0]) == str(tmp_path)


def test_failure_leaves_nothing_and_the_target_untouched(tmp_path):
  def fail(staging_dir):
    _write_files(staging_dir)
    raise OSError('disk full')

  with pytest.raises(OSError, match='disk full'):
    saved_model_writer.write_atomically(str(tmp_path / 'model'), fail)
  assert os.listdir(str(tmp_path)) == []


def test_empty_target_is_replaced_and_a_full_one_refused(tmp_path):
  (tmp_path / 'empty').mkdir()
  saved_model_writer.write_atomically(str(tmp_path / 'empty'), _write_files)
  assert sorted(os.listdir(str(tmp_path / 'empty'))) == ['saved_model.pb', 'variables']
  (tmp_path / 'full').mkdir()
  (tmp_path / 'full' / 'keep.txt').write_text('x')
  with pytest.raises(ValueError, match='full exists and is not empty'):
    saved_model_writer.write_atomically(str(tmp_path / 'full'), _write_files)
  assert os.listdir(str(tmp_path / 'full')) == ['keep.txt']


def test_leftover_staging_dir_of_a_crash_is_cleared(tmp_path):
  staging = tmp_path / 'temp-5'
  staging.mkdir()
  (staging / 'half.pb').write_text('x')
  saved_model_writer.write_atomically(str(tmp_path / '5'), _write_files,
                                      staging_dir=str(staging))
  assert sorted(os.listdir(str(tmp_path))) == ['5']
  assert sorted(os.listdir(str(tmp_path / '5'))) == ['saved_model.pb', 'variables']


def test_bytes_paths_as_estimators_pass_them(tmp_path):
  target = os.path.join(str(tmp_path), '9').encode()
  assert saved_model_writer.write_atomically(target, _write_files) == target
  assert os.path.isdir(target)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
