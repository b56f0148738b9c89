"""Feature map generators: the layers an SSD adds on top of a base network.

A base network (MobileNet, Inception, ResNet...) yields named end points of
growing stride. A generator turns some of them into the list of feature maps
the box predictor puts anchors on, finest first. Three recipes:

  multi_resolution_feature_maps   the classic SSD: take a few end points as
      they are, then keep halving the resolution with stride-2 convolutions
      (optionally preceded by a 1x1 "bottleneck" conv, optionally depthwise).
  fpn_top_down_feature_maps       a Feature Pyramid Network (Lin et al. 2017):
      project every level to one depth, add the 2x-upsampled coarser level,
      then smooth with a 3x3 convolution.
  pooling_pyramid_feature_maps    PPN: one base map, then repeated stride-2
      max pooling (or 3x3 convolutions); no new parameters with pooling.

The layers are plain slim ops named like the OD API's TF1 generators, so the
variables match the detection zoo's checkpoints (e.g.
`Conv2d_13_pointwise_1_Conv2d_2_1x1_256`, `Conv2d_13_pointwise_2_Conv2d_2_3x3_s2_512`,
`fpn/projection_1`, `fpn/smoothing_1`). Activation, normalization and
initialization come from the caller's slim arg_scope (the config's
conv_hyperparams); run a generator inside the base network's variable scope.

Usage:

    layout = {'from_layer': ['Conv2d_11_pointwise', 'Conv2d_13_pointwise', '', ''],
              'layer_depth': [-1, -1, 512, 256]}
    with slim.arg_scope(conv_hyperparams_fn()):
      maps = feature_map_generators.multi_resolution_feature_maps(
          layout, depth_multiplier=1.0, min_depth=16, insert_1x1_conv=True,
          image_features=end_points)        # OrderedDict name -> [B, H, W, C]

Differs on purpose:
  * multi_resolution_feature_maps checks its layout (matching list lengths,
    a first entry that names an end point) and names the offending key.
"""

import collections
import functools

import tensorflow as tf
import tf_slim as slim

# Bounded activations clip to [-ACTIVATION_BOUND, ACTIVATION_BOUND] (the
# relu6 range), which quantizes well.
ACTIVATION_BOUND = 6.0


def get_depth_fn(depth_multiplier, min_depth):
  """Returns fn(nominal_depth) -> int(nominal_depth * depth_multiplier), at least min_depth."""
  def depth_of(nominal_depth):
    return max(int(nominal_depth * depth_multiplier), min_depth)
  return depth_of


