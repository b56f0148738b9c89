"""Data augmentation for detection and classification examples.

`preprocess` applies a list of `(function, kwargs)` steps to one decoded
example (a tensor_dict keyed by `standard_fields.InputDataFields`). Which
tensors a step reads and writes back is decided by a *function-argument map*:
for each function, the tuple of tensor_dict keys passed positionally (None
for an argument that is absent). A function returns the new values of the
non-None keys, in the same order, so boxes, labels, weights, masks and
keypoints always move together with the image:

    from core import preprocessor
    from core import standard_fields as fields

    tensor_dict = {
        fields.InputDataFields.image: images,             # [1, H, W, 3] float
        fields.InputDataFields.groundtruth_boxes: boxes,  # [N, 4] normalized
        fields.InputDataFields.groundtruth_classes: classes,
        fields.InputDataFields.groundtruth_weights: weights,
    }
    options = [(preprocessor.random_horizontal_flip, {}),
               (preprocessor.random_crop_image, {'overlap_thresh': 0.5})]
    tensor_dict = preprocessor.preprocess(tensor_dict, options)

The configured steps come from `builders.preprocessor_builder.build`, which
turns each `PreprocessingStep` proto into such a pair.

Randomness: every step takes `seed` (an op-level seed; with
`tf.compat.v1.set_random_seed` the whole pipeline reproduces) and
`preprocess_vars_cache` (a `core.preprocessor_cache.PreprocessorCache` that
stores the random draws, so running the same options again -- on the same or
another tensor_dict -- repeats exactly the same flips, crops and colour
changes). Photometric steps assume pixel values in [0, 255].

Crop and pad steps live in `core.preprocessor_crop`, the SSD multi-choice
crops in `core.preprocessor_ssd`, resizing in `core.preprocessor_resize`;
they are re-exported here, so `preprocessor.random_crop_image` works as in
the Object Detection API.
"""

import inspect

import tensorflow as tf

from core import box_list_ops
from core import preprocessor_keypoints as kp_ops
from core import standard_fields as fields
from core.preprocessor_cache import PreprocessorCache
from core.preprocessor_cache import get_or_create_rand_vars
from core.preprocessor_cache import random_uniform
from core.preprocessor_crop import random_absolute_pad_image
from core.preprocessor_crop import random_crop_image
from core.preprocessor_crop import random_crop_pad_image
from core.preprocessor_crop import random_crop_to_aspect_ratio
from core.preprocessor_crop import random_pad_image
from core.preprocessor_crop import random_pad_to_aspect_ratio
from core.preprocessor_ssd import ssd_random_crop
from core.preprocessor_ssd import ssd_random_crop_fixed_aspect_ratio
from core.preprocessor_ssd import ssd_random_crop_pad
from core.preprocessor_resize import random_image_scale
from core.preprocessor_resize import random_resize_method
from core.preprocessor_resize import resize_image
from core.preprocessor_resize import resize_to_min_dimension
from core.preprocessor_resize import resize_to_range
from core.preprocessor_resize import scale_boxes_to_pixel_coordinates
from core.preprocessor_ssd import ssd_random_crop_pad_fixed_aspect_ratio

__all__ = [
    'PreprocessorCache', 'preprocess', 'get_default_func_arg_map',
    'random_absolute_pad_image', 'random_crop_image', 'random_crop_pad_image',
    'random_crop_to_aspect_ratio', 'random_pad_image',
    'random_pad_to_aspect_ratio', 'random_image_scale', 'random_resize_method',
    'resize_image', 'resize_to_min_dimension', 'resize_to_range',
    'scale_boxes_to_pixel_coordinates', 'ssd_random_crop',
    'ssd_random_crop_fixed_aspect_ratio', 'ssd_random_crop_pad',
    'ssd_random_crop_pad_fixed_aspect_ratio',
]

# ----------------------------------------------------------------- image only

def normalize_image(image, original_minval, original_maxval, target_minval=0.0,
                    target_maxval=1.0):
  """Maps pixel values linearly from [original_min, max] to [target_min, max].

  Args:
    image: [H, W, C] image.
    original_minval, original_maxval: the current value range.
    target_minval, target_maxval: the wanted value range.

  Returns:
    The float32 image in the target range.
  """
  with tf.compat.v1.name_scope('NormalizeImage'):
    image = tf.cast(image, tf.float32)
    factor = (target_maxval - target_minval) / (original_maxval - original_minval)
    return (image - original_minval) * factor + target_minval


