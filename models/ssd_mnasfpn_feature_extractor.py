"""SSD feature extractor: MnasFPN (Chen et al., 2019) over MobileNet v2.

MnasFPN is a searched feature pyramid for mobile detectors. It takes four
levels of a MobileNet v2: C3 ('layer_7', stride 8), C4 ('layer_14', stride
16), C5 ('layer_18', stride 32) and a C6 it makes by max-pooling C5 and a
1x1 convolution. Then cells (four by default) each rewrite the four levels:

    a cell holds nodes; it starts with the 4 incoming maps (nodes 0..3)
    every block adds a node:
      for each of its two input nodes:   resize to the block's level
          input coarser or equal:  1x1 conv to the block's expansion depth,
                                   then nearest-neighbour upsampling
          input finer:             3x3 max pool (stride 2^gap), then 1x1 conv
      sum, relu6, k x k separable conv to `additional_layer_depth` (48)
    the last 4 nodes, plus the cell's input where shapes agree, leave the cell

Resizing before the 1x1 convolution when shrinking, after it when growing,
keeps the wide expanded tensors at the smaller of the two resolutions (the
paper's "size-dependent ordering").

Variables are the OD API's: `MobilenetV2/...` (the backbone up to
'layer_18', as in its classification checkpoint) and
`MnasFPN/C6_Conv1x1`, `MnasFPN/cell_<c>/block_<b>/input_<i>/Conv1x1`,
`MnasFPN/cell_<c>/block_<b>/SepConv`.

Usage:

    extractor = SSDMobileNetV2MnasFPNFeatureExtractor(
        is_training=True, depth_multiplier=1.0, min_depth=16, pad_to_multiple=32,
        conv_hyperparams_fn=conv_hyperparams_fn)
    with tf.compat.v1.variable_scope('FeatureExtractor'):
      maps = extractor.extract_features(extractor.preprocess(images))
    # 320x320 input -> 40x40, 20x20, 10x10, 5x5 maps of 48 channels

Like the OD API, the network uses its own training settings (He
initialization, L2 decay 4e-5 in the backbone and 1e-4 in the head, batch
norm decay 0.99 and epsilon 0.01) whatever `conv_hyperparams_fn` and
`override_base_feature_extractor_hyperparams` say; the backbone's depthwise
kernels too get this scope's initializer and decay. `use_depthwise` is
accepted and ignored (the head is always separable).

Differs on purpose:

* `restore_from_classification_checkpoint_fn` maps only `MobilenetV2/...`
  (the OD API also offers the MnasFPN head, which no classification
  checkpoint holds).
* The constructor also takes `num_layers` (None or 4), so a builder that
  passes the config's num_layers to every extractor works; the OD API's
  rejects the argument.
"""

import collections

import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators
from models import mobilenet_blocks
from models import mobilenet_v2_v3
from models import ssd_meta_arch

# One block of a cell: indices of its two input nodes, its pyramid level, its
# depthwise kernel size and the depth its inputs are expanded to.
MnasFPNBlock = collections.namedtuple(
    'MnasFPNBlock', ['inputs', 'output_level', 'kernel_size', 'expansion_size'])

# The searched cell: node 4 is block 0's output, and so on.
MNASFPN_CELL = (
    MnasFPNBlock(inputs=(1, 2), output_level=4, kernel_size=3, expansion_size=256),
    MnasFPNBlock(inputs=(0, 4), output_level=3, kernel_size=3, expansion_size=128),
    MnasFPNBlock(inputs=(5, 4), output_level=4, kernel_size=3, expansion_size=128),
    MnasFPNBlock(inputs=(4, 3), output_level=5, kernel_size=5, expansion_size=128),
    MnasFPNBlock(inputs=(4, 3), output_level=6, kernel_size=3, expansion_size=96),
)

# A head: the levels of the incoming maps and one cell spec per cell.
MNASFPN_DEF = {'feature_levels': [3, 4, 5, 6], 'spec': [MNASFPN_CELL] * 4}

# MobileNet v2 end points of C3, C4 and C5.
_BACKBONE_END_POINTS = ('layer_7', 'layer_14', 'layer_18')
_MIN_IMAGE_DIM = 33


