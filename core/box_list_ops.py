"""Geometry on boxes held as plain [N, 4] float tensors.

Every function takes boxes as `[ymin, xmin, ymax, xmax]` rows (normalized or
absolute, as long as both operands agree) and returns tensors, so the
augmentation code and the detector share one implementation:

    from core import box_list_ops
    overlaps = box_list_ops.iou(groundtruth_boxes, anchors)    # [N, M]
    boxes, kept = box_list_ops.prune_completely_outside_window(boxes, window)
"""

import tensorflow as tf


def _split(boxes):
  ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=-1)
  return ymin, xmin, ymax, xmax


def area(boxes, scope=None):
  """Returns the [N] areas of `boxes`."""
  with tf.compat.v1.name_scope(scope, 'Area'):
    ymin, xmin, ymax, xmax = _split(boxes)
    return (ymax - ymin) * (xmax - xmin)


def height_width(boxes, scope=None):
  """Returns ([N] heights, [N] widths)."""
  with tf.compat.v1.name_scope(scope, 'HeightWidth'):
    ymin, xmin, ymax, xmax = _split(boxes)
    return ymax - ymin, xmax - xmin


def intersection(boxes1, boxes2, scope=None):
  """Returns the [N, M] pairwise intersection areas."""
  with tf.compat.v1.name_scope(scope, 'Intersection'):
    ymin1, xmin1, ymax1, xmax1 = tf.split(boxes1, 4, axis=1)
    ymin2, xmin2, ymax2, xmax2 = tf.split(boxes2, 4, axis=1)
    heights = tf.maximum(
        0.0, tf.minimum(ymax1, tf.transpose(ymax2)) -
        tf.maximum(ymin1, tf.transpose(ymin2)))
    widths = tf.maximum(
        0.0, tf.minimum(xmax1, tf.transpose(xmax2)) -
        tf.maximum(xmin1, tf.transpose(xmin2)))
    return heights * widths


def iou(boxes1, boxes2, scope=None):
  """Returns the [N, M] pairwise intersection-over-union (0 where undefined)."""
  with tf.compat.v1.name_scope(scope, 'IOU'):
    intersections = intersection(boxes1, boxes2)
    unions = (tf.expand_dims(area(boxes1), 1) +
              tf.expand_dims(area(boxes2), 0) - intersections)
    return tf.where(unions > 0.0, intersections / tf.maximum(unions, 1e-12),
                    tf.zeros_like(intersections))


def ioa(boxes1, boxes2, scope=None):
  """Returns the [N, M] intersection over the area of each box in boxes2.

  Note the asymmetry: ioa(a, b)[i, j] = intersection(a_i, b_j) / area(b_j).
  """
  with tf.compat.v1.name_scope(scope, 'IOA'):
    intersections = intersection(boxes1, boxes2)
    areas = tf.expand_dims(area(boxes2), 0)
    return tf.where(areas > 0.0, intersections / tf.maximum(areas, 1e-12),
                    tf.zeros_like(intersections))


def clip_to_window(boxes, window, scope=None):
  """Clips boxes to `window` [ymin, xmin, ymax, xmax]; may leave empty boxes."""
  with tf.compat.v1.name_scope(scope, 'ClipToWindow'):
    ymin, xmin, ymax, xmax = _split(boxes)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    ymin = tf.clip_by_value(ymin, win_ymin, win_ymax)
    ymax = tf.clip_by_value(ymax, win_ymin, win_ymax)
    xmin = tf.clip_by_value(xmin, win_xmin, win_xmax)
    xmax = tf.clip_by_value(xmax, win_xmin, win_xmax)
    return tf.stack([ymin, xmin, ymax, xmax], axis=1)


def prune_outside_window(boxes, window, scope=None):
  """Keeps boxes lying entirely inside `window`.

  Returns:
    (kept_boxes, valid_indices): the boxes inside and their int32 indices.
  """
  with tf.compat.v1.name_scope(scope, 'PruneOutsideWindow'):
    ymin, xmin, ymax, xmax = _split(boxes)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    inside = tf.reduce_all(
        tf.stack([ymin >= win_ymin, xmin >= win_xmin,
                  ymax <= win_ymax, xmax <= win_xmax], axis=1), axis=1)
    valid_indices = tf.cast(tf.reshape(tf.where(inside), [-1]), tf.int32)
    return tf.gather(boxes, valid_indices), valid_indices


def prune_completely_outside_window(boxes, window, scope=None):
  """Drops boxes that do not overlap `window` at all.

  Returns:
    (kept_boxes, valid_indices).
  """
  with tf.compat.v1.name_scope(scope, 'PruneCompletelyOutsideWindow'):
    ymin, xmin, ymax, xmax = _split(boxes)
    win_ymin, win_xmin, win_ymax, win_xmax = tf.unstack(window)
    outside = tf.reduce_any(
        tf.stack([ymin >= win_ymax, xmin >= win_xmax,
                  ymax <= win_ymin, xmax <= win_xmin], axis=1), axis=1)
    valid_indices = tf.cast(tf.reshape(tf.where(tf.logical_not(outside)), [-1]),
                            tf.int32)
    return tf.gather(boxes, valid_indices), valid_indices


def prune_non_overlapping_boxes(boxes1, boxes2, min_overlap=0.0, scope=None):
  """Keeps boxes1 rows whose ioa with some boxes2 row is at least min_overlap.

  Returns:
    (kept_boxes, valid_indices).
  """
  with tf.compat.v1.name_scope(scope, 'PruneNonOverlappingBoxes'):
    overlaps = ioa(boxes2, boxes1)  # [M, N]: fraction of each boxes1 covered.
    keep = tf.greater_equal(tf.reduce_max(overlaps, axis=0), min_overlap)
    valid_indices = tf.cast(tf.reshape(tf.where(keep), [-1]), tf.int32)
    return tf.gather(boxes1, valid_indices), valid_indices


def change_coordinate_frame(boxes, window, scope=None):
  """Expresses boxes relative to `window` (so window becomes [0, 0, 1, 1])."""
  with tf.compat.v1.name_scope(scope, 'ChangeCoordinateFrame'):
    win_height = window[2] - window[0]
    win_width = window[3] - window[1]
    shifted = boxes - tf.stack([window[0], window[1], window[0], window[1]])
    return shifted / tf.stack([win_height, win_width, win_height, win_width])


def scale(boxes, y_scale, x_scale, scope=None):
  """Multiplies y coordinates by y_scale and x coordinates by x_scale."""
  with tf.compat.v1.name_scope(scope, 'Scale'):
    y_scale = tf.cast(y_scale, boxes.dtype)
    x_scale = tf.cast(x_scale, boxes.dtype)
    return boxes * tf.stack([y_scale, x_scale, y_scale, x_scale])


def to_absolute_coordinates(boxes, height, width, scope=None):
  """Normalized boxes to pixel coordinates of an image height x width."""
  with tf.compat.v1.name_scope(scope, 'ToAbsoluteCoordinates'):
    return scale(boxes, tf.cast(height, tf.float32), tf.cast(width, tf.float32))


def to_normalized_coordinates(boxes, height, width, scope=None):
  """Pixel boxes of an image height x width to normalized coordinates."""
  with tf.compat.v1.name_scope(scope, 'ToNormalizedCoordinates'):
    return scale(boxes, 1.0 / tf.cast(height, tf.float32),
                 1.0 / tf.cast(width, tf.float32))
