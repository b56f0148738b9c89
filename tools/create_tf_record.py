r"""Converts a folder of images with Pascal VOC or COCO annotations to TFRecords.

Pascal VOC: one XML file per image (`<annotation><filename>`, `<size>`,
`<object><name>`, `<difficult>`, `<bndbox><xmin>...`) in `--annotations_dir`;
boxes are pixel corners. COCO: one JSON file with `images`
(`id`, `file_name`, `height`, `width`), `annotations` (`image_id`,
`bbox` = [x, y, width, height] in pixels, `category_id`, `iscrowd`, `area`) and
`categories` (`id`, `name`). Boxes are normalized by the image size, and a box
outside the image or with min > max is an error naming the annotation file.

    python -m tools.create_tf_record --image_dir=imgs --annotations_dir=xml \
        --output_path=/data/train.tfrecord --num_shards=4
    python -m tools.create_tf_record --image_dir=imgs --coco_json=train.json \
        --output_path=/data/train.tfrecord

Class ids come from `--label_map_path` when it is given (VOC names must be in
it); otherwise VOC names are numbered 1.. in sorted order, COCO keeps its
category ids, and the label map is written next to the output as
`label_map.pbtxt`. In Python:

    from tools import create_tf_record
    result = create_tf_record.convert_voc('imgs', 'xml', '/data/train.tfrecord')
    result['files'], result['label_map_path'], result['num_examples']
"""

import json
import os
import xml.etree.ElementTree as ElementTree

import numpy as np
import tensorflow as tf
from absl import app
from absl import flags

from core import label_map_util
from core import paths
from tools import dataset_util

# Pixel slack allowed when checking boxes against the image size.
_PIXEL_TOLERANCE = 1.0


def parse_voc_xml(path):
  """Reads one Pascal VOC annotation file.

  Args:
    path: the XML file.

  Returns:
    dict with filename, height, width (0 when absent) and objects: a list of
    dicts with name, xmin, ymin, xmax, ymax (pixels), difficult.

  Raises:
    ValueError: malformed XML or a missing element, naming the file.
  """
  try:
    root = ElementTree.parse(path).getroot()
  except ElementTree.ParseError as e:
    raise ValueError('%s: not valid XML: %s' % (path, e)) from None

  def text(node, tag, default=None):
    child = node.find(tag)
    if child is None or child.text is None:
      if default is None:
        raise ValueError('%s: missing <%s>' % (path, tag))
      return default
    return child.text.strip()

  size = root.find('size')
  result = {
      'filename': text(root, 'filename'),
      'height': int(float(text(size, 'height', '0'))) if size is not None else 0,
      'width': int(float(text(size, 'width', '0'))) if size is not None else 0,
      'objects': [],
  }
  for obj in root.findall('object'):
    box = obj.find('bndbox')
    if box is None:
      raise ValueError('%s: <object> %r has no <bndbox>' % (path, text(obj, 'name', '?')))
    result['objects'].append({
        'name': text(obj, 'name'),
        'xmin': float(text(box, 'xmin')), 'ymin': float(text(box, 'ymin')),
        'xmax': float(text(box, 'xmax')), 'ymax': float(text(box, 'ymax')),
        'difficult': int(text(obj, 'difficult', '0')),
    })
  return result


def _normalize_boxes(pixel_boxes, height, width, where):
  """[N, 4] pixel ymin, xmin, ymax, xmax -> normalized, checked."""
  boxes = np.asarray(pixel_boxes, np.float64).reshape([-1, 4])
  for i, (ymin, xmin, ymax, xmax) in enumerate(boxes):
    if xmin > xmax or ymin > ymax:
      raise ValueError('%s: box %d (xmin %g, ymin %g, xmax %g, ymax %g) has min > max' %
                       (where, i, xmin, ymin, xmax, ymax))
    if (min(xmin, ymin) < -_PIXEL_TOLERANCE or xmax > width + _PIXEL_TOLERANCE or
        ymax > height + _PIXEL_TOLERANCE):
      raise ValueError('%s: box %d (xmin %g, ymin %g, xmax %g, ymax %g) is outside the %dx%d '
                       'image' % (where, i, xmin, ymin, xmax, ymax, width, height))
  boxes = boxes / np.array([height, width, height, width], np.float64)
  return np.clip(boxes, 0.0, 1.0).astype(np.float32)


