"""Box encodings: boxes as offsets relative to anchors.

A detector does not regress raw coordinates; it regresses how an anchor has to
move and stretch to become the box. The Faster R-CNN coding (Ren et al., 2015)
of a box (centre yc, xc, size h, w) against an anchor (ya, xa, ha, wa) is

    ty = (yc - ya) / ha * y_scale      tx = (xc - xa) / wa * x_scale
    th = log(h / ha) * height_scale    tw = log(w / wa) * width_scale

with the scales (default 10, 10, 5, 5) bringing the targets to roughly unit
variance. `decode` inverts `encode` exactly.

Usage:

    coder = box_coder.FasterRcnnBoxCoder()
    codes = coder.encode(groundtruth_boxes, anchors)       # [N, 4]
    boxes = coder.decode(codes, anchors)                    # == groundtruth_boxes
    boxes = box_coder.batch_decode(coder, box_encodings, anchors)   # [B, N, 4]
"""

import tensorflow as tf

EPSILON = 1e-8


def _center_and_size(boxes):
  """Splits [..., 4] corner boxes into (y, x) centres and (height, width) sizes."""
  corner_min, corner_max = tf.split(boxes, 2, axis=-1)
  size = corner_max - corner_min
  return corner_min + size / 2.0, size


class FasterRcnnBoxCoder:
  """Encodes [ymin, xmin, ymax, xmax] boxes as scaled (ty, tx, th, tw).

  Args:
    scale_factors: four positive floats (y, x, height, width scales), or None
      for no scaling.

  Raises:
    ValueError: when scale_factors is not four positive numbers.
  """

  def __init__(self, scale_factors=(10.0, 10.0, 5.0, 5.0)):
    if scale_factors is not None:
      scale_factors = [float(s) for s in scale_factors]
      if len(scale_factors) != 4 or any(s <= 0 for s in scale_factors):
        raise ValueError('box coder scale_factors must be 4 positive numbers, got %r'
                         % (scale_factors,))
    self._scale_factors = scale_factors

  @property
  def code_size(self):
    return 4

  def _scales(self, dtype):
    return tf.constant(self._scale_factors, dtype=dtype)

  def encode(self, boxes, anchors, scope=None):
    """Returns the [N, 4] codes of `boxes` relative to `anchors` (both [N, 4])."""
    with tf.compat.v1.name_scope(scope, 'Encode'):
      anchor_center, anchor_size = _center_and_size(anchors)
      center, size = _center_and_size(boxes)
      # The epsilon keeps degenerate (zero-size) boxes and anchors finite.
      anchor_size += EPSILON
      size += EPSILON
      codes = tf.concat([(center - anchor_center) / anchor_size,
                         tf.math.log(size / anchor_size)], axis=-1)
      if self._scale_factors:
        codes *= self._scales(codes.dtype)
      return codes

  def decode(self, rel_codes, anchors, scope=None):
    """Returns [N, 4] boxes from codes [N, 4] relative to anchors [N, 4]."""
    with tf.compat.v1.name_scope(scope, 'Decode'):
      anchor_center, anchor_size = _center_and_size(anchors)
      if self._scale_factors:
        rel_codes /= self._scales(rel_codes.dtype)
      shift, log_stretch = tf.split(rel_codes, 2, axis=-1)
      half_size = tf.exp(log_stretch) * anchor_size / 2.0
      center = shift * anchor_size + anchor_center
      return tf.concat([center - half_size, center + half_size], axis=-1)


def batch_decode(coder, box_encodings, anchors):
  """Decodes [batch, N, code_size] encodings against shared [N, 4] anchors.

  Args:
    coder: a box coder (e.g. FasterRcnnBoxCoder).
    box_encodings: float [batch, N, code_size].
    anchors: float [N, 4].

  Returns:
    float [batch, N, 4] boxes.
  """
  with tf.compat.v1.name_scope('BatchDecode'):
    shape = tf.shape(box_encodings)
    batch = shape[0]
    tiled = tf.tile(tf.expand_dims(anchors, 0), [batch, 1, 1])
    boxes = coder.decode(tf.reshape(box_encodings, [-1, coder.code_size]),
                         tf.reshape(tiled, [-1, 4]))
    return tf.reshape(boxes, [batch, shape[1], 4])
