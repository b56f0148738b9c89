"""Crop and pad augmentations: the image changes size, boxes follow.

A crop is a window [ymin, xmin, ymax, xmax] of the image in normalized
coordinates (plus the same window in pixels as `begin`/`size` for
`tf.slice`). Cropping keeps the boxes that overlap the window, drops those
that keep less than `overlap_thresh` of their own area inside it, re-expresses
the survivors relative to the window (so the window becomes [0, 0, 1, 1]) and
clips them to it. Labels, label weights, confidences, multiclass scores,
masks and keypoints are gathered with the same indices, so every per-box
tensor stays aligned with the boxes. Padding is the inverse: the image is
placed inside a larger canvas (filled with `pad_color`, by default the mean
colour), and boxes are re-expressed relative to the canvas.

    from core import preprocessor_crop as crop
    image, boxes, labels, weights = crop.random_crop_image(
        image, boxes, labels, weights, min_object_covered=0.5,
        overlap_thresh=0.3, seed=7)
    image, boxes = crop.random_pad_image(image, boxes, pad_color=(0., 0., 0.))

The functions are used through `core.preprocessor` (they are part of its
default function-argument map); the multi-choice SSD variants live in
`core.preprocessor_ssd`. There is no `tf.cond`: "keep the original" (random_coef)
selects an identity window with `tf.where`. Random draws go through
`preprocess_vars_cache` (see `core.preprocessor_cache`): the crop
window is cached under `STRICT_CROP_IMAGE` as `(begin [3] int32, size [3]
int32, window [4] float32)`, pad parameters under `PAD_IMAGE` as
`(target_height, target_width, offset_height, offset_width)`.
"""

import sys

import tensorflow as tf

from core import box_list_ops
from core import preprocessor_keypoints as kp_ops
from core.preprocessor_cache import PreprocessorCache
from core.preprocessor_cache import get_or_create_rand_vars
from core.preprocessor_cache import random_uniform

_UNIT_WINDOW = (0.0, 0.0, 1.0, 1.0)


def random_int_in_range(minval, maxval, seed=None):
  """A scalar int32 in [minval, maxval), or maxval when the range is empty.

  Built from a float draw, so no control flow is needed for empty ranges.

  Args:
    minval: int32 scalar tensor, inclusive lower bound.
    maxval: int32 scalar tensor, exclusive upper bound.
    seed: op-level seed.

  Returns:
    int32 scalar tensor.
  """
  span = maxval - minval
  draw = random_uniform([], seed=seed)
  value = minval + tf.cast(tf.floor(draw * tf.cast(span, tf.float32)), tf.int32)
  return tf.where(span > 0, tf.minimum(value, maxval - 1), maxval)


def _maybe(fn, value, condition):
  """fn(value) if condition else value; condition is a bool or bool tensor."""
  if isinstance(condition, bool):
    return fn(value) if condition else value
  return tf.where(condition, fn(value), value)


def sample_crop_window(image, boxes, min_object_covered, aspect_ratio_range,
                       area_range, seed=None):
  """Draws a crop window with tf's SampleDistortedBoundingBoxV2.

  The window covers at least `min_object_covered` of one of the boxes (of the
  whole image when there are no boxes).

  Args:
    image: [H, W, C] image.
    boxes: [N, 4] normalized boxes.
    min_object_covered: fraction of some box the window must contain.
    aspect_ratio_range: (min, max) width/height of the window.
    area_range: (min, max) fraction of the image area.
    seed: op-level seed.

  Returns:
    (begin [3] int32, size [3] int32, window [4] float32).
  """
  boxes = tf.expand_dims(tf.clip_by_value(boxes, 0.0, 1.0), 0)
  # The op reads only its own seed attributes, never the graph seed, so they
  # are derived the way other random ops derive theirs (graph + op seed).
  seed1, seed2 = tf.compat.v1.get_seed(seed)
  begin, size, window = tf.raw_ops.SampleDistortedBoundingBoxV2(
      image_size=tf.shape(image), bounding_boxes=boxes,
      min_object_covered=tf.cast(min_object_covered, tf.float32),
      seed=seed1 or 0, seed2=seed2 or 0,
      aspect_ratio_range=[float(v) for v in aspect_ratio_range],
      area_range=[float(v) for v in area_range], max_attempts=100,
      use_image_if_no_bounding_boxes=True)
  return begin, size, tf.reshape(window, [4])


