"""Geometry on keypoints, the companion of box_list_ops for augmentation.

Keypoints are a float tensor [num_instances, num_keypoints, 2] of (y, x)
pairs, normalized to the image like boxes. A keypoint that is unknown or was
cropped away is NaN; visibilities ([num_instances, num_keypoints] bool) follow
that rule after a crop. The augmentations in `core.preprocessor` move
keypoints with the image through these helpers:

    from core import preprocessor_keypoints as kp_ops
    flipped = kp_ops.flip_horizontal(keypoints, 0.5, flip_permutation=[1, 0])
    cropped = kp_ops.change_coordinate_frame(keypoints, crop_window)
    cropped = kp_ops.prune_outside_window(cropped, [0.0, 0.0, 1.0, 1.0])
"""

import tensorflow as tf


def _permute(tensor, permutation):
  """Reorders the keypoint axis (axis 1) of `tensor` by `permutation`."""
  if permutation is None or len(permutation) == 0:
    return tensor
  return tf.gather(tensor, list(permutation), axis=1)


def flip_horizontal(keypoints, flip_point, flip_permutation=None, scope=None):
  """Mirrors x around `flip_point` and reorders keypoints (left <-> right).

  Args:
    keypoints: [N, K, 2] float (y, x).
    flip_point: the x coordinate of the mirror line (0.5 for normalized).
    flip_permutation: K ints, the new order of keypoints after the flip.
    scope: name scope.

  Returns:
    [N, K, 2] flipped keypoints.
  """
  with tf.compat.v1.name_scope(scope, 'FlipHorizontal'):
    y, x = tf.unstack(keypoints, num=2, axis=2)
    flipped = tf.stack([y, 2.0 * flip_point - x], axis=2)
    return _permute(flipped, flip_permutation)


def flip_vertical(keypoints, flip_point, flip_permutation=None, scope=None):
  """Mirrors y around `flip_point`; see flip_horizontal."""
  with tf.compat.v1.name_scope(scope, 'FlipVertical'):
    y, x = tf.unstack(keypoints, num=2, axis=2)
    flipped = tf.stack([2.0 * flip_point - y, x], axis=2)
    return _permute(flipped, flip_permutation)


def rot90(keypoints, rotation_permutation=None, scope=None):
  """Rotates normalized keypoints 90 degrees counter-clockwise.

  A point (y, x) of the original image lands at (1 - x, y) in the rotated one.

  Args:
    keypoints: [N, K, 2] normalized (y, x).
    rotation_permutation: optional new keypoint order.
    scope: name scope.

  Returns:
    [N, K, 2] rotated keypoints.
  """
  with tf.compat.v1.name_scope(scope, 'Rot90'):
    y, x = tf.unstack(keypoints, num=2, axis=2)
    rotated = tf.stack([1.0 - x, y], axis=2)
    return _permute(rotated, rotation_permutation)


def permute_visibilities(visibilities, permutation):
  """Reorders [N, K] visibilities the way keypoints were reordered."""
  return _permute(visibilities, permutation)


def scale(keypoints, y_scale, x_scale, scope=None):
  """Multiplies y by y_scale and x by x_scale."""
  with tf.compat.v1.name_scope(scope, 'Scale'):
    y_scale = tf.cast(y_scale, tf.float32)
    x_scale = tf.cast(x_scale, tf.float32)
    return keypoints * tf.reshape(tf.stack([y_scale, x_scale]), [1, 1, 2])


def change_coordinate_frame(keypoints, window, scope=None):
  """Expresses keypoints relative to `window` [ymin, xmin, ymax, xmax]."""
  with tf.compat.v1.name_scope(scope, 'ChangeCoordinateFrame'):
    window = tf.cast(window, tf.float32)
    origin = tf.reshape(tf.stack([window[0], window[1]]), [1, 1, 2])
    size = tf.reshape(tf.stack([window[2] - window[0], window[3] - window[1]]),
                      [1, 1, 2])
    return (keypoints - origin) / size


def prune_outside_window(keypoints, window, scope=None):
  """Sets keypoints outside `window` to NaN (both coordinates).

  Args:
    keypoints: [N, K, 2].
    window: [4] ymin, xmin, ymax, xmax.
    scope: name scope.

  Returns:
    [N, K, 2] keypoints with outside points replaced by NaN.
  """
  with tf.compat.v1.name_scope(scope, 'PruneOutsideWindow'):
    window = tf.cast(window, tf.float32)
    y, x = tf.unstack(keypoints, num=2, axis=2)
    inside = tf.logical_and(
        tf.logical_and(y >= window[0], y <= window[2]),
        tf.logical_and(x >= window[1], x <= window[3]))
    inside = tf.tile(tf.expand_dims(inside, 2), [1, 1, 2])
    return tf.where(inside, keypoints, tf.fill(tf.shape(keypoints), float('nan')))


def visibilities_from_keypoints(keypoints, visibilities):
  """Marks NaN keypoints invisible; keeps the others' visibility."""
  finite = tf.logical_not(tf.reduce_any(tf.math.is_nan(keypoints), axis=2))
  return tf.logical_and(tf.cast(visibilities, tf.bool), finite)
