"""`core.moving_averages.restore_saver`: the one Saver evaluation and export read with.

A training checkpoint holds each trainable weight twice when it was trained
with moving averages (`w` and `w/ExponentialMovingAverage`). The evaluator,
the exporter and the Estimator's eval scaffold build a fresh graph and must
read one or the other; these tests write such a checkpoint by hand and check
what lands in the variables, and that a checkpoint of another model is refused
with the names it lacks.
"""

import os
import sys

from absl import logging
import pytest
import tensorflow as tf

from core import moving_averages

tf.compat.v1.disable_eager_execution()


def _write_checkpoint(directory, with_averages=True):
  """A checkpoint of w=1, b=[2, 2], step=7 (averages: w=3, b=[4, 4]); returns its prefix."""
  with tf.Graph().as_default():
    values = {'w': 1.0, 'b': [2.0, 2.0], 'global_step': tf.constant(7, tf.int64)}
    if with_averages:
      values.update({'w/ExponentialMovingAverage': 3.0,
                     'b/ExponentialMovingAverage': [4.0, 4.0]})
    variables = [tf.compat.v1.get_variable(name, initializer=value, trainable=False)
                 for name, value in values.items()]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return tf.compat.v1.train.Saver(variables).save(sess, os.path.join(directory, 'model.ckpt'))


def _restored(checkpoint, use_moving_averages, **kwargs):
  """Builds a fresh model graph (w, b trainable; the global step), restores it, reads it."""
  with tf.Graph().as_default():
    w = tf.compat.v1.get_variable('w', initializer=0.0)
    b = tf.compat.v1.get_variable('b', initializer=[0.0, 0.0])
    step = tf.compat.v1.train.get_or_create_global_step()
    saver = moving_averages.restore_saver(use_moving_averages, checkpoint, **kwargs)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, checkpoint)
      return sess.run({'w': w, 'b': b, 'step': step})


def test_averages_are_read_into_the_trainable_variables(tmp_path):
  values = _restored(_write_checkpoint(str(tmp_path)), use_moving_averages=True)
  assert values['w'] == 3.0
  assert list(values['b']) == [4.0, 4.0]
  assert values['step'] == 7  # not trainable: read from its own name


def test_raw_weights_without_averages(tmp_path):
  values = _restored(_write_checkpoint(str(tmp_path)), use_moving_averages=False)
  assert values['w'] == 1.0
  assert list(values['b']) == [2.0, 2.0]


def test_averages_asked_of_a_checkpoint_without_them_read_the_raw_weights(tmp_path, caplog):
  checkpoint = _write_checkpoint(str(tmp_path), with_averages=False)
  with caplog.at_level(logging.WARNING):
    values = _restored(checkpoint, use_moving_averages=True)
  assert values['w'] == 1.0
  assert 'has none' in caplog.text


def test_a_checkpoint_lacking_variables_is_refused_with_their_names(tmp_path):
  checkpoint = _write_checkpoint(str(tmp_path))
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('w', initializer=0.0)
    tf.compat.v1.get_variable('head/kernel', initializer=0.0)
    needs = 'lacks 1 variables the eval model needs, e.g. head/kernel'
    with pytest.raises(ValueError, match=needs):
      moving_averages.restore_saver(False, checkpoint, model_description='eval model')


def test_without_a_checkpoint_the_map_names_the_averages(tmp_path):
  checkpoint = _write_checkpoint(str(tmp_path))
  # What the Estimator's eval scaffold builds before it knows the checkpoint.
  with tf.Graph().as_default():
    w = tf.compat.v1.get_variable('w', initializer=0.0)
    saver = moving_averages.restore_saver(True)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, checkpoint)  # b and the step are not in this graph
      assert sess.run(w) == 3.0


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