def image_to_float(image):
  """Casts the image to float32."""
  return tf.cast(image, tf.float32)


def random_pixel_value_scale(image, minval=0.9, maxval=1.1, seed=None,
                             preprocess_vars_cache=None):
  """Multiplies every pixel value by its own factor from [minval, maxval].

  Args:
    image: [H, W, C] float image with values in [0, 255].
    minval, maxval: factor range.
    seed: op-level seed.
    preprocess_vars_cache: caches the factors under PIXEL_VALUE_SCALE.

  Returns:
    The scaled image, clipped to [0, 255].
  """
  with tf.compat.v1.name_scope('RandomPixelValueScale'):
    factors = get_or_create_rand_vars(
        lambda: random_uniform(tf.shape(image), minval, maxval, seed=seed),
        PreprocessorCache.PIXEL_VALUE_SCALE, preprocess_vars_cache)
    return tf.clip_by_value(image * factors, 0.0, 255.0)


def rgb_to_gray(image):
  """Converts an RGB [H, W, 3] image to one grey channel [H, W, 1]."""
  return tf.image.rgb_to_grayscale(image)


def random_rgb_to_gray(image, probability=0.1, seed=None,
                       preprocess_vars_cache=None):
  """With `probability`, replaces the image by its grey version (3 channels).

  Args:
    image: [H, W, 3] image.
    probability: chance of converting.
    seed: op-level seed.
    preprocess_vars_cache: caches the draw under RGB_TO_GRAY.

  Returns:
    [H, W, 3] image.
  """
  with tf.compat.v1.name_scope('RandomRGBtoGray'):
    draw = get_or_create_rand_vars(lambda: random_uniform([], seed=seed),
                                   PreprocessorCache.RGB_TO_GRAY,
                                   preprocess_vars_cache)
    return tf.cond(tf.greater(draw, probability), lambda: tf.identity(image),
                   lambda: tf.image.grayscale_to_rgb(rgb_to_gray(image)))


# Each photometric step: (name scope, cache key of its random factor, tf.image function).
_PHOTOMETRIC_STEPS = {
    'brightness': ('RandomAdjustBrightness', PreprocessorCache.ADJUST_BRIGHTNESS,
                   tf.image.adjust_brightness),
    'contrast': ('RandomAdjustContrast', PreprocessorCache.ADJUST_CONTRAST,
                 tf.image.adjust_contrast),
    'hue': ('RandomAdjustHue', PreprocessorCache.ADJUST_HUE, tf.image.adjust_hue),
    'saturation': ('RandomAdjustSaturation', PreprocessorCache.ADJUST_SATURATION,
                   tf.image.adjust_saturation),
}


def _random_photometric(image, step, minval, maxval, seed, preprocess_vars_cache):
  """Draws a factor in [minval, maxval] and applies `step`'s adjustment on [0, 1] pixels."""
  name, cache_id, adjust_fn = _PHOTOMETRIC_STEPS[step]
  with tf.compat.v1.name_scope(name):
    factor = get_or_create_rand_vars(
        lambda: random_uniform([], minval, maxval, seed=seed), cache_id,
        preprocess_vars_cache)
    image = adjust_fn(image / 255.0, factor) * 255.0
    return tf.clip_by_value(image, 0.0, 255.0)


def random_adjust_brightness(image, max_delta=0.2, seed=None,
                             preprocess_vars_cache=None):
  """Adds a delta from [-max_delta, max_delta] (in [0, 1] units) to pixels.

  Args:
    image: [H, W, C] float image in [0, 255].
    max_delta: largest absolute change, as a fraction of 255.
    seed: op-level seed.
    preprocess_vars_cache: caches the delta under ADJUST_BRIGHTNESS.

  Returns:
    The adjusted image clipped to [0, 255].
  """
  return _random_photometric(image, 'brightness', -max_delta, max_delta, seed,
                             preprocess_vars_cache)


def random_adjust_contrast(image, min_delta=0.8, max_delta=1.25, seed=None,
                           preprocess_vars_cache=None):
  """Scales contrast by a factor from [min_delta, max_delta]; see brightness."""
  return _random_photometric(image, 'contrast', min_delta, max_delta, seed,
                             preprocess_vars_cache)


def random_adjust_hue(image, max_delta=0.02, seed=None,
                      preprocess_vars_cache=None):
  """Rotates hue by a delta from [-max_delta, max_delta]; RGB images only."""
  return _random_photometric(image, 'hue', -max_delta, max_delta, seed,
                             preprocess_vars_cache)


