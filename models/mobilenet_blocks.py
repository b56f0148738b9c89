"""Layers of the MobileNet v2 / v3 family and a builder that stacks them.

A MobileNet v2 or v3 is a plain stack of three kinds of layer:

  ConvLayer        a full k x k convolution (the stem, the 1x1 "head" convs)
  BottleneckLayer  an inverted residual (Sandler et al., 2018): a 1x1 conv
                   widens the input by an expansion factor ("expand"), a
                   k x k depthwise conv filters it ("depthwise"), optionally
                   a squeeze-excite gate reweights its channels (Howard et al.,
                   2019), and a linear 1x1 conv narrows it again ("project");
                   the input is added back when shapes allow. A *fused*
                   bottleneck (MobileNet-EdgeTPU) widens with a full k x k
                   conv instead and has no depthwise conv.
  PoolLayer        a global average pool (MobileNet v3's head)

An `Architecture` lists them; `build_mobilenet` builds one, naming variables
as the published classification checkpoints do (`Conv`, `expanded_conv`,
`expanded_conv_1/expand`, `.../depthwise`, `.../squeeze_excite/Conv_1`,
`Conv_1`...), and returns end points named by 1-based position: 'layer_k'
is the output of the k-th layer, 'layer_k/expansion_output' (and
'layer_k/depthwise_output') the inner tensors of a bottleneck.

Usage:

    arch = Architecture(scope='TinyNet', activation_fn=tf.nn.relu6, layers=[
        ConvLayer(depth=16, kernel=3, stride=2),
        BottleneckLayer(depth=24, expansion=6, stride=2),
        BottleneckLayer(depth=24, expansion=6, squeeze_excite=True)])
    with slim.arg_scope(mobilenet_v2_v3.training_scope(is_training=True)):
      net, end_points = build_mobilenet(images, arch, depth_multiplier=0.5)
    end_points['layer_3/expansion_output']          # [B, H/4, W/4, 72]

Depths: every layer depth d becomes make_divisible(d * depth_multiplier, 8,
min_depth); a bottleneck's inner depth is make_divisible(input depth *
expansion, 8) and it only expands when that is wider than its input.

Differs on purpose:
  * a fused bottleneck with use_explicit_padding pads before its k x k
    expansion conv (upstream convolves it VALID without padding, so its
    output shrank).
  * PoolLayer averages over the whole feature map whatever its shape
    (upstream used a 7x7 window on non-square maps).
"""

import collections

import tensorflow as tf
import tf_slim as slim

# The hard-sigmoid slope the published MobileNet v3 checkpoints were trained with.
_HARD_SIGMOID_SLOPE = 0.16667

ConvLayer = collections.namedtuple(
    'ConvLayer', ['depth', 'kernel', 'stride', 'activation_fn', 'batch_norm'],
    defaults=(1, 1, None, True))
ConvLayer.__doc__ = """A k x k convolution of `depth` outputs.

activation_fn None means the architecture's default; without batch_norm the
convolution has biases instead."""

BottleneckLayer = collections.namedtuple(
    'BottleneckLayer',
    ['depth', 'expansion', 'kernel', 'stride', 'activation_fn', 'squeeze_excite',
     'residual', 'fused', 'expansion_divisor'],
    defaults=(6, 3, 1, None, False, True, False, 8))
BottleneckLayer.__doc__ = """An inverted residual block of `depth` outputs.

expansion: inner depth = input depth * expansion, rounded to a multiple of
  expansion_divisor. activation_fn None means the architecture's default.
squeeze_excite: gate the depthwise output's channels. residual: add the input
when stride is 1 and depths agree. fused: widen with a kernel x kernel
convolution (carrying the stride) and skip the depthwise convolution."""

PoolLayer = collections.namedtuple('PoolLayer', [])
PoolLayer.__doc__ = """A global average pool to [B, 1, 1, C] (no variables)."""

Architecture = collections.namedtuple('Architecture', ['scope', 'activation_fn', 'layers'])
Architecture.__doc__ = """A MobileNet: default variable scope, default non-linearity, layers."""


def make_divisible(value, divisor=8, min_value=None):
  """Rounds `value` to the nearest multiple of `divisor`, losing at most 10%.

  Args:
    value: the nominal number of channels (may be fractional).
    divisor: the result is a multiple of this (unless min_value is not).
    min_value: smallest result (default: divisor).

  Returns:
    int.
  """
  if min_value is None:
    min_value = divisor
  rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
  if rounded < 0.9 * value:
    rounded += divisor
  return int(rounded)


def hard_sigmoid(x):
  """Piecewise-linear sigmoid: relu6(x + 3) / 6."""
  return tf.nn.relu6(x + 3.0) * _HARD_SIGMOID_SLOPE


