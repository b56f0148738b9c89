"""Decoders from serialized tf.Example records to tensor_dicts.

Two decoders, both built on tf_slim's `tfexample_decoder` (one parse of the
record, then an item handler per output tensor):

* `TfExampleDecoder` -- object detection records in the Object Detection API
  layout (`image/encoded`, `image/object/bbox/ymin|xmin|ymax|xmax`,
  `image/object/class/label`, ...) into the `InputDataFields` tensor_dict:
  `image` (uint8 [H, W, 3]), `source_id`, `key`, `filename`,
  `groundtruth_boxes` (float32 [N, 4], normalized ymin, xmin, ymax, xmax),
  `groundtruth_classes` (int32 [N]), `groundtruth_weights`,
  `groundtruth_difficult`, `groundtruth_is_crowd`, `groundtruth_group_of`,
  `groundtruth_area`, `num_groundtruth_boxes`, optionally
  `groundtruth_instance_masks` and `groundtruth_keypoints`.
* `TfClassificationExampleDecoder` -- `image/encoded` + `image/class/label`
  into `image` and `label`.

Images may be JPEG or PNG (the content decides, not `image/format`); gray
images become 3 channels.

    decoder = data_decoders.TfExampleDecoder(label_map_proto_file='label_map.pbtxt')
    tensor_dict = decoder.decode(serialized_example)      # OD API interface
    tensor_dict, checks = decoder.decode_and_check(serialized_example)

`decode_and_check` also returns the record's sanity checks as
`[(ok, message_fn)]`: `ok` is a scalar bool tensor and `message_fn()` builds
the string explaining a failure (missing feature, box outside [0, 1] or with
min > max, class id not in the label map, feature lengths that disagree).
`builders.input_reader_builder` turns them into errors naming the file and
record index, or into counted skips. A record that cannot be parsed or whose
image does not decode raises inside `decode`; the builder catches that too.
"""

import tensorflow as tf
import tf_slim as slim

from core import label_map_util
from core import standard_fields as fields
from protos import input_reader_pb2

tfexample_decoder = slim.tfexample_decoder
_FIELDS = fields.InputDataFields
_KEYS = fields.TfExampleFields

# Extra feature keys the OD API decoder reads that standard_fields has no name for.
KEY_SHA256 = 'image/key/sha256'
OBJECT_AREA = 'image/object/area'
OBJECT_MASK = 'image/object/mask'
# Slack allowed on box coordinates outside [0, 1] (float rounding in writers).
BOX_TOLERANCE = 1e-5


def _dense(tensor, default_value=0):
  """Returns the values of a parsed feature as a dense 1-D tensor."""
  if isinstance(tensor, tf.SparseTensor):
    return tf.sparse.to_dense(tensor, default_value=default_value)
  return tensor


def _str(tensor):
  """Formats a numeric tensor for an error message."""
  return tf.strings.format('{}', tensor, summarize=-1)


def _image_features():
  """The parse spec of the image fields both record layouts share."""
  string = tf.io.FixedLenFeature((), tf.string, default_value='')
  return {
      _KEYS.image_encoded: string,
      _KEYS.image_format: tf.io.FixedLenFeature((), tf.string, default_value='jpeg'),
      _KEYS.filename: string,
      _KEYS.source_id: string,
      KEY_SHA256: string,
  }


def decode_image(encoded):
  """Decodes JPEG or PNG bytes to uint8 [H, W, 3]; empty bytes give [0, 0, 3].

  Args:
    encoded: scalar string tensor.

  Returns:
    uint8 tensor of static shape [None, None, 3].
  """
  image = tf.cond(
      tf.greater(tf.strings.length(encoded), 0),
      lambda: tf.io.decode_image(encoded, channels=3, expand_animations=False),
      lambda: tf.zeros([0, 0, 3], tf.uint8))
  image.set_shape([None, None, 3])
  return image


