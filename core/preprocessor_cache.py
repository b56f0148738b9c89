"""Remembering the random draws of augmentation so they can be replayed.

Every random augmentation in `core.preprocessor` first *draws* its random
values (a flip coin, a crop window, pad offsets, ...) and then *applies* them.
The draw goes through `get_or_create_rand_vars`: with no cache it simply
creates fresh random ops; with a `PreprocessorCache` the first call stores the
drawn tensors under `(function_id, key)` and every later call with the same
cache reuses them instead of drawing again. That makes two uses of the same
augmentation agree, e.g. an image and its depth map flipped together, or a
test that runs `preprocess` twice and checks the outputs match:

    from core import preprocessor
    from core.preprocessor_cache import PreprocessorCache

    cache = PreprocessorCache()
    out1 = preprocessor.preprocess(dict1, options, preprocess_vars_cache=cache)
    out2 = preprocessor.preprocess(dict2, options, preprocess_vars_cache=cache)
    # The same flips and crop windows were applied to both.

A test can also put a known draw into the cache before calling an
augmentation (see each function's docstring for the value it caches), which
makes crop and pad results exactly computable by hand.

Cached values are graph tensors: reuse them only in the graph that made them,
and never from inside a `tf.cond` branch (the augmentations draw outside their
conditionals for that reason).
"""

import collections

import tensorflow as tf


class PreprocessorCache:
  """Dictionary of random draws keyed by augmentation id and a sub-key."""

  ROTATION90 = 'rotation90'
  HORIZONTAL_FLIP = 'horizontal_flip'
  VERTICAL_FLIP = 'vertical_flip'
  PIXEL_VALUE_SCALE = 'pixel_value_scale'
  IMAGE_SCALE = 'image_scale'
  RGB_TO_GRAY = 'rgb_to_gray'
  ADJUST_BRIGHTNESS = 'adjust_brightness'
  ADJUST_CONTRAST = 'adjust_contrast'
  ADJUST_HUE = 'adjust_hue'
  ADJUST_SATURATION = 'adjust_saturation'
  DISTORT_COLOR = 'distort_color'
  STRICT_CROP_IMAGE = 'strict_crop_image'
  CROP_IMAGE = 'crop_image'
  PAD_IMAGE = 'pad_image'
  CROP_TO_ASPECT_RATIO = 'crop_to_aspect_ratio'
  RESIZE_METHOD = 'resize_method'
  PAD_TO_ASPECT_RATIO = 'pad_to_aspect_ratio'
  BLACK_PATCHES = 'black_patches'
  ADD_BLACK_PATCH = 'add_black_patch'
  SELECTOR = 'selector'
  SELECTOR_TUPLES = 'selector_tuples'
  SSD_CROP_SELECTOR_ID = 'ssd_crop_selector_id'
  SSD_CROP_PAD_SELECTOR_ID = 'ssd_crop_pad_selector_id'
  JITTER_BOXES = 'jitter_boxes'

  _VALID_FNS = (
      ROTATION90, HORIZONTAL_FLIP, VERTICAL_FLIP, PIXEL_VALUE_SCALE,
      IMAGE_SCALE, RGB_TO_GRAY, ADJUST_BRIGHTNESS, ADJUST_CONTRAST, ADJUST_HUE,
      ADJUST_SATURATION, DISTORT_COLOR, STRICT_CROP_IMAGE, CROP_IMAGE,
      PAD_IMAGE, CROP_TO_ASPECT_RATIO, RESIZE_METHOD, PAD_TO_ASPECT_RATIO,
      BLACK_PATCHES, ADD_BLACK_PATCH, SELECTOR, SELECTOR_TUPLES,
      SSD_CROP_SELECTOR_ID, SSD_CROP_PAD_SELECTOR_ID, JITTER_BOXES)

  def __init__(self):
    self._history = collections.defaultdict(dict)

  def clear(self):
    """Forgets every stored draw."""
    self._history = collections.defaultdict(dict)

  def _check(self, function_id):
    if function_id not in self._VALID_FNS:
      raise ValueError('Function id not recognized: %s.' % str(function_id))

  def get(self, function_id, key):
    """Returns the draw stored for (function_id, key), or None.

    Args:
      function_id: one of the class constants (which augmentation).
      key: a sub-key inside that augmentation (e.g. a patch index).

    Returns:
      The stored value or None.

    Raises:
      ValueError: if function_id is not a known augmentation id.
    """
    self._check(function_id)
    return self._history[function_id].get(key)

  def update(self, function_id, key, value):
    """Stores `value` as the draw of (function_id, key).

    Args:
      function_id: one of the class constants.
      key: sub-key inside that augmentation.
      value: a tensor or tuple of tensors.

    Raises:
      ValueError: if function_id is not a known augmentation id.
    """
    self._check(function_id)
    self._history[function_id][key] = value


def get_or_create_rand_vars(generator_fn, function_id, preprocess_vars_cache,
                            key=''):
  """Returns the cached draw for (function_id, key), drawing it if absent.

  Args:
    generator_fn: callable with no arguments that creates the random tensors.
    function_id: a PreprocessorCache constant.
    preprocess_vars_cache: a PreprocessorCache or None (always draw anew).
    key: sub-key inside the augmentation.

  Returns:
    The random tensor(s).
  """
  if preprocess_vars_cache is None:
    return generator_fn()
  value = preprocess_vars_cache.get(function_id, key)
  if value is None:
    value = generator_fn()
    preprocess_vars_cache.update(function_id, key, value)
  return value


def random_uniform(shape=(), minval=0.0, maxval=1.0, dtype=tf.float32, seed=None):
  """tf.random.uniform with graph-mode (op-level + graph-level) seeding.

  Args:
    shape: output shape (list or tensor).
    minval: lower bound (inclusive).
    maxval: upper bound (exclusive).
    dtype: float or int dtype.
    seed: op-level seed or None; with the graph seed set, runs reproduce.

  Returns:
    A random tensor.
  """
  return tf.random.uniform(shape, minval=minval, maxval=maxval, dtype=dtype,
                           seed=seed)


def random_integer(minval, maxval, seed=None):
  """A scalar int32 drawn uniformly from [minval, maxval)."""
  return tf.random.uniform([], minval=minval, maxval=maxval, dtype=tf.int32,
                           seed=seed)
