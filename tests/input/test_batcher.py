"""core.batcher.BatchQueue and core.prefetcher.prefetch on counted examples.

Every example is made from a counter that goes up by one per example and
stops the input (OutOfRange) after the last one, so example `n` is known in
advance: its tensors have sizes and values computed from `n`. One queue
carries tensors of every kind at once (varying in one dimension, in all
dimensions, fixed, scalar, string), and the test checks that each comes
back unpadded, with its static shape, in order, and that the input ends
without a partial batch.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf

from core import batch_util
from core import batcher
from core import prefetcher
from tests.input import input_test_util

tf.compat.v1.disable_eager_execution()


@pytest.fixture
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _counter(first, stop):
  """An int32 that is `first`, `first + 1`, ... per run; OutOfRange at `stop`."""
  variable = tf.compat.v1.Variable(first, dtype=tf.int32, use_resource=False)
  return tf.compat.v1.count_up_to(variable, stop)


def _example(n):
  """Tensors of every shape kind for example number `n` (a scalar tensor)."""
  return {
      'rows': tf.tile(tf.range(4)[tf.newaxis], tf.stack([n, 1])),  # [n, 4]
      'square': tf.reshape(tf.range(n * n), tf.stack([n, n])),  # [n, n]
      'fixed': tf.reshape(tf.range(12), [3, 4]) * n,  # always [3, 4]
      'id': n,
      'name': tf.strings.as_string(n),
  }


def _expected(n):
  return {
      'rows': np.tile(np.arange(4), (n, 1)),
      'square': np.arange(n * n).reshape(n, n),
      'fixed': np.arange(12).reshape(3, 4) * n,
      'id': n,
      'name': str(n).encode(),
  }


def _batch_queue(tensor_dict, batch_size, **kwargs):
  options = dict(batch_queue_capacity=100, num_batch_queue_threads=1, prefetch_queue_capacity=100)
  options.update(kwargs)
  return batcher.BatchQueue(tensor_dict, batch_size=batch_size, **options)


@pytest.mark.parametrize('batch_size', [1, 3])
def test_each_example_comes_back_unpadded_in_order(graph, batch_size):
  num_batches, first = 3, 2
  tensor_dict = _example(_counter(first, first + num_batches * batch_size))
  examples = _batch_queue(tensor_dict, batch_size).dequeue()

  # The constructor records each entry's runtime shape in the dict passed in.
  assert 'square' + batcher.rt_shape_str in tensor_dict
  assert len(examples) == batch_size
  for example in examples:
    assert set(example) == {'rows', 'square', 'fixed', 'id', 'name'}
    static = {key: t.get_shape().as_list() for key, t in example.items()}
    assert static == {'rows': [None, 4], 'square': [None, None], 'fixed': [3, 4],
                      'id': [], 'name': []}

  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    with input_test_util.queue_runners(sess):
      seen = [example for _ in range(num_batches) for example in sess.run(examples)]
      with pytest.raises(tf.errors.OutOfRangeError):  # no partial last batch
        sess.run(examples)
  for n, example in enumerate(seen, first):
    for key, value in _expected(n).items():
      np.testing.assert_array_equal(example[key], value, err_msg='%s of example %d' % (key, n))


def test_queues_are_named_and_report_their_fullness(graph):
  _batch_queue({'x': tf.reshape(_counter(1, 100), [1])}, 2, batch_queue_capacity=20,
               num_batch_queue_threads=2, prefetch_queue_capacity=7)
  summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
  tags = [tf.get_static_value(s.op.inputs[0]) for s in summaries]
  tags = [t.decode() if isinstance(t, bytes) else s.op.name for t, s in zip(tags, summaries)]
  assert any('batch/fraction_of_20_full' in t for t in tags), tags
  assert any('queue/prefetch_queue/fraction_of_7_full' in t for t in tags), tags
  assert graph.get_operation_by_name('prefetch_queue').type == 'PaddingFIFOQueueV2'
  # One runner fills the batch queue, one the prefetch queue.
  assert len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)) == 2


@pytest.mark.parametrize('tensor, batch_size, message', [
    (lambda: tf.zeros([2]), 0, 'batch_size'),
    (lambda: tf.compat.v1.placeholder(tf.float32), 2, 'unknown rank'),
])
def test_bad_batch_queue_arguments_are_named(graph, tensor, batch_size, message):
  with pytest.raises(ValueError, match=message):
    batcher.BatchQueue({'x': tensor()}, batch_size, 10, 1, 2)


def test_prefetch_keeps_static_shapes_and_ends_with_its_input(graph):
  num_batches, batch_size = 5, 4
  height = tf.random.uniform([], 1, 10, dtype=tf.int32)
  width = tf.random.uniform([], 1, 10, dtype=tf.int32)
  varying = tf.random.normal(tf.stack([batch_size, height, width, 3]))
  varying.set_shape([batch_size, None, None, 3])
  queue = prefetcher.prefetch({
      'step': _counter(0, num_batches),
      'image': tf.random.normal([batch_size, 32, 32, 3]),
      'label': tf.random.uniform([batch_size, 1], 0, 10, dtype=tf.int32),
      'varying_image': varying,
      'varying_label': tf.random.uniform(tf.stack([batch_size, height]), 0, 10, dtype=tf.int32),
  }, capacity=100)
  tensors = queue.dequeue()
  assert {key: t.get_shape().as_list() for key, t in tensors.items() if key != 'step'} == {
      'image': [batch_size, 32, 32, 3], 'label': [batch_size, 1],
      'varying_image': [batch_size, None, None, 3], 'varying_label': [batch_size, None]}

  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    with input_test_util.queue_runners(sess):
      fetched = [sess.run(tensors) for _ in range(num_batches)]
      with pytest.raises(tf.errors.OutOfRangeError):
        sess.run(tensors)
  assert [f['step'] for f in fetched] == list(range(num_batches))
  for f in fetched:
    assert f['image'].shape == (batch_size, 32, 32, 3)
    assert f['label'].shape == (batch_size, 1)
    # Both varying entries were made from one draw of height (and width).
    _, h, w, channels = f['varying_image'].shape
    assert 1 <= h < 10 and 1 <= w < 10 and channels == 3
    assert f['varying_label'].shape == (batch_size, h)


def test_prefetch_queue_is_named_and_reports_its_fullness(graph):
  queue = prefetcher.prefetch({'x': tf.zeros([3])}, capacity=4)
  assert queue.name == 'prefetch_queue'
  tags = [op.name for op in graph.get_operations() if op.type == 'ScalarSummary']
  assert any('fraction_of_4_full' in t for t in tags), tags


def test_pad_images_pads_to_the_largest_and_moves_the_boxes_into_the_padded_frame(graph):
  wide = np.arange(1 * 2 * 4 * 1, dtype=np.float32).reshape([1, 2, 4, 1]) + 1.0
  tall = np.arange(1 * 4 * 2 * 1, dtype=np.float32).reshape([1, 4, 2, 1]) + 1.0
  wide_shape = tf.compat.v1.placeholder(tf.float32, [1, None, None, 1])
  tall_shape = tf.compat.v1.placeholder(tf.float32, [1, None, None, 1])
  # The tall image's content is 3 rows of its 4 (its resizer padded one).
  preprocessed = [(wide_shape, tf.constant([[2, 4, 1]])), (tall_shape, tf.constant([[3, 2, 1]]))]
  boxes = [tf.constant([[0.0, 0.0, 1.0, 1.0]]), tf.constant([[0.0, 0.5, 1.0, 1.0]])]
  images, true_shapes, padded_boxes = batch_util.pad_images(preprocessed, boxes)
  with tf.compat.v1.Session() as sess:
    images, true_shapes, padded_boxes = sess.run(
        [images, true_shapes, padded_boxes], {wide_shape: wide, tall_shape: tall})
  assert images.shape == (2, 4, 4, 1)
  np.testing.assert_array_equal(images[0, :2], wide[0])
  assert not images[0, 2:].any() and not images[1, :, 2:].any()
  np.testing.assert_array_equal(images[1, :, :2], tall[0])
  np.testing.assert_array_equal(true_shapes, [[2, 4, 1], [3, 2, 1]])
  # Content 2x4 of 4x4, and 3x2 of 4x4.
  np.testing.assert_allclose(padded_boxes[0], [[0.0, 0.0, 0.5, 1.0]])
  np.testing.assert_allclose(padded_boxes[1], [[0.0, 0.25, 0.75, 0.5]])


def test_pad_images_keeps_one_static_size_as_it_is(graph):
  preprocessed = [(tf.zeros([1, 8, 6, 3]), tf.constant([[8, 6, 3]]))] * 2
  boxes = [tf.constant([[0.1, 0.2, 0.3, 0.4]])] * 2
  images, _, padded_boxes = batch_util.pad_images(preprocessed, boxes)
  assert images.shape.as_list() == [2, 8, 6, 3]
  with tf.compat.v1.Session() as sess:
    np.testing.assert_allclose(sess.run(padded_boxes), [[[0.1, 0.2, 0.3, 0.4]]] * 2)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
