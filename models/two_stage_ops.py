"""Cropping ops of the two-stage detectors: crop-and-resize and position-sensitive crops.

Boxes are normalized [ymin, xmin, ymax, xmax]; as in tf.image.crop_and_resize
a normalized y maps to the pixel row y * (height - 1), so 0 and 1 are the
centres of the first and last rows. Crops sample the feature map bilinearly at
crop_size evenly spaced points from the box's first to its last edge.

* `native_crop_and_resize(features, boxes, crop_size)`: per-image boxes
  [B, P, 4] -> [B, P, crop_h, crop_w, D] with tf.image.crop_and_resize.
* `matmul_crop_and_resize(...)`: the same numbers from matrix products of
  bilinear interpolation kernels with the feature map (no gathers, fixed
  shapes: what accelerators like). It holds a [B, P, crop_h, W, D] (or
  [B, P, H, crop_w, D]) intermediate, so on large maps it needs more memory
  than the native op.
* `position_sensitive_crop_regions(image, boxes, crop_size, num_spatial_bins,
  global_pool)`: R-FCN's pooling. The box is cut into bins_y x bins_x bins;
  bin k reads only the k-th of bins_y * bins_x equal channel groups, so each
  channel group learns to score one part of an object (top-left, ...). With
  global_pool the crops are averaged into one [1, 1, D / bins] vector per box;
  without it the bins are tiled back into a [crop_h, crop_w, D / bins] crop.

Usage:

    crops = matmul_crop_and_resize(features, proposals, [14, 14])   # [B, P, 14, 14, D]
    scores = position_sensitive_crop_regions(score_map[0], proposals[0], [18, 18],
                                             [3, 3], global_pool=True)  # [P, 1, 1, D/9]
"""

import tensorflow as tf


def _box_indices(boxes):
  """int32 [B * P]: the image index of each row of boxes [B, P, 4] flattened."""
  shape = tf.shape(boxes)
  return tf.reshape(tf.tile(tf.range(shape[0])[:, None], [1, shape[1]]), [-1])


def _unflatten(crops, boxes):
  """Reshapes crops [B * P, ...] of boxes [B, P, 4] to [B, P, ...]."""
  shape = tf.concat([tf.shape(boxes)[:2], tf.shape(crops)[1:]], axis=0)
  result = tf.reshape(crops, shape)
  result.set_shape(boxes.shape[:2].concatenate(crops.shape[1:]))
  return result


def native_crop_and_resize(image, boxes, crop_size, scope=None):
  """Bilinear crops of each image's boxes with tf.image.crop_and_resize.

  Args:
    image: float [B, H, W, D].
    boxes: float [B, P, 4] normalized boxes, P per image.
    crop_size: [crop_height, crop_width] ints.
    scope: optional name scope.

  Returns:
    float [B, P, crop_height, crop_width, D].
  """
  with tf.name_scope(scope or 'CropAndResize'):
    crops = tf.image.crop_and_resize(image, tf.reshape(boxes, [-1, 4]),
                                     _box_indices(boxes), crop_size)
    return _unflatten(crops, boxes)


def _interpolation_kernel(start, end, crop_length, image_length, dtype):
  """Bilinear sampling weights along one axis of the image.

  Args:
    start, end: float [B, P] normalized box edges along the axis.
    crop_length: int, number of samples.
    image_length: int32 scalar, the image's size along the axis.
    dtype: dtype of the kernel.

  Returns:
    (kernel [B, P, crop_length, image_length], inside [B, P, crop_length]):
    row i of the kernel holds the weights of sample i on the image's pixels
    (all zero for a sample that falls outside the image, inside False).
  """
  last_pixel = tf.cast(image_length - 1, tf.float32)
  start = tf.cast(start, tf.float32)
  end = tf.cast(end, tf.float32)
  if crop_length > 1:
    # The same expression as tf.image.crop_and_resize, for the same rounding.
    spacing = (end - start) * last_pixel / (crop_length - 1)
    steps = tf.range(crop_length, dtype=tf.float32)
    positions = start[..., None] * last_pixel + steps * spacing[..., None]
  else:
    positions = (0.5 * (start + end) * last_pixel)[..., None]
  inside = tf.logical_and(positions >= 0, positions <= last_pixel)
  pixels = tf.range(image_length, dtype=tf.float32)
  kernel = tf.nn.relu(1.0 - tf.abs(positions[..., None] - pixels))
  kernel *= tf.cast(inside, tf.float32)[..., None]
  return tf.cast(kernel, dtype), inside