def _keep_mask(boxes, window, overlap_thresh):
  """[N] bool: the box overlaps the window and has enough of its area in it."""
  ymin, xmin, ymax, xmax = tf.unstack(boxes, num=4, axis=1)
  outside = tf.reduce_any(tf.stack([
      ymin >= window[2], xmin >= window[3], ymax <= window[0],
      xmax <= window[1]], axis=1), axis=1)
  covered = box_list_ops.ioa(tf.expand_dims(window, 0), boxes)[0]
  return tf.logical_and(tf.logical_not(outside),
                        tf.greater_equal(covered, overlap_thresh))


def crop_to_window(image, boxes, labels, label_weights, label_confidences,
                   multiclass_scores, masks, keypoints, keypoint_visibilities,
                   crop, overlap_thresh, clip_boxes, apply_crop=True):
  """Crops the image to a window and moves every per-box tensor with it.

  Boxes are kept as `prune_completely_outside_window` followed by
  `prune_non_overlapping_boxes(min_overlap=overlap_thresh)` would keep them.

  Args:
    image: [H, W, C].
    boxes: [N, 4] normalized.
    labels: [N].
    label_weights, label_confidences: [N] or None.
    multiclass_scores: [N, num_classes] or None.
    masks: [N, H, W] or None.
    keypoints: [N, K, 2] or None.
    keypoint_visibilities: [N, K] bool or None.
    crop: (begin [3], size [3], window [4]) as from sample_crop_window.
    overlap_thresh: boxes with less than this fraction of their area inside
      the window are dropped (float or scalar tensor).
    clip_boxes: clip boxes to the window and set keypoints outside to NaN
      (bool or bool scalar tensor).
    apply_crop: True, or a bool scalar tensor; where it is False every input
      is returned unchanged (no tf.cond needed).

  Returns:
    List [image, boxes, labels] followed by the non-None optional inputs in
    argument order, all cropped.
  """
  begin, size, window = crop
  begin = tf.cast(begin, tf.int32)
  size = tf.cast(size, tf.int32)
  window = tf.reshape(tf.cast(window, tf.float32), [4])
  unit = tf.constant(_UNIT_WINDOW, tf.float32)
  keep_mask = _keep_mask(boxes, window, overlap_thresh)
  if apply_crop is not True:
    begin = tf.where(apply_crop, begin, tf.zeros_like(begin))
    size = tf.where(apply_crop, size, -tf.ones_like(size))
    window = tf.where(apply_crop, window, unit)
    keep_mask = tf.logical_or(keep_mask, tf.logical_not(apply_crop))
    clip_boxes = tf.logical_and(apply_crop, clip_boxes)
  new_image = tf.slice(image, begin, size)
  new_image.set_shape([None, None, image.get_shape()[2]])
  keep = tf.cast(tf.reshape(tf.where(keep_mask), [-1]), tf.int32)

  new_boxes = box_list_ops.change_coordinate_frame(tf.gather(boxes, keep), window)
  new_boxes = _maybe(lambda b: box_list_ops.clip_to_window(b, unit), new_boxes,
                     clip_boxes)
  outputs = [new_image, new_boxes, tf.gather(labels, keep)]
  for per_box in (label_weights, label_confidences, multiclass_scores):
    if per_box is not None:
      outputs.append(tf.gather(per_box, keep))
  if masks is not None:
    kept = tf.gather(masks, keep)
    outputs.append(tf.slice(kept, tf.stack([0, begin[0], begin[1]]),
                            tf.stack([-1, size[0], size[1]])))
  new_keypoints = None
  if keypoints is not None:
    new_keypoints = kp_ops.change_coordinate_frame(tf.gather(keypoints, keep), window)
    new_keypoints = _maybe(lambda k: kp_ops.prune_outside_window(k, unit),
                           new_keypoints, clip_boxes)
    outputs.append(new_keypoints)
  if keypoint_visibilities is not None:
    visibilities = tf.gather(keypoint_visibilities, keep)
    if new_keypoints is not None:
      visibilities = kp_ops.visibilities_from_keypoints(new_keypoints, visibilities)
    outputs.append(visibilities)
  return outputs