def fixed_padding(inputs, kernel_size, rate=1):
  """Zero-pads height and width so a VALID convolution acts like a SAME one.

  The padding depends only on the kernel, never on the input size, so the
  result is the same at every resolution (unlike SAME padding with stride 2,
  whose split depends on whether the size is odd).

  Args:
    inputs: [B, H, W, C] tensor.
    kernel_size: int, or [kernel_height, kernel_width].
    rate: dilation rate of the convolution that follows.

  Returns:
    [B, H + pad_h, W + pad_w, C]; unchanged for a 1x1 kernel.
  """
  if isinstance(kernel_size, int):
    kernel_size = [kernel_size, kernel_size]
  paddings = [[0, 0]]
  for size in kernel_size[:2]:
    total = (size + (size - 1) * (rate - 1)) - 1
    paddings.append([total // 2, total - total // 2])
  paddings.append([0, 0])
  return tf.pad(inputs, paddings)


def _static_or_dynamic_shape(tensor):
  """List of the static dimensions of `tensor`, with scalar tensors where unknown."""
  static = tensor.shape.as_list()
  dynamic = tf.shape(tensor)
  return [dim if dim is not None else dynamic[i] for i, dim in enumerate(static)]


def _upsample_nearest_2x(features, use_native_resize_op):
  """Doubles height and width of [B, H, W, C] by repeating every pixel."""
  batch, height, width, channels = _static_or_dynamic_shape(features)
  with tf.compat.v1.name_scope('nearest_neighbor_upsampling'):
    if use_native_resize_op:
      return tf.compat.v1.image.resize_nearest_neighbor(
          features, [height * 2, width * 2])
    # Tile and reshape instead of a resize op: every accelerator has these.
    repeated = tf.tile(features[:, :, tf.newaxis, :, tf.newaxis, :],
                       [1, 1, 2, 1, 2, 1])
    return tf.reshape(repeated, [batch, height * 2, width * 2, channels])


def _check_layout(feature_map_layout):
  """Raises ValueError on a feature_map_layout multi_resolution_feature_maps cannot build."""
  from_layers = feature_map_layout['from_layer']
  for key in ('layer_depth', 'conv_kernel_size'):
    if key in feature_map_layout and len(feature_map_layout[key]) != len(from_layers):
      raise ValueError("feature_map_layout['%s'] has %d entries but 'from_layer' has %d"
                       % (key, len(feature_map_layout[key]), len(from_layers)))
  if from_layers and not from_layers[0]:
    raise ValueError("feature_map_layout['from_layer'][0] must name an end point of the "
                     "base network; new layers are built from the previous feature map")


def multi_resolution_feature_maps(feature_map_layout, depth_multiplier, min_depth,
                                  insert_1x1_conv, image_features, pool_residual=False):
  """Builds SSD's multi-scale feature maps from base-network end points.

  Each position of `feature_map_layout['from_layer']` gives one feature map:
  a non-empty name takes that end point of `image_features` unchanged; an
  empty string builds a new map from the previous one with a stride-2
  `k x k` convolution (k = conv_kernel_size, default 3) of depth
  `layer_depth` (scaled by depth_multiplier, at least min_depth), preceded by
  a 1x1 convolution of half that depth when insert_1x1_conv. With
  use_depthwise the k x k convolution is a depthwise one (scope suffix
  `_depthwise`) followed by a 1x1 convolution to the new depth.

  Args:
    feature_map_layout: dict with
      'from_layer': list of end-point names or '' (new layer);
      'layer_depth': list of nominal depths (-1 where from_layer is set);
      optional 'conv_kernel_size': list of kernel sizes (-1 where from_layer
        is set); optional 'use_explicit_padding': pad with fixed_padding and
        convolve VALID instead of SAME; optional 'use_depthwise'.
    depth_multiplier: multiplier of the new layers' depths.
    min_depth: smallest depth of a new layer.
    insert_1x1_conv: add the 1x1 bottleneck convolution before each new layer.
    image_features: dict end-point name -> [B, H, W, C] tensor.
    pool_residual: with use_depthwise, add a stride-2 3x3 average pool of the
      previous map to a new map of the same depth (a residual connection).

  Returns:
    OrderedDict feature-map name -> [B, H_i, W_i, C_i], in layout order.

  Raises:
    ValueError: if the layout's lists differ in length or its first entry is
      not an end point.
    KeyError: if a from_layer is not in image_features.
  """
  _check_layout(feature_map_layout)
  depth_of = get_depth_fn(depth_multiplier, min_depth)
  explicit_padding = feature_map_layout.get('use_explicit_padding', False)
  depthwise = feature_map_layout.get('use_depthwise', False)
  kernel_sizes = feature_map_layout.get(
      'conv_kernel_size', [3] * len(feature_map_layout['from_layer']))

  feature_maps = collections.OrderedDict()
  source_name = ''
  previous = None
  for index, from_layer in enumerate(feature_map_layout['from_layer']):
    if from_layer:
      if from_layer not in image_features:
        raise KeyError("feature_map_layout['from_layer'] names %r, which is not among the "
                       "base network's end points %s" % (from_layer, sorted(image_features)))
      source_name = from_layer
      previous = feature_maps[from_layer] = image_features[from_layer]
      continue
    nominal_depth = feature_map_layout['layer_depth'][index]
    kernel = kernel_sizes[index]
    net = previous
    if insert_1x1_conv:
      net = slim.conv2d(net, depth_of(nominal_depth // 2), [1, 1], stride=1, padding='SAME',
                        scope='%s_1_Conv2d_%d_1x1_%d' % (source_name, index,
                                                         depth_of(nominal_depth // 2)))
    name = '%s_2_Conv2d_%d_%dx%d_s2_%d' % (source_name, index, kernel, kernel,
                                            depth_of(nominal_depth))
    padding = 'SAME'
    if explicit_padding:
      net = fixed_padding(net, kernel)
      padding = 'VALID'
    if depthwise:
      net = slim.separable_conv2d(net, None, [kernel, kernel], depth_multiplier=1,
                                  stride=2, padding=padding, scope=name + '_depthwise')
      net = slim.conv2d(net, depth_of(nominal_depth), [1, 1], stride=1, padding='SAME',
                        scope=name)
      if pool_residual and previous.shape[-1] == depth_of(nominal_depth):
        net += slim.avg_pool2d(previous, [3, 3], stride=2, padding='SAME',
                               scope=name + '_pool')
    else:
      net = slim.conv2d(net, depth_of(nominal_depth), [kernel, kernel], stride=2,
                        padding=padding, scope=name)
    previous = feature_maps[name] = net
  return feature_maps


def fpn_top_down_feature_maps(image_features, depth, use_depthwise=False,
                              use_explicit_padding=False, use_bounded_activations=False,
                              scope=None, use_native_resize_op=False):
  """Builds the top-down pathway of a Feature Pyramid Network.

  With levels numbered 1..n from finest to coarsest: level n is projected to
  `depth` by a 1x1 convolution `projection_n`; then, for each finer level i,
  the running map is upsampled 2x, the level is projected (`projection_i`)
  and added, and a 3x3 convolution `smoothing_i` gives that level's output.
  Projections are linear with biases (no normalizer); smoothing layers take
  the caller's arg_scope.

  Args:
    image_features: list of (name, [B, H, W, C]) pairs, finest first, each
      half the resolution of the one before.
    depth: depth of every output map.
    use_depthwise: smooth with depthwise-separable convolutions.
    use_explicit_padding: pad with fixed_padding and convolve VALID; the
      upsampled map is cropped to the finer level's size.
    use_bounded_activations: clip the projections and sums to
      [-ACTIVATION_BOUND, ACTIVATION_BOUND].
    scope: name scope of the ops (default 'top_down'); variables take the
      enclosing variable scope.
    use_native_resize_op: upsample with a resize op rather than tile/reshape.

  Returns:
    OrderedDict 'top_down_<name>' -> [B, H_i, W_i, depth], finest first.
  """
  def bound(tensor):
    if not use_bounded_activations:
      return tensor
    return tf.clip_by_value(tensor, -ACTIVATION_BOUND, ACTIVATION_BOUND)

  padding = 'VALID' if use_explicit_padding else 'SAME'
  smoothing_op = (functools.partial(slim.separable_conv2d, depth_multiplier=1)
                  if use_depthwise else slim.conv2d)
  num_levels = len(image_features)
  outputs = []
  with tf.compat.v1.name_scope(scope, 'top_down'):
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding, stride=1):
      coarsest_name, coarsest = image_features[-1]
      running = bound(slim.conv2d(coarsest, depth, [1, 1], activation_fn=None,
                                  normalizer_fn=None, scope='projection_%d' % num_levels))
      outputs.append(('top_down_%s' % coarsest_name, running))
      for level in range(num_levels - 2, -1, -1):
        name, features = image_features[level]
        upsampled = _upsample_nearest_2x(running, use_native_resize_op)
        lateral = bound(slim.conv2d(features, depth, [1, 1], activation_fn=None,
                                    normalizer_fn=None, scope='projection_%d' % (level + 1)))
        if use_explicit_padding:
          # An odd-sized finer level is one pixel smaller than 2x the coarser.
          lateral_shape = tf.shape(lateral)
          upsampled = upsampled[:, :lateral_shape[1], :lateral_shape[2], :]
        merged = bound(upsampled + lateral)
        if use_explicit_padding:
          merged = fixed_padding(merged, 3)
        running = smoothing_op(merged, depth, [3, 3], scope='smoothing_%d' % (level + 1))
        outputs.append(('top_down_%s' % name, running))
  return collections.OrderedDict(reversed(outputs))


def coarser_fpn_levels(net, num_levels, depth, scope_fn, use_depthwise=False,
                       use_explicit_padding=False):
  """The FPN levels above the backbone's: each a stride-2 3x3 convolution of the last.

  Args:
    net: the top pyramid map.
    num_levels: how many coarser maps to add.
    depth: their depth.
    scope_fn: fn(index) -> the scope of the index-th added layer (0-based),
      e.g. MobileNet v1's 'bottom_up_Conv2d_14' for index 0.
    use_depthwise: separable instead of full convolutions.
    use_explicit_padding: pad explicitly, then convolve VALID.

  Returns:
    The list of `num_levels` maps, finest first.
  """
  maps = []
  padding = 'VALID' if use_explicit_padding else 'SAME'
  for index in range(num_levels):
    if use_explicit_padding:
      net = fixed_padding(net, 3)
    if use_depthwise:
      net = slim.separable_conv2d(net, depth, [3, 3], depth_multiplier=1, stride=2,
                                  padding=padding, scope=scope_fn(index))
    else:
      net = slim.conv2d(net, depth, [3, 3], stride=2, padding=padding, scope=scope_fn(index))
    maps.append(net)
  return maps


def pooling_pyramid_feature_maps(base_feature_map_depth, num_layers, image_features,
                                 replace_pool_with_conv=False):
  """Builds a Pooling Pyramid Network's maps from one base feature map.

  The base map (optionally re-projected by a 1x1 convolution
  `Base_Conv2d_1x1_<depth>`) is the first map; each further one is the
  previous one max-pooled 2x2 with stride 2 (`MaxPool2d_<i>_2x2`, no
  variables), or, with replace_pool_with_conv, convolved 3x3 with stride 2
  (`Conv2d_<i>_3x3_s2_<depth>`).

  Args:
    base_feature_map_depth: depth of the 1x1 re-projection; 0 or less uses
      the base map as it is.
    num_layers: number of maps to return.
    image_features: dict with exactly one entry, the base map [B, H, W, C].
    replace_pool_with_conv: use stride-2 convolutions instead of pooling.

  Returns:
    OrderedDict feature-map name -> [B, H_i, W_i, C], finest first.

  Raises:
    ValueError: if image_features does not hold exactly one tensor.
  """
  if len(image_features) != 1:
    raise ValueError('pooling_pyramid_feature_maps takes exactly one base feature map in '
                     'image_features, got %d: %s' % (len(image_features),
                                                     sorted(image_features)))
  net = list(image_features.values())[0]
  base_name = 'Base_Conv2d_1x1_%d' % base_feature_map_depth
  if base_feature_map_depth > 0:
    net = slim.conv2d(net, base_feature_map_depth, [1, 1], stride=1, padding='SAME',
                      scope=base_name)
    # A 1x1 pool is a no-op kept so TPU v1 compilers do not fuse the conv
    # with the next pooling (which would hide this map).
    net = slim.max_pool2d(net, [1, 1], stride=1, padding='SAME', scope=base_name)
  feature_maps = collections.OrderedDict([(base_name, net)])
  for index in range(num_layers - 1):
    if replace_pool_with_conv:
      name = 'Conv2d_%d_3x3_s2_%d' % (index, base_feature_map_depth)
      net = slim.conv2d(net, base_feature_map_depth, [3, 3], stride=2, padding='SAME',
                        scope=name)
    else:
      name = 'MaxPool2d_%d_2x2' % index
      net = slim.max_pool2d(net, [2, 2], stride=2, padding='SAME', scope=name)
    feature_maps[name] = net
  return feature_maps
