"""core.variables_helper (= utils.variables_helper): which variables to train,
how their gradients are scaled, and which of them a checkpoint can restore.

The fine-tune story a user follows: a detector has a backbone
(`FeatureExtractor/...`) and a head (`BoxPredictor/...`); they freeze or
scale the backbone's gradients by regex, and restore from an older
checkpoint only what it holds with the same shape. One checkpoint is written
per module (a `module`-scoped fixture) and each test builds the graph of the
"new" model against it.
"""

import logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import variables_helper

tf.compat.v1.disable_eager_execution()

_NAMES = ['FeatureExtractor/conv/weights', 'FeatureExtractor/conv/biases',
          'BoxPredictor/conv/weights', 'BoxPredictor/conv/biases']


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


@pytest.fixture
def detector(graph):
  """The four variables of `_NAMES`, holding 1, 2, 3, 4."""
  return [tf.compat.v1.Variable(float(i), name=name) for i, name in enumerate(_NAMES, 1)]


def _names(variables):
  return [v.op.name for v in variables]


# --- which variables -----------------------------------------------------------

@pytest.mark.parametrize('regexes, invert, kept', [
    ([], False, _NAMES),
    ([''], False, _NAMES),  # an empty regex matches nothing ...
    ([''], True, []),  # ... in either direction
    (['FeatureExtractor/.*'], False, _NAMES[2:]),
    (['FeatureExtractor.*biases', 'BoxPredictor.*biases'], False, _NAMES[0::2]),
    (['FeatureExtractor.*biases', 'BoxPredictor.*biases'], True, _NAMES[1::2]),
])
def test_filter_variables_drops_matches_or_keeps_only_them(detector, regexes, invert, kept):
  assert _names(variables_helper.filter_variables(detector, regexes, invert=invert)) == kept


def test_filter_variables_of_nothing_is_nothing():
  assert variables_helper.filter_variables([], ['.*']) == []


@pytest.mark.parametrize('include, exclude, kept', [
    (None, None, _NAMES),
    ([], [], _NAMES),
    (['BoxPredictor'], None, _NAMES[2:]),
    (None, ['biases$'], _NAMES[0::2]),
    (['conv/'], ['^FeatureExtractor'], _NAMES[2:]),  # exclude wins over include
    (['Nothing'], None, []),
])
def test_trainable_variables_by_include_and_exclude_patterns(detector, include, exclude, kept):
  chosen = variables_helper.filter_trainable_variables(detector, include, exclude)
  assert _names(chosen) == kept


# --- gradients -------------------------------------------------------------------

def test_gradient_scaling_and_freezing_touch_only_matching_variables(detector):
  # Gradient i+10 for variable i, so every pair tells which variable it is.
  grads_and_vars = [(tf.constant(10.0 + i), v) for i, v in enumerate(detector, 1)]
  backbone_off = variables_helper.multiply_gradients_matching_regex(
      grads_and_vars, ['FeatureExtractor/.*'], 0.0)
  biases_doubled = variables_helper.multiply_gradients_matching_regex(
      grads_and_vars, ['.*/biases'], 2.0)
  frozen = variables_helper.freeze_gradients_matching_regex(
      grads_and_vars, ['FeatureExtractor/.*'])
  assert [v for _, v in backbone_off] == detector
  assert [v for _, v in frozen] == detector[2:]  # frozen variables leave the list

  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    values = sess.run([[g for g, _ in pairs] for pairs in (backbone_off, biases_doubled, frozen)])
  assert values == [[0, 0, 13, 14], [11, 24, 13, 28], [13, 14]]


def test_gradients_no_regex_matches_are_returned_as_they_are(detector):
  grads_and_vars = [(tf.constant(1.0), v) for v in detector]
  same = variables_helper.multiply_gradients_matching_regex(grads_and_vars, ['NoSuch/.*'], 3.0)
  assert all(a is b for a, b in zip(same, grads_and_vars)) and len(same) == 4
  assert variables_helper.multiply_gradients_matching_regex([], ['.*'], 2.0) == []


def test_sparse_gradients_stay_sparse_and_missing_ones_stay_none(graph):
  table = tf.compat.v1.Variable(np.ones([4, 2], np.float32), name='Embedding/biases')
  unused = tf.compat.v1.Variable(1.0, name='Unused/biases')
  (sparse,) = tf.gradients(tf.reduce_sum(tf.gather(table, [0, 2, 2])), [table])
  assert isinstance(sparse, tf.IndexedSlices)
  (scaled, variable), (missing, _) = variables_helper.multiply_gradients_matching_regex(
      [(sparse, table), (None, unused)], ['.*/biases'], 3.0)
  assert isinstance(scaled, tf.IndexedSlices) and variable is table
  assert missing is None
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    # Row 2 was gathered twice: its gradient is 2, times 3.
    np.testing.assert_allclose(sess.run(tf.convert_to_tensor(scaled)),
                               [[3, 3], [0, 0], [6, 6], [0, 0]])


