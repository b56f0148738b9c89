"""SSD-style crops: pick one of several crop recipes at random per example.

The SSD paper (Liu et al.) augments each image with one of a list of crop
"operations", each a tuple of (min_object_covered, aspect_ratio_range,
area_range, overlap_thresh, clip_boxes, random_coef). Index i of every
argument list belongs to operation i; one index is drawn per example.

Instead of building one conditional branch per operation, every operation's
candidate window is drawn (cheap: one sample_distorted_bounding_box each),
and the chosen window and thresholds are gathered by the drawn index. So the
image is cropped once, there is a single optional keep-original `tf.cond`,
and every random draw can be cached: the index under `SSD_CROP_SELECTOR_ID`
(`SSD_CROP_PAD_SELECTOR_ID` for the padding variants) with key `'<step>'`,
operation i's window under `STRICT_CROP_IMAGE` with key `'<step>_<i>'`, and
the keep-original draw under `CROP_IMAGE` with key `'<step>'`, where step is
`ssd_crop`, `ssd_crop_pad`, `ssd_crop_fixed` or `ssd_crop_pad_fixed`.

    from core import preprocessor_ssd
    image, boxes, labels, weights = preprocessor_ssd.ssd_random_crop(
        image, boxes, labels, weights, seed=3)

Variants: `ssd_random_crop_pad` (then pads the crop), and the fixed aspect
ratio versions that finish with random_crop_to_aspect_ratio or
random_pad_to_aspect_ratio.
"""

import tensorflow as tf

from core import preprocessor_crop as crop_ops
from core.preprocessor_cache import PreprocessorCache
from core.preprocessor_cache import get_or_create_rand_vars
from core.preprocessor_cache import random_integer

_SEVEN = 7
_SIX = 6


def _per_op(value, num_ops, name):
  """Returns `value` as a list of num_ops entries (a bool broadcasts)."""
  if isinstance(value, bool):
    return [value] * num_ops
  value = list(value)
  if len(value) == num_ops:
    return value
  if value and all(v == value[0] for v in value):
    return [value[0]] * num_ops
  raise ValueError('%s has %d entries but there are %d crop operations '
                   '(min_object_covered has one per operation).'
                   % (name, len(value), num_ops))


def _select(values, index, dtype):
  """A python constant when all values agree, else values[index] as a tensor."""
  if all(v == values[0] for v in values):
    return values[0]
  return tf.gather(tf.constant(values, dtype), index)


def _select_pairs(pairs, index, name):
  """Gathers one (height, width) pair; validates that each has 2 values."""
  for pair in pairs:
    if len(pair) != 2:
      raise ValueError('%s entries must have 2 values (height, width), got %s.'
                       % (name, list(pair)))
  return tf.gather(tf.constant([list(p) for p in pairs], tf.float32), index)


def _ssd_crop(image, boxes, labels, label_weights, label_confidences,
              multiclass_scores, masks, keypoints, keypoint_visibilities,
              min_object_covered, aspect_ratio_range, area_range,
              overlap_thresh, clip_boxes, random_coef, seed,
              preprocess_vars_cache, selector_id, step):
  """Draws an operation index and applies that operation's crop.

  Returns:
    (outputs tuple like random_crop_image, selected index tensor).
  """
  num_ops = len(min_object_covered)
  aspect_ratio_range = _per_op(aspect_ratio_range, num_ops, 'aspect_ratio_range')
  area_range = _per_op(area_range, num_ops, 'area_range')
  overlap_thresh = _per_op(overlap_thresh, num_ops, 'overlap_thresh')
  clip_boxes = _per_op(clip_boxes, num_ops, 'clip_boxes')
  random_coef = _per_op(random_coef, num_ops, 'random_coef')

  windows = []
  for i in range(num_ops):
    windows.append(get_or_create_rand_vars(
        lambda i=i: crop_ops.sample_crop_window(
            image, boxes, min_object_covered[i], aspect_ratio_range[i],
            area_range[i], seed),
        PreprocessorCache.STRICT_CROP_IMAGE, preprocess_vars_cache,
        key='%s_%d' % (step, i)))
  index = get_or_create_rand_vars(
      lambda: random_integer(0, num_ops, seed), selector_id,
      preprocess_vars_cache, key=step)
  crop = tuple(tf.gather(tf.stack([tf.cast(w[part], dtype) for w in windows]), index)
               for part, dtype in ((0, tf.int32), (1, tf.int32), (2, tf.float32)))
  inputs = (image, boxes, labels, label_weights, label_confidences,
            multiclass_scores, masks, keypoints, keypoint_visibilities)
  outputs = crop_ops.maybe_crop(
      inputs, crop, _select(overlap_thresh, index, tf.float32),
      bool(clip_boxes[0]) if all(c == clip_boxes[0] for c in clip_boxes)
      else tf.gather(tf.constant(clip_boxes, tf.bool), index),
      _select([float(c) for c in random_coef], index, tf.float32), seed,
      preprocess_vars_cache, coef_key=step)
  return outputs, index