def maybe_crop(inputs, crop, overlap_thresh, clip_boxes, random_coef, seed,
               preprocess_vars_cache, coef_key=''):
  """Crops `inputs` unless a draw below `random_coef` keeps the original.

  Args:
    inputs: the 9 crop_to_window tensor arguments (image ... visibilities).
    crop: (begin, size, window).
    overlap_thresh: see crop_to_window.
    clip_boxes: see crop_to_window.
    random_coef: probability of returning the inputs unchanged (float or
      scalar tensor); 0 always crops.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.
    coef_key: cache sub-key of the keep-original draw (under CROP_IMAGE).

  Returns:
    Tuple of the non-None inputs, cropped or not.
  """
  apply_crop = True
  if not (isinstance(random_coef, (int, float)) and random_coef < sys.float_info.min):
    draw = get_or_create_rand_vars(lambda: random_uniform([], seed=seed),
                                   PreprocessorCache.CROP_IMAGE,
                                   preprocess_vars_cache, key=coef_key)
    apply_crop = tf.greater(draw, random_coef)
  return tuple(crop_to_window(*inputs, crop=crop, overlap_thresh=overlap_thresh,
                              clip_boxes=clip_boxes, apply_crop=apply_crop))


def random_crop_image(image, boxes, labels, label_weights=None,
                      label_confidences=None, multiclass_scores=None,
                      masks=None, keypoints=None, keypoint_visibilities=None,
                      min_object_covered=1.0, aspect_ratio_range=(0.75, 1.33),
                      area_range=(0.1, 1.0), overlap_thresh=0.3,
                      clip_boxes=True, random_coef=0.0, seed=None,
                      preprocess_vars_cache=None):
  """Randomly crops the image; boxes outside the crop are dropped.

  Args:
    image: [H, W, C] float image.
    boxes: [N, 4] normalized boxes.
    labels: [N] int class labels.
    label_weights: [N] float or None.
    label_confidences: [N] float or None.
    multiclass_scores: [N, num_classes] or None.
    masks: [N, H, W] or None.
    keypoints: [N, K, 2] or None.
    keypoint_visibilities: [N, K] bool or None.
    min_object_covered: the crop contains at least this fraction of a box.
    aspect_ratio_range: allowed (min, max) crop width/height.
    area_range: allowed (min, max) fraction of the image area.
    overlap_thresh: minimum fraction of a box's area inside the crop to keep it.
    clip_boxes: clip boxes to the crop.
    random_coef: probability of returning the original image (0: always crop).
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache; the window is cached under
      STRICT_CROP_IMAGE and the keep-original draw under CROP_IMAGE.

  Returns:
    (image, boxes, labels) followed by the cropped non-None optional inputs in
    argument order.
  """
  with tf.compat.v1.name_scope('RandomCropImage'):
    crop = get_or_create_rand_vars(
        lambda: sample_crop_window(image, boxes, min_object_covered,
                                   aspect_ratio_range, area_range, seed),
        PreprocessorCache.STRICT_CROP_IMAGE, preprocess_vars_cache)
    inputs = (image, boxes, labels, label_weights, label_confidences,
              multiclass_scores, masks, keypoints, keypoint_visibilities)
    return maybe_crop(inputs, crop, overlap_thresh, clip_boxes, random_coef,
                      seed, preprocess_vars_cache)


def _image_size_tensor(size, name):
  """Converts a (height, width) pair (ints, floats or tensor) to int32 [2]."""
  size = tf.convert_to_tensor(size, name=name)
  if size.dtype != tf.int32:
    size = tf.cast(size, tf.int32)
  return size