class _LabelMapLookup:
  """Class name -> id lookup with plain tensor ops (no table to initialize)."""

  def __init__(self, label_map_proto_file, use_display_name):
    self.ids = None
    self.names = None
    if label_map_proto_file:
      name_to_id = label_map_util.get_label_map_dict(label_map_proto_file, use_display_name)
      self.names = sorted(name_to_id)
      self.ids = [name_to_id[n] for n in self.names]

  def valid_ids(self):
    """Returns the sorted label-map ids, or None without a label map."""
    return None if self.ids is None else sorted(self.ids)

  def lookup(self, texts):
    """Maps a 1-D string tensor to int32 ids (-1 where the name is unknown)."""
    if self.names is None:
      return -tf.ones_like(texts, dtype=tf.int32)
    names = tf.constant(self.names)
    equal = tf.equal(tf.expand_dims(texts, 1), tf.expand_dims(names, 0))
    found = tf.reduce_any(equal, axis=1)
    index = tf.argmax(tf.cast(equal, tf.int32), axis=1)
    return tf.where(found, tf.gather(tf.constant(self.ids, tf.int32), index),
                    -tf.ones_like(index, dtype=tf.int32))


def _class_id_checks(classes, valid_ids, what, minimum):
  """Checks class ids against a label map (or `>= minimum` without one)."""
  if valid_ids is None:
    bad = tf.less(classes, minimum)
    reason = ', which is below %d' % minimum
  else:
    matches = tf.equal(tf.expand_dims(classes, -1), tf.constant(valid_ids, tf.int32))
    bad = tf.logical_not(tf.reduce_any(matches, axis=-1))
    reason = ', which is not in the label map (ids %s)' % (
        str(valid_ids) if len(valid_ids) <= 20 else '%d..%d' % (valid_ids[0], valid_ids[-1]))
  bad = tf.reshape(bad, [-1])
  flat = tf.reshape(classes, [-1])

  def message():
    first = tf.argmax(tf.cast(bad, tf.int32))
    return tf.strings.join([what, ' ', _str(first), ' has class id ', _str(flat[first]), reason])
  return tf.logical_not(tf.reduce_any(bad)), message


class _ExampleDecoder:
  """What both decoders share: the common handlers, parse_size, the label map."""

  def _init_decoder(self, keys_to_features):
    """Builds the tf_slim decoder over `keys_to_features` plus the image/id handlers."""
    callback = tfexample_decoder.ItemHandlerCallback
    items_to_handlers = {
        _FIELDS.image: callback([_KEYS.image_encoded, _KEYS.image_format],
                                lambda t: decode_image(t[_KEYS.image_encoded])),
        _FIELDS.source_id: tfexample_decoder.Tensor(_KEYS.source_id),
        _FIELDS.key: tfexample_decoder.Tensor(KEY_SHA256),
        _FIELDS.filename: tfexample_decoder.Tensor(_KEYS.filename),
        # Raw parsed features, turned into the outputs (and checks) by each decoder.
        '_raw': callback(list(keys_to_features), dict),
    }
    self._keys_to_features = keys_to_features
    self._decoder = tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)

  def parse_size(self, tf_example_string_tensor):
    """Parses the record without decoding the image.

    Returns:
      a scalar int32 (the number of parsed values) that only evaluates when
      the record is a tf.Example with the expected feature types.
    """
    parsed = tf.io.parse_single_example(tf_example_string_tensor, self._keys_to_features)
    return tf.add_n([tf.size(v.values if isinstance(v, tf.SparseTensor) else v)
                     for v in parsed.values()])

  def valid_class_ids(self):
    """The label map's ids (sorted), or None when decoding without one."""
    return self._labels.valid_ids()