def mnasfpn_arg_scope(weight_decay, is_training):
  """The slim arg_scope MnasFPN and its backbone train with.

  Args:
    weight_decay: L2 weight decay of conv and separable-conv kernels.
    is_training: batch norm's is_training.

  Returns:
    A slim arg_scope.
  """
  # 0.536 ~ He-normal std of a 3x3 depthwise kernel (fan-in 9), truncated.
  with slim.arg_scope([slim.conv2d],
                      weights_initializer=tf.compat.v1.initializers.he_normal(),
                      weights_regularizer=slim.l2_regularizer(weight_decay)), \
      slim.arg_scope([slim.separable_conv2d],
                     weights_initializer=tf.compat.v1.truncated_normal_initializer(
                         stddev=0.536),
                     weights_regularizer=slim.l2_regularizer(weight_decay)), \
      slim.arg_scope([slim.batch_norm], is_training=is_training, decay=0.99,
                     epsilon=0.01, center=True, scale=True) as scope:
    return scope


def _pad_for(features, kernel_size, use_explicit_padding):
  if not use_explicit_padding:
    return features
  return feature_map_generators.fixed_padding(features, kernel_size)


def _upsample_nearest(features, scale):
  """Repeats every pixel of [B, H, W, C] `scale` times down and across."""
  static = features.shape.as_list()
  dynamic = tf.shape(features)
  batch, height, width, channels = [dim if dim is not None else dynamic[i]
                                    for i, dim in enumerate(static)]
  with tf.compat.v1.name_scope('nearest_neighbor_upsampling'):
    # Tile + reshape rather than a resize op: every runtime supports them.
    tiled = tf.tile(features[:, :, tf.newaxis, :, tf.newaxis, :],
                    [1, 1, scale, 1, scale, 1])
    return tf.reshape(tiled, [batch, height * scale, width * scale, channels])


def _resize_to_level(features, from_level, to_level, depth, use_explicit_padding,
                     use_native_resize_op):
  """Brings a node to `to_level` at `depth` channels (linear, batch-normed).

  Args:
    features: [B, H, W, C] node at pyramid level `from_level`.
    from_level: its level (stride 2^level).
    to_level: the block's level.
    depth: output channels.
    use_explicit_padding: pad the max pool explicitly, convolve VALID.
    use_native_resize_op: upsample with resize_nearest_neighbor.

  Returns:
    [B, H * 2^(from_level - to_level), ..., depth] tensor.
  """
  padding = 'VALID' if use_explicit_padding else 'SAME'

  def project(net):
    return slim.conv2d(net, depth, [1, 1], activation_fn=None,
                       normalizer_fn=slim.batch_norm, padding=padding, scope='Conv1x1')

  if from_level < to_level:
    stride = 2**(to_level - from_level)
    pooled = slim.max_pool2d(_pad_for(features, 3, use_explicit_padding), [3, 3],
                             stride=[stride, stride], padding=padding, scope='Downsample')
    return project(pooled)
  net = project(features)
  scale = 2**(from_level - to_level)
  if scale == 1:
    return net
  if use_native_resize_op:
    static = net.shape.as_list()
    dynamic = tf.shape(net)
    height = static[1] if static[1] is not None else dynamic[1]
    width = static[2] if static[2] is not None else dynamic[2]
    return tf.compat.v1.image.resize_nearest_neighbor(net, [height * scale, width * scale])
  return _upsample_nearest(net, scale)


def _mnasfpn_cell(feature_maps, feature_levels, cell_spec, output_depth, depth_fn,
                  use_explicit_padding, use_native_resize_op):
  """One MnasFPN cell; returns maps at the levels (and order) of its inputs.

  Args:
    feature_maps: list of [B, H_i, W_i, C_i] maps.
    feature_levels: their pyramid levels.
    cell_spec: sequence of MnasFPNBlock.
    output_depth: nominal depth of every block's output.
    depth_fn: fn(nominal depth) -> depth after the width multiplier.
    use_explicit_padding, use_native_resize_op: as _resize_to_level.

  Returns:
    list of len(feature_maps) tensors.
  """
  nodes = list(feature_maps)
  levels = list(feature_levels)
  padding = 'VALID' if use_explicit_padding else 'SAME'
  for block_index, block in enumerate(cell_spec):
    with tf.compat.v1.variable_scope('block_%d' % block_index):
      total = None
      for input_index, node in enumerate(block.inputs):
        with tf.compat.v1.variable_scope('input_%d' % input_index):
          resized = _resize_to_level(nodes[node], levels[node], block.output_level,
                                     depth_fn(block.expansion_size), use_explicit_padding,
                                     use_native_resize_op)
        # A chain of two-way adds, not add_n: TFLite converts it better.
        total = resized if total is None else total + resized
      net = _pad_for(tf.nn.relu6(total), block.kernel_size, use_explicit_padding)
      net = slim.separable_conv2d(net, depth_fn(output_depth), block.kernel_size,
                                  activation_fn=None, normalizer_fn=slim.batch_norm,
                                  padding=padding, scope='SepConv')
    nodes.append(net)
    levels.append(block.output_level)

  num_outputs = len(feature_maps)
  outputs = nodes[-num_outputs:]
  for index, output in enumerate(outputs):
    # Residual across the whole cell wherever the shapes line up.
    if output.shape.as_list() == feature_maps[index].shape.as_list():
      outputs[index] = output + feature_maps[index]
  return outputs