def random_adjust_saturation(image, min_delta=0.8, max_delta=1.25, seed=None,
                             preprocess_vars_cache=None):
  """Scales saturation by a factor from [min_delta, max_delta]; RGB only."""
  return _random_photometric(image, 'saturation', min_delta, max_delta, seed,
                             preprocess_vars_cache)


def random_distort_color(image, color_ordering=0, preprocess_vars_cache=None):
  """Brightness, saturation, hue and contrast changes in a fixed order.

  Args:
    image: [H, W, 3] float image in [0, 255].
    color_ordering: 0: brightness, saturation, hue, contrast;
      1: brightness, contrast, saturation, hue.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    The distorted image.

  Raises:
    ValueError: if color_ordering is not 0 or 1.
  """
  if color_ordering not in (0, 1):
    raise ValueError('color_ordering must be in {0, 1}')
  cache = preprocess_vars_cache
  with tf.compat.v1.name_scope('RandomDistortColor'):
    image = random_adjust_brightness(image, max_delta=32. / 255.,
                                     preprocess_vars_cache=cache)
    if color_ordering == 0:
      image = random_adjust_saturation(image, 0.5, 1.5, preprocess_vars_cache=cache)
      image = random_adjust_hue(image, max_delta=0.2, preprocess_vars_cache=cache)
      image = random_adjust_contrast(image, 0.5, 1.5, preprocess_vars_cache=cache)
    else:
      image = random_adjust_contrast(image, 0.5, 1.5, preprocess_vars_cache=cache)
      image = random_adjust_saturation(image, 0.5, 1.5, preprocess_vars_cache=cache)
      image = random_adjust_hue(image, max_delta=0.2, preprocess_vars_cache=cache)
    return image


def random_black_patches(image, max_black_patches=10, probability=0.5,
                         size_to_image_ratio=0.1, random_seed=None,
                         preprocess_vars_cache=None):
  """Blacks out up to max_black_patches squares, each with `probability`.

  Each square has side size_to_image_ratio * min(H, W) pixels and a random
  top-left corner that keeps it inside the image.

  Args:
    image: [H, W, C] image.
    max_black_patches: number of candidate squares.
    probability: chance that each candidate is drawn.
    size_to_image_ratio: square side relative to the shorter image side.
    random_seed: op-level seed.
    preprocess_vars_cache: caches the coin flips under BLACK_PATCHES and the
      corners under ADD_BLACK_PATCH.

  Returns:
    The image with the patches set to zero.
  """
  with tf.compat.v1.name_scope('RandomBlackPatches'):
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    side = tf.cast(tf.minimum(tf.cast(height, tf.float32), tf.cast(width, tf.float32))
                   * size_to_image_ratio, tf.int32)
    draws = get_or_create_rand_vars(
        lambda: random_uniform([max_black_patches], seed=random_seed),
        PreprocessorCache.BLACK_PATCHES, preprocess_vars_cache)
    corners = get_or_create_rand_vars(
        lambda: random_uniform([max_black_patches, 2], 0.0,
                               1.0 - size_to_image_ratio, seed=random_seed),
        PreprocessorCache.ADD_BLACK_PATCH, preprocess_vars_cache)
    active = tf.logical_not(tf.greater(draws, probability))
    y_min = tf.cast(corners[:, 0] * tf.cast(height, tf.float32), tf.int32)
    x_min = tf.cast(corners[:, 1] * tf.cast(width, tf.float32), tf.int32)
    rows = tf.range(height)[tf.newaxis, :, tf.newaxis]
    cols = tf.range(width)[tf.newaxis, tf.newaxis, :]
    in_rows = tf.logical_and(rows >= y_min[:, None, None], rows < (y_min + side)[:, None, None])
    in_cols = tf.logical_and(cols >= x_min[:, None, None], cols < (x_min + side)[:, None, None])
    patches = tf.logical_and(tf.logical_and(in_rows, in_cols), active[:, None, None])
    black = tf.reduce_any(patches, axis=0)[:, :, tf.newaxis]
    return image * tf.cast(tf.logical_not(black), image.dtype)


