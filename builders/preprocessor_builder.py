"""Builds augmentation steps from `PreprocessingStep` protos.

A train config lists `data_augmentation_options`, each a
`preprocessor_pb2.PreprocessingStep` with exactly one step set. `build`
turns one into the `(function, kwargs)` pair that
`core.preprocessor.preprocess` applies:

    from builders import preprocessor_builder
    from core import preprocessor

    options = [preprocessor_builder.build(step)
               for step in train_config.data_augmentation_options]
    tensor_dict = preprocessor.preprocess(tensor_dict, options)

Most steps map proto fields 1:1 to keyword arguments, and only the fields set
in the config are passed, so the function's own defaults (equal to the proto
defaults) apply otherwise. The rest are built by hand: pairs of fields become
tuples (`aspect_ratio_range`, `area_range`, `min_image_size`, ...), repeated
fields are checked for length, `ResizeImage.Method` becomes a
`tf.compat.v1.image.ResizeMethod`, and the SSD crops turn their `operations`
into per-operation lists (or `{}` to use the function defaults).
"""

import tensorflow as tf

from core import preprocessor
from protos import preprocessor_pb2


def _get_dict_from_proto(config):
  """Returns {field name: value} for the fields set in `config`.

  Repeated fields become lists, so kwargs hold plain Python values.
  """
  kwargs = {}
  for field, value in config.ListFields():
    repeated = getattr(field, 'is_repeated', None)  # protobuf >= 5.29
    if repeated is None:
      repeated = field.label == field.LABEL_REPEATED
    if repeated:
      value = list(value)
    kwargs[field.name] = value
  return kwargs


# Steps whose proto fields are exactly the function's keyword arguments.
PREPROCESSING_FUNCTION_MAP = {
    'normalize_image': preprocessor.normalize_image,
    'random_pixel_value_scale': preprocessor.random_pixel_value_scale,
    'random_image_scale': preprocessor.random_image_scale,
    'random_rgb_to_gray': preprocessor.random_rgb_to_gray,
    'random_adjust_brightness': preprocessor.random_adjust_brightness,
    'random_adjust_contrast': preprocessor.random_adjust_contrast,
    'random_adjust_hue': preprocessor.random_adjust_hue,
    'random_adjust_saturation': preprocessor.random_adjust_saturation,
    'random_distort_color': preprocessor.random_distort_color,
    'random_jitter_boxes': preprocessor.random_jitter_boxes,
    'random_crop_to_aspect_ratio': preprocessor.random_crop_to_aspect_ratio,
    'random_black_patches': preprocessor.random_black_patches,
    'rgb_to_gray': preprocessor.rgb_to_gray,
    'scale_boxes_to_pixel_coordinates': preprocessor.scale_boxes_to_pixel_coordinates,
    'subtract_channel_mean': preprocessor.subtract_channel_mean,
}

# ResizeImage.Method enum value -> resize method for resize_images.
RESIZE_METHOD_MAP = {
    preprocessor_pb2.ResizeImage.AREA: tf.compat.v1.image.ResizeMethod.AREA,
    preprocessor_pb2.ResizeImage.BICUBIC: tf.compat.v1.image.ResizeMethod.BICUBIC,
    preprocessor_pb2.ResizeImage.BILINEAR: tf.compat.v1.image.ResizeMethod.BILINEAR,
    preprocessor_pb2.ResizeImage.NEAREST_NEIGHBOR:
        tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
}


def _optional_pair(config, first, second, step):
  """(config.first, config.second) when both are set, None when neither is.

  Raises:
    ValueError: if only one of the two fields is set.
  """
  if config.HasField(first) != config.HasField(second):
    raise ValueError('%s.%s and %s.%s should be either both set or both unset.'
                     % (step, first, step, second))
  if config.HasField(first):
    return (getattr(config, first), getattr(config, second))
  return None


