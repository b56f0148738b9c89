"""Turning raw detector outputs into a short list of detections.

Two steps: a score converter maps class logits to scores (identity, sigmoid
or softmax, after dividing by a logit scale), then batch multi-class
non-max suppression keeps, per image and class, the best-scoring boxes that do
not overlap a better one by more than `iou_thresh`, and finally the
`max_total_size` best over all classes. TensorFlow's
`tf.image.combined_non_max_suppression` does the NMS for the whole batch in
one op; outputs are padded to `max_total_size` with zeros, `num_detections`
says how many rows are real.

Usage:

    convert = post_processing.score_converter_fn('SIGMOID', logit_scale=1.0)
    scores = convert(class_predictions_with_background)[:, :, 1:]
    boxes, scores, classes, num = post_processing.batch_multiclass_non_max_suppression(
        decoded_boxes, scores, score_thresh=0.01, iou_thresh=0.6,
        max_size_per_class=100, max_total_size=100)
"""

import functools

import tensorflow as tf


def score_converter_fn(score_converter='IDENTITY', logit_scale=1.0):
  """Returns fn(logits) -> scores.

  Args:
    score_converter: 'IDENTITY', 'SIGMOID' or 'SOFTMAX' (case-insensitive).
    logit_scale: logits are divided by this first.

  Raises:
    ValueError: on an unknown converter or a non-positive logit scale.
  """
  converters = {'IDENTITY': tf.identity, 'SIGMOID': tf.sigmoid, 'SOFTMAX': tf.nn.softmax}
  name = str(score_converter).upper()
  if name not in converters:
    raise ValueError('post_processing.score_converter must be one of %s, got %r'
                     % (sorted(converters), score_converter))
  if logit_scale <= 0:
    raise ValueError('post_processing.logit_scale must be positive, got %s' % logit_scale)

  def convert(logits):
    with tf.compat.v1.name_scope('ScoreConverter'):
      scaled = logits if logit_scale == 1.0 else tf.divide(logits, logit_scale)
      return converters[name](scaled, name='convert_scores')

  convert.__name__ = name.lower() + '_score_converter'
  return convert


def batch_multiclass_non_max_suppression(boxes, scores, score_thresh, iou_thresh,
                                         max_size_per_class, max_total_size=0,
                                         clip_window=None, change_coordinate_frame=False,
                                         scope=None):
  """Multi-class NMS over a batch with one box per anchor shared by classes.

  Args:
    boxes: float [B, M, 4] or [B, M, q, 4] (q = 1 or num_classes) boxes.
    scores: float [B, M, num_classes] scores (background excluded).
    score_thresh: boxes scoring below this are dropped.
    iou_thresh: overlap above which the lower-scoring box is suppressed.
    max_size_per_class: boxes kept per class per image.
    max_total_size: boxes kept per image (0: max_size_per_class * classes).
    clip_window: optional float [B, 4] windows the boxes are clipped to
      before NMS; with change_coordinate_frame boxes are then re-expressed
      relative to that window (so they are normalized to the true image).
    change_coordinate_frame: see clip_window.
    scope: name scope.

  Returns:
    (nmsed_boxes [B, max_total_size, 4], nmsed_scores [B, max_total_size],
     nmsed_classes [B, max_total_size] float, 0-based,
     num_detections [B] int32).

  Raises:
    ValueError: on bad thresholds or shapes.
  """
  if not 0.0 <= iou_thresh <= 1.0:
    raise ValueError('iou_thresh must be in [0, 1], got %s' % iou_thresh)
  if max_size_per_class < 1:
    raise ValueError('max_size_per_class must be positive, got %s' % max_size_per_class)
  with tf.compat.v1.name_scope(scope, 'BatchMultiClassNonMaxSuppression'):
    boxes = tf.convert_to_tensor(boxes, tf.float32)
    scores = tf.convert_to_tensor(scores, tf.float32)
    if boxes.shape.ndims == 3:
      boxes = tf.expand_dims(boxes, 2)
    if boxes.shape.ndims != 4 or scores.shape.ndims != 3:
      raise ValueError('boxes must be [B, M, 4] or [B, M, q, 4] and scores [B, M, K], got '
                       '%s and %s' % (boxes.shape, scores.shape))
    num_classes = scores.shape[2]
    if not max_total_size:
      if num_classes is None:
        raise ValueError('max_total_size is needed when the class count is unknown')
      max_total_size = max_size_per_class * num_classes
    if clip_window is not None:
      boxes = _clip_to_window(boxes, clip_window)
      if change_coordinate_frame:
        boxes = _to_window_frame(boxes, clip_window)
    nmsed = tf.image.combined_non_max_suppression(
        boxes, scores,
        max_output_size_per_class=max_size_per_class,
        max_total_size=max_total_size,
        iou_threshold=iou_thresh,
        score_threshold=score_thresh,
        pad_per_class=False,
        clip_boxes=True)
    return (nmsed.nmsed_boxes, nmsed.nmsed_scores, nmsed.nmsed_classes,
            tf.cast(nmsed.valid_detections, tf.int32))


def _clip_to_window(boxes, window):
  """Clips [B, M, q, 4] boxes to per-image [B, 4] windows."""
  window = window[:, None, None, :]
  ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
  wy0, wx0, wy1, wx1 = tf.unstack(window, axis=-1)
  return tf.stack([tf.clip_by_value(ymin, wy0, wy1), tf.clip_by_value(xmin, wx0, wx1),
                   tf.clip_by_value(ymax, wy0, wy1), tf.clip_by_value(xmax, wx0, wx1)],
                  axis=-1)


def _to_window_frame(boxes, window):
  """Re-expresses [B, M, q, 4] boxes relative to per-image [B, 4] windows."""
  window = window[:, None, None, :]
  height = tf.maximum(window[..., 2] - window[..., 0], 1e-8)
  width = tf.maximum(window[..., 3] - window[..., 1], 1e-8)
  ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
  return tf.stack([(ymin - window[..., 0]) / height, (xmin - window[..., 1]) / width,
                   (ymax - window[..., 0]) / height, (xmax - window[..., 1]) / width],
                  axis=-1)


def non_max_suppression_fn(score_thresh=0.0, iou_thresh=0.6, max_size_per_class=100,
                           max_total_size=100):
  """Returns batch_multiclass_non_max_suppression with the thresholds bound.

  The SSD meta-architecture calls it as fn(boxes, scores, clip_window=...,
  change_coordinate_frame=...).
  """
  if max_total_size and max_total_size < 1:
    raise ValueError('max_total_detections must be positive, got %s' % max_total_size)
  return functools.partial(batch_multiclass_non_max_suppression,
                           score_thresh=score_thresh, iou_thresh=iou_thresh,
                           max_size_per_class=max_size_per_class,
                           max_total_size=max_total_size)
