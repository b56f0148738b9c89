"""Builds the batch image resizer of an `ImageResizer` proto.

The result is fn(images [B, H, W, C] float) -> (resized [B, h, w, C],
true_image_shapes int32 [B, 3]), what a meta-architecture's `preprocess`
calls; `true_image_shapes` is the content's size before any padding.

    fixed_shape_resizer        -> every image to height x width
    keep_aspect_ratio_resizer  -> shorter side to min_dimension, longer side at
                                  most max_dimension; with pad_to_max_dimension
                                  padded to max_dimension x max_dimension
    identity_resizer           -> unchanged

conditional_shape_resizer, pad_to_multiple_resizer and convert_to_grayscale
parse and are refused by name.

    resize = image_resizer_builder.build(ssd_config.image_resizer)
    resized, true_image_shapes = resize(images)

Differs on purpose from the OD API: the function takes and returns batches
(the OD API's resizes one image).
"""

import tensorflow as tf

from builders import config_checks
from core import preprocessor_resize
from models import ssd_meta_arch
from protos import image_resizer_pb2

_METHODS = {
    image_resizer_pb2.BILINEAR: tf.image.ResizeMethod.BILINEAR,
    image_resizer_pb2.NEAREST_NEIGHBOR: tf.image.ResizeMethod.NEAREST_NEIGHBOR,
    image_resizer_pb2.BICUBIC: tf.image.ResizeMethod.BICUBIC,
    image_resizer_pb2.AREA: tf.image.ResizeMethod.AREA,
}
_V1_METHODS = {
    image_resizer_pb2.BILINEAR: tf.compat.v1.image.ResizeMethod.BILINEAR,
    image_resizer_pb2.NEAREST_NEIGHBOR: tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
    image_resizer_pb2.BICUBIC: tf.compat.v1.image.ResizeMethod.BICUBIC,
    image_resizer_pb2.AREA: tf.compat.v1.image.ResizeMethod.AREA,
}


def build(image_resizer_config, path='model.ssd.image_resizer'):
  """Returns fn(images) -> (resized, true_image_shapes).

  Raises:
    ValueError: on a config of another type, no resizer set, an unsupported
      resizer or option, or bad sizes (named).
  """
  if not isinstance(image_resizer_config, image_resizer_pb2.ImageResizer):
    raise ValueError('image_resizer_config not of type image_resizer_pb2.ImageResizer.')
  kind = config_checks.oneof_choice(
      image_resizer_config, 'image_resizer_oneof', path,
      ('fixed_shape_resizer', 'keep_aspect_ratio_resizer', 'identity_resizer'))
  if kind is None:
    raise ValueError('%s: set one of fixed_shape_resizer, keep_aspect_ratio_resizer or '
                     'identity_resizer' % path)
  config = getattr(image_resizer_config, kind)
  path = '%s.%s' % (path, kind)
  config_checks.refuse_unsupported(
      config, path, supported=('height', 'width', 'resize_method', 'min_dimension',
                               'max_dimension', 'pad_to_max_dimension',
                               'per_channel_pad_value'),
      why={'convert_to_grayscale': 'grayscale conversion is not implemented'})
  if kind == 'fixed_shape_resizer':
    return ssd_meta_arch.fixed_shape_resizer(config.height, config.width,
                                             method=_METHODS[config.resize_method])
  if kind == 'keep_aspect_ratio_resizer':
    return _keep_aspect_ratio_resizer(config, path)
  return _identity_resizer


def _identity_resizer(images):
  shape = tf.shape(images)
  return images, tf.tile(shape[None, 1:4], [shape[0], 1])


def _keep_aspect_ratio_resizer(config, path):
  if not 0 < config.min_dimension <= config.max_dimension:
    raise ValueError('%s needs 0 < min_dimension <= max_dimension, got %d and %d'
                     % (path, config.min_dimension, config.max_dimension))
  pad_value = tuple(config.per_channel_pad_value) or (0.0, 0.0, 0.0)

  def resize_one(image):
    resized, shape = preprocessor_resize.resize_to_range(
        image, min_dimension=config.min_dimension, max_dimension=config.max_dimension,
        method=_V1_METHODS[config.resize_method],
        pad_to_max_dimension=config.pad_to_max_dimension,
        per_channel_pad_value=pad_value)
    return resized, shape

  def resize(images):
    resized, shapes = tf.map_fn(resize_one, images,
                                fn_output_signature=(tf.float32, tf.int32))
    if config.pad_to_max_dimension:
      resized.set_shape([None, config.max_dimension, config.max_dimension,
                         images.shape[3]])
    return resized, shapes

  return resize