def subtract_channel_mean(image, means=None):
  """Subtracts a per-channel mean.

  Args:
    image: [H, W, C] image.
    means: C floats.

  Returns:
    image - means.

  Raises:
    ValueError: if the image is not rank 3 or len(means) != C.
  """
  with tf.compat.v1.name_scope('SubtractChannelMean'):
    if len(image.get_shape()) != 3:
      raise ValueError('Input must be of size [height, width, channels]')
    if means is None or len(means) != image.get_shape()[-1]:
      raise ValueError('len(means) must match the number of channels')
    return image - tf.constant(list(means), dtype=image.dtype)


# ------------------------------------------------------- flips and rotation

def _flip(image, boxes, masks, keypoints, keypoint_visibilities, permutation,
          probability, seed, cache, cache_id, name, axis):
  """Shared body of the horizontal (axis=1) and vertical (axis=0) flips.

  Raises:
    ValueError: if keypoints are given without their flip permutation.
  """
  if keypoints is not None and permutation is None:
    raise ValueError('keypoints are provided but keypoint_flip_permutation is not '
                     'provided')
  with tf.compat.v1.name_scope(name):
    draw = get_or_create_rand_vars(lambda: random_uniform([], seed=seed),
                                   cache_id, cache)
    do_flip = tf.less(draw, probability)
    result = [tf.where(do_flip, tf.reverse(image, [axis]), image)]
    if boxes is not None:
      ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=1)
      if axis == 1:
        flipped = tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1)
      else:
        flipped = tf.stack([1.0 - ymax, xmin, 1.0 - ymin, xmax], axis=1)
      result.append(tf.where(do_flip, flipped, boxes))
    if masks is not None:
      result.append(tf.where(do_flip, tf.reverse(masks, [axis + 1]), masks))
    if keypoints is not None:
      flip_fn = kp_ops.flip_horizontal if axis == 1 else kp_ops.flip_vertical
      result.append(tf.where(do_flip, flip_fn(keypoints, 0.5, permutation), keypoints))
    if keypoint_visibilities is not None:
      result.append(tf.where(
          do_flip, kp_ops.permute_visibilities(keypoint_visibilities, permutation),
          keypoint_visibilities))
    return tuple(result) if len(result) > 1 else result[0]


def random_horizontal_flip(image, boxes=None, masks=None, keypoints=None,
                           keypoint_visibilities=None,
                           keypoint_flip_permutation=None, probability=0.5,
                           seed=None, preprocess_vars_cache=None):
  """Mirrors the image left-right with `probability`, with its annotations.

  A box [ymin, xmin, ymax, xmax] becomes [ymin, 1 - xmax, ymax, 1 - xmin].

  Args:
    image: [H, W, C] image.
    boxes: [N, 4] normalized boxes or None.
    masks: [N, H, W] or None.
    keypoints: [N, K, 2] normalized or None.
    keypoint_visibilities: [N, K] or None.
    keypoint_flip_permutation: K ints, the keypoint order after a flip
      (e.g. swaps left and right eye).
    probability: chance of flipping.
    seed: op-level seed.
    preprocess_vars_cache: caches the draw under HORIZONTAL_FLIP.

  Returns:
    image, followed by the non-None inputs in argument order (just the image
    tensor when no annotation is given).

  Raises:
    ValueError: if keypoints are given without keypoint_flip_permutation.
  """
  return _flip(image, boxes, masks, keypoints, keypoint_visibilities,
               keypoint_flip_permutation, probability, seed,
               preprocess_vars_cache, PreprocessorCache.HORIZONTAL_FLIP,
               'RandomHorizontalFlip', axis=1)


def random_vertical_flip(image, boxes=None, masks=None, keypoints=None,
                         keypoint_visibilities=None,
                         keypoint_flip_permutation=None, probability=0.5,
                         seed=None, preprocess_vars_cache=None):
  """Mirrors the image top-bottom with `probability`; see the horizontal flip.

  A box [ymin, xmin, ymax, xmax] becomes [1 - ymax, xmin, 1 - ymin, xmax].

  Returns:
    image, followed by the non-None inputs in argument order.

  Raises:
    ValueError: if keypoints are given without keypoint_flip_permutation.
  """
  return _flip(image, boxes, masks, keypoints, keypoint_visibilities,
               keypoint_flip_permutation, probability, seed,
               preprocess_vars_cache, PreprocessorCache.VERTICAL_FLIP,
               'RandomVerticalFlip', axis=0)