def random_pad_image(image, boxes, masks=None, keypoints=None,
                     min_image_size=None, max_image_size=None, pad_color=None,
                     seed=None, preprocess_vars_cache=None):
  """Places the image at a random offset inside a larger canvas.

  The canvas size is drawn from [min_image_size, max_image_size) (each never
  smaller than the image; defaults: the image size and twice the image size).

  Args:
    image: [H, W, C] float image.
    boxes: [N, 4] normalized boxes.
    masks: [N, H, W] or None; padded with zeros.
    keypoints: [N, K, 2] or None.
    min_image_size: (height, width) lower bound of the canvas, or None.
    max_image_size: (height, width) upper bound of the canvas, or None.
    pad_color: C values to fill the canvas with; None uses the image mean.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache; caches (target_height,
      target_width, offset_height, offset_width) under PAD_IMAGE.

  Returns:
    (image, boxes) followed by masks and keypoints when given.
  """
  with tf.compat.v1.name_scope('RandomPadImage'):
    image_shape = tf.shape(image)
    height, width = image_shape[0], image_shape[1]
    image_size = tf.stack([height, width])
    if pad_color is None:
      pad_color = tf.reduce_mean(image, axis=[0, 1])
    pad_color = tf.cast(pad_color, image.dtype)
    if max_image_size is None:
      max_image_size = image_size * 2
    max_image_size = tf.maximum(_image_size_tensor(max_image_size, 'max_image_size'),
                                image_size)
    if min_image_size is None:
      min_image_size = image_size
    min_image_size = tf.maximum(_image_size_tensor(min_image_size, 'min_image_size'),
                                image_size)

    def draw():
      target_height = random_int_in_range(min_image_size[0], max_image_size[0], seed)
      target_width = random_int_in_range(min_image_size[1], max_image_size[1], seed)
      offset_height = tf.maximum(random_int_in_range(0, target_height - height, seed), 0)
      offset_width = tf.maximum(random_int_in_range(0, target_width - width, seed), 0)
      return target_height, target_width, offset_height, offset_width

    target_height, target_width, offset_height, offset_width = (
        get_or_create_rand_vars(draw, PreprocessorCache.PAD_IMAGE,
                                preprocess_vars_cache))
    placement = (offset_height, offset_width, target_height, target_width)
    new_image = tf.image.pad_to_bounding_box(image, *placement)
    canvas = tf.image.pad_to_bounding_box(tf.ones_like(image), *placement)
    new_image += (1 - canvas) * pad_color

    window = tf.cast(tf.stack([-offset_height, -offset_width,
                               target_height - offset_height,
                               target_width - offset_width]), tf.float32)
    window /= tf.cast(tf.stack([height, width, height, width]), tf.float32)
    result = [new_image, box_list_ops.change_coordinate_frame(boxes, window)]
    if masks is not None:
      padded = tf.image.pad_to_bounding_box(tf.expand_dims(masks, 3), *placement)
      result.append(tf.squeeze(padded, axis=3))
    if keypoints is not None:
      result.append(kp_ops.change_coordinate_frame(keypoints, window))
    return tuple(result)


def random_absolute_pad_image(image, boxes, masks=None, keypoints=None,
                              max_height_padding=None, max_width_padding=None,
                              pad_color=None, seed=None,
                              preprocess_vars_cache=None):
  """Pads by up to the given number of pixels in each direction.

  Args:
    image, boxes, masks, keypoints: see random_pad_image.
    max_height_padding: maximum extra rows (int).
    max_width_padding: maximum extra columns (int).
    pad_color, seed, preprocess_vars_cache: see random_pad_image.

  Returns:
    See random_pad_image.
  """
  min_image_size = tf.shape(image)[:2]
  max_image_size = min_image_size + tf.cast(
      [max_height_padding, max_width_padding], tf.int32)
  return random_pad_image(image, boxes, masks=masks, keypoints=keypoints,
                          min_image_size=min_image_size,
                          max_image_size=max_image_size, pad_color=pad_color,
                          seed=seed, preprocess_vars_cache=preprocess_vars_cache)


def split_optional(outputs, optional_inputs):
  """Splits a crop output tuple by the optional inputs that were given.

  Args:
    outputs: (image, boxes, labels, *non-None optional outputs).
    optional_inputs: the optional inputs as passed (None where absent).

  Returns:
    (image, boxes, labels, list with one entry per optional input: its output
    or None).
  """
  rest = list(outputs[3:])
  optional = [rest.pop(0) if value is not None else None
              for value in optional_inputs]
  return outputs[0], outputs[1], outputs[2], optional


