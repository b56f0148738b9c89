"""Multi-scale feature extractors for the SSD meta-architecture.

An SSD feature extractor turns a preprocessed image batch into a list of
feature maps of decreasing resolution; the box predictor puts anchors on each.
Here the first three maps are the backbone's stride-8, 16 and 32 layers (see
models/backbones.py) and further maps come from extra layers (a 1x1
convolution halving the depth, then a stride-2 3x3 convolution), one per
additional layer asked for:

    128x128 input, num_layers=5 -> 16x16, 8x8, 4x4, 2x2, 1x1 feature maps

Variables live under `FeatureExtractor/<backbone scope>/...` (the backbone,
named as in a classification checkpoint of that backbone) and
`FeatureExtractor/ExtraLayers/...`. These are slimtrain's own small
extractors (types 'small_mobilenet_v1', 'small_resnet'), cheap enough for the
CPU demo; the zoo's extractors live in models/ssd_*_feature_extractors.py.

Usage:

    extractor = ssd_feature_extractors.SmallMobilenetV1FeatureExtractor(
        is_training=True, depth_multiplier=0.5, min_depth=8, pad_to_multiple=1,
        conv_hyperparams_fn=hyperparams_builder.build(hyperparams_config, True),
        num_layers=4)
    images = extractor.preprocess(resized_images)          # [0, 255] -> [-1, 1]
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(images)     # list of 4 tensors
"""

import tensorflow as tf
import tf_slim as slim

from models import backbones
from models import ssd_meta_arch

# Depths (before depth_multiplier) of the extra stride-2 layers.
_EXTRA_LAYER_DEPTHS = [256, 256, 128, 128, 64]


class SmallBackboneFeatureExtractor(ssd_meta_arch.SSDFeatureExtractor):
  """Base class: a small backbone trunk plus extra layers yielding `num_layers` maps.

  Every layer, the backbone's included, is built under `conv_hyperparams_fn()`
  (these backbones have no classification-checkpoint defaults of their own,
  so `override_base_feature_extractor_hyperparams` changes nothing).

  Raises:
    ValueError: on num_layers outside [1, 3 + number of extra layers] or a
      non-positive depth_multiplier.
  """

  backbone_name = None        # key of backbones.BASES

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    super().__init__(is_training, depth_multiplier, min_depth, pad_to_multiple,
                     conv_hyperparams_fn, reuse_weights=reuse_weights,
                     use_explicit_padding=use_explicit_padding, use_depthwise=use_depthwise,
                     num_layers=num_layers,
                     override_base_feature_extractor_hyperparams=(
                         override_base_feature_extractor_hyperparams))
    max_layers = len(backbones.FEATURE_END_POINTS[self.backbone_scope]) + len(
        _EXTRA_LAYER_DEPTHS)
    if not 1 <= num_layers <= max_layers:
      raise ValueError('%s supports 1 to %d feature maps, got num_layers=%d '
                       '(set anchor_generator.ssd_anchor_generator.num_layers)'
                       % (type(self).__name__, max_layers, num_layers))
    if depth_multiplier <= 0:
      raise ValueError('feature_extractor.depth_multiplier must be positive, got %s'
                       % depth_multiplier)

  @property
  def backbone_scope(self):
    """Variable scope of the backbone, as in its classification checkpoint."""
    return backbones.BASES[self.backbone_name][1]

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixel values to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def extract_features(self, preprocessed_inputs):
    """Returns the list of `num_layers` feature maps, finest first.

    Args:
      preprocessed_inputs: float [batch, height, width, 3] in [-1, 1] with a
        static height and width of at least 32.

    Raises:
      ValueError: if the input is not rank 4 or is smaller than 32x32.
    """
    shape = preprocessed_inputs.shape
    if shape.ndims != 4:
      raise ValueError('extract_features expects [batch, height, width, channels], got %s'
                       % shape)
    ssd_meta_arch.check_min_image_dim(32, preprocessed_inputs)
    images = ssd_meta_arch.pad_to_multiple(preprocessed_inputs, self._pad_to_multiple)
    base_fn = backbones.BASES[self.backbone_name][0]
    with slim.arg_scope(self._conv_hyperparams_fn()):
      _, end_points = base_fn(images, depth_multiplier=self._depth_multiplier,
                              min_depth=self._min_depth, scope=self.backbone_scope)
      names = backbones.FEATURE_END_POINTS[self.backbone_scope]
      feature_maps = [end_points[name] for name in names][:self._num_layers]
      net = feature_maps[-1]
      with tf.compat.v1.variable_scope('ExtraLayers'):
        for index in range(self._num_layers - len(feature_maps)):
          depth = backbones.scaled_depth(_EXTRA_LAYER_DEPTHS[index], self._depth_multiplier,
                                         self._min_depth)
          net = slim.conv2d(net, max(depth // 2, self._min_depth), [1, 1],
                            scope='Layer_%d_1x1' % index)
          net = slim.conv2d(net, depth, [3, 3], stride=2, scope='Layer_%d_3x3_s2' % index)
          feature_maps.append(net)
    return feature_maps


class SmallMobilenetV1FeatureExtractor(SmallBackboneFeatureExtractor):
  """SSD feature extractor over the depthwise-separable SmallMobilenetV1."""
  backbone_name = 'small_mobilenet_v1'


class SmallResnetFeatureExtractor(SmallBackboneFeatureExtractor):
  """SSD feature extractor over the residual SmallResnet."""
  backbone_name = 'small_resnet'
