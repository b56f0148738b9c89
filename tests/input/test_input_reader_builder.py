"""input_reader_builder: globs, sharding, epochs, sampling, shuffle, batching, sessions."""

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from builders import input_reader_builder
from core import batcher
from core import standard_fields as fields
from protos import input_reader_pb2
from tests.input import input_test_util
from tools import dataset_util

tf.compat.v1.disable_eager_execution()
_FIELDS = fields.InputDataFields


class InputReaderBuilderTest(tf.test.TestCase):

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.dir, ignore_errors=True)
    super().tearDownClass()

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.dir = tempfile.mkdtemp()
    cls.info = input_test_util.shapes_dataset(cls.dir)  # 12 images in 3 shards
    cls.all_ids = {b'train_%d' % i for i in range(12)}

  def _config(self, **kwargs):
    return input_test_util.reader_config(self.info['train_pattern'],
                                         self.info['label_map_path'], **kwargs)

  def _ids(self, config, **build_kwargs):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(config, **build_kwargs)
      return [r[_FIELDS.source_id] for r in input_test_util.read_all(tensor_dict)]

  def test_reads_every_record_once_per_epoch(self):
    ids = self._ids(self._config())
    self.assertLen(ids, 12)
    self.assertEqual(set(ids), self.all_ids)
    ids = self._ids(self._config(num_epochs=2))
    self.assertLen(ids, 24)
    self.assertEqual({i: ids.count(i) for i in set(ids)}, {i: 2 for i in self.all_ids})

  def test_num_epochs_zero_reads_forever(self):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config(num_epochs=0))
      results = input_test_util.read_all(tensor_dict, max_steps=40)
    self.assertLen(results, 40)

  def test_tensor_dict_contents(self):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config())
      self.assertEqual(tensor_dict[_FIELDS.image].get_shape().as_list(), [None, None, 3])
      self.assertEqual(tensor_dict[_FIELDS.groundtruth_boxes].get_shape().as_list(), [None, 4])
      first = input_test_util.read_all(tensor_dict)[0]
    self.assertEqual(first[_FIELDS.image].shape, (32, 32, 3))
    num_boxes = first[_FIELDS.num_groundtruth_boxes]
    self.assertGreaterEqual(num_boxes, 1)
    self.assertEqual(first[_FIELDS.groundtruth_boxes].shape, (num_boxes, 4))
    self.assertTrue(set(first[_FIELDS.groundtruth_classes]) <= {1, 2, 3})

  def test_sample_1_of_n_examples(self):
    ids = self._ids(self._config(sample_1_of_n_examples=3))
    # Round-robin shards hold records 0,3,6,9 / 1,4,7,10 / 2,5,8,11; index 0 and 3 of each.
    self.assertEqual(set(ids), {b'train_%d' % i for i in (0, 9, 1, 10, 2, 11)})

  def test_file_sharding_two_workers_disjoint_and_covering(self):
    worker_ids = [self._ids(self._config(), num_worker_replicas=2, task_index=t) for t in (0, 1)]
    self.assertEqual(len(worker_ids[0]) + len(worker_ids[1]), 12)
    self.assertEqual(set(worker_ids[0]) & set(worker_ids[1]), set())
    self.assertEqual(set(worker_ids[0]) | set(worker_ids[1]), self.all_ids)
    self.assertLen(worker_ids[0], 8)  # files 0 and 2 of 3

  def test_record_sharding_when_fewer_files_than_workers(self):
    config = input_test_util.reader_config(self.info['train_files'][0])  # 4 records, 1 file
    worker_ids = [self._ids(config, num_worker_replicas=2, task_index=t) for t in (0, 1)]
    self.assertEqual(sorted(worker_ids[0] + worker_ids[1]),
                     sorted([b'train_0', b'train_3', b'train_6', b'train_9']))
    self.assertEqual(set(worker_ids[0]) & set(worker_ids[1]), set())
    self.assertLen(worker_ids[0], 2)

  def test_shard_by_worker_off_reads_everything(self):
    ids = self._ids(self._config(shard_by_worker=False), num_worker_replicas=2, task_index=1)
    self.assertEqual(set(ids), self.all_ids)

  def test_shuffle_is_seeded_and_covering(self):
    config = self._config(shuffle=True, shuffle_buffer_size=16)
    first = self._ids(config, seed=3)
    self.assertEqual(first, self._ids(config, seed=3))
    self.assertEqual(set(first), self.all_ids)
    self.assertNotEqual(first, self._ids(self._config()))

  def test_multiple_patterns_and_interleave_settings(self):
    config = input_test_util.reader_config(self.info['train_files'][:2] + [
        self.info['train_files'][1]], num_readers=2, read_block_length=1)
    self.assertLen(self._ids(config), 8)  # duplicates are read once

  def test_config_errors_name_the_field_or_pattern(self):
    pattern = os.path.join(self.dir, 'nothing-*.tfrecord')
    with self.assertRaisesRegex(ValueError, 'nothing-\\*.tfrecord.*matches no files'):
      input_reader_builder.build(input_test_util.reader_config(pattern))
    with self.assertRaisesRegex(ValueError, 'input_path is empty'):
      input_reader_builder.build(input_test_util.reader_config([]))
    with self.assertRaisesRegex(ValueError, 'tf_record_input_reader'):
      input_reader_builder.build(input_reader_pb2.InputReader())
    with self.assertRaisesRegex(ValueError, 'task_index'):
      input_reader_builder.build(self._config(), num_worker_replicas=2, task_index=2)

  def test_build_dataset_pads_boxes_and_batches(self):
    with tf.Graph().as_default():
      dataset = input_reader_builder.build_dataset(self._config(), batch_size=5,
                                                   max_number_of_boxes=4)
      batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
      self.assertEqual(batch[_FIELDS.groundtruth_boxes].get_shape().as_list(), [5, 4, 4])
      self.assertEqual(batch[_FIELDS.image].get_shape().as_list(), [5, None, None, 3])
      batches = input_test_util.read_all(batch)
      with tf.Graph().as_default():
        examples = input_test_util.read_all(input_reader_builder.build(self._config()))
    self.assertLen(batches, 2)  # 12 examples, drop_remainder
    for i in range(5):
      n = batches[0][_FIELDS.num_groundtruth_boxes][i]
      self.assertAllClose(batches[0][_FIELDS.groundtruth_boxes][i][:n],
                          examples[i][_FIELDS.groundtruth_boxes])
      self.assertAllEqual(batches[0][_FIELDS.groundtruth_boxes][i][n:], np.zeros((4 - n, 4)))
      self.assertAllEqual(batches[0][_FIELDS.true_image_shape][i], [32, 32, 3])

  def test_build_dataset_applies_transform(self):
    def transform(tensor_dict):
      tensor_dict = dict(tensor_dict)
      tensor_dict[_FIELDS.image] = tf.image.resize(tensor_dict[_FIELDS.image], [8, 8])
      return tensor_dict
    with tf.Graph().as_default():
      dataset = input_reader_builder.build_dataset(self._config(), batch_size=4,
                                                   transform_input_data_fn=transform)
      self.assertEqual(dataset.element_spec[_FIELDS.image].shape.as_list(), [4, 8, 8, 3])

  def test_monitored_session_with_batch_queue_needs_no_extra_init(self):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config(num_epochs=0))
      tensor_dict[_FIELDS.image] = tf.cast(tensor_dict[_FIELDS.image], tf.float32)
      queue = batcher.BatchQueue(tensor_dict, batch_size=3, batch_queue_capacity=10,
                                 num_batch_queue_threads=2, prefetch_queue_capacity=2)
      batch = queue.dequeue()
      tf.compat.v1.train.get_or_create_global_step()
      with tf.compat.v1.train.MonitoredSession() as sess:
        for _ in range(3):
          result = sess.run(batch)
    self.assertLen(result, 3)
    for example in result:
      self.assertEqual(example[_FIELDS.groundtruth_boxes].shape,
                       (example[_FIELDS.num_groundtruth_boxes], 4))

  def test_supervisor_starts_reader_and_queues(self):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config(num_epochs=0))
      queue = batcher.BatchQueue(tensor_dict, batch_size=2, batch_queue_capacity=10,
                                 num_batch_queue_threads=1, prefetch_queue_capacity=2)
      batch = queue.dequeue()
      tf.compat.v1.train.get_or_create_global_step()
      supervisor = tf.compat.v1.train.Supervisor(logdir=None, summary_op=None, saver=None)
      with supervisor.managed_session() as sess:
        result = sess.run(batch)
    self.assertLen(result, 2)

  def test_classification_reader(self):
    writer = input_test_util.RecordWriter()
    examples = []
    for label in range(3):
      _, encoded = writer.image(8, 8, seed=label)
      examples.append(dataset_util.classification_example(encoded, 'jpeg', 8, 8, label=label))
    path = writer.write(os.path.join(self.get_temp_dir(), 'cls.tfrecord'), examples)
    config = input_test_util.reader_config(
        path, decoder_type=input_reader_pb2.InputReader.CLASSIFICATION)
    with tf.Graph().as_default():
      results = input_test_util.read_all(input_reader_builder.build(config))
    self.assertEqual([r[_FIELDS.label] for r in results], [0, 1, 2])


if __name__ == '__main__':
  tf.test.main()
