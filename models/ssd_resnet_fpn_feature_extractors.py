"""SSD feature extractors over ResNet v1 with a Feature Pyramid Network (RetinaNet style).

ResNet v1's four blocks end at strides 4, 8, 16 and 32; pyramid level L is
stride 2**L, so blocks 1..4 are levels 2..5. The FPN top-down pathway
(models/feature_map_generators.fpn_top_down_feature_maps) projects the blocks
of levels `fpn_min_level`..min(fpn_max_level, 5) to `additional_layer_depth`
channels and adds each coarser map, upsampled, to the next finer one. Levels
above 5 come from stride-2 3x3 convolutions on the coarsest pyramid map:

    640x640 image, levels 3..7 -> 80, 40, 20, 10, 5 cells per side, 256 deep

Variables, e.g. for ResNet-50:

    FeatureExtractor/resnet_v1_50/conv1/...            backbone, named as in
    FeatureExtractor/resnet_v1_50/block3/unit_6/...    the classification ckpt
    FeatureExtractor/resnet_v1_50/fpn/projection_1/... 1x1 lateral projections
    FeatureExtractor/resnet_v1_50/fpn/smoothing_1/...  3x3 after each merge
    FeatureExtractor/resnet_v1_50/fpn/bottom_up_block5/...  level 6 (and up)

The backbone is built from tf_slim.nets.resnet_v1's own pieces (its
`bottleneck` unit and `resnet_v1_block` recipe, resnet_utils' root
convolution and `subsample`), stacked here: tf-slim 1.1.0's `resnet_v1`
predates the option to read a block's output *before* its final stride-2
unit (`store_non_strided_activations`), which is the map the pyramid needs.
Like that option, every block's last unit runs at stride 1 and the block's
output is subsampled afterwards; the variables are the same either way.

Usage:

    extractor = ssd_resnet_fpn_feature_extractors.SSDResnet50V1FpnFeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=32,
        conv_hyperparams_fn=conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=7,
        override_base_feature_extractor_hyperparams=True)
    images = extractor.preprocess(resized_images)       # VGG channel means removed
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      feature_maps = extractor.extract_features(images)  # 5 maps, levels 3..7

Differs on purpose:
  * Without override_base_feature_extractor_hyperparams the backbone's batch
    norm follows the extractor's `is_training`; the OD API left it at
    slim's default (always training), also at evaluation.
  * restore_from_classification_checkpoint_fn leaves out the `fpn/` layers
    (a classification checkpoint has none of them); the OD API listed every
    FeatureExtractor variable and relied on the checkpoint filter.
  * fpn_min_level, fpn_max_level are checked (levels 2..5 exist in the
    backbone, min <= max) and the error names the field.
"""

import collections

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_utils
from tf_slim.nets import resnet_v1

from models import feature_map_generators
from models import ssd_meta_arch

# The FPN's stride-2 convolutions need at least this many pixels per side.
_MIN_IMAGE_DIM = 129
# ImageNet RGB means the ResNet v1 classification checkpoints were trained with.
_CHANNEL_MEANS = (123.68, 116.779, 103.939)
# Bottleneck depth of each block's units (outputs are 4x deeper), and the
# stride each block ends with; the root already has stride 4.
_BLOCK_BASE_DEPTHS = (64, 128, 256, 512)
_BLOCK_STRIDES = (2, 2, 2, 1)
_ROOT_DEPTH = 64
# Pyramid levels the backbone provides: block k is level k + 1.
_FIRST_BACKBONE_LEVEL = 2
_LAST_BACKBONE_LEVEL = 5