def random_rotation90(image, boxes=None, masks=None, keypoints=None,
                      keypoint_visibilities=None, keypoint_rot_permutation=None,
                      probability=0.5, seed=None, preprocess_vars_cache=None):
  """Rotates 90 degrees counter-clockwise with `probability`.

  A box [ymin, xmin, ymax, xmax] becomes [1 - xmax, ymin, 1 - xmin, ymax];
  the image becomes [W, H, C].

  Args:
    image: [H, W, C] image.
    boxes, masks, keypoints, keypoint_visibilities: annotations or None.
    keypoint_rot_permutation: optional keypoint order after rotation.
    probability: chance of rotating.
    seed: op-level seed.
    preprocess_vars_cache: caches the draw under ROTATION90.

  Returns:
    image, followed by the non-None inputs in argument order.
  """
  with tf.compat.v1.name_scope('RandomRotation90'):
    draw = get_or_create_rand_vars(lambda: random_uniform([], seed=seed),
                                   PreprocessorCache.ROTATION90,
                                   preprocess_vars_cache)
    do_rotate = tf.less(draw, probability)
    result = [tf.cond(do_rotate, lambda: tf.image.rot90(image),
                      lambda: tf.identity(image))]
    if boxes is not None:
      ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=1)
      rotated = tf.stack([1.0 - xmax, ymin, 1.0 - xmin, ymax], axis=1)
      result.append(tf.where(do_rotate, rotated, boxes))
    if masks is not None:
      result.append(tf.cond(
          do_rotate, lambda: tf.squeeze(tf.image.rot90(masks[..., None]), 3),
          lambda: tf.identity(masks)))
    if keypoints is not None:
      result.append(tf.where(do_rotate,
                             kp_ops.rot90(keypoints, keypoint_rot_permutation),
                             keypoints))
    if keypoint_visibilities is not None:
      result.append(tf.where(
          do_rotate,
          kp_ops.permute_visibilities(keypoint_visibilities, keypoint_rot_permutation),
          keypoint_visibilities))
    return tuple(result) if len(result) > 1 else result[0]


def random_jitter_boxes(boxes, ratio=0.05, seed=None, preprocess_vars_cache=None):
  """Moves each box coordinate by up to ratio * (box height or width).

  Args:
    boxes: [N, 4] normalized boxes.
    ratio: maximum relative shift of each coordinate.
    seed: op-level seed.
    preprocess_vars_cache: caches the [N, 4] draws under JITTER_BOXES.

  Returns:
    [N, 4] jittered boxes clipped to [0, 1].
  """
  with tf.compat.v1.name_scope('RandomJitterBoxes'):
    draws = get_or_create_rand_vars(
        lambda: random_uniform(tf.shape(boxes), -ratio, ratio, seed=seed),
        PreprocessorCache.JITTER_BOXES, preprocess_vars_cache)
    heights, widths = box_list_ops.height_width(boxes)
    sizes = tf.stack([heights, widths, heights, widths], axis=1)
    return tf.clip_by_value(boxes + sizes * draws, 0.0, 1.0)


# ----------------------------------------------------------- the dispatcher