def _read_image(image_dir, filename, codec, where):
  """Returns (encoded bytes, format, height, width) of an image file."""
  path = paths.join(image_dir, filename)
  if not paths.exists(path):
    raise ValueError('%s: image %s does not exist' % (where, path))
  with tf.io.gfile.GFile(path, 'rb') as f:
    encoded = f.read()
  image_format = dataset_util.image_format_of(encoded)
  if image_format is None:
    raise ValueError('%s: %s is not a JPEG or PNG image' % (where, path))
  try:
    shape = codec.decode(encoded).shape
  except tf.errors.OpError as e:
    raise ValueError('%s: %s does not decode: %s' % (where, path, e.message)) from None
  return encoded, image_format, shape[0], shape[1]


def voc_examples(image_dir, annotations_dir, label_map_dict, codec):
  """Yields tf.Examples for every *.xml file in `annotations_dir` (sorted)."""
  for xml_path in sorted(tf.io.gfile.glob(paths.join(annotations_dir, '*.xml'))):
    annotation = parse_voc_xml(xml_path)
    encoded, image_format, height, width = _read_image(
        image_dir, annotation['filename'], codec, xml_path)
    if annotation['height'] and annotation['width'] and (
        (annotation['height'], annotation['width']) != (height, width)):
      raise ValueError('%s: <size> says %dx%d but %s is %dx%d' % (
          xml_path, annotation['width'], annotation['height'], annotation['filename'], width,
          height))
    objects = annotation['objects']
    for obj in objects:
      if obj['name'] not in label_map_dict:
        raise ValueError('%s: class %r is not in the label map' % (xml_path, obj['name']))
    boxes = _normalize_boxes([[o['ymin'], o['xmin'], o['ymax'], o['xmax']] for o in objects],
                             height, width, xml_path)
    yield dataset_util.detection_example(
        encoded, image_format, height, width, boxes,
        class_ids=[label_map_dict[o['name']] for o in objects],
        class_texts=[o['name'] for o in objects], filename=annotation['filename'],
        source_id=os.path.splitext(paths.basename(xml_path))[0],
        difficult=[o['difficult'] for o in objects])


def coco_examples(image_dir, coco_json_path, codec, valid_ids=None):
  """Yields tf.Examples for every image of a COCO JSON file (in file order)."""
  with tf.io.gfile.GFile(coco_json_path, 'r') as f:
    coco = json.load(f)
  for key in ('images', 'annotations', 'categories'):
    if key not in coco:
      raise ValueError('%s: missing top-level key %r' % (coco_json_path, key))
  names = {c['id']: c['name'] for c in coco['categories']}
  by_image = {}
  for ann in coco['annotations']:
    by_image.setdefault(ann['image_id'], []).append(ann)
  for image in coco['images']:
    where = '%s (image id %s)' % (coco_json_path, image['id'])
    encoded, image_format, height, width = _read_image(image_dir, image['file_name'], codec,
                                                       where)
    annotations = by_image.get(image['id'], [])
    for ann in annotations:
      if ann['category_id'] not in names or (valid_ids and ann['category_id'] not in valid_ids):
        raise ValueError('%s: category_id %s is not a known category' %
                         (where, ann['category_id']))
    pixel_boxes = [[a['bbox'][1], a['bbox'][0], a['bbox'][1] + a['bbox'][3],
                    a['bbox'][0] + a['bbox'][2]] for a in annotations]
    boxes = _normalize_boxes(pixel_boxes, height, width, where)
    yield dataset_util.detection_example(
        encoded, image_format, height, width, boxes,
        class_ids=[a['category_id'] for a in annotations],
        class_texts=[names[a['category_id']] for a in annotations],
        filename=image['file_name'], source_id=str(image['id']),
        is_crowd=[int(a.get('iscrowd', 0)) for a in annotations],
        area=[float(a.get('area', 0.0)) for a in annotations])