def resnet_v1_block_outputs(inputs, units_per_block, depth_of):
  """Builds ResNet v1 in the current variable scope; returns every block's output.

  Args:
    inputs: float [batch, height, width, channels].
    units_per_block: number of bottleneck units of block1..block4, e.g.
      (3, 4, 6, 3) for ResNet-50.
    depth_of: fn(nominal bottleneck depth) -> depth (depth multiplier and
      minimum applied); the root convolution always has 64 channels.

  Returns:
    OrderedDict 'block1'..'block4' -> [batch, h, w, 4 * bottleneck depth] at
    strides 4, 8, 16 and 32, each taken before its block's closing subsample.
  """
  net = resnet_utils.conv2d_same(inputs, _ROOT_DEPTH, 7, stride=2, scope='conv1')
  net = slim.max_pool2d(net, [3, 3], stride=2, scope='pool1')
  outputs = collections.OrderedDict()
  for index, (num_units, base_depth, stride) in enumerate(
      zip(units_per_block, _BLOCK_BASE_DEPTHS, _BLOCK_STRIDES)):
    # Every unit at stride 1; the block's stride is applied to its output.
    block = resnet_v1.resnet_v1_block('block%d' % (index + 1), base_depth=depth_of(base_depth),
                                      num_units=num_units, stride=1)
    with tf.compat.v1.variable_scope(block.scope):
      for unit_index, unit in enumerate(block.args):
        with tf.compat.v1.variable_scope('unit_%d' % (unit_index + 1)):
          net = block.unit_fn(net, rate=1, **unit)
      outputs[block.scope] = net
      net = resnet_utils.subsample(net, stride)
  return outputs


class SSDResnetV1FpnFeatureExtractor(ssd_meta_arch.SSDFeatureExtractor):
  """ResNet v1 + FPN; subclasses fix the depth (`backbone_scope`, `units_per_block`).

  Args:
    is_training, depth_multiplier, min_depth, pad_to_multiple,
    conv_hyperparams_fn, reuse_weights, use_explicit_padding, use_depthwise,
    override_base_feature_extractor_hyperparams: see
      ssd_meta_arch.SSDFeatureExtractor. use_explicit_padding must be False;
      use_depthwise is accepted and ignored, as in the OD API.
    fpn_min_level: finest pyramid level, 2..5 (block fpn_min_level - 1).
    fpn_max_level: coarsest pyramid level, at least fpn_min_level; levels
      above 5 are extra stride-2 convolutions.
    additional_layer_depth: nominal depth of every pyramid map (scaled by
      depth_multiplier, at least min_depth).
    use_native_resize_op: upsample with a resize op instead of tile/reshape.

  The extractor returns fpn_max_level - fpn_min_level + 1 maps (`num_layers`).

  Raises:
    ValueError: on use_explicit_padding, or pyramid levels out of range.
  """

  backbone_scope = None
  units_per_block = None
  # Scope of the pyramid layers, inside backbone_scope.
  fpn_scope = 'fpn'

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=7,
               additional_layer_depth=256, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False):
    _check_levels(fpn_min_level, fpn_max_level)
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier, min_depth=min_depth,
        pad_to_multiple=pad_to_multiple, conv_hyperparams_fn=conv_hyperparams_fn,
        reuse_weights=reuse_weights, use_explicit_padding=use_explicit_padding,
        use_depthwise=use_depthwise, num_layers=fpn_max_level - fpn_min_level + 1,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    if use_explicit_padding:
      raise ValueError('%s does not support feature_extractor.use_explicit_padding'
                       % type(self).__name__)
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._use_native_resize_op = use_native_resize_op

  def preprocess(self, resized_inputs):
    """Subtracts the ImageNet channel means (VGG style) from 3-channel images.

    Args:
      resized_inputs: float [batch, height, width, channels] in [0, 255].

    Returns:
      The centred images; inputs without exactly 3 channels are returned as
      they are.
    """
    if resized_inputs.shape[3] == len(_CHANNEL_MEANS):
      return resized_inputs - [[list(_CHANNEL_MEANS)]]
    return resized_inputs

  def _backbone_arg_scope(self):
    """The arg_scope the ResNet layers are built under (see the module docstring)."""
    if self._override_base_feature_extractor_hyperparams:
      return self._conv_hyperparams_fn()
    with slim.arg_scope([slim.batch_norm], is_training=self._is_training) as scope:
      return scope

  def extract_features(self, preprocessed_inputs):
    """Returns the pyramid maps of levels fpn_min_level..fpn_max_level, finest first.

    Args:
      preprocessed_inputs: float [batch, height, width, 3] from `preprocess`,
        at least 129x129; sizes that are multiples of 2**min(fpn_max_level, 5)
        (see pad_to_multiple) keep the upsampled maps aligned.

    Returns:
      A list of `num_layers` tensors [batch, h_L, w_L, depth].

    Raises:
      ValueError: if the static height or width is below 129.
    """
    images = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM, preprocessed_inputs)
    images = ssd_meta_arch.pad_to_multiple(images, self._pad_to_multiple)
    depth_of = feature_map_generators.get_depth_fn(self._depth_multiplier, self._min_depth)
    with tf.compat.v1.variable_scope(self.backbone_scope, reuse=self._reuse_weights):
      # The base ResNet scope first, so that conv_hyperparams (when it
      # overrides) only replaces what it sets (pool1 keeps SAME padding).
      with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        with slim.arg_scope(self._backbone_arg_scope()):
          blocks = resnet_v1_block_outputs(images, self.units_per_block, depth_of)
      with slim.arg_scope(self._conv_hyperparams_fn()):
        with tf.compat.v1.variable_scope(self.fpn_scope, reuse=self._reuse_weights):
          return self._pyramid(blocks, depth_of(self._additional_layer_depth))

  def _pyramid(self, blocks, depth):
    """FPN over the chosen blocks, then the extra coarse levels.

    Args:
      blocks: OrderedDict 'block1'..'block4' from resnet_v1_block_outputs.
      depth: depth of every pyramid map.

    Returns:
      The list of pyramid maps, finest first.
    """
    last_backbone_level = min(self._fpn_max_level, _LAST_BACKBONE_LEVEL)
    names = ['block%d' % (level - 1)
             for level in range(self._fpn_min_level, last_backbone_level + 1)]
    top_down = feature_map_generators.fpn_top_down_feature_maps(
        [(name, blocks[name]) for name in names], depth=depth,
        use_native_resize_op=self._use_native_resize_op)
    feature_maps = [top_down['top_down_' + name] for name in names]
    # Scope names count from the backbone's last level, as in the zoo.
    for level in range(last_backbone_level, self._fpn_max_level):
      feature_maps.append(slim.conv2d(feature_maps[-1], depth, [3, 3], stride=2,
                                      padding='SAME', scope='bottom_up_block%d' % level))
    return feature_maps

  def restore_from_classification_checkpoint_fn(self, feature_extractor_scope):
    """{ResNet classification-checkpoint name: variable}, pyramid layers left out.

    Args:
      feature_extractor_scope: the scope extract_features ran in
        ('FeatureExtractor').

    Returns:
      A dict like {'resnet_v1_50/conv1/weights': <variable>, ...}.
    """
    pyramid_prefix = '%s/%s/' % (self.backbone_scope, self.fpn_scope)
    variables = super().restore_from_classification_checkpoint_fn(feature_extractor_scope)
    return {name: variable for name, variable in variables.items()
            if not name.startswith(pyramid_prefix)}


