"""Decoders and label maps, on real TFRecords written by the tests."""

import os

import numpy as np
import tensorflow as tf

from builders import decoder_builder
from core import data_decoders
from core import label_map_util
from core import standard_fields as fields
from protos import input_reader_pb2
from tests.input import input_test_util
from tools import dataset_util

tf.compat.v1.disable_eager_execution()
_FIELDS = fields.InputDataFields


def _records(path):
  return list(tf.compat.v1.io.tf_record_iterator(path))


class DetectionDecoderTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.writer = input_test_util.RecordWriter()
    self.dir = self.get_temp_dir()

  def _decode(self, record, decoder=None):
    decoder = decoder or data_decoders.TfExampleDecoder()
    serialized = tf.compat.v1.placeholder(tf.string, [])
    tensor_dict, checks = decoder.decode_and_check(serialized)
    with self.session() as sess:
      return sess.run((tensor_dict, [ok for ok, _ in checks]), {serialized: record})

  def test_decodes_jpeg_record_from_tfrecord(self):
    image, encoded = self.writer.image(16, 20, seed=3)
    example = self.writer.example(boxes=[[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0]],
                                  classes=[1, 3], encoded=encoded, filename='a.jpg',
                                  source_id='42', class_texts=['a', 'c'], difficult=[0, 1])
    path = self.writer.write(os.path.join(self.dir, 'a.tfrecord'), [example])
    result, oks = self._decode(_records(path)[0])
    self.assertTrue(all(oks))
    self.assertEqual(result[_FIELDS.image].shape, (16, 20, 3))
    self.assertEqual(result[_FIELDS.image].dtype, np.uint8)
    # JPEG is lossy: compare with what TF decodes from the same bytes.
    self.assertAllEqual(result[_FIELDS.image], self.writer.codec.decode(encoded))
    self.assertAllClose(result[_FIELDS.groundtruth_boxes],
                        [[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0]])
    self.assertAllEqual(result[_FIELDS.groundtruth_classes], [1, 3])
    self.assertEqual(result[_FIELDS.groundtruth_classes].dtype, np.int32)
    self.assertEqual(result[_FIELDS.num_groundtruth_boxes], 2)
    self.assertAllEqual(result[_FIELDS.groundtruth_difficult], [False, True])
    self.assertAllEqual(result[_FIELDS.groundtruth_is_crowd], [False, False])
    self.assertAllClose(result[_FIELDS.groundtruth_weights], [1.0, 1.0])
    self.assertEqual(result[_FIELDS.source_id], b'42')
    self.assertEqual(result[_FIELDS.filename], b'a.jpg')
    self.assertLen(result[_FIELDS.key], 64)  # sha256 hex
    self.assertAllEqual(result[_FIELDS.original_image_spatial_shape], [16, 20])

  def test_decodes_png_exactly_and_gray_png_to_three_channels(self):
    image, encoded = self.writer.image(9, 7, seed=1, image_format='png')
    result, _ = self._decode(self.writer.example(encoded=encoded, height=9, width=7,
                                                 image_format='png').SerializeToString())
    self.assertAllEqual(result[_FIELDS.image], image)
    gray = tf.io.encode_png(tf.constant(np.arange(12, dtype=np.uint8).reshape(3, 4, 1)))
    with self.session() as sess:
      gray = sess.run(gray)
    result, _ = self._decode(self.writer.example(encoded=gray, height=3, width=4,
                                                 image_format='png').SerializeToString())
    self.assertEqual(result[_FIELDS.image].shape, (3, 4, 3))
    self.assertAllEqual(result[_FIELDS.image][..., 0], result[_FIELDS.image][..., 2])

  def test_static_shapes(self):
    decoder = data_decoders.TfExampleDecoder(num_keypoints=2, load_instance_masks=True)
    tensor_dict = decoder.decode(tf.compat.v1.placeholder(tf.string, []))
    self.assertEqual(tensor_dict[_FIELDS.image].get_shape().as_list(), [None, None, 3])
    self.assertEqual(tensor_dict[_FIELDS.groundtruth_boxes].get_shape().as_list(), [None, 4])
    self.assertEqual(tensor_dict[_FIELDS.groundtruth_classes].get_shape().as_list(), [None])
    self.assertEqual(tensor_dict[_FIELDS.groundtruth_keypoints].get_shape().as_list()[1:],
                     [2, 2])

  def test_image_without_boxes(self):
    result, oks = self._decode(self.writer.example(boxes=[], classes=[]).SerializeToString())
    self.assertTrue(all(oks))
    self.assertEqual(result[_FIELDS.groundtruth_boxes].shape, (0, 4))
    self.assertEqual(result[_FIELDS.num_groundtruth_boxes], 0)

  def test_class_text_maps_through_label_map(self):
    label_map = os.path.join(self.dir, 'label_map.pbtxt')
    label_map_util.write_label_map(label_map, ['cat', 'dog'])
    example = self.writer.example(boxes=[[0, 0, 1, 1]] * 2, classes=[])
    example.features.feature['image/object/class/text'].bytes_list.value.extend([b'dog', b'cat'])
    decoder = data_decoders.TfExampleDecoder(label_map_proto_file=label_map)
    result, oks = self._decode(example.SerializeToString(), decoder)
    self.assertTrue(all(oks))
    self.assertAllEqual(result[_FIELDS.groundtruth_classes], [2, 1])

  def test_numerical_masks_and_keypoints(self):
    example = self.writer.example(boxes=[[0, 0, 1, 1]], classes=[1], height=16, width=20)
    mask = np.zeros((16, 20), np.float32)
    mask[2:5, 3:9] = 1.0
    example.features.feature['image/object/mask'].float_list.value.extend(mask.ravel())
    example.features.feature['image/object/keypoint/y'].float_list.value.extend([0.1, 0.2])
    example.features.feature['image/object/keypoint/x'].float_list.value.extend([0.3, 0.4])
    decoder = data_decoders.TfExampleDecoder(load_instance_masks=True, num_keypoints=2)
    result, oks = self._decode(example.SerializeToString(), decoder)
    self.assertTrue(all(oks))
    self.assertAllEqual(result[_FIELDS.groundtruth_instance_masks], mask[None])
    self.assertAllClose(result[_FIELDS.groundtruth_keypoints], [[[0.1, 0.3], [0.2, 0.4]]])

  def test_png_masks(self):
    example = self.writer.example(boxes=[[0, 0, 1, 1]] * 2, classes=[1, 1], height=16, width=20)
    masks = np.zeros((2, 16, 20, 3), np.uint8)
    masks[0, :4] = 1
    masks[1, 8:] = 255
    pngs = [self.writer.codec.encode(m, 'png') for m in masks]
    example.features.feature['image/object/mask'].bytes_list.value.extend(pngs)
    decoder = data_decoders.TfExampleDecoder(load_instance_masks=True,
                                             instance_mask_type=input_reader_pb2.PNG_MASKS)
    result, _ = self._decode(example.SerializeToString(), decoder)
    self.assertAllEqual(result[_FIELDS.groundtruth_instance_masks], (masks[..., 0] > 0))

  def test_checks_flag_bad_content(self):
    bad = [
        self.writer.example(boxes=[[0.1, 0.2, 1.5, 0.6]]),           # outside [0, 1]
        self.writer.example(boxes=[[0.1, 0.7, 0.5, 0.6]]),           # xmin > xmax
        self.writer.example(boxes=[[0.1, 0.2, 0.5, 0.6]], classes=[0]),  # id below 1
        self.writer.example(boxes=[[0.1, 0.2, 0.5, 0.6]], classes=[]),   # missing label
    ]
    for example in bad:
      _, oks = self._decode(example.SerializeToString())
      self.assertFalse(all(oks))

  def test_unsupported_options(self):
    with self.assertRaisesRegex(ValueError, 'num_additional_channels'):
      data_decoders.TfExampleDecoder(num_additional_channels=1)