def _checked_repeated(values, length, name):
  """tuple(values), or None when empty; the length must match when set."""
  if not values:
    return None
  if len(values) != length:
    raise ValueError('%s should have %d elements if set, got %d: %s'
                     % (name, length, len(values), list(values)))
  return tuple(values)


def _padded_size_ratios(operations, name, default):
  """Per-operation (height, width) pairs; unset -> default."""
  pairs = []
  for i, op in enumerate(operations):
    values = getattr(op, name)
    pair = _checked_repeated(values, 2, 'operations[%d].%s' % (i, name))
    pairs.append(pair if pair is not None else default)
  return pairs


# The crop-window arguments of every crop step: keyword -> the message field
# holding it, or the (low, high) pair of fields holding a range.
_CROP_WINDOW_FIELDS = (
    ('min_object_covered', 'min_object_covered'),
    ('aspect_ratio_range', ('min_aspect_ratio', 'max_aspect_ratio')),
    ('area_range', ('min_area', 'max_area')),
    ('overlap_thresh', 'overlap_thresh'),
    ('random_coef', 'random_coef'),
)


def _crop_window(message, with_aspect_ratio=True):
  """The crop-window kwargs of one crop message (a step or one SSD operation)."""
  kwargs = {}
  for keyword, fields in _CROP_WINDOW_FIELDS:
    if keyword == 'aspect_ratio_range' and not with_aspect_ratio:
      continue  # the fixed-aspect-ratio steps take one ratio for all operations
    if isinstance(fields, tuple):
      kwargs[keyword] = tuple(getattr(message, field) for field in fields)
    else:
      kwargs[keyword] = getattr(message, fields)
  return kwargs


def _crop_operation_lists(operations, with_aspect_ratio=True):
  """The SSD crop steps' kwargs: each crop-window argument as a per-operation list."""
  windows = [_crop_window(op, with_aspect_ratio) for op in operations]
  return {keyword: [window[keyword] for window in windows] for keyword in windows[0]}


# Steps of the OD API's schema that parse but are not implemented here.
NOT_BUILT_STEPS = (
    'convert_class_logits_to_softmax', 'random_absolute_pad_image',
    'random_self_concat_image', 'autoaugment_image', 'drop_label_probabilistically',
    'remap_labels', 'random_jpeg_quality', 'random_downscale_to_target_pixels',
    'random_patch_gaussian', 'random_square_crop_by_scale')