def _check_levels(fpn_min_level, fpn_max_level):
  """Raises ValueError unless the backbone has level fpn_min_level and min <= max."""
  if not _FIRST_BACKBONE_LEVEL <= fpn_min_level <= _LAST_BACKBONE_LEVEL:
    raise ValueError('feature_extractor.fpn.min_level must be in [%d, %d] (ResNet blocks '
                     '1..4), got %d' % (_FIRST_BACKBONE_LEVEL, _LAST_BACKBONE_LEVEL,
                                        fpn_min_level))
  if fpn_max_level < fpn_min_level:
    raise ValueError('feature_extractor.fpn.max_level (%d) must be at least fpn.min_level '
                     '(%d)' % (fpn_max_level, fpn_min_level))


class SSDResnet50V1FpnFeatureExtractor(SSDResnetV1FpnFeatureExtractor):
  """ResNet-50 v1 + FPN; serves type 'ssd_resnet50_v1_fpn'."""

  backbone_scope = 'resnet_v1_50'
  units_per_block = (3, 4, 6, 3)


class SSDResnet101V1FpnFeatureExtractor(SSDResnetV1FpnFeatureExtractor):
  """ResNet-101 v1 + FPN; serves type 'ssd_resnet101_v1_fpn'."""

  backbone_scope = 'resnet_v1_101'
  units_per_block = (3, 4, 23, 3)


class SSDResnet152V1FpnFeatureExtractor(SSDResnetV1FpnFeatureExtractor):
  """ResNet-152 v1 + FPN; serves type 'ssd_resnet152_v1_fpn'."""

  backbone_scope = 'resnet_v1_152'
  units_per_block = (3, 8, 36, 3)
