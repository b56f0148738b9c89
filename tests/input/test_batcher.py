"""BatchQueue and prefetch: the Object Detection API test cases, ported."""

import numpy as np
import tensorflow as tf

from core import batcher
from core import prefetcher
from tests.input import input_test_util

tf.compat.v1.disable_eager_execution()


def _counter(start, limit):
  """A variable counting up from `start`; OutOfRange once it reaches `limit`."""
  variable = tf.compat.v1.Variable(tf.constant(start, dtype=tf.int32), use_resource=False)
  return tf.compat.v1.count_up_to(variable, limit)


class BatchQueueTest(tf.test.TestCase):

  def _run_batches(self, batch, num_batches, expected_fn, first=2):
    with self.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with input_test_util.queue_runners(sess):
        i = first
        for _ in range(num_batches):
          batch_np = sess.run(batch)
          for tensor_dict in batch_np:
            for tensor in tensor_dict.values():
              self.assertAllEqual(tensor, expected_fn(i))
            i += 1
        with self.assertRaises(tf.errors.OutOfRangeError):
          sess.run(batch)

  def test_batch_and_unpad_2d_tensors_of_different_sizes_in_1st_dimension(self):
    batch_size, num_batches = 3, 2
    counter = _counter(2, num_batches * batch_size + 2)
    boxes = tf.tile(tf.reshape(tf.range(4), [1, 4]), tf.stack([counter, tf.constant(1)]))
    batch_queue = batcher.BatchQueue({'boxes': boxes}, batch_size=batch_size,
                                     batch_queue_capacity=100, num_batch_queue_threads=1,
                                     prefetch_queue_capacity=100)
    batch = batch_queue.dequeue()
    self.assertLen(batch, batch_size)
    for tensor_dict in batch:
      for tensor in tensor_dict.values():
        self.assertAllEqual([None, 4], tensor.get_shape().as_list())
    self._run_batches(batch, num_batches, lambda i: np.tile(np.arange(4), (i, 1)))

  def test_batch_and_unpad_2d_tensors_of_different_sizes_in_all_dimensions(self):
    batch_size, num_batches = 3, 2
    counter = _counter(2, num_batches * batch_size + 2)
    image = tf.reshape(tf.range(counter * counter), tf.stack([counter, counter]))
    batch_queue = batcher.BatchQueue({'image': image}, batch_size=batch_size,
                                     batch_queue_capacity=100, num_batch_queue_threads=1,
                                     prefetch_queue_capacity=100)
    batch = batch_queue.dequeue()
    for tensor_dict in batch:
      for tensor in tensor_dict.values():
        self.assertAllEqual([None, None], tensor.get_shape().as_list())
    self._run_batches(batch, num_batches, lambda i: np.arange(i * i).reshape((i, i)))

  def test_batch_and_unpad_2d_tensors_of_same_size_in_all_dimensions(self):
    batch_size, num_batches = 3, 3
    counter = _counter(1, num_batches * batch_size + 1)
    image = tf.reshape(tf.range(1, 13), [4, 3]) * counter
    batch_queue = batcher.BatchQueue({'image': image}, batch_size=batch_size,
                                     batch_queue_capacity=100, num_batch_queue_threads=1,
                                     prefetch_queue_capacity=100)
    batch = batch_queue.dequeue()
    for tensor_dict in batch:
      for tensor in tensor_dict.values():
        self.assertAllEqual([4, 3], tensor.get_shape().as_list())
    self._run_batches(batch, num_batches, lambda i: np.arange(1, 13).reshape((4, 3)) * i,
                      first=1)

  def test_batcher_when_batch_size_is_one(self):
    batch_size, num_batches = 1, 3
    counter = _counter(2, num_batches * batch_size + 2)
    image = tf.reshape(tf.range(counter * counter), tf.stack([counter, counter]))
    batch_queue = batcher.BatchQueue({'image': image}, batch_size=batch_size,
                                     batch_queue_capacity=100, num_batch_queue_threads=1,
                                     prefetch_queue_capacity=100)
    batch = batch_queue.dequeue()
    self.assertLen(batch, 1)
    for tensor_dict in batch:
      for tensor in tensor_dict.values():
        self.assertAllEqual([None, None], tensor.get_shape().as_list())
    self._run_batches(batch, num_batches, lambda i: np.arange(i * i).reshape((i, i)))

  def test_mixed_keys_scalars_strings_and_runtime_shape_entries(self):
    counter = _counter(1, 5)
    tensor_dict = {
        'boxes': tf.zeros(tf.stack([counter, 4])),
        'id': counter,
        'name': tf.strings.as_string(counter),
    }
    batch_queue = batcher.BatchQueue(tensor_dict, batch_size=2, batch_queue_capacity=10,
                                     num_batch_queue_threads=1, prefetch_queue_capacity=2)
    self.assertIn('boxes' + batcher.rt_shape_str, tensor_dict)  # the input dict is extended
    batch = batch_queue.dequeue()
    self.assertEqual(set(batch[0]), {'boxes', 'id', 'name'})
    with self.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with input_test_util.queue_runners(sess):
        first, second = sess.run(batch)
    self.assertEqual((first['id'], second['id']), (1, 2))
    self.assertEqual(first['boxes'].shape, (1, 4))
    self.assertEqual(second['boxes'].shape, (2, 4))
    self.assertEqual(second['name'], b'2')

  def test_queue_fullness_summaries_and_op_names(self):
    counter = _counter(1, 100)
    batcher.BatchQueue({'x': tf.reshape(counter, [1])}, batch_size=2, batch_queue_capacity=20,
                       num_batch_queue_threads=2, prefetch_queue_capacity=7)
    names = [s.op.inputs[0].op.get_attr('value').string_val[0].decode()
             if s.op.inputs[0].op.type == 'Const' else s.op.name
             for s in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)]
    self.assertTrue(any('queue/prefetch_queue/fraction_of_7_full' in n for n in names), names)
    self.assertTrue(any('batch/fraction_of_20_full' in n for n in names), names)
    graph = tf.compat.v1.get_default_graph()
    self.assertEqual(graph.get_operation_by_name('prefetch_queue').type, 'PaddingFIFOQueueV2')
    self.assertLen(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS), 2)

  def test_rejects_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, 'batch_size'):
      batcher.BatchQueue({'x': tf.zeros([2])}, 0, 10, 1, 2)
    with self.assertRaisesRegex(ValueError, 'unknown rank'):
      batcher.BatchQueue({'x': tf.compat.v1.placeholder(tf.float32)}, 2, 10, 1, 2)


