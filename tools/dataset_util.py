"""Helpers shared by the dataset writers: tf.Example features, image codec, shards.

    from tools import dataset_util
    codec = dataset_util.ImageCodec()
    encoded = codec.encode(image_uint8_hwc, 'jpeg')
    example = dataset_util.detection_example(
        encoded, 'jpeg', height, width, boxes=[[0.1, 0.2, 0.5, 0.6]],
        class_ids=[1], class_texts=['rectangle'], filename='a.jpg', source_id='1')
    paths = dataset_util.write_sharded([example], '/tmp/data/train.tfrecord', 2)

`ImageCodec` runs TensorFlow's own JPEG/PNG encoders in a private graph and
session, so it works the same in eager programs and in graph-mode tests.
Shards are named `<prefix>-00000-of-00002` and records go round robin, so
shards hold nearly equal numbers of records.
"""

import hashlib

import numpy as np
import tensorflow as tf

from core import data_decoders
from core import standard_fields as fields

_KEYS = fields.TfExampleFields


def int64_list_feature(values):
  """A tf.train.Feature holding int64 values."""
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def float_list_feature(values):
  """A tf.train.Feature holding float values."""
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


def bytes_list_feature(values):
  """A tf.train.Feature holding byte strings (str values are UTF-8 encoded)."""
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[v.encode('utf-8') if isinstance(v, str) else v for v in values]))


def _image_feature(encoded, image_format, height, width, filename, source_id):
  """The feature map of the image fields both record layouts share."""
  return {
      _KEYS.image_encoded: bytes_list_feature([encoded]),
      _KEYS.image_format: bytes_list_feature([image_format]),
      _KEYS.height: int64_list_feature([height]),
      _KEYS.width: int64_list_feature([width]),
      _KEYS.filename: bytes_list_feature([filename]),
      _KEYS.source_id: bytes_list_feature([source_id]),
  }


def detection_example(encoded, image_format, height, width, boxes, class_ids, class_texts=None,
                      filename='', source_id='', difficult=None, is_crowd=None, area=None,
                      png_masks=None):
  """Builds an OD-API-layout detection tf.Example.

  Args:
    encoded: encoded image bytes.
    image_format: 'jpeg' or 'png'.
    height: image height in pixels.
    width: image width in pixels.
    boxes: [N, 4] normalized [ymin, xmin, ymax, xmax].
    class_ids: N integer class ids (>= 1).
    class_texts: optional N class names.
    filename: the image's file name.
    source_id: a string id of the image.
    difficult: optional N ints (0/1).
    is_crowd: optional N ints (0/1).
    area: optional N floats (pixels).
    png_masks: optional N PNG-encoded instance masks (`image/object/mask`).

  Returns:
    a tf.train.Example.
  """
  boxes = np.asarray(boxes, np.float32).reshape([-1, 4])
  feature = _image_feature(encoded, image_format, height, width, filename, source_id)
  feature.update({
      'image/key/sha256': bytes_list_feature([hashlib.sha256(encoded).hexdigest()]),
      _KEYS.object_bbox_ymin: float_list_feature(boxes[:, 0]),
      _KEYS.object_bbox_xmin: float_list_feature(boxes[:, 1]),
      _KEYS.object_bbox_ymax: float_list_feature(boxes[:, 2]),
      _KEYS.object_bbox_xmax: float_list_feature(boxes[:, 3]),
      _KEYS.object_class_label: int64_list_feature(class_ids),
  })
  if class_texts is not None:
    feature[_KEYS.object_class_text] = bytes_list_feature(class_texts)
  if difficult is not None:
    feature[_KEYS.object_difficult] = int64_list_feature(difficult)
  if is_crowd is not None:
    feature[_KEYS.object_is_crowd] = int64_list_feature(is_crowd)
  if area is not None:
    feature['image/object/area'] = float_list_feature(area)
  if png_masks is not None:
    feature[data_decoders.OBJECT_MASK] = bytes_list_feature(png_masks)
  return tf.train.Example(features=tf.train.Features(feature=feature))