# --- what a checkpoint can restore -------------------------------------------------

@pytest.fixture(scope='module')
def old_checkpoint(tmp_path_factory):
  """A checkpoint of an "old" model: 2x2 weights, scalar biases, a 2-way
  partitioned kernel and the global step. Returns its prefix."""
  prefix = str(tmp_path_factory.mktemp('old_model') / 'model.ckpt-7')
  with tf.Graph().as_default():
    tf.compat.v1.Variable([[1.0, 2.0], [3.0, 4.0]], name='weights')
    tf.compat.v1.Variable(3.0, name='biases')
    tf.compat.v1.get_variable('kernel', shape=(2, 2),
                              partitioner=tf.compat.v1.fixed_size_partitioner(2))
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(sess, prefix)
  return prefix


def _available(variables, checkpoint, **kwargs):
  return variables_helper.get_variables_available_in_checkpoint(variables, checkpoint, **kwargs)


def test_variables_held_with_the_same_shape_are_restored_in_name_order(graph, old_checkpoint):
  new = [tf.compat.v1.Variable(np.zeros((2, 2), np.float32), name='weights'),
         tf.compat.v1.Variable(0.0, name='biases'),
         tf.compat.v1.Variable(0.0, name='new_head')]
  assert _names(_available(new, old_checkpoint)) == ['biases', 'weights']


def test_a_shape_change_drops_the_variable_with_a_warning(graph, old_checkpoint, caplog):
  new = [tf.compat.v1.Variable([1.0, 2.0], name='weights'),  # was 2x2
         tf.compat.v1.Variable(0.0, name='biases')]
  with caplog.at_level(logging.WARNING):
    assert _names(_available(new, old_checkpoint)) == ['biases']
  assert 'incompatible shape' in caplog.text and 'weights' in caplog.text


@pytest.mark.parametrize('include_global_step', [False, True])
def test_the_global_step_is_restored_only_when_asked(graph, old_checkpoint, include_global_step):
  step = tf.compat.v1.train.get_or_create_global_step()
  biases = tf.compat.v1.Variable(0.0, name='biases')
  restored = _available([biases, step], old_checkpoint, include_global_step=include_global_step)
  assert set(restored) == ({biases, step} if include_global_step else {biases})


def test_a_dict_maps_checkpoint_names_to_differently_named_variables(graph, old_checkpoint):
  restored = _available({'biases': tf.compat.v1.Variable(0.0, name='head/bias'),
                         'not_saved': tf.compat.v1.Variable(0.0, name='other')},
                        old_checkpoint)
  assert isinstance(restored, dict)
  assert {k: v.op.name for k, v in restored.items()} == {'biases': 'head/bias'}


def test_partitioned_variables_match_whole_or_by_part(graph, old_checkpoint):
  kernel = tf.compat.v1.get_variable('kernel', shape=(2, 2),
                                     partitioner=tf.compat.v1.fixed_size_partitioner(2))
  assert _available([kernel], old_checkpoint) == [kernel]
  # The parts, as global_variables() lists them, match the whole's name and shape.
  parts = tf.compat.v1.global_variables()
  assert len(parts) == 2
  assert set(_available(parts, old_checkpoint)) == set(parts)


def test_a_train_dir_stands_for_its_latest_checkpoint(graph, old_checkpoint):
  train_dir = os.path.dirname(old_checkpoint)
  assert variables_helper.resolve_checkpoint_path(old_checkpoint) == old_checkpoint
  assert variables_helper.resolve_checkpoint_path(train_dir) == old_checkpoint
  biases = tf.compat.v1.Variable(0.0, name='biases')
  assert _available([biases], train_dir) == [biases]


def test_missing_or_empty_checkpoint_paths_are_named_in_the_error(old_checkpoint, tmp_path):
  missing_prefix = old_checkpoint.replace('-7', '-8')
  for missing in (missing_prefix, str(tmp_path)):
    with pytest.raises(ValueError, match='No checkpoint found.*' + os.path.basename(missing)):
      variables_helper.resolve_checkpoint_path(missing)
  with pytest.raises(ValueError, match='empty'):
    variables_helper.resolve_checkpoint_path('')
  with pytest.raises(ValueError, match='list or dict'):
    _available('weights', old_checkpoint)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
