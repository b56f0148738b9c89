"""Multi-scale anchor grids for single-shot detectors.

An SSD predicts, at every cell of every feature map, a fixed set of boxes
("anchors") and regresses offsets from them. Layer `k` of `L` gets anchors of
scale

    s_k = min_scale + (max_scale - min_scale) * k / (L - 1)

(relative to the shorter image side) for every aspect ratio `a`
(height = s_k / sqrt(a), width = s_k * sqrt(a)), plus one extra square-ish
anchor of scale sqrt(s_k * s_{k+1}) (with s_L = 1). The anchors of a layer
are centred on its grid cells: cell (i, j) of an H x W map has its centre at
((i + 0.5) / H, (j + 0.5) / W) in normalized image coordinates.

Anchors are ordered layer by layer, then row, column, and anchor within the
cell, which is exactly the order a box predictor's [batch, H, W, A * 4] output
has after reshaping to [batch, H * W * A, 4].

Usage:

    generator = anchor_generator.create_ssd_anchors(
        num_layers=3, min_scale=0.2, max_scale=0.9, aspect_ratios=(1.0, 2.0, 0.5))
    generator.num_anchors_per_location()          # [4, 4, 4] (1st layer reduced: 3)
    anchors = generator.generate([(8, 8), (4, 4), (2, 2)])   # [N, 4] float32
"""

import math

import numpy as np
import tensorflow as tf


class MultipleGridAnchorGenerator:
  """Anchors on several feature-map grids, each cell with its own box specs.

  Args:
    box_specs_list: one list per feature map of (scale, aspect_ratio) pairs.
    base_anchor_size: [height, width] the scales are relative to (default
      [1.0, 1.0], i.e. the whole normalized image).
    clip_window: optional [ymin, xmin, ymax, xmax] the anchors are clipped to.
  """

  def __init__(self, box_specs_list, base_anchor_size=None, clip_window=None):
    if not box_specs_list or not all(
        isinstance(specs, (list, tuple)) and specs for specs in box_specs_list):
      raise ValueError('box_specs_list must be a non-empty list of non-empty '
                       'lists of (scale, aspect_ratio) pairs, got %r' % (box_specs_list,))
    for specs in box_specs_list:
      for spec in specs:
        if len(spec) != 2:
          raise ValueError('box spec must be (scale, aspect_ratio), got %r' % (spec,))
    self._box_specs = [list(specs) for specs in box_specs_list]
    self._base_anchor_size = list(base_anchor_size or [1.0, 1.0])
    self._clip_window = clip_window

  def name_scope(self):
    return 'MultipleGridAnchorGenerator'

  def num_anchors_per_location(self):
    """Returns the number of anchors per grid cell, one int per feature map."""
    return [len(specs) for specs in self._box_specs]

  def anchor_sizes(self, im_height=1, im_width=1):
    """Returns, per layer, a float array [num_anchors, 2] of (height, width).

    Args:
      im_height: image height; only the aspect ratio of the image matters.
      im_width: image width.
    """
    min_side = float(min(im_height, im_width))
    base_h = self._base_anchor_size[0] * min_side / im_height
    base_w = self._base_anchor_size[1] * min_side / im_width
    sizes = []
    for specs in self._box_specs:
      layer = []
      for scale, aspect_ratio in specs:
        ratio_sqrt = math.sqrt(aspect_ratio)
        layer.append((scale * base_h / ratio_sqrt, scale * base_w * ratio_sqrt))
      sizes.append(np.array(layer, dtype=np.float32))
    return sizes

  def generate(self, feature_map_shape_list, im_height=1, im_width=1):
    """Returns the anchors of all feature maps as one [N, 4] float32 tensor.

    Args:
      feature_map_shape_list: one (height, width) pair per feature map, Python
        ints (the grids are static for a fixed-shape resizer).
      im_height: image height (or 1 for a square image); only used to keep
        anchors square in pixels on non-square images.
      im_width: image width.

    Returns:
      float32 [sum_k H_k * W_k * A_k, 4] normalized [ymin, xmin, ymax, xmax].

    Raises:
      ValueError: if the number of feature maps differs from the number of
        box-spec layers, or a shape is not two positive ints.
    """
    if len(feature_map_shape_list) != len(self._box_specs):
      raise ValueError(
          'got %d feature maps but the anchor generator has %d layers '
          '(anchor_generator.num_layers must equal the feature extractor\'s '
          'number of feature maps)' % (len(feature_map_shape_list), len(self._box_specs)))
    with tf.compat.v1.name_scope(self.name_scope()):
      anchors = []
      for (height, width), sizes in zip(feature_map_shape_list,
                                         self.anchor_sizes(im_height, im_width)):
        if not (isinstance(height, (int, np.integer)) and isinstance(width, (int, np.integer))
                and height > 0 and width > 0):
          raise ValueError('feature map shape must be two positive ints, got %r'
                           % ((height, width),))
        anchors.append(grid_anchors(height, width, sizes))
      boxes = np.concatenate(anchors, axis=0)
      if self._clip_window is not None:
        ymin, xmin, ymax, xmax = self._clip_window
        boxes = np.stack([np.clip(boxes[:, 0], ymin, ymax), np.clip(boxes[:, 1], xmin, xmax),
                          np.clip(boxes[:, 2], ymin, ymax), np.clip(boxes[:, 3], xmin, xmax)],
                         axis=1)
      return tf.constant(boxes, dtype=tf.float32, name='anchors')


