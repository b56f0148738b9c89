"""The single-grid anchors of a Faster R-CNN region proposal network.

Every cell (i, j) of the RPN's feature map gets one box per pair of a scale
`s` and an aspect ratio `a` (width / height), all centred on

    center_y = offset_y + i * stride_y,   center_x = offset_x + j * stride_x

with

    height = s * base_height / sqrt(a),   width = s * base_width * sqrt(a)

in absolute (pixel) coordinates of the resized image. The stride is the
feature extractor's output stride, so the anchors follow the image however it
was resized; the grid size may be a tensor (keep_aspect_ratio_resizer without
padding gives each image its own size).

Anchors are ordered by grid row, then grid column, then the pairs within the
cell, matching a box predictor's [batch, H, W, A * code] output reshaped to
[batch, H * W * A, code]. Within a cell the scale varies fastest:
(s0, a0), (s1, a0), (s2, a0), (s0, a1), ... as in the OD API.

Usage:

    generator = GridAnchorGenerator(scales=(0.25, 0.5, 1.0, 2.0),
                                    aspect_ratios=(0.5, 1.0, 2.0),
                                    anchor_stride=[16, 16])
    generator.num_anchors_per_location()        # [12]
    anchors = generator.generate([(38, 50)])    # float32 [38 * 50 * 12, 4]
"""

import math

import tensorflow as tf


def _pair(name, value, default):
  value = default if value is None else value
  if isinstance(value, (tf.Tensor, tf.Variable)):
    return tf.cast(value, tf.float32)
  value = [float(v) for v in value]
  if len(value) != 2:
    raise ValueError('%s must be a (y, x) pair, got %r' % (name, value))
  return value


class GridAnchorGenerator:
  """Anchors of several scales and aspect ratios on one feature-map grid.

  Args:
    scales: anchor scales, relative to base_anchor_size.
    aspect_ratios: width / height ratios.
    base_anchor_size: [height, width] of the scale-1, ratio-1 anchor (pixels;
      default [256, 256]).
    anchor_stride: [y, x] distance between neighbouring grid centres (pixels;
      default [16, 16]).
    anchor_offset: [y, x] centre of the top-left cell (pixels; default [0, 0]).
  """

  def __init__(self, scales=(0.5, 1.0, 2.0), aspect_ratios=(0.5, 1.0, 2.0),
               base_anchor_size=None, anchor_stride=None, anchor_offset=None):
    if not len(scales) or not len(aspect_ratios):
      raise ValueError('scales and aspect_ratios must be non-empty, got %r and %r'
                       % (scales, aspect_ratios))
    self._scales = [float(s) for s in scales]
    self._aspect_ratios = [float(a) for a in aspect_ratios]
    self._base_anchor_size = _pair('base_anchor_size', base_anchor_size, [256, 256])
    self._anchor_stride = _pair('anchor_stride', anchor_stride, [16, 16])
    self._anchor_offset = _pair('anchor_offset', anchor_offset, [0, 0])

  def name_scope(self):
    return 'GridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns [number of anchors per grid cell] (one feature map)."""
    return [len(self._scales) * len(self._aspect_ratios)]

  def cell_anchor_sizes(self):
    """Returns float32 [A, 2]: (height, width) of the anchors of one cell, in order."""
    heights, widths = [], []
    for ratio in self._aspect_ratios:
      for scale in self._scales:   # the scale varies fastest
        heights.append(scale / math.sqrt(ratio))
        widths.append(scale * math.sqrt(ratio))
    base = tf.convert_to_tensor(self._base_anchor_size, tf.float32)
    return tf.stack([tf.constant(heights) * base[0], tf.constant(widths) * base[1]], axis=1)

  def generate(self, feature_map_shape_list):
    """Builds the anchors of one feature map.

    Args:
      feature_map_shape_list: [(height, width)], one pair of Python ints or
        int32 scalar tensors.

    Returns:
      float32 [height * width * A, 4] absolute [ymin, xmin, ymax, xmax].

    Raises:
      ValueError: if feature_map_shape_list is not a list of one pair.
    """
    if (not isinstance(feature_map_shape_list, (list, tuple))
        or len(feature_map_shape_list) != 1
        or len(feature_map_shape_list[0]) != 2):
      raise ValueError('feature_map_shape_list must be a list of one (height, width) '
                       'pair, got %r' % (feature_map_shape_list,))
    height, width = feature_map_shape_list[0]
    with tf.name_scope(self.name_scope()):
      return self._tile(height, width)

  def _tile(self, height, width):
    """Anchors [height * width * A, 4]: every cell's centre with every cell size."""
    stride = tf.convert_to_tensor(self._anchor_stride, tf.float32)
    offset = tf.convert_to_tensor(self._anchor_offset, tf.float32)
    y_centers = tf.cast(tf.range(height), tf.float32) * stride[0] + offset[0]
    x_centers = tf.cast(tf.range(width), tf.float32) * stride[1] + offset[1]
    y_grid, x_grid = tf.meshgrid(y_centers, x_centers, indexing='ij')
    centers = tf.reshape(tf.stack([y_grid, x_grid], axis=-1), [-1, 1, 2])
    sizes = self.cell_anchor_sizes()[None, :, :]          # [1, A, 2]
    corners = tf.concat([centers - 0.5 * sizes, centers + 0.5 * sizes], axis=-1)
    return tf.reshape(corners, [-1, 4])
