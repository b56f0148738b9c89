"""Resizing augmentations: the image changes size, normalized boxes do not.

Boxes and keypoints are normalized to the image, so scaling the image leaves
them unchanged; only instance masks (pixel grids) are resized with it, always
with nearest neighbour so they stay binary. `scale_boxes_to_pixel_coordinates`
is the step that leaves the normalized world (typically last):

    from core import preprocessor_resize as resize
    image, masks, shape = resize.resize_image(image, masks, new_height=300,
                                              new_width=300)
    image, boxes = resize.scale_boxes_to_pixel_coordinates(image, boxes)

These functions are re-exported by `core.preprocessor` and listed in its
default function-argument map. `resize_image`, `resize_to_range` and
`resize_to_min_dimension` return the output image shape last (after masks);
`preprocess` ignores it, model code (image resizers) uses it.
"""

import tensorflow as tf

from core import box_list_ops
from core import preprocessor_keypoints as kp_ops
from core.preprocessor_cache import PreprocessorCache
from core.preprocessor_cache import get_or_create_rand_vars
from core.preprocessor_cache import random_integer
from core.preprocessor_cache import random_uniform

_NEAREST = tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR
_BILINEAR = tf.compat.v1.image.ResizeMethod.BILINEAR


def _resize_masks(masks, size, align_corners=False):
  """Nearest-neighbour resize of [N, H, W] masks (N may be 0)."""
  resized = tf.compat.v1.image.resize_images(
      tf.expand_dims(masks, 3), size, method=_NEAREST, align_corners=align_corners)
  return tf.squeeze(resized, axis=3)


def random_image_scale(image, masks=None, min_scale_ratio=0.5,
                       max_scale_ratio=2.0, seed=None,
                       preprocess_vars_cache=None):
  """Scales the image by one factor from [min_scale_ratio, max_scale_ratio].

  Normalized boxes and keypoints are unchanged by a scale.

  Args:
    image: [H, W, C] image.
    masks: [N, H, W] or None; resized with nearest neighbour.
    min_scale_ratio, max_scale_ratio: factor range.
    seed: op-level seed.
    preprocess_vars_cache: caches the factor under IMAGE_SCALE.

  Returns:
    image, and masks when given.
  """
  with tf.compat.v1.name_scope('RandomImageScale'):
    shape = tf.shape(image)
    factor = get_or_create_rand_vars(
        lambda: random_uniform([], min_scale_ratio, max_scale_ratio, seed=seed),
        PreprocessorCache.IMAGE_SCALE, preprocess_vars_cache)
    size = tf.cast(tf.cast(shape[:2], tf.float32) * factor, tf.int32)
    image = tf.compat.v1.image.resize_images(image, size, align_corners=True)
    if masks is None:
      return (image,)
    return image, _resize_masks(masks, size, align_corners=True)


def random_resize_method(image, target_size, seed=None,
                         preprocess_vars_cache=None):
  """Resizes to target_size with a randomly chosen method of the four.

  Args:
    image: [H, W, C] image.
    target_size: (height, width).
    seed: op-level seed.
    preprocess_vars_cache: caches the method index under RESIZE_METHOD.

  Returns:
    The resized float image.
  """
  with tf.compat.v1.name_scope('RandomResizeMethod'):
    if isinstance(target_size, (list, tuple)):
      size = [int(v) for v in target_size]  # proto fields are floats
    else:
      size = tf.cast(target_size, tf.int32)
    index = get_or_create_rand_vars(lambda: random_integer(0, 4, seed),
                                    PreprocessorCache.RESIZE_METHOD,
                                    preprocess_vars_cache)
    methods = tf.compat.v1.image.ResizeMethod
    branches = [
        (lambda m=m: tf.cast(tf.compat.v1.image.resize_images(image, size, method=m),
                             tf.float32))
        for m in (methods.BILINEAR, methods.NEAREST_NEIGHBOR, methods.BICUBIC,
                  methods.AREA)]
    return tf.switch_case(index, branches)


