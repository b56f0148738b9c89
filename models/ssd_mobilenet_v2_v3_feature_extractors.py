"""SSD feature extractors over MobileNet v2, v3 and EdgeTPU (the OD API's TF1 zoo models).

Two recipes, each creating the variables of the OD API's extractor of the
same `type`, so the detection zoo's checkpoints restore:

  multi-resolution (SSD / SSDLite)   the backbone's stride-16 expansion
      output and its stride-32 output, then stride-2 layers of nominal
      depths 512, 256, 256, 128 (a 1x1 bottleneck before each; depthwise with
      use_depthwise, i.e. SSDLite). 320x320 input -> 20, 10, 5, 3, 2, 1.
  FPN (ssd_mobilenet_v2_fpn)        MobileNet v2's layer_4/7/14/19 (strides
      4..32) for levels 2..5 through a top-down pyramid of depth
      additional_layer_depth, then stride-2 convolutions up to fpn_max_level.
      With use_depthwise ("FPN-lite") layer_19 is 256 deep instead of 1280.

    type                       class                               backbone scope
    ssd_mobilenet_v2           SSDMobileNetV2FeatureExtractor      MobilenetV2
    ssd_mobilenet_v2_fpn       SSDMobileNetV2FpnFeatureExtractor   MobilenetV2
    ssd_mobilenet_v3_large     SSDMobileNetV3LargeFeatureExtractor MobilenetV3
    ssd_mobilenet_v3_small     SSDMobileNetV3SmallFeatureExtractor MobilenetV3
    ssd_mobilenet_edgetpu      SSDMobileNetEdgeTPUFeatureExtractor MobilenetEdgeTPU

Everything, extra layers included, lives under the backbone scope
(`FeatureExtractor/MobilenetV2/layer_19_2_Conv2d_2_3x3_s2_512`,
`FeatureExtractor/MobilenetV2/fpn/smoothing_1`), as in the zoo checkpoints.
The backbone is built under its own training arg_scope (batch-norm decay
0.9997, is_training from the extractor) unless
override_base_feature_extractor_hyperparams, when conv_hyperparams_fn's
scope replaces it; the extra layers always use conv_hyperparams_fn.

Usage:

    extractor = SSDMobileNetV2FeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=conv_hyperparams_fn, use_depthwise=True)   # SSDLite
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(extractor.preprocess(images))

Differs on purpose:
  * the v3 / EdgeTPU extractors accept num_layers (1..6; upstream always
    builds 6), and the FPN one accepts num_layers only when it equals
    fpn_max_level - fpn_min_level + 1.
  * batch norm of a non-overridden backbone follows the extractor's
    is_training (upstream took it from SSDMetaArch's arg_scope).
"""

import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators
from models import mobilenet_v2_v3
from models import ssd_meta_arch
from models.mobilenet_blocks import build_mobilenet

# The OD API's extra-layer depths for the 3rd..6th multi-resolution feature maps.
_EXTRA_LAYER_DEPTHS = [512, 256, 256, 128]
_MIN_IMAGE_DIM = 33
# Batch-norm decay of the backbones in the OD API's MobileNet extractors.
_BACKBONE_BN_DECAY = 0.9997
# MobileNet v2 end points that feed FPN levels 2, 3, 4 and 5 (strides 4..32).
_FPN_LEVEL_END_POINTS = {2: 'layer_4', 3: 'layer_7', 4: 'layer_14', 5: 'layer_19'}


def _preprocess(resized_inputs):
  """Maps [0, 255] pixels to [-1, 1], the range the MobileNet checkpoints saw."""
  return (2.0 / 255.0) * resized_inputs - 1.0


class _MobileNetSSDFeatureExtractorBase(ssd_meta_arch.SSDFeatureExtractor):
  """Shared backbone building of the MobileNet v2/v3 SSD extractors."""

  def preprocess(self, resized_inputs):
    return _preprocess(resized_inputs)

  def _backbone_arg_scope(self):
    """The arg_scope dict the backbone is built under (see the module docstring)."""
    if self._override_base_feature_extractor_hyperparams:
      return self._conv_hyperparams_fn()
    return mobilenet_v2_v3.training_scope(is_training=self._is_training,
                                          bn_decay=_BACKBONE_BN_DECAY)

  def _build_backbone(self, preprocessed_inputs, architecture, final_endpoint, scope):
    """Checks and pads the images, then builds `architecture` in `scope`; returns end points."""
    images = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM, preprocessed_inputs)
    images = ssd_meta_arch.pad_to_multiple(images, self._pad_to_multiple)
    with slim.arg_scope(self._backbone_arg_scope()):
      _, end_points = build_mobilenet(
          images, architecture, depth_multiplier=self._depth_multiplier,
          min_depth=self._min_depth, final_endpoint=final_endpoint,
          use_explicit_padding=self._use_explicit_padding, scope=scope)
    return end_points