def hard_swish(x):
  """x * hard_sigmoid(x) with an exact 1/6, MobileNet v3's cheap swish."""
  with tf.compat.v1.name_scope('hard_swish'):
    return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def fixed_padding(inputs, kernel_size, rate=1):
  """Zero-pads [B, H, W, C] so a VALID k x k convolution keeps SAME's output size.

  The split of the padding depends only on the kernel, not on the input size.

  Args:
    inputs: [B, H, W, C] tensor.
    kernel_size: int, or (kernel_height, kernel_width).
    rate: dilation rate of the convolution that follows.

  Returns:
    The padded tensor (the input itself for a 1x1 kernel).
  """
  if isinstance(kernel_size, int):
    kernel_size = (kernel_size, kernel_size)
  if tuple(kernel_size) == (1, 1):
    return inputs
  paddings = [[0, 0]]
  for size in kernel_size:
    total = size + (size - 1) * (rate - 1) - 1
    paddings.append([total // 2, total - total // 2])
  paddings.append([0, 0])
  return tf.pad(inputs, paddings)


def squeeze_excite(net, squeeze_factor=4, divisible_by=8):
  """Scales each channel of `net` by a gate computed from its global average.

  Two 1x1 convolutions with biases (no normalizer): `squeeze_excite/Conv`
  narrows to make_divisible(C / squeeze_factor) with relu, and
  `squeeze_excite/Conv_1` widens back to C with a hard sigmoid.

  Args:
    net: [B, H, W, C] tensor with a static C.
    squeeze_factor: how much narrower the inner layer is.
    divisible_by: inner depth is a multiple of this.

  Returns:
    [B, H, W, C] tensor.
  """
  channels = int(net.shape[-1])
  with tf.compat.v1.variable_scope('squeeze_excite'):
    pooled = tf.reduce_mean(net, axis=[1, 2], keepdims=True)
    squeezed = slim.conv2d(pooled, make_divisible(channels / squeeze_factor, divisible_by),
                           [1, 1], normalizer_fn=None, activation_fn=tf.nn.relu, scope='Conv')
    gate = slim.conv2d(squeezed, channels, [1, 1], normalizer_fn=None,
                       activation_fn=hard_sigmoid, scope='Conv_1')
    return net * gate


def inverted_residual(net, depth, expansion_depth, kernel=3, stride=1, activation_fn=None,
                      use_squeeze_excite=False, residual=True, fused=False,
                      use_explicit_padding=False, end_points=None, scope=None):
  """Builds one (possibly fused) inverted-residual block.

  Args:
    net: [B, H, W, C] input with a static C.
    depth: output depth.
    expansion_depth: inner depth; no 'expand' conv when it is not above C.
    kernel: size of the depthwise (or fused expansion) convolution.
    stride: its stride.
    activation_fn: non-linearity of the expansion and depthwise convs (None:
      the enclosing arg_scope's); the projection is always linear.
    use_squeeze_excite: gate the channels before the projection.
    residual: add the input back when stride is 1 and C == depth.
    fused: expand with a kernel x kernel conv and skip the depthwise one.
    use_explicit_padding: pad explicitly before k x k convolutions (the
      caller sets VALID padding in the arg_scope).
    end_points: optional dict receiving 'expansion_output',
      'depthwise_output' and 'output'.
    scope: variable scope of the block.

  Returns:
    [B, H / stride, W / stride, depth] tensor.

  Raises:
    ValueError: if a fused block that does not expand has a stride.
  """
  end_points = end_points if end_points is not None else {}
  inner_kwargs = {} if activation_fn is None else {'activation_fn': activation_fn}
  in_depth = int(net.shape[-1])
  with tf.compat.v1.variable_scope(scope, default_name='expanded_conv', values=[net]):
    shortcut = net
    expands = expansion_depth > in_depth
    if fused:
      if not expands and stride != 1:
        raise ValueError('a fused bottleneck needs expansion_depth (%d) above its input depth '
                         '(%d) to carry stride %d' % (expansion_depth, in_depth, stride))
      if expands:
        if use_explicit_padding:
          net = fixed_padding(net, kernel)
        net = slim.conv2d(net, expansion_depth, [kernel, kernel], stride=stride,
                          scope='expand', **inner_kwargs)
        net = end_points['expansion_output'] = tf.identity(net, name='expansion_output')
    else:
      if expands:
        net = slim.conv2d(net, expansion_depth, [1, 1], scope='expand', **inner_kwargs)
        net = end_points['expansion_output'] = tf.identity(net, name='expansion_output')
      if use_explicit_padding:
        net = fixed_padding(net, kernel)
      net = slim.separable_conv2d(net, None, [kernel, kernel], depth_multiplier=1,
                                  stride=stride, scope='depthwise', **inner_kwargs)
      net = end_points['depthwise_output'] = tf.identity(net, name='depthwise_output')
    if use_squeeze_excite:
      net = squeeze_excite(net)
    net = slim.conv2d(net, depth, [1, 1], activation_fn=None, scope='project')
    if residual and stride == 1 and depth == in_depth:
      net += shortcut
    net = end_points['output'] = tf.identity(net, name='output')
  return net


def _global_average_pool(net):
  """[B, H, W, C] -> [B, 1, 1, C] mean over the spatial dimensions."""
  return tf.reduce_mean(net, axis=[1, 2], keepdims=True, name='AvgPool2D')


class _ScopeNamer:
  """Hands out 'Conv', 'Conv_1', 'Conv_2'... like slim's default layer names."""

  def __init__(self):
    self._counts = collections.Counter()

  def __call__(self, base):
    count = self._counts[base]
    self._counts[base] += 1
    return base if count == 0 else '%s_%d' % (base, count)


def _layer_depth(layer, depth_multiplier, min_depth, divisible_by, scale):
  """Output depth of a Conv/Bottleneck layer after the width multiplier."""
  if not scale:
    return layer.depth
  return make_divisible(layer.depth * depth_multiplier, divisible_by, min_depth)


def build_mobilenet(inputs, architecture, depth_multiplier=1.0, min_depth=8, divisible_by=8,
                    final_endpoint=None, use_explicit_padding=False, is_training=None,
                    keep_last_layer_depth=False, scope=None, reuse=None):
  """Builds `architecture` on `inputs` up to `final_endpoint`.

  The network's own settings (batch norm with center and scale after every
  convolution, its default activation, SAME or VALID padding) are set
  inside, so they win over the caller's arg_scope; initializers,
  regularizers and batch-norm decay/epsilon/is_training come from the
  caller (see mobilenet_v2_v3.training_scope).

  Args:
    inputs: float [B, H, W, C] images.
    architecture: an Architecture.
    depth_multiplier: width multiplier of every layer's depth (> 0).
    min_depth: smallest depth of a layer after the multiplier.
    divisible_by: layer depths are rounded to multiples of this.
    final_endpoint: 'layer_k' to stop after (default: build every layer).
    use_explicit_padding: pad explicitly and convolve VALID, so outputs do
      not depend on whether sizes are odd.
    is_training: batch norm's is_training; None leaves it to the arg_scope.
    keep_last_layer_depth: do not scale the last layer's depth (the
      "finegrain classification mode" of small multipliers).
    scope: variable scope (name or VariableScope), default architecture.scope.
    reuse: passed to the variable scope.

  Returns:
    (net, end_points): the last built layer and {end point name: tensor}.

  Raises:
    ValueError: on a non-positive depth_multiplier or an unknown final_endpoint.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be positive, got %s' % depth_multiplier)
  num_layers = len(architecture.layers)
  valid_endpoints = ['layer_%d' % (i + 1) for i in range(num_layers)]
  if final_endpoint is not None and final_endpoint not in valid_endpoints:
    raise ValueError('final_endpoint %r is not one of layer_1..layer_%d of %s'
                     % (final_endpoint, num_layers, architecture.scope))
  padding = 'VALID' if use_explicit_padding else 'SAME'
  norm_scope = {} if is_training is None else {'is_training': is_training}
  end_points = {}
  namer = _ScopeNamer()
  with tf.compat.v1.variable_scope(scope, default_name=architecture.scope, values=[inputs],
                                   reuse=reuse), \
      slim.arg_scope([slim.batch_norm], center=True, scale=True, **norm_scope), \
      slim.arg_scope([slim.conv2d, slim.separable_conv2d], normalizer_fn=slim.batch_norm,
                     activation_fn=architecture.activation_fn, padding=padding):
    net = inputs
    for index, layer in enumerate(architecture.layers):
      name = valid_endpoints[index]
      scale = not (keep_last_layer_depth and index == num_layers - 1)
      if isinstance(layer, ConvLayer):
        net = _conv_layer(net, layer, _layer_depth(layer, depth_multiplier, min_depth,
                                                   divisible_by, scale),
                          use_explicit_padding, namer('Conv'))
      elif isinstance(layer, BottleneckLayer):
        block_points = {}
        net = inverted_residual(
            net, _layer_depth(layer, depth_multiplier, min_depth, divisible_by, scale),
            make_divisible(int(net.shape[-1]) * layer.expansion, layer.expansion_divisor),
            kernel=layer.kernel, stride=layer.stride, activation_fn=layer.activation_fn,
            use_squeeze_excite=layer.squeeze_excite, residual=layer.residual,
            fused=layer.fused, use_explicit_padding=use_explicit_padding,
            end_points=block_points, scope=namer('expanded_conv'))
        for key, tensor in block_points.items():
          end_points['%s/%s' % (name, key)] = tensor
      elif isinstance(layer, PoolLayer):
        net = _global_average_pool(net)
      else:
        raise ValueError('%s layer %d is a %s, not a ConvLayer, BottleneckLayer or PoolLayer'
                         % (architecture.scope, index + 1, type(layer).__name__))
      end_points[name] = net
      if name == final_endpoint:
        break
  return net, end_points


def _conv_layer(net, layer, depth, use_explicit_padding, scope):
  """One ConvLayer; explicit padding applies to kernels above 1x1."""
  kwargs = {}
  if layer.activation_fn is not None:
    kwargs['activation_fn'] = layer.activation_fn
  if not layer.batch_norm:
    kwargs['normalizer_fn'] = None
  if use_explicit_padding:
    net = fixed_padding(net, layer.kernel)
  return slim.conv2d(net, depth, [layer.kernel, layer.kernel], stride=layer.stride,
                     scope=scope, **kwargs)
