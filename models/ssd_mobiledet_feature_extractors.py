"""SSD feature extractors over the MobileDet backbones (models/mobiledet.py).

The SSD takes six feature maps: the backbone's stride-16 and stride-32
stage outputs ('C4', 'C5') as they are, then four new maps of halving
resolution made by `feature_map_generators.multi_resolution_feature_maps`
(1x1 bottleneck, then a stride-2 3x3 convolution, depthwise with
use_depthwise as in the SSDLite configs) of nominal depths 512, 256, 256 and
128. A 320x320 image gives 20, 10, 5, 3, 2 and 1 pixel wide maps.

The backbone trains with its own batch norm settings (decay 0.99, epsilon
0.01, center and scale); `conv_hyperparams_fn` styles only the new layers.
Everything, new layers included, lives under one scope per variant, as in
the OD API's checkpoints:

    'ssd_mobiledet_cpu'      SSDMobileDetCPUFeatureExtractor      'MobileDetCPU'
    'ssd_mobiledet_dsp'      SSDMobileDetDSPFeatureExtractor      'MobileDetDSP'
    'ssd_mobiledet_edgetpu'  SSDMobileDetEdgeTPUFeatureExtractor  'MobileDetEdgeTPU'

Usage:

    extractor = SSDMobileDetCPUFeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=conv_hyperparams_fn, use_depthwise=True)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))

Like the OD API, `override_base_feature_extractor_hyperparams` changes
nothing (every backbone layer sets its own initializer, regularizer and
activation) and `use_explicit_padding` is not supported.

Differs on purpose:

* `num_layers` (2 to 6, default 6) drops trailing new maps; the OD API's
  MobileDet extractors always build six and reject the argument.
"""

import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators
from models import mobiledet
from models import ssd_meta_arch

# The backbone stage outputs the SSD uses, then the nominal depths of the
# new maps built on top of the last of them.
_BACKBONE_MAPS = ('C4', 'C5')
_NEW_MAP_DEPTHS = (512, 256, 256, 128)

# Smallest input for which every new map keeps at least one pixel.
_MIN_IMAGE_DIM = 33


class SSDMobileDetFeatureExtractorBase(ssd_meta_arch.SSDFeatureExtractor):
  """C4, C5 of a MobileDet backbone plus up to four stride-2 layers.

  Args:
    is_training, depth_multiplier, min_depth, pad_to_multiple,
    conv_hyperparams_fn, reuse_weights, use_explicit_padding, use_depthwise,
    num_layers, override_base_feature_extractor_hyperparams: as
      ssd_meta_arch.SSDFeatureExtractor.
    scope_name: variable scope of the backbone and the new layers (default
      the variant's `backbone_scope`).

  Raises:
    NotImplementedError: if use_explicit_padding.
    ValueError: if num_layers is not in [2, 6].
  """

  # mobiledet.BackboneSpec of the variant; set by subclasses.
  backbone_spec = None

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False, scope_name=None):
    if use_explicit_padding:
      raise NotImplementedError(
          'use_explicit_padding=True: MobileDet backbones only pad SAME')
    max_layers = len(_BACKBONE_MAPS) + len(_NEW_MAP_DEPTHS)
    if not len(_BACKBONE_MAPS) <= num_layers <= max_layers:
      raise ValueError('%s supports num_layers from %d to %d, got %r'
                       % (type(self).__name__, len(_BACKBONE_MAPS), max_layers,
                          num_layers))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier,
        min_depth=min_depth, pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn, reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding, use_depthwise=use_depthwise,
        num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    if scope_name is not None:
      # An instance attribute, so restore maps follow a renamed scope.
      self.backbone_scope = scope_name

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixels to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _feature_map_layout(self):
    num_new = self._num_layers - len(_BACKBONE_MAPS)
    return {
        'from_layer': list(_BACKBONE_MAPS) + [''] * num_new,
        # -1: a backbone map keeps the depth the backbone gives it.
        'layer_depth': [-1] * len(_BACKBONE_MAPS) + list(_NEW_MAP_DEPTHS[:num_new]),
        'use_depthwise': self._use_depthwise,
        'use_explicit_padding': self._use_explicit_padding,
    }

  def extract_features(self, preprocessed_inputs):
    """Returns `num_layers` feature maps [B, H_k, W_k, D_k], strides 16, 32, 64...

    Args:
      preprocessed_inputs: [B, H, W, 3] float tensor in [-1, 1], H and W at
        least 33.
    """
    inputs = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM, preprocessed_inputs)
    inputs = ssd_meta_arch.pad_to_multiple(inputs, self._pad_to_multiple)
    with tf.compat.v1.variable_scope(self.backbone_scope, reuse=self._reuse_weights):
      with slim.arg_scope([slim.batch_norm], is_training=self._is_training,
                          decay=0.99, epsilon=0.01, center=True, scale=True):
        endpoints = mobiledet.build_backbone(self.backbone_spec, inputs,
                                             multiplier=self._depth_multiplier)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            feature_map_layout=self._feature_map_layout(),
            depth_multiplier=self._depth_multiplier,
            min_depth=self._min_depth,
            insert_1x1_conv=True,
            image_features={name: endpoints[name] for name in _BACKBONE_MAPS})
    return list(feature_maps.values())


class SSDMobileDetCPUFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """'ssd_mobiledet_cpu': MobileDet searched for mobile CPUs (hard swish, SE)."""
  backbone_scope = 'MobileDetCPU'
  backbone_spec = mobiledet.CPU_SPEC


class SSDMobileDetDSPFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """'ssd_mobiledet_dsp': MobileDet searched for mobile DSPs (fused and Tucker blocks)."""
  backbone_scope = 'MobileDetDSP'
  backbone_spec = mobiledet.DSP_SPEC


class SSDMobileDetEdgeTPUFeatureExtractor(SSDMobileDetFeatureExtractorBase):
  """'ssd_mobiledet_edgetpu': MobileDet searched for the Edge TPU."""
  backbone_scope = 'MobileDetEdgeTPU'
  backbone_spec = mobiledet.EDGETPU_SPEC