class _MultiResolutionMobileNetFeatureExtractor(_MobileNetSSDFeatureExtractorBase):
  """Backbone end points + SSD's stride-2 extra layers (multi_resolution_feature_maps).

  Subclasses set `architecture` and `from_layers` (the stride-16 and stride-32
  end points).

  Raises:
    ValueError: if num_layers is outside 1..6.
  """

  architecture = None
  from_layers = None

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    max_layers = len(self.from_layers) + len(_EXTRA_LAYER_DEPTHS)
    if not 1 <= num_layers <= max_layers:
      raise ValueError('%s builds 1 to %d feature maps, got num_layers=%s'
                       % (type(self).__name__, max_layers, num_layers))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def _feature_map_layout(self):
    """The multi_resolution_feature_maps layout for num_layers maps."""
    from_layer = list(self.from_layers) + [''] * len(_EXTRA_LAYER_DEPTHS)
    layer_depth = [-1] * len(self.from_layers) + _EXTRA_LAYER_DEPTHS
    return {
        'from_layer': from_layer[:self._num_layers],
        'layer_depth': layer_depth[:self._num_layers],
        'use_depthwise': self._use_depthwise,
        'use_explicit_padding': self._use_explicit_padding,
    }

  def extract_features(self, preprocessed_inputs):
    """Returns num_layers feature maps [B, H_i, W_i, D_i], strides 16, 32, 64, ...

    Args:
      preprocessed_inputs: float [B, H, W, 3] in [-1, 1], H and W >= 33.

    Raises:
      ValueError: if a static H or W is below 33.
    """
    with tf.compat.v1.variable_scope(self.backbone_scope, reuse=self._reuse_weights) as scope:
      end_points = self._build_backbone(preprocessed_inputs, self.architecture,
                                        self.from_layers[-1], scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            feature_map_layout=self._feature_map_layout(),
            depth_multiplier=self._depth_multiplier, min_depth=self._min_depth,
            insert_1x1_conv=True, image_features=end_points)
    return list(feature_maps.values())


class SSDMobileNetV2FeatureExtractor(_MultiResolutionMobileNetFeatureExtractor):
  """type 'ssd_mobilenet_v2': SSD / SSDLite (use_depthwise) over MobileNet v2."""
  backbone_scope = 'MobilenetV2'
  architecture = mobilenet_v2_v3.MOBILENET_V2
  from_layers = ('layer_15/expansion_output', 'layer_19')


class _MobileNetV3FamilyFeatureExtractor(_MultiResolutionMobileNetFeatureExtractor):
  """v3 / EdgeTPU: as the OD API's, takes scope_name (the backbone's variable scope)."""

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, override_base_feature_extractor_hyperparams=False,
               scope_name=None, num_layers=6):
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    if scope_name:
      self.backbone_scope = scope_name


class SSDMobileNetV3LargeFeatureExtractor(_MobileNetV3FamilyFeatureExtractor):
  """type 'ssd_mobilenet_v3_large': over MobileNet v3 large, stride-32 layers halved."""
  backbone_scope = 'MobilenetV3'
  architecture = mobilenet_v2_v3.MOBILENET_V3_LARGE_DETECTION
  from_layers = ('layer_14/expansion_output', 'layer_17')


class SSDMobileNetV3SmallFeatureExtractor(_MobileNetV3FamilyFeatureExtractor):
  """type 'ssd_mobilenet_v3_small': over MobileNet v3 small, stride-32 layers halved."""
  backbone_scope = 'MobilenetV3'
  architecture = mobilenet_v2_v3.MOBILENET_V3_SMALL_DETECTION
  from_layers = ('layer_10/expansion_output', 'layer_13')