class TfExampleDecoder(_ExampleDecoder):
  """Decodes detection tf.Examples (OD API layout) into a tensor_dict."""

  def __init__(self,
               load_instance_masks=False,
               instance_mask_type=input_reader_pb2.NUMERICAL_MASKS,
               label_map_proto_file=None,
               use_display_name=False,
               num_keypoints=0,
               num_additional_channels=0,
               load_multiclass_scores=False):
    """Creates the decoder.

    Args:
      load_instance_masks: also decode `image/object/mask` into
        `groundtruth_instance_masks` (float32 [N, H, W], 0/1).
      instance_mask_type: NUMERICAL_MASKS (floats, N*H*W values) or PNG_MASKS
        (one PNG per object).
      label_map_proto_file: optional label map path; when set, class ids must
        be in it and `image/object/class/text` maps to ids when
        `image/object/class/label` is absent.
      use_display_name: map texts by `display_name` instead of `name`.
      num_keypoints: keypoints per object (0 = none) from
        `image/object/keypoint/y|x` into `groundtruth_keypoints` [N, K, 2].
      num_additional_channels: must be 0 (not supported).
      load_multiclass_scores: must be False (not supported).

    Raises:
      ValueError: an unsupported option, or an invalid label map.
    """
    if num_additional_channels:
      raise ValueError('num_additional_channels=%d is not supported by slimtrain decoders.' %
                       num_additional_channels)
    if load_multiclass_scores:
      raise ValueError('load_multiclass_scores is not supported by slimtrain decoders.')
    if instance_mask_type not in (input_reader_pb2.DEFAULT, input_reader_pb2.NUMERICAL_MASKS,
                                  input_reader_pb2.PNG_MASKS):
      raise ValueError('Unknown mask_type %r.' % instance_mask_type)
    self._load_instance_masks = load_instance_masks
    self._png_masks = instance_mask_type == input_reader_pb2.PNG_MASKS
    self._num_keypoints = num_keypoints
    self._labels = _LabelMapLookup(label_map_proto_file, use_display_name)

    keys_to_features = _image_features()
    keys_to_features.update({
        _KEYS.height: tf.io.FixedLenFeature((), tf.int64, default_value=0),
        _KEYS.width: tf.io.FixedLenFeature((), tf.int64, default_value=0),
        _KEYS.object_bbox_ymin: tf.io.VarLenFeature(tf.float32),
        _KEYS.object_bbox_xmin: tf.io.VarLenFeature(tf.float32),
        _KEYS.object_bbox_ymax: tf.io.VarLenFeature(tf.float32),
        _KEYS.object_bbox_xmax: tf.io.VarLenFeature(tf.float32),
        _KEYS.object_class_label: tf.io.VarLenFeature(tf.int64),
        _KEYS.object_class_text: tf.io.VarLenFeature(tf.string),
        _KEYS.object_weight: tf.io.VarLenFeature(tf.float32),
        _KEYS.object_difficult: tf.io.VarLenFeature(tf.int64),
        _KEYS.object_is_crowd: tf.io.VarLenFeature(tf.int64),
        _KEYS.object_group_of: tf.io.VarLenFeature(tf.int64),
        OBJECT_AREA: tf.io.VarLenFeature(tf.float32),
    })
    if load_instance_masks:
      keys_to_features[OBJECT_MASK] = tf.io.VarLenFeature(
          tf.string if self._png_masks else tf.float32)
    if num_keypoints:
      keys_to_features[_KEYS.keypoint_y] = tf.io.VarLenFeature(tf.float32)
      keys_to_features[_KEYS.keypoint_x] = tf.io.VarLenFeature(tf.float32)

    self._init_decoder(keys_to_features)

  def decode(self, tf_example_string_tensor):
    """Decodes one serialized tf.Example.

    Args:
      tf_example_string_tensor: scalar string tensor.

    Returns:
      the tensor_dict described in the module docstring.
    """
    tensor_dict, _ = self.decode_and_check(tf_example_string_tensor)
    return tensor_dict

  def decode_and_check(self, tf_example_string_tensor):
    """Decodes one record and builds its sanity checks.

    Args:
      tf_example_string_tensor: scalar string tensor.

    Returns:
      (tensor_dict, checks): checks is a list of (ok, message_fn) pairs, `ok`
      a scalar bool tensor, `message_fn()` a scalar string tensor.
    """
    items = [_FIELDS.image, _FIELDS.source_id, _FIELDS.key, _FIELDS.filename, '_raw']
    image, source_id, key, filename, raw = self._decoder.decode(tf_example_string_tensor, items)
    checks = []
    encoded = raw[_KEYS.image_encoded]
    checks.append((tf.greater(tf.strings.length(encoded), 0),
                   lambda: tf.constant('missing feature image/encoded')))
    height, width = raw[_KEYS.height], raw[_KEYS.width]
    shape = tf.cast(tf.shape(image)[:2], tf.int64)
    declared_ok = tf.logical_or(
        tf.logical_or(tf.equal(height * width, 0), tf.equal(tf.strings.length(encoded), 0)),
        tf.reduce_all(tf.equal(shape, tf.stack([height, width]))))
    checks.append((declared_ok, lambda: tf.strings.join([
        'image/height x image/width say ', _str(height), ' x ', _str(width),
        ' but image/encoded decodes to ', _str(shape[0]), ' x ', _str(shape[1])])))

    sides = [_dense(raw[k], 0.0) for k in (_KEYS.object_bbox_ymin, _KEYS.object_bbox_xmin,
                                           _KEYS.object_bbox_ymax, _KEYS.object_bbox_xmax)]
    side_counts = tf.stack([tf.size(s) for s in sides])
    num_boxes = tf.reduce_min(side_counts)
    checks.append((tf.reduce_all(tf.equal(side_counts, num_boxes)), lambda: tf.strings.join([
        'image/object/bbox/ymin, xmin, ymax, xmax have different lengths ',
        _str(side_counts)])))
    boxes = tf.stack([s[:num_boxes] for s in sides], axis=1)
    boxes.set_shape([None, 4])
    inside = tf.reduce_all(tf.logical_and(tf.greater_equal(boxes, -BOX_TOLERANCE),
                                          tf.less_equal(boxes, 1.0 + BOX_TOLERANCE)), axis=1)

    def outside_message():
      first = tf.argmax(tf.cast(tf.logical_not(inside), tf.int32))
      return tf.strings.join(['box ', _str(first), ' [ymin xmin ymax xmax] = ',
                              _str(boxes[first]), ' is outside [0, 1] (boxes must be normalized)'])
    checks.append((tf.reduce_all(inside), outside_message))
    ordered = tf.logical_and(tf.less_equal(boxes[:, 0], boxes[:, 2]),
                             tf.less_equal(boxes[:, 1], boxes[:, 3]))

    def order_message():
      first = tf.argmax(tf.cast(tf.logical_not(ordered), tf.int32))
      return tf.strings.join(['box ', _str(first), ' [ymin xmin ymax xmax] = ',
                              _str(boxes[first]), ' has ymin > ymax or xmin > xmax'])
    checks.append((tf.reduce_all(ordered), order_message))

    labels = tf.cast(_dense(raw[_KEYS.object_class_label]), tf.int32)
    texts = _dense(raw[_KEYS.object_class_text], '')
    classes = tf.cond(
        tf.logical_or(tf.greater(tf.size(labels), 0), tf.equal(tf.size(texts), 0)),
        lambda: labels, lambda: self._labels.lookup(texts))
    classes.set_shape([None])
    num_classes = tf.size(classes)
    checks.append((tf.equal(num_classes, num_boxes), lambda: tf.strings.join([
        'image/object/class/label (or class/text) has ', _str(num_classes),
        ' values for ', _str(num_boxes), ' boxes'])))
    checks.append(_class_id_checks(classes, self._labels.valid_ids(), 'box', 1))

    def per_box(key, default, dtype):
      values = tf.cast(_dense(raw[key], default), dtype)
      count = tf.size(values)
      ok = tf.logical_or(tf.equal(count, 0), tf.equal(count, num_boxes))
      checks.append((ok, lambda: tf.strings.join(
          [key, ' has ', _str(count), ' values for ', _str(num_boxes), ' boxes'])))
      filled = tf.cond(tf.equal(count, num_boxes), lambda: values,
                       lambda: tf.fill([num_boxes], tf.cast(default, dtype)))
      filled.set_shape([None])
      return filled

    tensor_dict = {
        _FIELDS.image: image,
        _FIELDS.source_id: source_id,
        _FIELDS.key: key,
        _FIELDS.filename: filename,
        _FIELDS.original_image_spatial_shape: tf.shape(image)[:2],
        _FIELDS.groundtruth_boxes: boxes,
        _FIELDS.groundtruth_classes: classes,
        _FIELDS.groundtruth_weights: per_box(_KEYS.object_weight, 1.0, tf.float32),
        _FIELDS.groundtruth_difficult: per_box(_KEYS.object_difficult, 0, tf.bool),
        _FIELDS.groundtruth_is_crowd: per_box(_KEYS.object_is_crowd, 0, tf.bool),
        _FIELDS.groundtruth_group_of: per_box(_KEYS.object_group_of, 0, tf.bool),
        _FIELDS.groundtruth_area: per_box(OBJECT_AREA, 0.0, tf.float32),
        _FIELDS.num_groundtruth_boxes: num_boxes,
    }
    if self._load_instance_masks:
      tensor_dict[_FIELDS.groundtruth_instance_masks] = self._decode_masks(
          raw[OBJECT_MASK], tf.shape(image)[0], tf.shape(image)[1])
    if self._num_keypoints:
      y = _dense(raw[_KEYS.keypoint_y], 0.0)
      x = _dense(raw[_KEYS.keypoint_x], 0.0)
      keypoints = tf.reshape(tf.stack([y, x], axis=1), [-1, self._num_keypoints, 2])
      tensor_dict[_FIELDS.groundtruth_keypoints] = keypoints
      count = tf.shape(keypoints)[0]
      checks.append((tf.equal(count, num_boxes), lambda: tf.strings.join([
          'image/object/keypoint/y|x hold ', _str(count), ' objects of ',
          str(self._num_keypoints), ' keypoints for ', _str(num_boxes), ' boxes'])))
    return tensor_dict, checks

  def _decode_masks(self, masks, height, width):
    """Decodes instance masks to float32 [N, H, W] of 0/1."""
    if self._png_masks:
      pngs = _dense(masks, '')

      def decode_png(png):
        return tf.squeeze(tf.io.decode_png(png, channels=1), axis=2)
      decoded = tf.cond(
          tf.greater(tf.size(pngs), 0),
          lambda: tf.map_fn(decode_png, pngs, fn_output_signature=tf.uint8),
          lambda: tf.zeros([0, height, width], tf.uint8))
      decoded = tf.reshape(decoded, [-1, height, width])
      return tf.cast(tf.greater(decoded, 0), tf.float32)
    values = _dense(masks, 0.0)
    return tf.cast(tf.greater(tf.reshape(values, [-1, height, width]), 0.0), tf.float32)

  def empty_tensor_dict(self):
    """A tensor_dict of the decoder's structure with no image and no boxes.

    Used by the input reader as a stand-in for records that fail to decode.
    """
    tensor_dict = {
        _FIELDS.image: tf.zeros([0, 0, 3], tf.uint8),
        _FIELDS.source_id: tf.constant(''),
        _FIELDS.key: tf.constant(''),
        _FIELDS.filename: tf.constant(''),
        _FIELDS.original_image_spatial_shape: tf.zeros([2], tf.int32),
        _FIELDS.groundtruth_boxes: tf.zeros([0, 4], tf.float32),
        _FIELDS.groundtruth_classes: tf.zeros([0], tf.int32),
        _FIELDS.groundtruth_weights: tf.zeros([0], tf.float32),
        _FIELDS.groundtruth_difficult: tf.zeros([0], tf.bool),
        _FIELDS.groundtruth_is_crowd: tf.zeros([0], tf.bool),
        _FIELDS.groundtruth_group_of: tf.zeros([0], tf.bool),
        _FIELDS.groundtruth_area: tf.zeros([0], tf.float32),
        _FIELDS.num_groundtruth_boxes: tf.constant(0, tf.int32),
    }
    if self._load_instance_masks:
      tensor_dict[_FIELDS.groundtruth_instance_masks] = tf.zeros([0, 0, 0], tf.float32)
    if self._num_keypoints:
      tensor_dict[_FIELDS.groundtruth_keypoints] = tf.zeros([0, self._num_keypoints, 2])
    return tensor_dict