def _output_label_map_path(output_path):
  return paths.join(paths.parent(paths.absolute(output_path)), 'label_map.pbtxt')


def convert_voc(image_dir, annotations_dir, output_path, num_shards=1, label_map_path=None):
  """Converts a Pascal VOC folder.

  Args:
    image_dir: folder of the images named in the XML files.
    annotations_dir: folder of *.xml annotation files.
    output_path: output path prefix; shards are `<output_path>-0000i-of-0000n`.
    num_shards: number of output files.
    label_map_path: optional label map; else one is made from the class names
      and written next to the output.

  Returns:
    dict with files, num_examples, label_map_path.
  """
  xml_files = tf.io.gfile.glob(paths.join(annotations_dir, '*.xml'))
  if not xml_files:
    raise ValueError('--annotations_dir %s has no *.xml files' % annotations_dir)
  if label_map_path:
    label_map_dict = label_map_util.get_label_map_dict(label_map_path)
  else:
    names = sorted({o['name'] for p in xml_files for o in parse_voc_xml(p)['objects']})
    label_map_path = _output_label_map_path(output_path)
    label_map_util.write_label_map(label_map_path, names)
    label_map_dict = {name: i + 1 for i, name in enumerate(names)}
  codec = dataset_util.ImageCodec()
  try:
    files, count = dataset_util.write_sharded(
        voc_examples(image_dir, annotations_dir, label_map_dict, codec), output_path, num_shards)
  finally:
    codec.close()
  return {'files': files, 'num_examples': count, 'label_map_path': label_map_path}


def convert_coco(image_dir, coco_json_path, output_path, num_shards=1, label_map_path=None):
  """Converts images + a COCO JSON file; arguments and result as convert_voc."""
  valid_ids = None
  if label_map_path:
    valid_ids = set(label_map_util.get_label_map_dict(label_map_path).values())
  else:
    with tf.io.gfile.GFile(coco_json_path, 'r') as f:
      categories = json.load(f).get('categories', [])
    label_map_path = _output_label_map_path(output_path)
    label_map_util.write_label_map(label_map_path, {c['name']: c['id'] for c in categories})
  codec = dataset_util.ImageCodec()
  try:
    files, count = dataset_util.write_sharded(
        coco_examples(image_dir, coco_json_path, codec, valid_ids), output_path, num_shards)
  finally:
    codec.close()
  return {'files': files, 'num_examples': count, 'label_map_path': label_map_path}


FLAGS = flags.FLAGS


def define_flags():
  """Defines this tool's absl flags (idempotent)."""
  if 'coco_json' in FLAGS:
    return
  flags.DEFINE_string('image_dir', None, 'Folder of the images.')
  flags.DEFINE_string('annotations_dir', None, 'Folder of Pascal VOC *.xml files.')
  flags.DEFINE_string('coco_json', None, 'COCO annotation JSON file.')
  flags.DEFINE_string('output_path', None, 'Output TFRecord path prefix.')
  flags.DEFINE_integer('num_shards', 1, 'Number of output shards.')
  flags.DEFINE_string('label_map_path', None, 'Optional existing label map.')


def main(argv):
  del argv
  if not FLAGS.image_dir or not FLAGS.output_path:
    raise app.UsageError('--image_dir and --output_path are required.')
  if bool(FLAGS.annotations_dir) == bool(FLAGS.coco_json):
    raise app.UsageError('Give exactly one of --annotations_dir (VOC) and --coco_json.')
  if FLAGS.annotations_dir:
    result = convert_voc(FLAGS.image_dir, FLAGS.annotations_dir, FLAGS.output_path,
                         FLAGS.num_shards, FLAGS.label_map_path)
  else:
    result = convert_coco(FLAGS.image_dir, FLAGS.coco_json, FLAGS.output_path,
                          FLAGS.num_shards, FLAGS.label_map_path)
  print('Wrote %d examples to %d files; label map %s' %
        (result['num_examples'], len(result['files']), result['label_map_path']))


if __name__ == '__main__':
  define_flags()
  app.run(main)