def mnasfpn_head(feature_maps, head_def, output_depth=48, depth_fn=None,
                 use_explicit_padding=False, use_native_resize_op=False):
  """Stacks the cells of `head_def` (scopes 'cell_0', 'cell_1', ...).

  Args:
    feature_maps: list of maps at head_def['feature_levels'].
    head_def: {'feature_levels': [...], 'spec': [cell spec, ...]}.
    output_depth: nominal depth of the blocks' outputs.
    depth_fn: fn(nominal depth) -> depth; default identity.
    use_explicit_padding, use_native_resize_op: as _resize_to_level.

  Returns:
    list of maps at the same levels.
  """
  depth_fn = depth_fn or (lambda depth: depth)
  for cell_index, cell_spec in enumerate(head_def['spec']):
    with tf.compat.v1.variable_scope('cell_%d' % cell_index):
      feature_maps = _mnasfpn_cell(feature_maps, head_def['feature_levels'], cell_spec,
                                   output_depth, depth_fn, use_explicit_padding,
                                   use_native_resize_op)
  return feature_maps


def check_head_def(head_def, feature_maps):
  """Raises ValueError unless `feature_maps` and `head_def` fit together.

  Checks: one map per level, each map's height matching its level, every
  cell's last blocks landing on the levels the next cell expects, and every
  block reading only nodes made before it.
  """
  levels = head_def['feature_levels']
  if len(levels) != len(feature_maps):
    raise ValueError("head_def['feature_levels'] has %d levels for %d feature maps"
                     % (len(levels), len(feature_maps)))
  finest_height = feature_maps[0].shape.as_list()[1]
  if finest_height is not None:
    image_height = finest_height * 2**levels[0]
    for index in range(1, len(levels)):
      height = feature_maps[index].shape.as_list()[1]
      if height is not None and height != image_height // 2**levels[index]:
        raise ValueError('feature map %d is %d high, which does not fit level %d '
                         '(image height %d)' % (index, height, levels[index], image_height))
  num_inputs = len(levels)
  for cell_index, cell_spec in enumerate(head_def['spec']):
    output_levels = [block.output_level for block in cell_spec[-num_inputs:]]
    if output_levels != list(levels):
      raise ValueError("head_def['spec'][%d] ends on levels %s, not the feature levels %s"
                       % (cell_index, output_levels, list(levels)))
    for block_index, block in enumerate(cell_spec):
      for node in block.inputs:
        if node >= num_inputs + block_index:
          raise ValueError("head_def['spec'][%d] block %d reads node %d, made later"
                           % (cell_index, block_index, node))


