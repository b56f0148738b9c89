"""SSD feature extractors on MobileNet v1: the detection zoo's TF1 variants.

Each extractor runs MobileNet v1 (models/mobilenet_v1.py) up to
Conv2d_13_pointwise inside the variable scope 'MobilenetV1' and adds its own
layers in the same scope, so under SSDMetaArch's 'FeatureExtractor' scope the
variables are exactly those of the zoo checkpoints
(`FeatureExtractor/MobilenetV1/...`):

  type (feature_extractor.type)  class                                   maps from
  'ssd_mobilenet_v1'             SSDMobileNetV1FeatureExtractor          Conv2d_11 and 13
      pointwise, then stride-2 layers of depth 512, 256, 256, 128 (each
      after a 1x1 bottleneck); use_depthwise gives SSDLite's depthwise
      layers; depth_multiplier 0.75 the "0.75_depth" models.
  'embedded_ssd_mobilenet_v1'    EmbeddedSSDMobileNetV1FeatureExtractor  5 maps for a
      256x256 input, the last from a 2x2 kernel so no kernel exceeds its map.
  'ssd_mobilenet_v1_fpn'         SSDMobileNetV1FpnFeatureExtractor       an FPN over
      Conv2d_3/5/11/13 pointwise (levels 2..5) plus stride-2 convolutions up
      to fpn_max_level.
  'ssd_mobilenet_v1_ppn'         SSDMobileNetV1PpnFeatureExtractor       Conv2d_11
      pointwise then 5 max-pooled copies (a pooling pyramid, no new variables).

The base network takes MobileNet's own training arg_scope (weight decay
4e-5, truncated-normal 0.09, batch norm decay 0.9997 with this extractor's
is_training) unless override_base_feature_extractor_hyperparams, when the
config's conv_hyperparams apply to it too; the added layers always take
conv_hyperparams_fn(). Images are scaled from [0, 255] to [-1, 1].

Usage:

    extractor = SSDMobileNetV1FeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=1,
        conv_hyperparams_fn=conv_hyperparams_fn)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    # 300x300 -> 19x19x512, 10x10x1024, 5x5x512, 3x3x256, 2x2x256, 1x1x128

Differs on purpose:
  * EmbeddedSSDMobileNetV1FeatureExtractor honours
    override_base_feature_extractor_hyperparams (upstream passes it where
    num_layers belongs, so it is silently ignored there).
  * SSDMobileNetV1FpnFeatureExtractor.num_layers is its number of maps,
    fpn_max_level - fpn_min_level + 1 (upstream leaves the default 6).
"""

import contextlib

import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators
from models import mobilenet_v1
from models import ssd_meta_arch

# MobileNet v1 has five stride-2 layers; smaller images leave an empty map.
_MIN_IMAGE_DIM = 33
# End points of MobileNet v1 at strides 4, 8, 16, 32: FPN levels 2..5.
_FPN_LEVEL_END_POINTS = {2: 'Conv2d_3_pointwise', 3: 'Conv2d_5_pointwise',
                         4: 'Conv2d_11_pointwise', 5: 'Conv2d_13_pointwise'}


