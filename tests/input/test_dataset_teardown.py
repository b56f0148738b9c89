"""core.dataset_teardown: the iterators slimtrain makes over tf.data have no autotuning thread.

Destroying an iterator whose dataset autotunes waits for its model thread, and
TensorFlow does it under the lock a task's new session needs: 15-43 s of a
recovery in benchmarks/ps_failover.py (benchmarks/RESULTS.md). Every path that
turns a dataset into an iterator (the legacy input reader, the Estimator's
input_fn result, numpy_input_fn) goes through `prompt_teardown`.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import dataset_options_pb2

from builders import input_reader_builder
from core import dataset_teardown
from estimator import inputs
from estimator import util as estimator_util
from tests.input import input_test_util

tf.compat.v1.disable_eager_execution()


def _autotune_settings(graph):
  """The autotune `enabled` of each OptionsDataset op of `graph` (None: left unset)."""
  settings = []
  for op in graph.get_operations():
    if op.type == 'OptionsDataset':
      options = dataset_options_pb2.Options.FromString(op.get_attr('serialized_options'))
      autotune = options.autotune_options
      settings.append(autotune.enabled if autotune.HasField('enabled') else None)
  return settings


def _read(graph, tensor, initializer=None, count=None):
  with tf.compat.v1.Session(graph=graph) as sess:
    if initializer is not None:
      sess.run(initializer)
    values = []
    while count is None or len(values) < count:
      try:
        values.append(sess.run(tensor))
      except tf.errors.OutOfRangeError:
        break
    return values


@pytest.fixture(autouse=True)
def _autotune_switch_unset(monkeypatch):
  monkeypatch.delenv(dataset_teardown.AUTOTUNE_ENV, raising=False)


def test_autotuning_is_off_and_the_elements_are_the_same():
  with tf.Graph().as_default() as graph:
    dataset = tf.data.Dataset.range(6).map(lambda x: x * 3,
                                           num_parallel_calls=tf.data.AUTOTUNE)
    quick = dataset_teardown.prompt_teardown(dataset.prefetch(tf.data.AUTOTUNE))
    assert quick.options().autotune.enabled is False
    iterator = tf.compat.v1.data.make_initializable_iterator(quick)
    assert _read(graph, iterator.get_next(), iterator.initializer) == [0, 3, 6, 9, 12, 15]
  assert _autotune_settings(graph) == [False]


def test_the_switch_keeps_autotuning_on(monkeypatch):
  monkeypatch.setenv(dataset_teardown.AUTOTUNE_ENV, '1')
  with tf.Graph().as_default():
    dataset = tf.data.Dataset.range(3)
    assert dataset_teardown.prompt_teardown(dataset) is dataset
    assert dataset.options().autotune.enabled is None  # tf.data's default: on


def test_a_datasets_own_autotune_setting_is_kept():
  with tf.Graph().as_default():
    options = tf.data.Options()
    options.autotune.enabled = True
    chosen = tf.data.Dataset.range(3).with_options(options)
    assert dataset_teardown.prompt_teardown(chosen) is chosen


def test_the_input_readers_iterator_has_no_autotuning(tmp_path):
  info = input_test_util.shapes_dataset(str(tmp_path))
  config = input_test_util.reader_config(info['train_pattern'], info['label_map_path'])
  with tf.Graph().as_default() as graph:
    tensor_dict = input_reader_builder.build(config)
    assert len(input_test_util.read_all(tensor_dict)) == 12
  assert _autotune_settings(graph) == [False]
  with tf.Graph().as_default():
    dataset = input_reader_builder.build_dataset(config, batch_size=2)
    assert dataset.options().autotune.enabled is False


def test_an_input_fn_datasets_iterator_has_no_autotuning():
  with tf.Graph().as_default() as graph:
    dataset = tf.data.Dataset.from_tensor_slices(({'x': [1.0, 2.0]}, [0, 1]))
    features, labels, hooks = estimator_util.parse_input_fn_result(dataset)
    with tf.compat.v1.Session(graph=graph) as sess:
      for hook in hooks:  # The Estimator's hook initialises the iterator.
        hook.after_create_session(sess, None)
      values = [sess.run([features['x'], labels]) for _ in range(2)]
  assert [(float(x), int(y)) for x, y in values] == [(1.0, 0), (2.0, 1)]
  assert _autotune_settings(graph) == [False]


def test_numpy_input_fn_has_no_autotuning():
  with tf.Graph().as_default() as graph:
    input_fn = inputs.numpy_input_fn({'x': np.arange(4.0)}, np.arange(4), batch_size=2,
                                     num_epochs=1, shuffle=False)
    features, labels = input_fn()
    batches = _read(graph, [features['x'], labels])
  assert [list(y) for _, y in batches] == [[0, 1], [2, 3]]
  assert _autotune_settings(graph) == [False]


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
