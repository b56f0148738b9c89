"""Tests for core.checkpoints: path resolution, step parsing, following a directory."""

import os
import sys

import pytest
import tensorflow as tf

from core import checkpoints
from core import variables_helper

tf.compat.v1.disable_eager_execution()


def _write_checkpoints(train_dir, steps, max_to_keep=10):
  """Writes `model.ckpt-<step>` for each step; returns their prefixes."""
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.get_variable('w', initializer=[1.0, 2.0])
    saver = tf.compat.v1.train.Saver(max_to_keep=max_to_keep)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      prefixes = []
      for step in steps:
        sess.run(global_step.assign(step))
        prefixes.append(saver.save(sess, os.path.join(train_dir, 'model.ckpt'),
                                   global_step=step))
  return prefixes


def test_resolve_directory_gives_latest_and_prefix_gives_itself(tmp_path):
  first, last = _write_checkpoints(str(tmp_path), [3, 7])
  assert checkpoints.resolve_checkpoint_path(str(tmp_path)) == last
  assert checkpoints.resolve_checkpoint_path(first) == first
  assert variables_helper.resolve_checkpoint_path is checkpoints.resolve_checkpoint_path


def test_resolve_missing_path_names_it(tmp_path):
  missing = str(tmp_path / 'nothing-here')
  with pytest.raises(ValueError, match='No checkpoint found at .*nothing-here'):
    checkpoints.resolve_checkpoint_path(missing)


def test_checkpoint_step_reads_global_step_not_the_name(tmp_path):
  prefix, = _write_checkpoints(str(tmp_path), [42])
  renamed = os.path.join(str(tmp_path), 'renamed')
  for suffix in ('.index', '.data-00000-of-00001'):
    tf.io.gfile.copy(prefix + suffix, renamed + suffix)
  assert checkpoints.checkpoint_step(prefix) == 42
  assert checkpoints.checkpoint_step(renamed) == 42


def test_checkpoint_step_falls_back_to_the_suffix(tmp_path):
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('w', initializer=[1.0])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(sess, os.path.join(str(tmp_path), 'model.ckpt'), global_step=9)
  assert checkpoints.checkpoint_step(prefix) == 9


def test_follow_evaluates_each_checkpoint_until_stop_fn_says_so(tmp_path):
  _write_checkpoints(str(tmp_path), [5])
  seen = []

  def evaluate(path):
    seen.append(path)
    return checkpoints.checkpoint_step(path)

  outcome = checkpoints.follow_checkpoints(
      str(tmp_path), evaluate, timeout=30,
      stop_fn=lambda path, step, count: 'enough' if step >= 5 else None)
  assert outcome.stop_reason == 'enough'
  assert outcome.result == 5
  assert outcome.count == 1
  assert seen == [os.path.join(str(tmp_path), 'model.ckpt-5')]


def test_follow_stops_after_the_timeout_without_new_checkpoints(tmp_path):
  _write_checkpoints(str(tmp_path), [1])
  outcome = checkpoints.follow_checkpoints(str(tmp_path), checkpoints.checkpoint_step,
                                           timeout=1)
  assert outcome == checkpoints.FollowOutcome(
      1, os.path.join(str(tmp_path), 'model.ckpt-1'), 1, checkpoints.STOP_TIMEOUT)


def test_follow_skips_a_checkpoint_deleted_before_its_turn(tmp_path):
  old, new = _write_checkpoints(str(tmp_path), [1, 2])
  for name in tf.io.gfile.glob(new + '.*'):
    tf.io.gfile.remove(name)

  def evaluate(path):
    raise tf.errors.NotFoundError(None, None, 'gone: %s' % path)

  outcome = checkpoints.follow_checkpoints(str(tmp_path), evaluate, timeout=1)
  assert outcome.count == 0
  assert outcome.stop_reason == checkpoints.STOP_TIMEOUT
  assert tf.io.gfile.exists(old + '.index')


def test_follow_raises_errors_of_a_checkpoint_that_exists(tmp_path):
  _write_checkpoints(str(tmp_path), [1])

  def evaluate(path):
    raise ValueError('model does not match %s' % path)

  with pytest.raises(ValueError, match='model does not match'):
    checkpoints.follow_checkpoints(str(tmp_path), evaluate, timeout=1)


def test_latest_step_of_a_directory_and_zero_before_any_checkpoint(tmp_path):
  train_dir = str(tmp_path / 'train')
  assert checkpoints.latest_step(train_dir) == 0  # not created yet
  os.makedirs(train_dir)
  assert checkpoints.latest_step(train_dir) == 0  # no checkpoint yet
  _write_checkpoints(train_dir, [5, 12], max_to_keep=1)
  assert checkpoints.latest_step(train_dir) == 12


def test_latest_step_reads_zero_when_the_listed_checkpoint_was_deleted(tmp_path):
  prefix, = _write_checkpoints(str(tmp_path), [4])
  for name in tf.io.gfile.glob(prefix + '.*'):
    tf.io.gfile.remove(name)
  assert checkpoints.latest_step(str(tmp_path)) == 0


def test_the_estimator_step_reader_is_latest_step(tmp_path):
  from estimator import estimator
  _write_checkpoints(str(tmp_path), [8])
  assert estimator.load_global_step_from_checkpoint_dir is checkpoints.latest_step
  assert estimator.load_global_step_from_checkpoint_dir(str(tmp_path)) == 8


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