def matmul_crop_and_resize(image, boxes, crop_size, extrapolation_value=0.0, scope=None):
  """tf.image.crop_and_resize's bilinear crops, computed with matrix products.

  Args:
    image: float [B, H, W, D].
    boxes: float [B, P, 4] normalized boxes, P per image; coordinates outside
      [0, 1] sample outside the image.
    crop_size: [crop_height, crop_width] Python ints.
    extrapolation_value: the value of samples outside the image.
    scope: optional name scope.

  Returns:
    float [B, P, crop_height, crop_width, D].
  """
  crop_height, crop_width = [int(size) for size in crop_size]
  with tf.name_scope(scope or 'MatMulCropAndResize'):
    height, width = tf.shape(image)[1], tf.shape(image)[2]
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
    kernel_y, inside_y = _interpolation_kernel(ymin, ymax, crop_height, height, image.dtype)
    kernel_x, inside_x = _interpolation_kernel(xmin, xmax, crop_width, width, image.dtype)
    static_height, static_width = image.shape[1], image.shape[2]
    rows_first = (static_height is None or static_width is None or
                  crop_height * static_width <= static_height * crop_width)
    if rows_first:   # the smaller intermediate first
      rows = tf.einsum('bpih,bhwd->bpiwd', kernel_y, image)
      crops = tf.einsum('bpjw,bpiwd->bpijd', kernel_x, rows)
    else:
      columns = tf.einsum('bpjw,bhwd->bpjhd', kernel_x, image)
      crops = tf.einsum('bpih,bpjhd->bpijd', kernel_y, columns)
    if extrapolation_value:
      inside = tf.logical_and(inside_y[..., :, None], inside_x[..., None, :])
      outside = 1.0 - tf.cast(inside, image.dtype)[..., None]
      crops += extrapolation_value * outside
    return crops


def _check_bins(crop_size, num_spatial_bins):
  """Returns the [height, width] of one bin's crop; raises on a bad layout."""
  if len(crop_size) != 2 or len(num_spatial_bins) != 2:
    raise ValueError('crop_size and num_spatial_bins must be [y, x] pairs, got %r and %r'
                     % (crop_size, num_spatial_bins))
  bin_crop_size = []
  for bins, size in zip(num_spatial_bins, crop_size):
    if bins < 1:
      raise ValueError('num_spatial_bins must be >= 1, got %r' % (num_spatial_bins,))
    if size % bins:
      raise ValueError('crop_size %r must be divisible by num_spatial_bins %r'
                       % (crop_size, num_spatial_bins))
    bin_crop_size.append(size // bins)
  return bin_crop_size


def _bin_boxes(boxes, num_spatial_bins):
  """Splits boxes [M, 4] into bins; returns one [M, 4] per bin, row-major."""
  ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
  bins_y, bins_x = num_spatial_bins
  step_y = (ymax - ymin) / bins_y
  step_x = (xmax - xmin) / bins_x
  return [tf.stack([ymin + row * step_y, xmin + column * step_x,
                    ymin + (row + 1) * step_y, xmin + (column + 1) * step_x], axis=1)
          for row in range(bins_y) for column in range(bins_x)]


def _position_sensitive_crops(images, boxes, box_indices, crop_size, num_spatial_bins,
                              global_pool):
  """Position-sensitive crops of boxes [M, 4] from images[box_indices].

  Returns:
    float [M, 1, 1, D / bins] with global_pool, else [M, crop_h, crop_w, D / bins].
  """
  bin_crop_size = _check_bins(crop_size, num_spatial_bins)
  num_bins = num_spatial_bins[0] * num_spatial_bins[1]
  depth = images.shape[-1]
  if depth is not None and depth % num_bins:
    raise ValueError('the feature depth %d must be divisible by the number of '
                     'num_spatial_bins (%d)' % (depth, num_bins))
  channel_groups = tf.split(images, num_bins, axis=3)
  crops = [tf.image.crop_and_resize(group, bin_box, box_indices, bin_crop_size)
           for group, bin_box in zip(channel_groups, _bin_boxes(boxes, num_spatial_bins))]
  if global_pool:
    # Averaging every bin's crop equals averaging the assembled crop.
    return tf.reduce_mean(tf.add_n(crops) / num_bins, axis=[1, 2], keepdims=True)
  bins_x = num_spatial_bins[1]
  rows = [tf.concat(crops[start:start + bins_x], axis=2)
          for start in range(0, num_bins, bins_x)]
  return tf.concat(rows, axis=1)


def position_sensitive_crop_regions(image, boxes, crop_size, num_spatial_bins, global_pool):
  """R-FCN's position-sensitive crops of the boxes of one image.

  Args:
    image: float [H, W, D], D divisible by bins_y * bins_x.
    boxes: float [N, 4] normalized boxes.
    crop_size: [crop_height, crop_width], divisible by num_spatial_bins.
    num_spatial_bins: [bins_y, bins_x].
    global_pool: average each box's crop into one vector.

  Returns:
    float [N, 1, 1, D / (bins_y * bins_x)] with global_pool, else
    [N, crop_height, crop_width, D / (bins_y * bins_x)].

  Raises:
    ValueError: if crop_size, num_spatial_bins or D do not fit together.
  """
  box_indices = tf.zeros(tf.shape(boxes)[:1], tf.int32)
  return _position_sensitive_crops(image[None], boxes, box_indices, crop_size,
                                   num_spatial_bins, global_pool)


def batch_position_sensitive_crop_regions(images, boxes, crop_size, num_spatial_bins,
                                          global_pool):
  """position_sensitive_crop_regions for a batch: each image with its own boxes.

  Args:
    images: float [B, H, W, D].
    boxes: float [B, P, 4] normalized boxes.
    crop_size, num_spatial_bins, global_pool: as position_sensitive_crop_regions.

  Returns:
    float [B, P, K_h, K_w, D / bins], K = 1 with global_pool, else crop_size.
  """
  crops = _position_sensitive_crops(images, tf.reshape(boxes, [-1, 4]),
                                    _box_indices(boxes), crop_size, num_spatial_bins,
                                    global_pool)
  return _unflatten(crops, boxes)