def ssd_random_crop(image, boxes, labels, label_weights=None,
                    label_confidences=None, multiclass_scores=None, masks=None,
                    keypoints=None, keypoint_visibilities=None,
                    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                    aspect_ratio_range=((0.5, 2.0),) * _SEVEN,
                    area_range=((0.1, 1.0),) * _SEVEN,
                    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                    clip_boxes=(True,) * _SEVEN,
                    random_coef=(0.15,) * _SEVEN, seed=None,
                    preprocess_vars_cache=None):
  """Random crop with one of several SSD crop operations.

  Args:
    image, boxes, labels, label_weights, label_confidences, multiclass_scores,
      masks, keypoints, keypoint_visibilities: see
      preprocessor_crop.random_crop_image.
    min_object_covered: one value per operation.
    aspect_ratio_range: one (min, max) per operation.
    area_range: one (min, max) per operation.
    overlap_thresh: one per operation.
    clip_boxes: one bool per operation (or a bool).
    random_coef: one per operation: probability of keeping the original.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.

  Raises:
    ValueError: if the per-operation lists disagree in length.
  """
  with tf.compat.v1.name_scope('SSDRandomCrop'):
    outputs, _ = _ssd_crop(
        image, boxes, labels, label_weights, label_confidences,
        multiclass_scores, masks, keypoints, keypoint_visibilities,
        min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
        clip_boxes, random_coef, seed, preprocess_vars_cache,
        PreprocessorCache.SSD_CROP_SELECTOR_ID, 'ssd_crop')
    return outputs


def ssd_random_crop_pad(image, boxes, labels, label_weights=None,
                        label_confidences=None, multiclass_scores=None,
                        masks=None, keypoints=None, keypoint_visibilities=None,
                        min_object_covered=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                        aspect_ratio_range=((0.5, 2.0),) * _SIX,
                        area_range=((0.1, 1.0),) * _SIX,
                        overlap_thresh=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
                        clip_boxes=(True,) * _SIX,
                        random_coef=(0.15,) * _SIX,
                        min_padded_size_ratio=((1.0, 1.0),) * _SIX,
                        max_padded_size_ratio=((2.0, 2.0),) * _SIX,
                        pad_color=(None,) * _SIX, seed=None,
                        preprocess_vars_cache=None):
  """SSD random crop, then a random pad of the crop (one operation per call).

  Args:
    image, boxes, labels, label_weights, label_confidences, multiclass_scores,
      masks, keypoints, keypoint_visibilities: see
      preprocessor_crop.random_crop_pad_image (masks and keypoints are
      cropped and padded too, an addition to the Object Detection API).
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef: per operation, see ssd_random_crop.
    min_padded_size_ratio: one (height, width) ratio pair per operation.
    max_padded_size_ratio: one (height, width) ratio pair per operation.
    pad_color: one 3-value colour (or None for the crop's mean) per operation.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.
  """
  with tf.compat.v1.name_scope('SSDRandomCropPad'):
    num_ops = len(min_object_covered)
    optional_inputs = (label_weights, label_confidences, multiclass_scores,
                       masks, keypoints, keypoint_visibilities)
    cropped, index = _ssd_crop(
        image, boxes, labels, *optional_inputs, min_object_covered,
        aspect_ratio_range, area_range, overlap_thresh, clip_boxes,
        random_coef, seed, preprocess_vars_cache,
        PreprocessorCache.SSD_CROP_PAD_SELECTOR_ID, 'ssd_crop_pad')
    min_ratio = _select_pairs(_per_op(min_padded_size_ratio, num_ops,
                                      'min_padded_size_ratio'), index,
                              'min_padded_size_ratio')
    max_ratio = _select_pairs(_per_op(max_padded_size_ratio, num_ops,
                                      'max_padded_size_ratio'), index,
                              'max_padded_size_ratio')
    colors = _per_op(pad_color, num_ops, 'pad_color')
    if all(c is None for c in colors):
      color = None
    else:
      mean = tf.reduce_mean(cropped[0], axis=[0, 1])
      color = tf.gather(tf.stack([
          mean if c is None else tf.cast(c, cropped[0].dtype) for c in colors]), index)
    return crop_ops.pad_crop_result(image, cropped, optional_inputs, min_ratio,
                                    max_ratio, color, seed, preprocess_vars_cache)