class SSDMobileNetV2MnasFPNFeatureExtractor(ssd_meta_arch.SSDFeatureExtractor):
  """'ssd_mobilenet_v2_mnasfpn': MobileNet v2 C3..C5, a C6, and MnasFPN cells.

  Args:
    is_training, depth_multiplier, min_depth, pad_to_multiple,
    conv_hyperparams_fn, reuse_weights, use_explicit_padding, use_depthwise,
    override_base_feature_extractor_hyperparams: as
      ssd_meta_arch.SSDFeatureExtractor (see the module docstring for the
      ones MnasFPN ignores).
    fpn_min_level: finest level; only 3 is supported.
    fpn_max_level: coarsest level; only 6 is supported.
    additional_layer_depth: depth of the head's maps (before the multiplier).
    head_def: {'feature_levels', 'spec'}, default MNASFPN_DEF.
    use_native_resize_op: upsample with resize_nearest_neighbor instead of
      tile + reshape.
    data_format: only 'channels_last'.
    num_layers: None or the number of levels (4).

  Raises:
    ValueError: on other levels, data_format or num_layers.
  """

  backbone_scope = 'MobilenetV2'

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, fpn_min_level=3, fpn_max_level=6,
               additional_layer_depth=48, head_def=None, reuse_weights=None,
               use_explicit_padding=False, use_depthwise=False, use_native_resize_op=False,
               override_base_feature_extractor_hyperparams=False,
               data_format='channels_last', num_layers=None):
    if (fpn_min_level, fpn_max_level) != (3, 6):
      raise ValueError('MnasFPN needs fpn_min_level=3 and fpn_max_level=6, got %r and %r'
                       % (fpn_min_level, fpn_max_level))
    if data_format != 'channels_last':
      raise ValueError("data_format must be 'channels_last', got %r" % (data_format,))
    num_levels = fpn_max_level - fpn_min_level + 1
    if num_layers is not None and num_layers != num_levels:
      raise ValueError('MnasFPN makes %d feature maps, got num_layers=%r'
                       % (num_levels, num_layers))
    super().__init__(
        is_training=is_training, depth_multiplier=depth_multiplier,
        min_depth=min_depth, pad_to_multiple=pad_to_multiple,
        conv_hyperparams_fn=conv_hyperparams_fn, reuse_weights=reuse_weights,
        use_explicit_padding=use_explicit_padding, use_depthwise=use_depthwise,
        num_layers=num_levels,
        override_base_feature_extractor_hyperparams=(
            override_base_feature_extractor_hyperparams))
    self._fpn_min_level = fpn_min_level
    self._fpn_max_level = fpn_max_level
    self._additional_layer_depth = additional_layer_depth
    self._head_def = head_def or MNASFPN_DEF
    self._use_native_resize_op = use_native_resize_op

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixels to [-1, 1]."""
    return (2.0 / 255.0) * resized_inputs - 1.0

  def _head_depth(self, nominal_depth):
    return mobilenet_blocks.make_divisible(nominal_depth * self._depth_multiplier, 8,
                                           self._min_depth)

  def _backbone(self, images):
    """MobileNet v2 up to 'layer_18' -> [C3, C4, C5]."""
    with slim.arg_scope(mnasfpn_arg_scope(4e-5, self._is_training)):
      _, end_points = mobilenet_v2_v3.mobilenet_v2_base(
          images, depth_multiplier=self._depth_multiplier, min_depth=self._min_depth,
          final_endpoint=_BACKBONE_END_POINTS[-1],
          use_explicit_padding=self._use_explicit_padding, scope=self.backbone_scope,
          reuse=self._reuse_weights)
    return [end_points[name] for name in _BACKBONE_END_POINTS]

  def _make_c6(self, c5):
    """C6: C5 max-pooled by 2, then a 1x1 conv (batch norm, no weight decay)."""
    c6 = slim.max_pool2d(_pad_for(c5, 3, self._use_explicit_padding), [3, 3],
                         stride=[2, 2],
                         padding='VALID' if self._use_explicit_padding else 'SAME',
                         scope='C6_downsample')
    c6 = slim.conv2d(c6, self._head_depth(self._additional_layer_depth), [1, 1],
                     activation_fn=tf.identity, normalizer_fn=slim.batch_norm,
                     weights_regularizer=None, padding='VALID', scope='C6_Conv1x1')
    # An explicit op boundary, where quantization rewrites expect one.
    return tf.identity(c6)

  def extract_features(self, preprocessed_inputs):
    """Returns the 4 maps of levels 3..6 (strides 8..64), finest first.

    Args:
      preprocessed_inputs: [B, H, W, 3] float tensor in [-1, 1], H and W at
        least 33.
    """
    inputs = ssd_meta_arch.check_min_image_dim(_MIN_IMAGE_DIM, preprocessed_inputs)
    inputs = ssd_meta_arch.pad_to_multiple(inputs, self._pad_to_multiple)
    c3, c4, c5 = self._backbone(inputs)
    with tf.compat.v1.variable_scope('MnasFPN', reuse=self._reuse_weights), \
        slim.arg_scope(mnasfpn_arg_scope(1e-4, self._is_training)):
      levels = [c3, c4, c5, self._make_c6(c5)]
      check_head_def(self._head_def, levels)
      return mnasfpn_head(levels, self._head_def, output_depth=self._additional_layer_depth,
                          depth_fn=self._head_depth,
                          use_explicit_padding=self._use_explicit_padding,
                          use_native_resize_op=self._use_native_resize_op)