def classification_example(encoded, image_format, height, width, label, text=None,
                           filename='', source_id=''):
  """Builds a classification tf.Example (`image/class/label`)."""
  feature = _image_feature(encoded, image_format, height, width, filename, source_id)
  feature[_KEYS.image_class_label] = int64_list_feature([label])
  if text is not None:
    feature[_KEYS.image_class_text] = bytes_list_feature([text])
  return tf.train.Example(features=tf.train.Features(feature=feature))


class ImageCodec:
  """Encodes numpy images and reads encoded images' shapes with TF ops.

  Keeps one private graph and session, so it neither needs nor disturbs
  eager mode or the caller's default graph.
  """

  def __init__(self, jpeg_quality=90):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._image = tf.compat.v1.placeholder(tf.uint8, [None, None, 3])
      self._jpeg = tf.io.encode_jpeg(self._image, quality=jpeg_quality)
      self._png = tf.io.encode_png(self._image)
      self._mask = tf.compat.v1.placeholder(tf.uint8, [None, None])
      self._mask_png = tf.io.encode_png(self._mask[:, :, None])
      self._encoded = tf.compat.v1.placeholder(tf.string, [])
      self._decoded = tf.io.decode_image(self._encoded, channels=3, expand_animations=False)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=1,
                                      device_count={'GPU': 0})
    self._session = tf.compat.v1.Session(graph=self._graph, config=config)

  def encode(self, image, image_format='jpeg'):
    """Encodes a uint8 [H, W, 3] array as 'jpeg' or 'png' bytes."""
    if image_format not in ('jpeg', 'png'):
      raise ValueError("image_format must be 'jpeg' or 'png', got %r" % image_format)
    output = self._jpeg if image_format == 'jpeg' else self._png
    return self._session.run(output, {self._image: image})

  def encode_mask(self, mask):
    """Encodes a [H, W] 0/1 instance mask as one-channel PNG bytes (the OD API's PNG_MASKS)."""
    return self._session.run(self._mask_png, {self._mask: np.asarray(mask, np.uint8)})

  def decode(self, encoded):
    """Decodes JPEG/PNG bytes to a uint8 [H, W, 3] array."""
    return self._session.run(self._decoded, {self._encoded: encoded})

  def close(self):
    self._session.close()


def image_format_of(encoded):
  """Returns 'jpeg' or 'png' from the bytes' signature, or None."""
  if encoded[:3] == b'\xff\xd8\xff':
    return 'jpeg'
  if encoded[:8] == b'\x89PNG\r\n\x1a\n':
    return 'png'
  return None


def shard_paths(output_prefix, num_shards):
  """Returns the shard file names `<prefix>-0000i-of-0000n`."""
  return ['%s-%05d-of-%05d' % (output_prefix, i, num_shards) for i in range(num_shards)]


def write_sharded(examples, output_prefix, num_shards):
  """Writes examples round robin into `num_shards` TFRecord files.

  Args:
    examples: an iterable of tf.train.Example (or serialized bytes).
    output_prefix: path prefix of the shards.
    num_shards: number of files (>= 1).

  Returns:
    (list of shard paths, number of records written).
  """
  if num_shards < 1:
    raise ValueError('num_shards must be >= 1, got %d' % num_shards)
  paths = shard_paths(output_prefix, num_shards)
  parent = output_prefix.rsplit('/', 1)[0] if '/' in output_prefix else ''
  if parent:
    tf.io.gfile.makedirs(parent)
  writers = [tf.io.TFRecordWriter(p) for p in paths]
  count = 0
  try:
    for i, example in enumerate(examples):
      data = example if isinstance(example, bytes) else example.SerializeToString()
      writers[i % num_shards].write(data)
      count += 1
  finally:
    for w in writers:
      w.close()
  return paths, count