def build(preprocessor_step_config):
  """Builds the augmentation function and its kwargs for one step.

  Args:
    preprocessor_step_config: a preprocessor_pb2.PreprocessingStep.

  Returns:
    (function, kwargs dict) for core.preprocessor.preprocess.

  Raises:
    ValueError: for a message of another type, an unknown or unset step, or
      a malformed field.
  """
  if not isinstance(preprocessor_step_config, preprocessor_pb2.PreprocessingStep):
    raise ValueError('preprocessor_step_config not of type preprocessor_pb2.PreprocessingStep.')
  step_type = preprocessor_step_config.WhichOneof('preprocessing_step')

  if step_type in PREPROCESSING_FUNCTION_MAP:
    config = getattr(preprocessor_step_config, step_type)
    return PREPROCESSING_FUNCTION_MAP[step_type], _get_dict_from_proto(config)

  if step_type in ('random_horizontal_flip', 'random_vertical_flip'):
    config = getattr(preprocessor_step_config, step_type)
    return (getattr(preprocessor, step_type),
            {'keypoint_flip_permutation': tuple(config.keypoint_flip_permutation)})

  if step_type == 'random_rotation90':
    return preprocessor.random_rotation90, {}

  if step_type == 'random_crop_image':
    return (preprocessor.random_crop_image,
            _crop_window(preprocessor_step_config.random_crop_image))

  if step_type == 'random_pad_image':
    config = preprocessor_step_config.random_pad_image
    step = 'random_pad_image'
    pad_color = _checked_repeated(config.pad_color, 3, 'random_pad_image.pad_color')
    return preprocessor.random_pad_image, {
        'min_image_size': _optional_pair(config, 'min_image_height',
                                         'min_image_width', step),
        'max_image_size': _optional_pair(config, 'max_image_height',
                                         'max_image_width', step),
        'pad_color': pad_color,
    }

  if step_type == 'random_crop_pad_image':
    config = preprocessor_step_config.random_crop_pad_image
    kwargs = _crop_window(config)
    for name, length in (('min_padded_size_ratio', 2), ('max_padded_size_ratio', 2),
                         ('pad_color', 3)):
      value = _checked_repeated(getattr(config, name), length,
                                'random_crop_pad_image.%s' % name)
      if value is not None:
        kwargs[name] = value
    return preprocessor.random_crop_pad_image, kwargs

  if step_type == 'random_resize_method':
    config = preprocessor_step_config.random_resize_method
    return preprocessor.random_resize_method, {
        'target_size': [config.target_height, config.target_width],
    }

  if step_type == 'resize_image':
    config = preprocessor_step_config.resize_image
    return preprocessor.resize_image, {
        'new_height': config.new_height,
        'new_width': config.new_width,
        'method': RESIZE_METHOD_MAP[config.method],
    }

  if step_type == 'ssd_random_crop':
    config = preprocessor_step_config.ssd_random_crop
    if config.operations:
      return preprocessor.ssd_random_crop, _crop_operation_lists(config.operations)
    return preprocessor.ssd_random_crop, {}

  if step_type == 'ssd_random_crop_pad':
    config = preprocessor_step_config.ssd_random_crop_pad
    if config.operations:
      kwargs = _crop_operation_lists(config.operations)
      kwargs['min_padded_size_ratio'] = _padded_size_ratios(
          config.operations, 'min_padded_size_ratio', (1.0, 1.0))
      kwargs['max_padded_size_ratio'] = _padded_size_ratios(
          config.operations, 'max_padded_size_ratio', (2.0, 2.0))
      kwargs['pad_color'] = [(op.pad_color_r, op.pad_color_g, op.pad_color_b)
                             for op in config.operations]
      return preprocessor.ssd_random_crop_pad, kwargs
    return preprocessor.ssd_random_crop_pad, {}

  if step_type == 'ssd_random_crop_fixed_aspect_ratio':
    config = preprocessor_step_config.ssd_random_crop_fixed_aspect_ratio
    if config.operations:
      kwargs = _crop_operation_lists(config.operations, with_aspect_ratio=False)
      kwargs['aspect_ratio'] = config.aspect_ratio
      return preprocessor.ssd_random_crop_fixed_aspect_ratio, kwargs
    return preprocessor.ssd_random_crop_fixed_aspect_ratio, {}

  if step_type == 'ssd_random_crop_pad_fixed_aspect_ratio':
    config = preprocessor_step_config.ssd_random_crop_pad_fixed_aspect_ratio
    kwargs = {}
    if config.aspect_ratio:
      kwargs['aspect_ratio'] = config.aspect_ratio
    if config.operations:
      kwargs.update(_crop_operation_lists(config.operations))
    # One (height, width) padding range for every operation, as in the OD API.
    for name in ('min_padded_size_ratio', 'max_padded_size_ratio'):
      pair = _checked_repeated(getattr(config, name), 2,
                               'ssd_random_crop_pad_fixed_aspect_ratio.%s' % name)
      if pair is not None:
        kwargs[name] = pair
    return preprocessor.ssd_random_crop_pad_fixed_aspect_ratio, kwargs

  if step_type in NOT_BUILT_STEPS:
    raise ValueError('train_config.data_augmentation_options.%s is set, but slimtrain does '
                     'not build it (a step of later OD API versions)' % step_type)
  raise ValueError('Unknown preprocessing step.')