def pad_crop_result(original_image, crop_result, optional_inputs,
                    min_padded_size_ratio, max_padded_size_ratio, pad_color,
                    seed, preprocess_vars_cache):
  """Pads a crop result: image, boxes, masks and keypoints move; labels stay.

  The canvas is between min_padded_size_ratio and max_padded_size_ratio times
  the size of `original_image` (the image before cropping).

  Args:
    original_image: the uncropped [H, W, C] image.
    crop_result: tuple (image, boxes, labels, ...non-None optional outputs).
    optional_inputs: the six optional crop inputs (label_weights ...
      keypoint_visibilities) as passed, None where absent.
    min_padded_size_ratio: (height, width) ratios (floats or tensor).
    max_padded_size_ratio: (height, width) ratios.
    pad_color: C values or None.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    Tuple like crop_result, padded.
  """
  image_size = tf.cast(tf.shape(original_image)[:2], tf.float32)
  min_size = tf.cast(image_size * tf.cast(min_padded_size_ratio, tf.float32), tf.int32)
  max_size = tf.cast(image_size * tf.cast(max_padded_size_ratio, tf.float32), tf.int32)
  image, boxes, labels, optional = split_optional(crop_result, optional_inputs)
  padded = list(random_pad_image(
      image, boxes, masks=optional[3], keypoints=optional[4],
      min_image_size=min_size, max_image_size=max_size, pad_color=pad_color,
      seed=seed, preprocess_vars_cache=preprocess_vars_cache))
  image, boxes = padded.pop(0), padded.pop(0)
  for position in (3, 4):  # masks, keypoints
    if optional[position] is not None:
      optional[position] = padded.pop(0)
  return (image, boxes, labels) + tuple(v for v in optional if v is not None)


def random_crop_pad_image(image, boxes, labels, label_weights=None,
                          label_confidences=None, multiclass_scores=None,
                          masks=None, keypoints=None,
                          keypoint_visibilities=None, min_object_covered=1.0,
                          aspect_ratio_range=(0.75, 1.33),
                          area_range=(0.1, 1.0), overlap_thresh=0.3,
                          clip_boxes=True, random_coef=0.0,
                          min_padded_size_ratio=(1.0, 1.0),
                          max_padded_size_ratio=(2.0, 2.0), pad_color=None,
                          seed=None, preprocess_vars_cache=None):
  """random_crop_image followed by random_pad_image of the crop.

  The padded canvas is between min_padded_size_ratio and
  max_padded_size_ratio times the original (uncropped) image size. Unlike
  the Object Detection API, masks and keypoints are cropped and padded too.

  Args:
    image, boxes, labels, label_weights, label_confidences, multiclass_scores,
      masks, keypoints, keypoint_visibilities: see random_crop_image.
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef: see random_crop_image.
    min_padded_size_ratio: (height, width) minimum canvas / image ratio.
    max_padded_size_ratio: (height, width) maximum canvas / image ratio.
    pad_color: C values or None (mean of the crop).
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.
  """
  with tf.compat.v1.name_scope('RandomCropPadImage'):
    optional_inputs = (label_weights, label_confidences, multiclass_scores,
                       masks, keypoints, keypoint_visibilities)
    cropped = random_crop_image(
        image, boxes, labels, *optional_inputs,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range, area_range=area_range,
        overlap_thresh=overlap_thresh, clip_boxes=clip_boxes,
        random_coef=random_coef, seed=seed,
        preprocess_vars_cache=preprocess_vars_cache)
    return pad_crop_result(image, cropped, optional_inputs,
                           min_padded_size_ratio, max_padded_size_ratio,
                           pad_color, seed, preprocess_vars_cache)


def random_crop_to_aspect_ratio(image, boxes, labels, label_weights=None,
                                label_confidences=None, multiclass_scores=None,
                                masks=None, keypoints=None,
                                keypoint_visibilities=None, aspect_ratio=1.0,
                                overlap_thresh=0.3, clip_boxes=True, seed=None,
                                preprocess_vars_cache=None):
  """Crops the largest window of the given aspect ratio at a random offset.

  One side keeps its full length; the other is cut to
  round(side * aspect_ratio) (width) or round(side / aspect_ratio) (height).

  Args:
    image: [H, W, C] image (must be rank 3).
    boxes, labels, label_weights, label_confidences, multiclass_scores, masks,
      keypoints, keypoint_visibilities: see random_crop_image.
    aspect_ratio: width / height of the crop.
    overlap_thresh: see random_crop_image.
    clip_boxes: see random_crop_image.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache; caches (offset_height,
      offset_width) under CROP_TO_ASPECT_RATIO.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.

  Raises:
    ValueError: if the image is not rank 3.
  """
  if len(image.get_shape()) != 3:
    raise ValueError('Image should be 3D.')
  with tf.compat.v1.name_scope('RandomCropToAspectRatio'):
    shape = tf.shape(image)
    height, width = shape[0], shape[1]
    height_f, width_f = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    image_ratio = width_f / height_f
    target_height = tf.where(
        image_ratio >= aspect_ratio, height,
        tf.cast(tf.round(width_f / aspect_ratio), tf.int32))
    target_width = tf.where(
        image_ratio <= aspect_ratio, width,
        tf.cast(tf.round(height_f * aspect_ratio), tf.int32))
    offset_height, offset_width = get_or_create_rand_vars(
        lambda: (random_int_in_range(0, height - target_height + 1, seed),
                 random_int_in_range(0, width - target_width + 1, seed)),
        PreprocessorCache.CROP_TO_ASPECT_RATIO, preprocess_vars_cache)
    window = tf.cast(tf.stack([offset_height, offset_width,
                               offset_height + target_height,
                               offset_width + target_width]), tf.float32)
    window /= tf.stack([height_f, width_f, height_f, width_f])
    crop = (tf.stack([offset_height, offset_width, 0]),
            tf.stack([target_height, target_width, -1]), window)
    return tuple(crop_to_window(
        image, boxes, labels, label_weights, label_confidences,
        multiclass_scores, masks, keypoints, keypoint_visibilities, crop,
        overlap_thresh, clip_boxes))