class TfClassificationExampleDecoder(_ExampleDecoder):
  """Decodes classification tf.Examples (`image/encoded`, `image/class/label`)."""

  def __init__(self, label_map_proto_file=None, use_display_name=False):
    """Creates the decoder.

    Args:
      label_map_proto_file: optional label map path; when set, labels must be
        in it and `image/class/text` maps to an id when the label is absent.
      use_display_name: map texts by `display_name` instead of `name`.
    """
    self._labels = _LabelMapLookup(label_map_proto_file, use_display_name)
    keys_to_features = _image_features()
    keys_to_features[_KEYS.image_class_label] = tf.io.FixedLenFeature(
        (), tf.int64, default_value=-1)
    keys_to_features[_KEYS.image_class_text] = tf.io.FixedLenFeature(
        (), tf.string, default_value='')
    self._init_decoder(keys_to_features)

  def decode(self, tf_example_string_tensor):
    """Decodes one record into {image, label, source_id, key, filename}."""
    tensor_dict, _ = self.decode_and_check(tf_example_string_tensor)
    return tensor_dict

  def decode_and_check(self, tf_example_string_tensor):
    """Like TfExampleDecoder.decode_and_check, for classification records."""
    items = [_FIELDS.image, _FIELDS.source_id, _FIELDS.key, _FIELDS.filename, '_raw']
    image, source_id, key, filename, raw = self._decoder.decode(tf_example_string_tensor, items)
    label = tf.cast(raw[_KEYS.image_class_label], tf.int32)
    text = raw[_KEYS.image_class_text]
    label = tf.cond(tf.logical_and(tf.less(label, 0), tf.greater(tf.strings.length(text), 0)),
                    lambda: self._labels.lookup(tf.reshape(text, [1]))[0], lambda: label)
    checks = [
        (tf.greater(tf.strings.length(raw[_KEYS.image_encoded]), 0),
         lambda: tf.constant('missing feature image/encoded')),
        (tf.logical_or(tf.greater_equal(label, 0), tf.greater(tf.strings.length(text), 0)),
         lambda: tf.constant('missing feature image/class/label')),
        _class_id_checks(label, self._labels.valid_ids(), 'image', 0),
    ]
    tensor_dict = {
        _FIELDS.image: image,
        _FIELDS.label: label,
        _FIELDS.source_id: source_id,
        _FIELDS.key: key,
        _FIELDS.filename: filename,
        _FIELDS.original_image_spatial_shape: tf.shape(image)[:2],
    }
    return tensor_dict, checks

  def empty_tensor_dict(self):
    """A tensor_dict of this decoder's structure for records that fail."""
    return {
        _FIELDS.image: tf.zeros([0, 0, 3], tf.uint8),
        _FIELDS.label: tf.constant(-1, tf.int32),
        _FIELDS.source_id: tf.constant(''),
        _FIELDS.key: tf.constant(''),
        _FIELDS.filename: tf.constant(''),
        _FIELDS.original_image_spatial_shape: tf.zeros([2], tf.int32),
    }