def resize_image(image, masks=None, new_height=600, new_width=1024,
                 method=_BILINEAR, align_corners=False):
  """Resizes the image (and masks) to exactly new_height x new_width.

  Args:
    image: [H, W, C] image.
    masks: [N, H, W] or None (resized with nearest neighbour).
    new_height, new_width: output size.
    method: a tf.compat.v1.image.ResizeMethod.
    align_corners: as in tf.compat.v1.image.resize_images.

  Returns:
    (image, [masks,] shape) where shape is the int32 [3] output image shape.
  """
  with tf.compat.v1.name_scope('ResizeImage'):
    size = tf.stack([new_height, new_width])
    new_image = tf.compat.v1.image.resize_images(image, size, method=method,
                                                 align_corners=align_corners)
    result = [new_image]
    if masks is not None:
      result.append(_resize_masks(masks, size, align_corners))
    result.append(tf.stack([new_height, new_width, tf.shape(image)[2]]))
    return result


def resize_to_range(image, masks=None, min_dimension=None, max_dimension=None,
                    method=_BILINEAR, align_corners=False,
                    pad_to_max_dimension=False, per_channel_pad_value=(0, 0, 0)):
  """Resizes keeping the aspect ratio: shorter side to min_dimension, unless
  the longer side would exceed max_dimension (then longer side to it).

  Args:
    image: [H, W, C] image.
    masks: [N, H, W] or None.
    min_dimension: target length of the shorter side.
    max_dimension: cap on the longer side, or None.
    method: tf.compat.v1.image.ResizeMethod.
    align_corners: as in resize_images.
    pad_to_max_dimension: pad (bottom/right) to max_dimension x max_dimension.
    per_channel_pad_value: pad colour when padding.

  Returns:
    (image, [masks,] shape) where shape is the unpadded int32 [3] shape.

  Raises:
    ValueError: if the image is not rank 3.
  """
  if len(image.get_shape()) != 3:
    raise ValueError('Image should be 3D tensor')
  with tf.compat.v1.name_scope('ResizeToRange'):
    shape = tf.shape(image)
    hw = tf.cast(shape[:2], tf.float32)
    factor = min_dimension / tf.reduce_min(hw)
    if max_dimension:
      factor = tf.minimum(factor, max_dimension / tf.reduce_max(hw))
    size = tf.cast(tf.round(hw * factor), tf.int32)
    new_image = tf.compat.v1.image.resize_images(image, size, method=method,
                                                 align_corners=align_corners)
    new_shape = tf.stack([size[0], size[1], shape[2]])
    if pad_to_max_dimension:
      channels = tf.unstack(new_image, axis=2)
      new_image = tf.stack([
          tf.pad(c, [[0, max_dimension - size[0]], [0, max_dimension - size[1]]],
                 constant_values=v)
          for c, v in zip(channels, per_channel_pad_value)], axis=2)
    result = [new_image]
    if masks is not None:
      new_masks = _resize_masks(masks, size, align_corners)
      if pad_to_max_dimension:
        new_masks = tf.image.pad_to_bounding_box(
            new_masks[..., None], 0, 0, max_dimension, max_dimension)[..., 0]
      result.append(new_masks)
    result.append(new_shape)
    return result


def resize_to_min_dimension(image, masks=None, min_dimension=600,
                            method=_BILINEAR):
  """Upscales (aspect kept) so the shorter side is at least min_dimension.

  Returns:
    (image, [masks,] shape).

  Raises:
    ValueError: if the image is not rank 3.
  """
  if len(image.get_shape()) != 3:
    raise ValueError('Image should be 3D tensor')
  with tf.compat.v1.name_scope('ResizeToMinDimension'):
    shape = tf.shape(image)
    hw = tf.cast(shape[:2], tf.float32)
    factor = tf.maximum(min_dimension / tf.reduce_min(hw), 1.0)
    size = tf.cast(tf.round(hw * factor), tf.int32)
    result = [tf.compat.v1.image.resize_images(image, size, method=method)]
    if masks is not None:
      result.append(_resize_masks(masks, size))
    result.append(tf.stack([size[0], size[1], shape[2]]))
    return result


def scale_boxes_to_pixel_coordinates(image, boxes, keypoints=None):
  """Turns normalized boxes (and keypoints) into pixel coordinates.

  Args:
    image: [H, W, C] image (passed through).
    boxes: [N, 4] normalized boxes.
    keypoints: [N, K, 2] normalized or None.

  Returns:
    (image, boxes[, keypoints]) with coordinates multiplied by H and W.
  """
  shape = tf.shape(image)
  height, width = shape[0], shape[1]
  result = [image, box_list_ops.scale(boxes, height, width)]
  if keypoints is not None:
    result.append(kp_ops.scale(keypoints, height, width))
  return tuple(result)
