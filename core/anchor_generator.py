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

Grids of a fixed-size input are Python ints and give a constant made with
numpy. Behind a resizer without a fixed output size (keep_aspect_ratio_resizer
without padding, identity_resizer) the grid and image sizes are scalar tensors
and the same anchors come from TF ops, computed in the same order and
precision as numpy's, so both paths give identical values.

Usage:

    generator = anchor_generator.create_ssd_anchors(
        num_layers=3, min_scale=0.2, max_scale=0.9, aspect_ratios=(1.0, 2.0, 0.5))
    generator.num_anchors_per_location()          # [4, 4, 4] (1st layer reduced: 3)
    anchors = generator.generate([(8, 8), (4, 4), (2, 2)])   # [N, 4] float32
    # Sizes known when the graph runs (feature_maps: [B, H_k, W_k, D] tensors):
    anchors = generator.generate(
        [(tf.shape(f)[1], tf.shape(f)[2]) for f in feature_maps],
        im_height=tf.shape(images)[1], im_width=tf.shape(images)[2])
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
    anchor_strides: optional (stride_y, stride_x) per layer, in pixels of the
      input image (the OD API's height_stride / width_stride); default: the
      layer's cell size.
    anchor_offsets: optional (offset_y, offset_x) per layer, in pixels, of the
      first anchor centre; default: half the stride.
  """

  def __init__(self, box_specs_list, base_anchor_size=None, clip_window=None,
               anchor_strides=None, anchor_offsets=None):
    if not box_specs_list or not all(
        isinstance(specs, (list, tuple)) and specs for specs in box_specs_list):
      raise ValueError('box_specs_list must be a non-empty list of non-empty '
                       'lists of (scale, aspect_ratio) pairs, got %r' % (box_specs_list,))
    for specs in box_specs_list:
      for spec in specs:
        if len(spec) != 2:
          raise ValueError('box spec must be (scale, aspect_ratio), got %r' % (spec,))
    for name, pairs in (('anchor_strides', anchor_strides), ('anchor_offsets', anchor_offsets)):
      if pairs is not None and len(pairs) != len(box_specs_list):
        raise ValueError('%s must have one (y, x) pair per layer (%d), got %r'
                         % (name, len(box_specs_list), pairs))
    self._anchor_strides = anchor_strides
    self._anchor_offsets = anchor_offsets
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

  def _normalized_stride_and_offset(self, layer, im_height, im_width):
    """The layer's (stride, offset) in normalized coordinates, or (None, None)."""
    if self._anchor_strides is None:
      return None, None
    stride_y, stride_x = self._anchor_strides[layer]
    stride = (float(stride_y) / im_height, float(stride_x) / im_width)
    if self._anchor_offsets is None:
      return stride, None
    offset_y, offset_x = self._anchor_offsets[layer]
    return stride, (float(offset_y) / im_height, float(offset_x) / im_width)

  def generate(self, feature_map_shape_list, im_height=1, im_width=1):
    """Returns the anchors of all feature maps as one [N, 4] float32 tensor.

    Static grids (Python ints) give a constant computed with numpy; grids or
    image sizes only known when the graph runs (scalar tensors, e.g.
    `tf.shape(feature_map)[1]` behind a keep_aspect_ratio_resizer) give the
    same anchors computed by TF ops, op for op as numpy does.

    Args:
      feature_map_shape_list: one (height, width) pair per feature map, each
        a positive Python int or an int32 scalar tensor.
      im_height: image height (or 1 for a square image), number or scalar
        tensor; only used to keep anchors square in pixels on non-square
        images and to normalize pixel strides.
      im_width: image width, likewise.

    Returns:
      float32 [sum_k H_k * W_k * A_k, 4] normalized [ymin, xmin, ymax, xmax].

    Raises:
      ValueError: if the number of feature maps differs from the number of
        box-spec layers, or a static shape is not two positive ints.
    """
    if len(feature_map_shape_list) != len(self._box_specs):
      raise ValueError(
          'got %d feature maps but the anchor generator has %d layers '
          '(anchor_generator.num_layers must equal the feature extractor\'s '
          'number of feature maps)' % (len(feature_map_shape_list), len(self._box_specs)))
    for height, width in feature_map_shape_list:
      for size in (height, width):
        if not tf.is_tensor(size) and not (isinstance(size, (int, np.integer)) and size > 0):
          raise ValueError('feature map shape must be two positive ints or scalar '
                           'tensors, got %r' % ((height, width),))
    with tf.compat.v1.name_scope(self.name_scope()):
      sizes = [size for pair in feature_map_shape_list for size in pair]
      if any(tf.is_tensor(size) for size in sizes + [im_height, im_width]):
        return self._generate_with_tf(feature_map_shape_list, im_height, im_width)
      return self._generate_with_numpy(feature_map_shape_list, im_height, im_width)

  def _generate_with_numpy(self, feature_map_shape_list, im_height, im_width):
    """The anchors of static grids, as a constant."""
    anchors = []
    for layer, ((height, width), sizes) in enumerate(
        zip(feature_map_shape_list, self.anchor_sizes(im_height, im_width))):
      stride, offset = self._normalized_stride_and_offset(layer, im_height, im_width)
      anchors.append(grid_anchors(height, width, sizes, stride, offset))
    boxes = np.concatenate(anchors, axis=0)
    if self._clip_window is not None:
      ymin, xmin, ymax, xmax = self._clip_window
      boxes = np.stack([np.clip(boxes[:, 0], ymin, ymax), np.clip(boxes[:, 1], xmin, xmax),
                        np.clip(boxes[:, 2], ymin, ymax), np.clip(boxes[:, 3], xmin, xmax)],
                       axis=1)
    return tf.constant(boxes, dtype=tf.float32, name='anchors')

  def _generate_with_tf(self, feature_map_shape_list, im_height, im_width):
    """The anchors of grids known when the graph runs, as TF ops."""
    im_height = tf.cast(im_height, tf.float64)
    im_width = tf.cast(im_width, tf.float64)
    anchors = []
    for layer, ((height, width), sizes) in enumerate(
        zip(feature_map_shape_list, self.anchor_sizes_tensor(im_height, im_width))):
      stride, offset = self._normalized_stride_and_offset_tensor(layer, im_height, im_width)
      anchors.append(grid_anchors_tensor(height, width, sizes, stride, offset))
    boxes = tf.concat(anchors, axis=0)
    if self._clip_window is not None:
      ymin, xmin, ymax, xmax = [float(v) for v in self._clip_window]
      boxes = tf.stack([tf.clip_by_value(boxes[:, 0], ymin, ymax),
                        tf.clip_by_value(boxes[:, 1], xmin, xmax),
                        tf.clip_by_value(boxes[:, 2], ymin, ymax),
                        tf.clip_by_value(boxes[:, 3], xmin, xmax)], axis=1)
    return tf.identity(boxes, name='anchors')

  def anchor_sizes_tensor(self, im_height, im_width):
    """`anchor_sizes` for float64 scalar-tensor image sizes: float32 [A, 2] per layer.

    The arithmetic is numpy's, in the same order and precision (float64, then
    rounded to float32), so both give identical sizes.
    """
    min_side = tf.minimum(im_height, im_width)
    base_h = self._base_anchor_size[0] * min_side / im_height
    base_w = self._base_anchor_size[1] * min_side / im_width
    sizes = []
    for specs in self._box_specs:
      scales = tf.constant([scale for scale, _ in specs], dtype=tf.float64)
      ratio_sqrts = tf.constant([math.sqrt(ratio) for _, ratio in specs], dtype=tf.float64)
      sizes.append(tf.cast(tf.stack([scales * base_h / ratio_sqrts,
                                     scales * base_w * ratio_sqrts], axis=1), tf.float32))
    return sizes

  def _normalized_stride_and_offset_tensor(self, layer, im_height, im_width):
    """`_normalized_stride_and_offset` for float64 scalar-tensor image sizes."""
    if self._anchor_strides is None:
      return None, None
    stride_y, stride_x = self._anchor_strides[layer]
    stride = (float(stride_y) / im_height, float(stride_x) / im_width)
    if self._anchor_offsets is None:
      return stride, None
    offset_y, offset_x = self._anchor_offsets[layer]
    return stride, (float(offset_y) / im_height, float(offset_x) / im_width)


def grid_anchors(grid_height, grid_width, anchor_sizes, stride=None, offset=None):
  """Returns numpy [H * W * A, 4] anchors centred on an H x W grid.

  Args:
    grid_height: rows of the feature map.
    grid_width: columns of the feature map.
    anchor_sizes: float array [A, 2] of normalized (height, width).
    stride: optional normalized (y, x) distance of neighbouring centres
      (default: 1 / grid size).
    offset: optional normalized (y, x) centre of the first cell (default:
      half the stride).

  Returns:
    float32 array ordered by row, column, then anchor.
  """
  stride = stride or (1.0 / grid_height, 1.0 / grid_width)
  offset = offset or (stride[0] / 2.0, stride[1] / 2.0)
  centers_y = np.arange(grid_height, dtype=np.float32) * stride[0] + offset[0]
  centers_x = np.arange(grid_width, dtype=np.float32) * stride[1] + offset[1]
  cy, cx = np.meshgrid(centers_y, centers_x, indexing='ij')       # [H, W]
  cy = cy[:, :, None]
  cx = cx[:, :, None]
  half_h = anchor_sizes[None, None, :, 0] / 2.0
  half_w = anchor_sizes[None, None, :, 1] / 2.0
  boxes = np.stack([cy - half_h, cx - half_w, cy + half_h, cx + half_w], axis=-1)
  return boxes.reshape([-1, 4]).astype(np.float32)


def grid_anchors_tensor(grid_height, grid_width, anchor_sizes, stride=None, offset=None):
  """`grid_anchors` with TF ops, for grids whose size is known when the graph runs.

  Args:
    grid_height: rows of the feature map, int or int32 scalar tensor.
    grid_width: columns, likewise.
    anchor_sizes: float32 tensor [A, 2] of normalized (height, width).
    stride: optional normalized (y, x) float64 scalars (default: 1 / grid size).
    offset: optional normalized (y, x) float64 scalars (default: half the
      stride).

  Returns:
    float32 tensor [H * W * A, 4], the values grid_anchors gives: strides and
    offsets are formed in float64 and rounded to float32 once, centres are
    float32 index * stride + offset, as in numpy.
  """
  if stride is None:
    stride = (1.0 / tf.cast(grid_height, tf.float64), 1.0 / tf.cast(grid_width, tf.float64))
  if offset is None:
    offset = (stride[0] / 2.0, stride[1] / 2.0)
  stride = [tf.cast(value, tf.float32) for value in stride]
  offset = [tf.cast(value, tf.float32) for value in offset]
  centers_y = tf.range(grid_height, dtype=tf.float32) * stride[0] + offset[0]
  centers_x = tf.range(grid_width, dtype=tf.float32) * stride[1] + offset[1]
  cy, cx = tf.meshgrid(centers_y, centers_x, indexing='ij')      # [H, W]
  cy = cy[:, :, None]
  cx = cx[:, :, None]
  half_h = anchor_sizes[None, None, :, 0] / 2.0
  half_w = anchor_sizes[None, None, :, 1] / 2.0
  boxes = tf.stack([cy - half_h, cx - half_w, cy + half_h, cx + half_w], axis=-1)
  return tf.reshape(boxes, [-1, 4])


def create_ssd_anchors(num_layers=6,
                       min_scale=0.2,
                       max_scale=0.95,
                       scales=None,
                       aspect_ratios=(1.0, 2.0, 3.0, 1.0 / 2, 1.0 / 3),
                       interpolated_scale_aspect_ratio=1.0,
                       base_anchor_size=None,
                       reduce_boxes_in_lowest_layer=True,
                       anchor_strides=None,
                       anchor_offsets=None):
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
    anchor_strides: optional (y, x) pixel strides per layer.
    anchor_offsets: optional (y, x) pixel offsets per layer.

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
  return MultipleGridAnchorGenerator(box_specs_list, base_anchor_size=base_anchor_size,
                                     anchor_strides=anchor_strides,
                                     anchor_offsets=anchor_offsets)


class MultiscaleGridAnchorGenerator(MultipleGridAnchorGenerator):
  """RetinaNet's anchors: one grid per pyramid level `min_level..max_level`.

  Level l has cells 2^l pixels apart; its anchors are
  anchor_scale * 2^l * 2^(i / scales_per_octave) pixels on a side (i <
  scales_per_octave) times each aspect ratio, listed aspect ratio first, then
  scale within it, as the OD API lists them (a zoo checkpoint's prediction
  channels follow that order).

  Args:
    min_level: finest pyramid level (stride 2^min_level).
    max_level: coarsest level.
    anchor_scale: anchor side in units of the level's stride.
    aspect_ratios: width/height ratios.
    scales_per_octave: scales between consecutive levels.
    normalize_coordinates: anchors in [0, 1] image coordinates (False:
      pixels).

  Raises:
    ValueError: on max_level < min_level, no aspect ratio or a bad scale count.
  """

  def __init__(self, min_level, max_level, anchor_scale, aspect_ratios, scales_per_octave,
               normalize_coordinates=True):
    if max_level < min_level:
      raise ValueError('multiscale anchors need min_level <= max_level, got %d and %d'
                       % (min_level, max_level))
    if not aspect_ratios or scales_per_octave < 1:
      raise ValueError('multiscale anchors need aspect_ratios and scales_per_octave >= 1')
    if not normalize_coordinates:
      raise ValueError('multiscale_anchor_generator.normalize_coordinates: false is not '
                       'supported (the SSD works in normalized coordinates)')
    self._levels = list(range(min_level, max_level + 1))
    self._anchor_scale = anchor_scale
    octave_scales = [2.0 ** (i / float(scales_per_octave)) for i in range(scales_per_octave)]
    specs = [(scale, float(ratio)) for ratio in aspect_ratios for scale in octave_scales]
    super().__init__([list(specs) for _ in self._levels],
                     anchor_strides=[(2 ** level, 2 ** level) for level in self._levels])

  def name_scope(self):
    return 'MultiscaleGridAnchorGenerator'

  def anchor_sizes(self, im_height=1, im_width=1):
    """Per level, [num_anchors, 2] normalized (height, width)."""
    sizes = []
    for level, specs in zip(self._levels, self._box_specs):
      base = self._anchor_scale * 2 ** level
      layer = [(base * scale / math.sqrt(ratio) / im_height,
                base * scale * math.sqrt(ratio) / im_width) for scale, ratio in specs]
      sizes.append(np.array(layer, dtype=np.float32))
    return sizes

  def anchor_sizes_tensor(self, im_height, im_width):
    """`anchor_sizes` for float64 scalar-tensor image sizes (numpy's arithmetic)."""
    sizes = []
    for level, specs in zip(self._levels, self._box_specs):
      base = self._anchor_scale * 2 ** level
      heights = tf.constant([base * scale / math.sqrt(ratio) for scale, ratio in specs],
                            dtype=tf.float64)
      widths = tf.constant([base * scale * math.sqrt(ratio) for scale, ratio in specs],
                           dtype=tf.float64)
      sizes.append(tf.cast(tf.stack([heights / im_height, widths / im_width], axis=1),
                           tf.float32))
    return sizes