def grid_anchors(grid_height, grid_width, anchor_sizes):
  """Returns numpy [H * W * A, 4] anchors centred on an H x W grid.

  Args:
    grid_height: rows of the feature map.
    grid_width: columns of the feature map.
    anchor_sizes: float array [A, 2] of normalized (height, width).

  Returns:
    float32 array ordered by row, column, then anchor.
  """
  centers_y = (np.arange(grid_height, dtype=np.float32) + 0.5) / grid_height
  centers_x = (np.arange(grid_width, dtype=np.float32) + 0.5) / grid_width
  cy, cx = np.meshgrid(centers_y, centers_x, indexing='ij')       # [H, W]
  cy = cy[:, :, None]
  cx = cx[:, :, None]
  half_h = anchor_sizes[None, None, :, 0] / 2.0
  half_w = anchor_sizes[None, None, :, 1] / 2.0
  boxes = np.stack([cy - half_h, cx - half_w, cy + half_h, cx + half_w], axis=-1)
  return boxes.reshape([-1, 4]).astype(np.float32)


def create_ssd_anchors(num_layers=6,
                       min_scale=0.2,
                       max_scale=0.95,
                       scales=None,
                       aspect_ratios=(1.0, 2.0, 3.0, 1.0 / 2, 1.0 / 3),
                       interpolated_scale_aspect_ratio=1.0,
                       base_anchor_size=None,
                       reduce_boxes_in_lowest_layer=True):
  """Creates the SSD paper's anchor layout as a MultipleGridAnchorGenerator.

  Args:
    num_layers: number of feature maps.
    min_scale: scale of the first layer's anchors (fraction of the image).
    max_scale: scale of the last layer's anchors.
    scales: optional explicit per-layer scales (overrides min/max_scale).
    aspect_ratios: width/height ratios used at every layer.
    interpolated_scale_aspect_ratio: aspect ratio of the extra anchor of scale
      sqrt(s_k * s_{k+1}); 0 or less leaves it out.
    base_anchor_size: [height, width] the scales multiply (default [1, 1]).
    reduce_boxes_in_lowest_layer: the first layer gets just three anchors:
      (0.1, 1.0), (s_0, 2.0), (s_0, 0.5).

  Returns:
    A MultipleGridAnchorGenerator.

  Raises:
    ValueError: on num_layers < 1, bad scales or empty aspect_ratios.
  """
  if num_layers < 1:
    raise ValueError('num_layers must be at least 1, got %d' % num_layers)
  if not aspect_ratios:
    raise ValueError('aspect_ratios must not be empty')
  if scales is None or not list(scales):
    if num_layers == 1:
      scales = [min_scale]
    else:
      scales = [min_scale + (max_scale - min_scale) * i / (num_layers - 1)
                for i in range(num_layers)]
  scales = list(scales)
  if len(scales) != num_layers:
    raise ValueError('got %d scales for %d layers' % (len(scales), num_layers))
  scales_next = scales[1:] + [1.0]
  box_specs_list = []
  for layer, (scale, scale_next) in enumerate(zip(scales, scales_next)):
    if layer == 0 and reduce_boxes_in_lowest_layer:
      specs = [(0.1, 1.0), (scale, 2.0), (scale, 0.5)]
    else:
      specs = [(scale, float(ratio)) for ratio in aspect_ratios]
      if interpolated_scale_aspect_ratio > 0.0:
        specs.append((math.sqrt(scale * scale_next), interpolated_scale_aspect_ratio))
    box_specs_list.append(specs)
  return MultipleGridAnchorGenerator(box_specs_list, base_anchor_size=base_anchor_size)