class ClassificationDecoderTest(tf.test.TestCase):

  def test_decodes_image_and_label(self):
    writer = input_test_util.RecordWriter()
    image, encoded = writer.image(8, 8, image_format='png')
    example = dataset_util.classification_example(encoded, 'png', 8, 8, label=4)
    path = writer.write(os.path.join(self.get_temp_dir(), 'c.tfrecord'), [example])
    decoder = data_decoders.TfClassificationExampleDecoder()
    tensor_dict, checks = decoder.decode_and_check(tf.constant(_records(path)[0]))
    with self.session() as sess:
      result, oks = sess.run((tensor_dict, [ok for ok, _ in checks]))
    self.assertTrue(all(oks))
    self.assertAllEqual(result[_FIELDS.image], image)
    self.assertEqual(result[_FIELDS.label], 4)

  def test_build_picks_decoder_from_config(self):
    config = input_reader_pb2.InputReader(
        decoder_type=input_reader_pb2.InputReader.CLASSIFICATION)
    self.assertIsInstance(decoder_builder.build(config),
                          data_decoders.TfClassificationExampleDecoder)
    self.assertIsInstance(decoder_builder.build(input_reader_pb2.InputReader()),
                          data_decoders.TfExampleDecoder)
    with self.assertRaisesRegex(
        ValueError, 'input_reader_config not of type input_reader_pb2.InputReader'):
      decoder_builder.build(input_reader_pb2.TFRecordInputReader())


class LabelMapTest(tf.test.TestCase):

  def _write(self, text):
    path = os.path.join(self.get_temp_dir(), 'lm_%d.pbtxt' % abs(hash(text)))
    with open(path, 'w') as f:
      f.write(text)
    return path

  def test_load_and_category_index(self):
    path = self._write('item { name: "a" id: 1 display_name: "A" } item { name: "b" id: 3 }')
    self.assertEqual(label_map_util.get_label_map_dict(path), {'a': 1, 'b': 3})
    self.assertEqual(label_map_util.get_label_map_dict(path, use_display_name=True),
                     {'A': 1, 'b': 3})
    self.assertEqual(label_map_util.create_category_index_from_labelmap(path),
                     {1: {'id': 1, 'name': 'A'}, 3: {'id': 3, 'name': 'b'}})
    self.assertEqual(label_map_util.get_max_label_map_index(path), 3)

  def test_invalid_label_maps_name_the_file(self):
    cases = {
        'item { name: "a" id: 0 }': 'ids must be >= 1',
        'item { name: "a" id: 1 } item { name: "b" id: 1 }': 'id 1 is used by both',
        'item { name: "a" id: 1 } item { name: "a" id: 2 }': "name 'a' is used",
        'item { name: "a" }': 'has no id',
        'item { nam: "a" id: 1 }': 'does not parse',
        '': 'has no items',
    }
    for text, message in cases.items():
      path = self._write(text)
      with self.assertRaisesRegex(ValueError, message) as context:
        label_map_util.load_labelmap(path)
      self.assertIn(path, str(context.exception))
    with self.assertRaisesRegex(ValueError, 'does not exist'):
      label_map_util.load_labelmap('/nonexistent/label_map.pbtxt')

  def test_write_round_trip(self):
    path = os.path.join(self.get_temp_dir(), 'w.pbtxt')
    label_map_util.write_label_map(path, ['x', 'y'])
    self.assertEqual(label_map_util.get_label_map_dict(path), {'x': 1, 'y': 2})


if __name__ == '__main__':
  tf.test.main()