def get_default_func_arg_map(include_label_weights=True,
                             include_label_confidences=False,
                             include_multiclass_scores=False,
                             include_instance_masks=False,
                             include_keypoints=False,
                             include_keypoint_visibilities=False,
                             include_dense_pose=False,
                             include_keypoint_depths=False):
  """The tensor_dict keys each augmentation reads and writes, in order.

  Args:
    include_label_weights: pass groundtruth_weights to crops.
    include_label_confidences: pass groundtruth_confidences to crops.
    include_multiclass_scores: pass multiclass_scores to crops.
    include_instance_masks: pass groundtruth_instance_masks.
    include_keypoints: pass groundtruth_keypoints.
    include_keypoint_visibilities: pass groundtruth_keypoint_visibilities.
    include_dense_pose: not supported (must be False).
    include_keypoint_depths: not supported (must be False).

  Returns:
    dict: function -> tuple of tensor_dict keys (None where not passed).

  Raises:
    ValueError: for the unsupported DensePose / keypoint depth fields.
  """
  if include_dense_pose or include_keypoint_depths:
    raise ValueError('include_dense_pose and include_keypoint_depths are not '
                     'supported by slimtrain augmentation.')
  f = fields.InputDataFields
  image, boxes, classes = f.image, f.groundtruth_boxes, f.groundtruth_classes
  weights = f.groundtruth_weights if include_label_weights else None
  confidences = f.groundtruth_confidences if include_label_confidences else None
  scores = f.multiclass_scores if include_multiclass_scores else None
  masks = f.groundtruth_instance_masks if include_instance_masks else None
  keypoints = f.groundtruth_keypoints if include_keypoints else None
  visibilities = (f.groundtruth_keypoint_visibilities
                  if include_keypoint_visibilities else None)

  geometry = (image, boxes, masks, keypoints, visibilities)
  crop_args = (image, boxes, classes, weights, confidences, scores, masks,
               keypoints, visibilities)
  pad_args = (image, boxes, masks, keypoints)
  image_only = (image,)
  image_masks = (image, masks)
  return {
      normalize_image: image_only,
      image_to_float: image_only,
      random_horizontal_flip: geometry,
      random_vertical_flip: geometry,
      random_rotation90: geometry,
      random_pixel_value_scale: image_only,
      random_image_scale: image_masks,
      random_rgb_to_gray: image_only,
      rgb_to_gray: image_only,
      random_adjust_brightness: image_only,
      random_adjust_contrast: image_only,
      random_adjust_hue: image_only,
      random_adjust_saturation: image_only,
      random_distort_color: image_only,
      random_black_patches: image_only,
      subtract_channel_mean: image_only,
      random_resize_method: image_only,
      random_jitter_boxes: (boxes,),
      random_crop_image: crop_args,
      random_pad_image: pad_args,
      random_absolute_pad_image: pad_args,
      random_crop_pad_image: crop_args,
      random_crop_to_aspect_ratio: crop_args,
      random_pad_to_aspect_ratio: pad_args,
      resize_image: image_masks,
      resize_to_range: image_masks,
      resize_to_min_dimension: image_masks,
      scale_boxes_to_pixel_coordinates: (image, boxes, keypoints),
      ssd_random_crop: crop_args,
      ssd_random_crop_pad: crop_args,
      ssd_random_crop_fixed_aspect_ratio: crop_args,
      ssd_random_crop_pad_fixed_aspect_ratio: crop_args,
  }


def _function_name(func):
  return getattr(func, '__name__', repr(func))


def preprocess(tensor_dict, preprocess_options, func_arg_map=None,
               preprocess_vars_cache=None):
  """Applies the augmentation steps to one example.

  The image must be [1, H, W, C]; it is squeezed to [H, W, C] for the steps
  and expanded back at the end.

  Args:
    tensor_dict: dict of tensors keyed by InputDataFields names. Not modified;
      a new dict is returned.
    preprocess_options: list of (function, kwargs dict) pairs.
    func_arg_map: function -> tuple of tensor_dict keys (None for absent
      arguments); defaults to get_default_func_arg_map().
    preprocess_vars_cache: PreprocessorCache or None; passed to every function
      that accepts it.

  Returns:
    A new tensor_dict with the augmented tensors.

  Raises:
    ValueError: if the image is not rank 4, a function is not in the map, or a
      key a function needs is missing from tensor_dict.
  """
  if func_arg_map is None:
    func_arg_map = get_default_func_arg_map()
  tensor_dict = dict(tensor_dict)
  image_key = fields.InputDataFields.image
  if image_key in tensor_dict:
    images = tensor_dict[image_key]
    if len(images.get_shape()) != 4:
      raise ValueError('images in tensor_dict should be rank 4, got shape %s for '
                       'key %r' % (images.get_shape(), image_key))
    tensor_dict[image_key] = tf.squeeze(images, axis=0)

  for step, (func, params) in enumerate(preprocess_options):
    name = _function_name(func)
    if func not in func_arg_map:
      raise ValueError('The function %s does not exist in func_arg_map '
                       '(preprocess_options[%d])' % (name, step))
    arg_names = func_arg_map[func]
    for arg_name in arg_names:
      if arg_name is not None and arg_name not in tensor_dict:
        raise ValueError('The function %s requires argument %s, which is not in '
                         'tensor_dict (keys: %s)'
                         % (name, arg_name, sorted(tensor_dict)))
    args = [tensor_dict[a] if a is not None else None for a in arg_names]
    params = dict(params or {})
    if (preprocess_vars_cache is not None and
        'preprocess_vars_cache' in inspect.signature(func).parameters):
      params['preprocess_vars_cache'] = preprocess_vars_cache
    results = func(*args, **params)
    if not isinstance(results, (list, tuple)):
      results = (results,)
    for arg_name, value in zip([a for a in arg_names if a is not None], results):
      tensor_dict[arg_name] = value

  if image_key in tensor_dict:
    tensor_dict[image_key] = tf.expand_dims(tensor_dict[image_key], 0)
  return tensor_dict
