"""Bad input: an error naming the file and record, or counted skips; never a wrong batch."""

import os
import shutil
import re
import tempfile

import tensorflow as tf

from builders import input_reader_builder
from core import label_map_util
from core import standard_fields as fields
from tests.input import input_test_util

tf.compat.v1.disable_eager_execution()
_FIELDS = fields.InputDataFields


def _corrupt(path, record_index):
  """Flips a byte inside the data of record `record_index` (CRC mismatch)."""
  data = bytearray(open(path, 'rb').read())
  offset = 0
  for _ in range(record_index):
    length = int.from_bytes(data[offset:offset + 8], 'little')
    offset += length + 16
  data[offset + 12 + 5] ^= 0xFF
  open(path, 'wb').write(bytes(data))


class BadInputTest(tf.test.TestCase):
  """Each file holds good records around one bad record at a known index."""

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.dir, ignore_errors=True)
    super().tearDownClass()

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.dir = tempfile.mkdtemp()
    cls.label_map = os.path.join(cls.dir, 'label_map.pbtxt')
    label_map_util.write_label_map(cls.label_map, ['a', 'b', 'c'])
    writer = input_test_util.RecordWriter()
    good = lambda i: writer.example(source_id='good_%d' % i)  # noqa: E731
    bad_examples = {
        'box_outside': (writer.example(boxes=[[0.1, 0.2, 0.5, 0.6], [0.2, 0.2, 1.4, 0.6]],
                                       classes=[1, 2]), 'box 1 .* is outside \\[0, 1\\]'),
        'xmin_above_xmax': (writer.example(boxes=[[0.1, 0.8, 0.5, 0.6]]),
                            'box 0 .* has ymin > ymax or xmin > xmax'),
        'class_not_in_label_map': (writer.example(classes=[7]),
                                   'box 0 has class id 7, which is not in the label map'),
        'missing_label': (writer.example(classes=[]),
                          'class/label \\(or class/text\\) has 0 values for 1 boxes'),
        'missing_image': (writer.example(encoded=b''), "missing feature image/encoded"),
        'undecodable_image': (writer.example(encoded=b'\xff\xd8\xff' + b'garbage' * 20),
                              'image/encoded does not decode'),
        'bbox_lengths_differ': (None, 'bbox/ymin, xmin, ymax, xmax have different lengths'),
        'not_an_example': (b'this is not a tf.Example proto',
                           'not a tf.Example with the expected feature types'),
        'wrong_feature_type': (None, 'not a tf.Example with the expected feature types'),
    }
    lengths = writer.example()
    lengths.features.feature['image/object/bbox/xmin'].float_list.value.append(0.3)
    bad_examples['bbox_lengths_differ'] = (lengths, bad_examples['bbox_lengths_differ'][1])
    wrong_type = writer.example()
    del wrong_type.features.feature['image/object/class/label']
    wrong_type.features.feature['image/object/class/label'].float_list.value.append(1.0)
    bad_examples['wrong_feature_type'] = (wrong_type, bad_examples['wrong_feature_type'][1])
    cls.cases = {}
    for i, (name, (example, pattern)) in enumerate(sorted(bad_examples.items())):
      path = os.path.join(cls.dir, 'data', '%02d_%s.tfrecord' % (i, name))
      writer.write(path, [good(2 * i), example, good(2 * i + 1)])
      cls.cases[name] = (path, 1, pattern)
    # Corrupt record: bad CRC in record 2 of 4 ends the file.
    path = os.path.join(cls.dir, 'data', '%02d_corrupt_record.tfrecord' % len(cls.cases))
    writer.write(path, [good(100), good(101), good(102), good(103)])
    _corrupt(path, 2)
    cls.cases['corrupt_record'] = (path, 2, 'corrupt TFRecord data .*at byte offset')
    # Truncated file: the last record is cut short.
    path = os.path.join(cls.dir, 'data', '%02d_truncated.tfrecord' % len(cls.cases))
    writer.write(path, [good(200), good(201)])
    data = open(path, 'rb').read()
    open(path, 'wb').write(data[:-7])
    cls.cases['truncated_file'] = (path, 1, 'corrupt TFRecord data')
    # A good file last, so that every skip is followed by a good record.
    writer.write(os.path.join(cls.dir, 'data', '99_good.tfrecord'), [good(300)])
    cls.num_good = 2 * len(bad_examples) + 2 + 1 + 1

  def _config(self):
    return input_test_util.reader_config(os.path.join(self.dir, 'data', '*.tfrecord'),
                                         self.label_map, num_readers=1)

  def test_every_bad_record_raises_an_error_naming_file_and_record(self):
    messages, good_ids = [], []
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config())
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.tables_initializer())
        for _ in range(100):
          try:
            good_ids.append(sess.run(tensor_dict[_FIELDS.source_id]))
          except tf.errors.InvalidArgumentError as e:
            messages.append(e.message)
          except tf.errors.OutOfRangeError:
            break
    self.assertLen(messages, len(self.cases))
    for name, (path, index, pattern) in self.cases.items():
      expected = re.escape('%s%s, record %d: ' % (input_reader_builder.ERROR_PREFIX, path,
                                                   index)) + '.*' + pattern
      self.assertTrue(any(re.search(expected, m) for m in messages),
                      '%s: no error matching %r in\n%s' % (name, expected, '\n'.join(messages)))
    # Only good records came through, each exactly once.
    self.assertLen(good_ids, self.num_good)
    self.assertTrue(all(i.startswith(b'good_') for i in good_ids))
    self.assertLen(set(good_ids), len(good_ids))

  def test_skip_corrupt_records_drops_and_counts_them(self):
    with tf.Graph().as_default():
      tensor_dict = input_reader_builder.build(self._config(), skip_corrupt_records=True)
      counter = [v for v in tf.compat.v1.local_variables() if 'num_skipped_records' in v.name]
      self.assertLen(counter, 1)
      summaries = [op.name for op in tf.compat.v1.get_default_graph().get_operations()
                   if op.type == 'ScalarSummary']
      self.assertTrue(any('num_skipped_records' in s for s in summaries), summaries)
      results = []
      with tf.compat.v1.Session() as sess:
        sess.run([tf.compat.v1.tables_initializer(),
                  tf.compat.v1.local_variables_initializer()])
        try:
          while True:
            results.append(sess.run(tensor_dict))
        except tf.errors.OutOfRangeError:
          pass
        skipped = sess.run(counter[0])
    ids = [r[_FIELDS.source_id] for r in results]
    self.assertLen(ids, self.num_good)
    self.assertTrue(all(i.startswith(b'good_') for i in ids))
    self.assertEqual(skipped, len(self.cases))
    for result in results:  # never a wrong example
      self.assertEqual(result[_FIELDS.groundtruth_classes].tolist(), [1])
      self.assertEqual(result[_FIELDS.image].shape, (16, 20, 3))

  def test_build_dataset_skips_too(self):
    with tf.Graph().as_default():
      dataset = input_reader_builder.build_dataset(self._config(), batch_size=4,
                                                   skip_corrupt_records=True,
                                                   drop_remainder=False)
      batch = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
      batches = input_test_util.read_all(batch)
    ids = [i for b in batches for i in b[_FIELDS.source_id]]
    self.assertLen(ids, self.num_good)
    self.assertTrue(all(i.startswith(b'good_') for i in ids))


if __name__ == '__main__':
  tf.test.main()