def random_pad_to_aspect_ratio(image, boxes, masks=None, keypoints=None,
                               aspect_ratio=1.0, min_padded_size_ratio=(1.0, 1.0),
                               max_padded_size_ratio=(2.0, 2.0), seed=None,
                               preprocess_vars_cache=None):
  """Pads (bottom and right, with zeros) to the aspect ratio, randomly scaled.

  The smallest canvas of the aspect ratio containing the image is scaled by a
  factor drawn so that the canvas stays within [min_padded_size_ratio,
  max_padded_size_ratio] times the image size where possible.

  Args:
    image: [H, W, C] image.
    boxes: [N, 4] normalized boxes.
    masks: [N, H, W] or None.
    keypoints: [N, K, 2] or None.
    aspect_ratio: width / height of the canvas.
    min_padded_size_ratio: (height, width) minimum canvas / image ratio.
    max_padded_size_ratio: (height, width) maximum canvas / image ratio.
    seed: op-level seed.
    preprocess_vars_cache: caches the scale under PAD_TO_ASPECT_RATIO.

  Returns:
    (image, boxes) followed by masks and keypoints when given.
  """
  with tf.compat.v1.name_scope('RandomPadToAspectRatio'):
    shape = tf.shape(image)
    height = tf.cast(shape[0], tf.float32)
    width = tf.cast(shape[1], tf.float32)
    ratio = tf.constant(aspect_ratio, tf.float32)
    target_height = tf.where(width / height <= ratio, height, width / ratio)
    target_width = tf.where(width / height >= ratio, width, height * ratio)
    min_ratio = tf.cast(min_padded_size_ratio, tf.float32)
    max_ratio = tf.cast(max_padded_size_ratio, tf.float32)
    min_height = tf.maximum(min_ratio[0] * height, target_height)
    min_width = tf.maximum(min_ratio[1] * width, target_width)
    max_height = tf.maximum(max_ratio[0] * height, target_height)
    max_width = tf.maximum(max_ratio[1] * width, target_width)
    max_scale = tf.minimum(max_height / target_height, max_width / target_width)
    min_scale = tf.minimum(max_scale, tf.maximum(min_height / target_height,
                                                 min_width / target_width))
    scale = get_or_create_rand_vars(
        lambda: random_uniform([], min_scale, max_scale, seed=seed),
        PreprocessorCache.PAD_TO_ASPECT_RATIO, preprocess_vars_cache)
    target_height = tf.round(scale * target_height)
    target_width = tf.round(scale * target_width)
    size = (tf.cast(target_height, tf.int32), tf.cast(target_width, tf.int32))
    new_image = tf.image.pad_to_bounding_box(image, 0, 0, *size)
    window = tf.stack([0.0, 0.0, target_height / height, target_width / width])
    result = [new_image, box_list_ops.change_coordinate_frame(boxes, window)]
    if masks is not None:
      padded = tf.image.pad_to_bounding_box(tf.expand_dims(masks, 3), 0, 0, *size)
      result.append(tf.squeeze(padded, axis=3))
    if keypoints is not None:
      result.append(kp_ops.change_coordinate_frame(keypoints, window))
    return tuple(result)