class SSDMobileNetEdgeTPUFeatureExtractor(_MobileNetV3FamilyFeatureExtractor):
  """type 'ssd_mobilenet_edgetpu': over MobileNet-EdgeTPU (no 1280-deep head conv)."""
  backbone_scope = 'MobilenetEdgeTPU'
  architecture = mobilenet_v2_v3.MOBILENET_EDGETPU
  from_layers = ('layer_18/expansion_output', 'layer_23')


class SSDMobileNetV2FpnFeatureExtractor(_MobileNetSSDFeatureExtractorBase):
  """type 'ssd_mobilenet_v2_fpn': FPN (FPN-lite with use_depthwise) over MobileNet v2.

  Args (besides the base class's):
    fpn_min_level: finest pyramid level (2..5 -> layer_4, 7, 14, 19).
    fpn_max_level: coarsest level; levels above 5 are stride-2 3x3
      convolutions 'fpn/bottom_up_Conv2d_20', '..._21', ...
    additional_layer_depth: nominal depth of every pyramid map.
    use_native_resize_op: upsample with a resize op, not tile/reshape.
    num_layers: optional; must equal fpn_max_level - fpn_min_level + 1.

  Raises:
    ValueError: on fpn levels outside those bounds or a mismatched num_layers.
  """

  backbone_scope = 'MobilenetV2'

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=7,
               additional_layer_depth=256, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False, num_layers=None):
    if fpn_min_level not in _FPN_LEVEL_END_POINTS:
      raise ValueError('fpn_min_level must be one of %s, got %s'
                       % (sorted(_FPN_LEVEL_END_POINTS), fpn_min_level))
    if fpn_max_level < fpn_min_level:
      raise ValueError('fpn_max_level (%s) must be at least fpn_min_level (%s)'
                       % (fpn_max_level, fpn_min_level))
    levels = fpn_max_level - fpn_min_level + 1
    if num_layers is not None and num_layers != levels:
      raise ValueError('num_layers=%s does not match the %d FPN levels %d..%d'
                       % (num_layers, levels, fpn_min_level, fpn_max_level))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=levels,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._use_native_resize_op = use_native_resize_op

  def extract_features(self, preprocessed_inputs):
    """Returns the pyramid's maps, levels fpn_min_level..fpn_max_level (finest first).

    Args:
      preprocessed_inputs: float [B, H, W, 3] in [-1, 1], H and W >= 33.
    """
    architecture = (mobilenet_v2_v3.MOBILENET_V2_FPN_LITE if self._use_depthwise
                    else mobilenet_v2_v3.MOBILENET_V2)
    with tf.compat.v1.variable_scope(self.backbone_scope, reuse=self._reuse_weights) as scope:
      end_points = self._build_backbone(preprocessed_inputs, architecture, 'layer_19', scope)
      with slim.arg_scope(self._conv_hyperparams_fn()), \
          tf.compat.v1.variable_scope('fpn', reuse=self._reuse_weights):
        return self._pyramid(end_points)

  def _pyramid(self, end_points):
    """Top-down FPN over the backbone levels, then stride-2 convs for the coarser ones."""
    depth = feature_map_generators.get_depth_fn(self._depth_multiplier, self._min_depth)(
        self._additional_layer_depth)
    top_backbone_level = min(self._fpn_max_level, max(_FPN_LEVEL_END_POINTS))
    names = [_FPN_LEVEL_END_POINTS[level]
             for level in range(self._fpn_min_level, top_backbone_level + 1)]
    top_down = feature_map_generators.fpn_top_down_feature_maps(
        [(name, end_points[name]) for name in names], depth=depth,
        use_depthwise=self._use_depthwise, use_explicit_padding=self._use_explicit_padding,
        use_native_resize_op=self._use_native_resize_op)
    feature_maps = [top_down['top_down_%s' % name] for name in names]
    # Named after layer_19, the last backbone layer: the first is bottom_up_Conv2d_20.
    feature_maps += feature_map_generators.coarser_fpn_levels(
        feature_maps[-1], self._fpn_max_level - top_backbone_level, depth,
        scope_fn=lambda index: 'bottom_up_Conv2d_%d' % (index + 20),
        use_depthwise=self._use_depthwise, use_explicit_padding=self._use_explicit_padding)
    return feature_maps