class _MobileNetV1Extractor(ssd_meta_arch.SSDFeatureExtractor):
  """Shared part: preprocessing and the MobileNet v1 trunk in scope 'MobilenetV1'."""

  backbone_scope = 'MobilenetV1'
  # Whether the base network's own arg_scope decays the depthwise weights.
  _regularize_depthwise = True

  def preprocess(self, resized_inputs):
    """[0, 255] -> [-1, 1], the range MobileNet v1 was trained on."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _mobilenet_end_points(self, preprocessed_inputs, scope, conv_defs=None):
    """Runs MobileNet v1 to Conv2d_13_pointwise in `scope`; returns its end points."""
    base_scope = mobilenet_v1.mobilenet_v1_arg_scope(
        is_training=self._is_training, regularize_depthwise=self._regularize_depthwise)
    with slim.arg_scope(base_scope):
      # Called inside MobileNet's scope, conv_hyperparams_fn() stacks on it:
      # what it leaves unset (e.g. the batch-norm update collection) stays.
      override = (slim.arg_scope(self._conv_hyperparams_fn())
                  if self._override_base_feature_extractor_hyperparams
                  else contextlib.nullcontext())
      with override:
        _, end_points = mobilenet_v1.mobilenet_v1_base(
            ssd_meta_arch.pad_to_multiple(preprocessed_inputs, self._pad_to_multiple),
            final_endpoint='Conv2d_13_pointwise', min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier, conv_defs=conv_defs,
            use_explicit_padding=self._use_explicit_padding, scope=scope)
    return end_points

  @contextlib.contextmanager
  def _backbone_variable_scope(self):
    with tf.compat.v1.variable_scope(self.backbone_scope, reuse=self._reuse_weights) as scope:
      yield scope


class SSDMobileNetV1FeatureExtractor(_MobileNetV1Extractor):
  """'ssd_mobilenet_v1' (and SSDLite with use_depthwise): up to 6 maps.

  Maps: Conv2d_11_pointwise (stride 16), Conv2d_13_pointwise (stride 32),
  then stride-2 layers of nominal depth 512, 256, 256, 128, the first
  num_layers of them. Constructor arguments as SSDFeatureExtractor's.
  """

  _LAYER_DEPTHS = [-1, -1, 512, 256, 256, 128]

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    if not 1 <= num_layers <= len(self._LAYER_DEPTHS):
      raise ValueError('ssd_mobilenet_v1 builds 1 to %d feature maps, got num_layers=%s'
                       % (len(self._LAYER_DEPTHS), num_layers))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=num_layers,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def extract_features(self, preprocessed_inputs):
    """[B, H, W, 3] in [-1, 1] (H, W >= 33) -> list of num_layers maps, finest first."""
    preprocessed_inputs = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM,
                                                            preprocessed_inputs)
    layout = {
        'from_layer': ['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', '', '',
                       ''][:self._num_layers],
        'layer_depth': self._LAYER_DEPTHS[:self._num_layers],
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    with self._backbone_variable_scope() as scope:
      end_points = self._mobilenet_end_points(preprocessed_inputs, scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            layout, depth_multiplier=self._depth_multiplier, min_depth=self._min_depth,
            insert_1x1_conv=True, image_features=end_points)
    return list(feature_maps.values())


class EmbeddedSSDMobileNetV1FeatureExtractor(_MobileNetV1Extractor):
  """'embedded_ssd_mobilenet_v1': 5 maps for exactly 256x256 inputs.

  Maps 16x16, 8x8, 4x4, 2x2, 1x1: Conv2d_11 and 13 pointwise, then stride-2
  layers of nominal depth 512, 256, 256 with kernels 3, 3, 2 (every kernel
  fits in its input, which embedded runtimes require). The number of maps
  is fixed (the anchor generator's num_layers must be 5).

  Raises:
    ValueError: if pad_to_multiple is not 1.
  """

  _regularize_depthwise = False

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, override_base_feature_extractor_hyperparams=False):
    if pad_to_multiple != 1:
      raise ValueError('embedded_ssd_mobilenet_v1 needs feature_extractor.pad_to_multiple '
                       '1, got %s' % pad_to_multiple)
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=5,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))

  def extract_features(self, preprocessed_inputs):
    """[B, 256, 256, 3] in [-1, 1] -> 5 maps, finest first.

    Raises:
      ValueError: if the static height or width is not 256 (a dynamic size
        is checked when the graph runs).
    """
    preprocessed_inputs = _require_size(preprocessed_inputs, 256)
    layout = {
        'from_layer': ['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', '', ''],
        'layer_depth': [-1, -1, 512, 256, 256],
        'conv_kernel_size': [-1, -1, 3, 3, 2],
        'use_explicit_padding': self._use_explicit_padding,
        'use_depthwise': self._use_depthwise,
    }
    with self._backbone_variable_scope() as scope:
      end_points = self._mobilenet_end_points(preprocessed_inputs, scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        feature_maps = feature_map_generators.multi_resolution_feature_maps(
            layout, depth_multiplier=self._depth_multiplier, min_depth=self._min_depth,
            insert_1x1_conv=True, image_features=end_points)
    return list(feature_maps.values())


def _require_size(images, size):
  """Returns `images` [B, H, W, C], checking H == W == size (statically if known)."""
  images.shape.assert_has_rank(4)
  height, width = images.shape.as_list()[1:3]
  if height is None or width is None:
    check = tf.debugging.Assert(
        tf.reduce_all(tf.equal(tf.shape(images)[1:3], size)),
        ['image height and width must both be %d' % size])
    with tf.control_dependencies([check]):
      return tf.identity(images)
  if height != size or width != size:
    raise ValueError('embedded_ssd_mobilenet_v1 needs %dx%d images (image_resizer), got '
                     '%dx%d' % (size, size, height, width))
  return images


class SSDMobileNetV1FpnFeatureExtractor(_MobileNetV1Extractor):
  """'ssd_mobilenet_v1_fpn': FPN maps of levels fpn_min_level..fpn_max_level.

  Level l has stride 2**l. Levels up to 5 come from the FPN top-down pathway
  over MobileNet's end points (variables `fpn/projection_i`,
  `fpn/smoothing_i`); levels above 5 from stride-2 3x3 convolutions of the
  previous map (`fpn/bottom_up_Conv2d_14`, `_15`, ...). All maps have depth
  additional_layer_depth (times depth_multiplier, at least min_depth). With
  use_depthwise the last two MobileNet blocks shrink to 512 and 256
  channels and the new layers are depthwise-separable.

  Args (beyond SSDFeatureExtractor's; there is no num_layers: it is
  fpn_max_level - fpn_min_level + 1):
    fpn_min_level: finest level, 2..5.
    fpn_max_level: coarsest level, >= fpn_min_level.
    additional_layer_depth: nominal depth of every FPN map.
    use_native_resize_op: upsample with a resize op instead of tile/reshape.

  Raises:
    ValueError: on levels outside those bounds.
  """

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=7,
               additional_layer_depth=256, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    if fpn_min_level not in _FPN_LEVEL_END_POINTS:
      raise ValueError('feature_extractor.fpn.min_level must be 2..5 for '
                       'ssd_mobilenet_v1_fpn, got %s' % fpn_min_level)
    if fpn_max_level < fpn_min_level:
      raise ValueError('feature_extractor.fpn.max_level (%s) must be >= min_level (%s)'
                       % (fpn_max_level, fpn_min_level))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=fpn_max_level - fpn_min_level + 1,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._use_native_resize_op = use_native_resize_op

  def _conv_defs(self):
    """MobileNet's layers, with narrower last blocks when depthwise (detection-friendly)."""
    if not self._use_depthwise:
      return None
    return mobilenet_v1.MOBILENETV1_CONV_DEFS[:-2] + [
        mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=2, depth=512),
        mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1, depth=256)]

  def extract_features(self, preprocessed_inputs):
    """[B, H, W, 3] in [-1, 1] (H, W >= 33) -> one map per FPN level, finest first."""
    preprocessed_inputs = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM,
                                                            preprocessed_inputs)
    depth = feature_map_generators.get_depth_fn(self._depth_multiplier, self._min_depth)(
        self._additional_layer_depth)
    top_level = min(self._fpn_max_level, 5)
    levels = list(range(self._fpn_min_level, top_level + 1))
    with self._backbone_variable_scope() as scope:
      end_points = self._mobilenet_end_points(preprocessed_inputs, scope, self._conv_defs())
      with slim.arg_scope(self._conv_hyperparams_fn()):
        with tf.compat.v1.variable_scope('fpn', reuse=self._reuse_weights):
          pyramid = feature_map_generators.fpn_top_down_feature_maps(
              [(_FPN_LEVEL_END_POINTS[level], end_points[_FPN_LEVEL_END_POINTS[level]])
               for level in levels],
              depth=depth, use_depthwise=self._use_depthwise,
              use_explicit_padding=self._use_explicit_padding,
              use_native_resize_op=self._use_native_resize_op)
          feature_maps = list(pyramid.values())
          feature_maps += self._coarser_levels(feature_maps[-1], top_level, depth)
    return feature_maps

  def _coarser_levels(self, net, top_level, depth):
    """Maps of levels top_level+1..fpn_max_level, each a stride-2 3x3 conv of the last."""
    # Named after MobileNet's layer count: level 6 is the "14th" layer.
    return feature_map_generators.coarser_fpn_levels(
        net, self._fpn_max_level - top_level, depth,
        scope_fn=lambda index: 'bottom_up_Conv2d_%d' % (index + 14),
        use_depthwise=self._use_depthwise, use_explicit_padding=self._use_explicit_padding)


class SSDMobileNetV1PpnFeatureExtractor(_MobileNetV1Extractor):
  """'ssd_mobilenet_v1_ppn': Conv2d_11_pointwise and 5 max-pooled copies (6 maps).

  The pooling pyramid adds no variables; the box predictor (weight-shared)
  sees the same features at every scale. The number of maps is always 6,
  whatever num_layers says (as in the OD API). Constructor arguments as
  SSDFeatureExtractor's.
  """

  def extract_features(self, preprocessed_inputs):
    """[B, H, W, 3] in [-1, 1] (H, W >= 33) -> 6 maps of stride 16..512, finest first."""
    preprocessed_inputs = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM,
                                                            preprocessed_inputs)
    with self._backbone_variable_scope() as scope:
      end_points = self._mobilenet_end_points(preprocessed_inputs, scope)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        feature_maps = feature_map_generators.pooling_pyramid_feature_maps(
            base_feature_map_depth=0, num_layers=6,
            image_features={'image_features': end_points['Conv2d_11_pointwise']})
    return list(feature_maps.values())