class PrefetcherTest(tf.test.TestCase):

  def test_prefetch_tensors_with_fully_defined_shapes(self):
    num_batches, batch_size, image_size = 5, 4, 32
    counter = _counter(0, num_batches)
    image = tf.random.normal([batch_size, image_size, image_size, 3], dtype=tf.float32)
    label = tf.random.uniform([batch_size, 1], 0, 10, dtype=tf.int32)
    prefetch_queue = prefetcher.prefetch({'counter': counter, 'image': image, 'label': label},
                                         capacity=100)
    tensor_dict = prefetch_queue.dequeue()
    self.assertAllEqual(tensor_dict['image'].get_shape().as_list(),
                        [batch_size, image_size, image_size, 3])
    self.assertAllEqual(tensor_dict['label'].get_shape().as_list(), [batch_size, 1])
    with self.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with input_test_util.queue_runners(sess):
        for _ in range(num_batches):
          results = sess.run(tensor_dict)
          self.assertEqual(results['image'].shape, (batch_size, image_size, image_size, 3))
          self.assertEqual(results['label'].shape, (batch_size, 1))
        with self.assertRaises(tf.errors.OutOfRangeError):
          sess.run(tensor_dict)

  def test_prefetch_tensors_with_partially_defined_shapes(self):
    num_batches, batch_size = 5, 4
    counter = _counter(0, num_batches)
    image_height = tf.random.uniform([], 1, 10, dtype=tf.int32)
    image_width = tf.random.uniform([], 1, 10, dtype=tf.int32)
    image = tf.random.normal(tf.stack([batch_size, image_height, image_width, 3]),
                             dtype=tf.float32)
    image.set_shape([batch_size, None, None, 3])
    label = tf.random.uniform(tf.stack([batch_size, image_height]), 0, 10, dtype=tf.int32)
    prefetch_queue = prefetcher.prefetch({'counter': counter, 'image': image, 'label': label},
                                         capacity=100)
    tensor_dict = prefetch_queue.dequeue()
    self.assertAllEqual(tensor_dict['image'].get_shape().as_list(), [batch_size, None, None, 3])
    self.assertAllEqual(tensor_dict['label'].get_shape().as_list(), [batch_size, None])
    with self.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with input_test_util.queue_runners(sess):
        for _ in range(num_batches):
          results = sess.run(tensor_dict)
          self.assertEqual(results['image'].shape[0], batch_size)
          self.assertEqual(results['image'].shape[3], 3)
          self.assertEqual(results['label'].shape, (batch_size, results['image'].shape[1]))
        with self.assertRaises(tf.errors.OutOfRangeError):
          sess.run(tensor_dict)

  def test_summary_name(self):
    queue = prefetcher.prefetch({'x': tf.zeros([3])}, capacity=4)
    self.assertEqual(queue.name, 'prefetch_queue')
    tags = [op.name for op in tf.compat.v1.get_default_graph().get_operations()
            if op.type == 'ScalarSummary']
    self.assertTrue(any('fraction_of_4_full' in t for t in tags), tags)


if __name__ == '__main__':
  tf.test.main()