def ssd_random_crop_fixed_aspect_ratio(
    image, boxes, labels, label_weights=None, label_confidences=None,
    multiclass_scores=None, masks=None, keypoints=None,
    keypoint_visibilities=None,
    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), aspect_ratio=1.0,
    area_range=((0.1, 1.0),) * _SEVEN,
    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
    clip_boxes=(True,) * _SEVEN, random_coef=(0.15,) * _SEVEN, seed=None,
    preprocess_vars_cache=None):
  """SSD random crop whose windows all have `aspect_ratio`, then an exact fix.

  Windows are sampled with aspect_ratio_range (aspect_ratio, aspect_ratio);
  because pixel rounding (and the keep-original branch) can miss the ratio, a
  random_crop_to_aspect_ratio follows.

  Args:
    image ... keypoint_visibilities: see ssd_random_crop.
    min_object_covered, area_range, overlap_thresh, clip_boxes, random_coef:
      per operation, see ssd_random_crop.
    aspect_ratio: width / height of the output.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.
  """
  aspect_ratio_range = ((aspect_ratio, aspect_ratio),) * len(min_object_covered)
  optional_inputs = (label_weights, label_confidences, multiclass_scores,
                     masks, keypoints, keypoint_visibilities)
  with tf.compat.v1.name_scope('SSDRandomCropFixedAspectRatio'):
    cropped, _ = _ssd_crop(
        image, boxes, labels, *optional_inputs, min_object_covered,
        aspect_ratio_range, area_range, overlap_thresh, clip_boxes,
        random_coef, seed, preprocess_vars_cache,
        PreprocessorCache.SSD_CROP_SELECTOR_ID, 'ssd_crop_fixed')
  new_image, new_boxes, new_labels, optional = crop_ops.split_optional(cropped, optional_inputs)
  clip = clip_boxes if isinstance(clip_boxes, bool) else all(clip_boxes)
  return crop_ops.random_crop_to_aspect_ratio(
      new_image, new_boxes, new_labels, *optional, aspect_ratio=aspect_ratio,
      clip_boxes=clip, seed=seed, preprocess_vars_cache=preprocess_vars_cache)


def ssd_random_crop_pad_fixed_aspect_ratio(
    image, boxes, labels, label_weights=None, label_confidences=None,
    multiclass_scores=None, masks=None, keypoints=None,
    keypoint_visibilities=None,
    min_object_covered=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), aspect_ratio=1.0,
    aspect_ratio_range=((0.5, 2.0),) * _SEVEN,
    area_range=((0.1, 1.0),) * _SEVEN,
    overlap_thresh=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
    clip_boxes=(True,) * _SEVEN, random_coef=(0.15,) * _SEVEN,
    min_padded_size_ratio=(1.0, 1.0), max_padded_size_ratio=(2.0, 2.0),
    seed=None, preprocess_vars_cache=None):
  """SSD random crop, then random_pad_to_aspect_ratio of the crop.

  Args:
    image ... keypoint_visibilities: see ssd_random_crop.
    min_object_covered, aspect_ratio_range, area_range, overlap_thresh,
      clip_boxes, random_coef: per operation, see ssd_random_crop.
    aspect_ratio: width / height of the padded output.
    min_padded_size_ratio: (height, width) pair, or one pair per operation.
    max_padded_size_ratio: (height, width) pair, or one pair per operation.
    seed: op-level seed.
    preprocess_vars_cache: PreprocessorCache or None.

  Returns:
    (image, boxes, labels) followed by the non-None optional inputs.
  """
  with tf.compat.v1.name_scope('SSDRandomCropPadFixedAspectRatio'):
    optional_inputs = (label_weights, label_confidences, multiclass_scores,
                       masks, keypoints, keypoint_visibilities)
    cropped, index = _ssd_crop(
        image, boxes, labels, *optional_inputs, min_object_covered,
        aspect_ratio_range, area_range, overlap_thresh, clip_boxes,
        random_coef, seed, preprocess_vars_cache,
        PreprocessorCache.SSD_CROP_PAD_SELECTOR_ID, 'ssd_crop_pad_fixed')
    num_ops = len(min_object_covered)
    ratios = []
    for value, name in ((min_padded_size_ratio, 'min_padded_size_ratio'),
                        (max_padded_size_ratio, 'max_padded_size_ratio')):
      if value and not isinstance(value[0], (int, float)):
        value = _select_pairs(_per_op(value, num_ops, name), index, name)
      elif len(value) != 2:
        raise ValueError('%s must have 2 values (height, width), got %s.'
                         % (name, list(value)))
      ratios.append(value)
    new_image, new_boxes, new_labels, optional = crop_ops.split_optional(cropped, optional_inputs)
    padded = crop_ops.random_pad_to_aspect_ratio(
        new_image, new_boxes, optional[3], optional[4],
        aspect_ratio=aspect_ratio, min_padded_size_ratio=ratios[0],
        max_padded_size_ratio=ratios[1], seed=seed,
        preprocess_vars_cache=preprocess_vars_cache)
    padded = list(padded)
    result = [padded.pop(0), padded.pop(0), new_labels]
    result += [v for v in optional[:3] if v is not None]
    if optional[3] is not None:
      result.append(padded.pop(0))
    if optional[4] is not None:
      result.append(padded.pop(0))
    if optional[5] is not None:
      result.append(optional[5])
    return tuple(result)
