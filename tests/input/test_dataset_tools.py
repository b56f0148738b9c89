"""Round trips through tools/create_shapes_tf_record.py and tools/create_tf_record.py."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from builders import input_reader_builder
from core import data_decoders
from core import label_map_util
from core import standard_fields as fields
from protos import input_reader_pb2
from tests.input import input_test_util
from tools import create_shapes_tf_record
from tools import create_tf_record
from tools import dataset_util

tf.compat.v1.disable_eager_execution()
_FIELDS = fields.InputDataFields
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _decode_file(path, label_map=None):
  """Decodes every record of a TFRecord file with the detection decoder."""
  with tf.Graph().as_default():
    serialized = tf.compat.v1.placeholder(tf.string, [])
    decoder = data_decoders.TfExampleDecoder(label_map_proto_file=label_map)
    tensor_dict, checks = decoder.decode_and_check(serialized)
    with tf.compat.v1.Session() as sess:
      results = []
      for record in tf.compat.v1.io.tf_record_iterator(path):
        result, oks = sess.run((tensor_dict, [ok for ok, _ in checks]), {serialized: record})
        assert all(oks), path
        results.append(result)
  return results


class ShapesDatasetTest(tf.test.TestCase):

  def test_generate_example_boxes_are_tight(self):
    rng = np.random.default_rng(5)
    image, boxes, classes = create_shapes_tf_record.generate_example(rng, 64, 48, 4, 5)
    self.assertEqual(image.shape, (64, 48, 3))
    self.assertBetween(len(boxes), 1, 4)
    self.assertTrue(set(classes.tolist()) <= {1, 2, 3, 4, 5})
    self.assertTrue(np.all(boxes >= 0) and np.all(boxes <= 1))
    self.assertTrue(np.all(boxes[:, 0] < boxes[:, 2]) and np.all(boxes[:, 1] < boxes[:, 3]))

  def test_instance_masks_decode_and_fit_their_boxes(self):
    info = create_shapes_tf_record.create_shapes_dataset(
        os.path.join(self.get_temp_dir(), 'masks'), num_train=3, num_val=0, height=32,
        width=40, num_shards=1, instance_masks=True)
    decoder = data_decoders.TfExampleDecoder(load_instance_masks=True,
                                             instance_mask_type=input_reader_pb2.PNG_MASKS)
    with tf.Graph().as_default():
      serialized = tf.compat.v1.placeholder(tf.string, [])
      decoded = decoder.decode(serialized)
      with tf.compat.v1.Session() as sess:
        for record in tf.compat.v1.io.tf_record_iterator(info['train_files'][0]):
          example = sess.run(decoded, {serialized: record})
          masks = example[_FIELDS.groundtruth_instance_masks]
          boxes = example[_FIELDS.groundtruth_boxes]
          self.assertEqual(masks.shape, (len(boxes), 32, 40))
          self.assertEqual(set(np.unique(masks).tolist()), {0, 1})
          for mask, box in zip(masks, boxes):
            rows, cols = np.nonzero(mask)
            # Each mask's tight box is its groundtruth box.
            self.assertAllClose([rows.min() / 32, cols.min() / 40, (rows.max() + 1) / 32,
                                 (cols.max() + 1) / 40], box)

  def test_round_trip_deterministic_and_split(self):
    first = create_shapes_tf_record.create_shapes_dataset(
        os.path.join(self.get_temp_dir(), 'a'), num_train=6, num_val=3, height=24, width=32,
        num_classes=5, num_shards=2, seed=11, image_format='png')
    second = create_shapes_tf_record.create_shapes_dataset(
        os.path.join(self.get_temp_dir(), 'b'), num_train=6, num_val=3, height=24, width=32,
        num_classes=5, num_shards=3, seed=11, image_format='png')
    self.assertLen(first['train_files'], 2)
    self.assertLen(first['val_files'], 1)
    self.assertEqual(label_map_util.get_label_map_dict(first['label_map_path']),
                     {'rectangle': 1, 'ellipse': 2, 'triangle': 3, 'diamond': 4, 'cross': 5})
    decoded = {}
    for name, info in (('first', first), ('second', second)):
      records = []
      for path in info['train_files']:
        records.extend(_decode_file(path, info['label_map_path']))
      decoded[name] = {r[_FIELDS.source_id]: r for r in records}
    self.assertEqual(set(decoded['first']), {b'train_%d' % i for i in range(6)})
    # Same seed, different sharding: identical images and boxes (PNG is lossless).
    for key, result in decoded['first'].items():
      other = decoded['second'][key]
      self.assertAllEqual(result[_FIELDS.image], other[_FIELDS.image])
      self.assertAllClose(result[_FIELDS.groundtruth_boxes], other[_FIELDS.groundtruth_boxes])
    # The boxes decoded equal the generator's.
    rng = np.random.default_rng([11, 0, 2])
    image, boxes, classes = create_shapes_tf_record.generate_example(rng, 24, 32, 3, 5)
    self.assertAllEqual(decoded['first'][b'train_2'][_FIELDS.image], image)
    self.assertAllClose(decoded['first'][b'train_2'][_FIELDS.groundtruth_boxes], boxes)
    self.assertAllEqual(decoded['first'][b'train_2'][_FIELDS.groundtruth_classes], classes)
    val = _decode_file(first['val_files'][0])
    self.assertEqual([r[_FIELDS.source_id] for r in val], [b'val_0', b'val_1', b'val_2'])

  def test_command_line(self):
    out = os.path.join(self.get_temp_dir(), 'cli')
    subprocess.run([sys.executable, '-m', 'tools.create_shapes_tf_record', '--output_dir=' + out,
                    '--num_train=3', '--num_val=1', '--height=16', '--width=16',
                    '--num_shards=1'], check=True, cwd=_REPO, capture_output=True)
    self.assertTrue(os.path.exists(os.path.join(out, 'train.tfrecord-00000-of-00001')))
    self.assertTrue(os.path.exists(os.path.join(out, 'label_map.pbtxt')))


class CreateTfRecordTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.codec = dataset_util.ImageCodec()
    self.image_dir = os.path.join(self.get_temp_dir(), 'images')
    os.makedirs(self.image_dir, exist_ok=True)
    self.images = {}
    for i, (name, fmt) in enumerate([('a.jpg', 'jpeg'), ('b.png', 'png')]):
      image = np.random.RandomState(i).randint(0, 255, (40, 50, 3)).astype(np.uint8)
      with open(os.path.join(self.image_dir, name), 'wb') as f:
        f.write(self.codec.encode(image, fmt))
      self.images[name] = image

  def _write_voc(self, directory, name, objects, size=(50, 40)):
    os.makedirs(directory, exist_ok=True)
    parts = ['<annotation><filename>%s</filename><size><width>%d</width><height>%d</height>'
             '<depth>3</depth></size>' % (name, size[0], size[1])]
    for cls, (xmin, ymin, xmax, ymax), difficult in objects:
      parts.append('<object><name>%s</name><difficult>%d</difficult><bndbox><xmin>%g</xmin>'
                   '<ymin>%g</ymin><xmax>%g</xmax><ymax>%g</ymax></bndbox></object>' %
                   (cls, difficult, xmin, ymin, xmax, ymax))
    parts.append('</annotation>')
    with open(os.path.join(directory, os.path.splitext(name)[0] + '.xml'), 'w') as f:
      f.write(''.join(parts))

  def test_voc_round_trip(self):
    ann = os.path.join(self.get_temp_dir(), 'voc')
    self._write_voc(ann, 'a.jpg', [('dog', (5, 4, 25, 20), 0), ('cat', (0, 0, 50, 40), 1)])
    self._write_voc(ann, 'b.png', [('cat', (10, 8, 20, 16), 0)])
    result = create_tf_record.convert_voc(self.image_dir, ann,
                                          os.path.join(self.get_temp_dir(), 'out', 'voc.record'),
                                          num_shards=2)
    self.assertEqual(result['num_examples'], 2)
    self.assertEqual(label_map_util.get_label_map_dict(result['label_map_path']),
                     {'cat': 1, 'dog': 2})
    config = input_test_util.reader_config(result['files'], result['label_map_path'])
    with tf.Graph().as_default():
      examples = input_test_util.read_all(input_reader_builder.build(config))
    by_name = {e[_FIELDS.filename]: e for e in examples}
    a = by_name[b'a.jpg']
    self.assertAllClose(a[_FIELDS.groundtruth_boxes], [[4 / 40, 5 / 50, 20 / 40, 25 / 50],
                                                       [0, 0, 1, 1]])
    self.assertAllEqual(a[_FIELDS.groundtruth_classes], [2, 1])
    self.assertAllEqual(a[_FIELDS.groundtruth_difficult], [False, True])
    self.assertAllEqual(by_name[b'b.png'][_FIELDS.image], self.images['b.png'])
    self.assertAllClose(by_name[b'b.png'][_FIELDS.groundtruth_boxes], [[0.2, 0.2, 0.4, 0.4]])

  def test_voc_errors_name_the_file(self):
    ann = os.path.join(self.get_temp_dir(), 'bad_voc')
    self._write_voc(ann, 'a.jpg', [('dog', (30, 4, 25, 20), 0)])
    with self.assertRaisesRegex(ValueError, 'a.xml: box 0 .* min > max'):
      create_tf_record.convert_voc(self.image_dir, ann, os.path.join(self.get_temp_dir(), 'x'))
    self._write_voc(ann, 'a.jpg', [('dog', (5, 4, 80, 20), 0)])
    with self.assertRaisesRegex(ValueError, 'a.xml: box 0 .* outside the 50x40 image'):
      create_tf_record.convert_voc(self.image_dir, ann, os.path.join(self.get_temp_dir(), 'x'))

  def test_coco_round_trip(self):
    coco = {
        'images': [{'id': 7, 'file_name': 'a.jpg', 'height': 40, 'width': 50},
                   {'id': 9, 'file_name': 'b.png', 'height': 40, 'width': 50}],
        'annotations': [
            {'image_id': 7, 'bbox': [5, 4, 20, 16], 'category_id': 3, 'iscrowd': 0,
             'area': 320.0},
            {'image_id': 7, 'bbox': [0, 0, 10, 10], 'category_id': 1, 'iscrowd': 1,
             'area': 100.0}],
        'categories': [{'id': 1, 'name': 'person'}, {'id': 3, 'name': 'car'}],
    }
    path = os.path.join(self.get_temp_dir(), 'coco.json')
    with open(path, 'w') as f:
      json.dump(coco, f)
    result = create_tf_record.convert_coco(self.image_dir, path,
                                           os.path.join(self.get_temp_dir(), 'c', 'coco.record'))
    self.assertEqual(label_map_util.get_label_map_dict(result['label_map_path']),
                     {'person': 1, 'car': 3})
    examples = _decode_file(result['files'][0], result['label_map_path'])
    self.assertEqual([e[_FIELDS.source_id] for e in examples], [b'7', b'9'])
    self.assertAllClose(examples[0][_FIELDS.groundtruth_boxes],
                        [[0.1, 0.1, 0.5, 0.5], [0, 0, 0.25, 0.2]])
    self.assertAllEqual(examples[0][_FIELDS.groundtruth_classes], [3, 1])
    self.assertAllEqual(examples[0][_FIELDS.groundtruth_is_crowd], [False, True])
    self.assertAllClose(examples[0][_FIELDS.groundtruth_area], [320.0, 100.0])
    self.assertEqual(examples[1][_FIELDS.num_groundtruth_boxes], 0)


if __name__ == '__main__':
  tf.test.main()
