"""`object_detection.utils.ops` functions that training code calls on groundtruth.

The legacy trainer turns each example's class ids into the model's class targets with
these two:

    from utils import ops as util_ops

    # ids 0..num_classes-1 (background already removed) -> [N, num_classes] float one-hot
    classes = util_ops.padded_one_hot_encoding(indices=ids, depth=num_classes, left_pad=0)

    # the same box listed once per label -> one box with k-hot classes (2017 form)
    boxes, k_hot, kept = util_ops.merge_boxes_with_multiple_labels(boxes, ids, num_classes)
    # later form, with per-label confidences and quantized box coordinates
    boxes, k_hot, confidence, kept = util_ops.merge_boxes_with_multiple_labels(
        boxes, ids, confidences, num_classes, quantization_bins=10000)

Both are graph-mode TensorFlow (no py_func), so they run on any device of a clone.

Differs on purpose:
* `merge_boxes_with_multiple_labels` takes both of the OD API's signatures: with three
  arguments (`boxes, classes, num_classes`, 2017) it returns three values and compares
  box coordinates exactly, as that version did; with `confidences` it returns four values
  and compares boxes after quantizing them into `quantization_bins`, as later versions
  do. Merged boxes come out in the order of their first occurrence.
"""

import numbers

import tensorflow as tf


def _check_non_negative_int(name, value):
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
    raise ValueError('`%s` must be a non-negative integer.' % name)


def padded_one_hot_encoding(indices, depth, left_pad):
  """One-hot rows for class ids, with `left_pad` zero columns in front.

  Args:
    indices: an integer tensor of rank 1 (the class ids, 0-based).
    depth: a non-negative int, the number of classes.
    left_pad: a non-negative int, zero columns added before the first class
      (e.g. 1 for a background column).

  Returns:
    A float32 tensor of shape [len(indices), depth + left_pad]; with no ids, an empty
    [0, depth + left_pad] tensor; None when `depth` is 0 (as the OD API).

  Raises:
    ValueError: `depth` or `left_pad` not a non-negative integer, or `indices` not of
      rank 1.
  """
  _check_non_negative_int('depth', depth)
  _check_non_negative_int('left_pad', left_pad)
  if depth == 0:
    return None
  indices = tf.convert_to_tensor(indices)
  rank = indices.shape.rank
  if rank != 1:
    raise ValueError('`indices` must have rank 1, but has rank=%s' % rank)
  one_hot = tf.one_hot(tf.cast(indices, tf.int64), depth, dtype=tf.float32)
  # tf.one_hot of an empty vector is already [0, depth]; padding keeps that shape.
  padded = tf.pad(one_hot, [[0, 0], [left_pad, 0]])
  return tf.reshape(padded, [-1, depth + left_pad])


def _box_keys(boxes, quantization_bins):
  """Per box, an int64 row to compare boxes by: exact bits, or quantized coordinates."""
  if quantization_bins is None:
    return tf.bitcast(tf.cast(boxes, tf.float32), tf.int32)
  return tf.cast(tf.math.floor(tf.cast(boxes, tf.float32) * quantization_bins), tf.int64)


def _merge(boxes, classes, confidences, num_classes, quantization_bins):
  """The merge of both signatures: (boxes, k_hot int32, confidences, first indices)."""
  boxes = tf.convert_to_tensor(boxes, tf.float32)
  classes = tf.cast(classes, tf.int32)
  num_boxes = tf.shape(boxes)[0]
  _, box_ids = tf.raw_ops.UniqueV2(x=_box_keys(boxes, quantization_bins), axis=[0])[:2]
  num_merged = tf.reduce_max(tf.concat([box_ids, [-1]], 0)) + 1
  first_index = tf.math.unsorted_segment_min(tf.range(num_boxes), box_ids, num_merged)
  one_hot = tf.one_hot(classes, num_classes, dtype=tf.int32)
  k_hot = tf.math.unsorted_segment_max(one_hot, box_ids, num_merged)
  merged_confidences = None
  if confidences is not None:
    weighted = tf.one_hot(classes, num_classes) * tf.expand_dims(
        tf.cast(confidences, tf.float32), 1)
    merged_confidences = tf.math.unsorted_segment_max(weighted, box_ids, num_merged)
  merged_boxes = tf.gather(boxes, first_index)
  return merged_boxes, k_hot, merged_confidences, first_index


def merge_boxes_with_multiple_labels(boxes, classes, confidences=None, num_classes=None,
                                     quantization_bins=10000):
  """Merges boxes listed once per label into one box with k-hot classes.

  Called as in 2017, `merge_boxes_with_multiple_labels(boxes, classes, num_classes)`,
  or as later, `merge_boxes_with_multiple_labels(boxes, classes, confidences,
  num_classes, quantization_bins=10000)`.

  Args:
    boxes: a float32 tensor [N, 4] (normalized coordinates for the quantized form).
    classes: an int tensor [N] of 0-based class ids.
    confidences: a float tensor [N] of per-label confidences; in the 2017 form this
      position holds `num_classes` (an int), or it is left out and `num_classes` given
      by keyword.
    num_classes: an int, the number of classes (the later form).
    quantization_bins: boxes whose coordinates fall in the same bin are one box (the
      later form only; the 2017 form compares coordinates exactly).

  Returns:
    2017 form: (merged_boxes [M, 4], class_encodings int32 [M, num_classes],
      merged_box_indices int32 [M]). Later form: (merged_boxes, class_encodings,
      confidence_encodings float32 [M, num_classes], merged_box_indices). Each merged
      box is the first of its group; `merged_box_indices` are those positions in `boxes`.

  Raises:
    ValueError: `num_classes` missing or not a positive integer.
  """
  if num_classes is None and isinstance(confidences, numbers.Integral):
    num_classes, confidences = confidences, None  # 2017, positionally
  if confidences is None:  # 2017 (also `num_classes=` by keyword)
    _check_num_classes(num_classes)
    merged_boxes, k_hot, _, indices = _merge(boxes, classes, None, int(num_classes), None)
    return merged_boxes, k_hot, indices
  _check_num_classes(num_classes)
  return _merge(boxes, classes, confidences, num_classes, quantization_bins)


def _check_num_classes(num_classes):
  if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or (
      num_classes <= 0):
    raise ValueError('merge_boxes_with_multiple_labels: num_classes must be a positive '
                     'integer; got %r' % (num_classes,))
