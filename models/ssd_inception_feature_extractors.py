"""SSD feature extractors over Inception v2 and v3 (tf_slim.nets.inception).

The detector looks at a few of the backbone's own mixed blocks, finest first,
and then at new maps made by halving the resolution again and again: each new
map is a 1x1 convolution to half the nominal depth followed by a stride-2 3x3
convolution (models/feature_map_generators.multi_resolution_feature_maps).

    type               end points taken            new maps (nominal depth)
    ssd_inception_v2   Mixed_4c, Mixed_5c          512, 256, 256, 128
    ssd_inception_v3   Mixed_5d, Mixed_6e, Mixed_7c 512, 256, 128

A 300x300 image gives 19, 10, 5, 3, 2, 1 cells per side with Inception v2.
The new layers live inside the backbone's scope, named after the last end
point they grow from, e.g.
`FeatureExtractor/InceptionV2/Mixed_5c_2_Conv2d_2_3x3_s2_512/weights`; the
backbone's own variables are named as in its classification checkpoint
(`InceptionV2/Mixed_4c/Branch_0/Conv2d_0a_1x1/weights`), so that checkpoint
restores once `FeatureExtractor/` is stripped.

These backbones have no arg_scope the detector could reuse (the classification
scope has no batch-norm gamma, which the zoo checkpoints have), so the whole
network, backbone included, is built with `conv_hyperparams_fn()`; configs
must set `override_base_feature_extractor_hyperparams: true`.

Usage:

    extractor = ssd_inception_feature_extractors.SSDInceptionV2FeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=conv_hyperparams_fn,
        override_base_feature_extractor_hyperparams=True)
    images = extractor.preprocess(resized_images)       # [0, 255] -> [-1, 1]
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(images)  # 6 tensors
"""

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception

from models import feature_map_generators
from models import ssd_meta_arch

# Inception's first layers need at least this many pixels per side.
_MIN_IMAGE_DIM = 33


class _SSDInceptionFeatureExtractor(ssd_meta_arch.SSDFeatureExtractor):
  """Shared body of the Inception extractors; subclasses name the backbone.

  Subclasses set `backbone_scope`, `_base_network` (an `inception_v*_base`
  function), `_final_endpoint`, and `_layout_from_layer` / `_layout_depths`
  (six entries each: an end-point name or '' for a new layer, and the new
  layer's nominal depth or -1). `num_layers` keeps the first that many.

  Raises:
    ValueError: if override_base_feature_extractor_hyperparams is False, or
      num_layers is outside [1, 6].
  """

  _base_network = None
  _final_endpoint = None
  _layout_from_layer = ()
  _layout_depths = ()

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    if not override_base_feature_extractor_hyperparams:
      raise ValueError(
          '%s builds its %s backbone with conv_hyperparams (there is no other arg_scope '
          'for it); set feature_extractor.override_base_feature_extractor_hyperparams '
          'to true' % (type(self).__name__, self.backbone_scope))
    max_layers = len(self._layout_from_layer)
    if not 1 <= num_layers <= max_layers:
      raise ValueError('%s makes 1 to %d feature maps, got num_layers=%d'
                       % (type(self).__name__, max_layers, num_layers))

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixel values to [-1, 1], the range Inception was trained on.

    Args:
      resized_inputs: float [batch, height, width, channels] in [0, 255].

    Returns:
      A tensor of the same shape in [-1, 1].
    """
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _feature_map_layout(self):
    """The multi_resolution_feature_maps layout, cut to num_layers entries."""
    return {
        'from_layer': list(self._layout_from_layer[:self._num_layers]),
        'layer_depth': list(self._layout_depths[:self._num_layers]),
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }

  def extract_features(self, preprocessed_inputs):
    """Returns the `num_layers` feature maps, finest first.

    Args:
      preprocessed_inputs: float [batch, height, width, 3] from `preprocess`,
        at least 33x33.

    Returns:
      A list of [batch, height_i, width_i, depth_i] tensors.

    Raises:
      ValueError: if the static height or width is below 33.
    """
    images = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM, preprocessed_inputs)
    images = ssd_meta_arch.pad_to_multiple(images, self._pad_to_multiple)
    with slim.arg_scope(self._conv_hyperparams_fn()):
      with tf.compat.v1.variable_scope(self.backbone_scope,
                                       reuse=self._reuse_weights) as scope:
        _, end_points = self._base_network(
            images, final_endpoint=self._final_endpoint, min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier, scope=scope)
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            feature_map_layout=self._feature_map_layout(),
            depth_multiplier=self._depth_multiplier, min_depth=self._min_depth,
            insert_1x1_conv=True, image_features=end_points)
    return list(feature_maps.values())


class SSDInceptionV2FeatureExtractor(_SSDInceptionFeatureExtractor):
  """SSD over Inception v2 (BN-Inception); serves type 'ssd_inception_v2'."""

  backbone_scope = 'InceptionV2'
  _base_network = staticmethod(inception.inception_v2_base)
  _final_endpoint = 'Mixed_5c'
  _layout_from_layer = ('Mixed_4c', 'Mixed_5c', '', '', '', '')
  _layout_depths = (-1, -1, 512, 256, 256, 128)


class SSDInceptionV3FeatureExtractor(_SSDInceptionFeatureExtractor):
  """SSD over Inception v3; serves type 'ssd_inception_v3'."""

  backbone_scope = 'InceptionV3'
  _base_network = staticmethod(inception.inception_v3_base)
  _final_endpoint = 'Mixed_7c'
  _layout_from_layer = ('Mixed_5d', 'Mixed_6e', 'Mixed_7c', '', '', '')
  _layout_depths = (-1, -1, -1, 512, 256, 128)
