"""MobileDet backbones (Xiong et al., 2020): CPU, DSP and EdgeTPU variants.

MobileDet is a family of detection backbones found by architecture search
for one kind of hardware each. They chain four kinds of residual blocks:

* IBN: 1x1 expansion, kxk depthwise, 1x1 linear projection (MobileNet v2's
  inverted bottleneck), optionally with squeeze-and-excite after the
  depthwise layer; `IBNNoExpansion` is the same without the expansion.
* FusedConv: a full kxk convolution that expands, then a 1x1 projection
  (cheaper than a depthwise pair on accelerators that like dense kernels).
* TuckerConv: 1x1 compression, kxk convolution between the two low ranks,
  1x1 expansion (a generalized bottleneck).

Each variant is described here as data (`CPU_SPEC`, `DSP_SPEC`,
`EDGETPU_SPEC`): a stem convolution, then stages, each ending at an
endpoint 'C1'..'C5' (strides 2, 4, 8, 16, 32). The variables are named as in
the OD API's MobileDet checkpoints: blocks open uniquified scopes ('IBN',
'IBN_1', ...; 'FusedConv', ...), inside which slim names the layers 'Conv',
'Conv_1', 'SeparableConv2d' and 'SqueezeExcite/Conv{,_1}'.

Every layer sets its own initializer, regularizer and activation, so an
enclosing arg_scope only reaches batch norm's settings (is_training, decay,
epsilon, center, scale).

Usage:

    with tf.compat.v1.variable_scope('MobileDetCPU'):
      with slim.arg_scope([slim.batch_norm], is_training=True, decay=0.99,
                          epsilon=0.01, center=True, scale=True):
        endpoints = mobiledet.build_backbone(mobiledet.CPU_SPEC, images)
    endpoints['C4'], endpoints['C5']    # strides 16 and 32

Differs on purpose:

* Squeeze-and-excite pools with a spatial mean instead of an average pool
  whose window is the static feature size; the values are the same and the
  graph also accepts images of unknown size.
"""

import collections

import numpy as np
import tensorflow as tf
import tf_slim as slim

# L2 weight decay of every backbone kernel.
WEIGHT_DECAY = 4e-5

# One block of a stage. `kind` is one of 'ibn', 'ibn_no_expansion', 'fused',
# 'tucker'. `expansion` multiplies the input depth ('ibn', 'fused');
# `input_rank_ratio` / `output_rank_ratio` size the two low ranks ('tucker').
Block = collections.namedtuple(
    'Block', ['kind', 'filters', 'kernel_size', 'stride', 'expansion', 'residual',
              'input_rank_ratio', 'output_rank_ratio'])

# A backbone: stem depth, activation name ('relu6' or 'swish6'), whether IBN
# blocks squeeze-and-excite, and stages as (endpoint name, [Block, ...]).
BackboneSpec = collections.namedtuple(
    'BackboneSpec', ['stem_filters', 'activation', 'use_se', 'stages'])


def _block(kind, filters, expansion=None, kernel_size=3, stride=1, residual=True,
           input_rank_ratio=None, output_rank_ratio=None):
  return Block(kind, filters, kernel_size, stride, expansion, residual,
               input_rank_ratio, output_rank_ratio)


def _ibn(filters, expansion, **kwargs):
  return _block('ibn', filters, expansion=expansion, **kwargs)


def _fused(filters, expansion, **kwargs):
  return _block('fused', filters, expansion=expansion, **kwargs)


def _tucker(filters, input_rank_ratio, output_rank_ratio, **kwargs):
  return _block('tucker', filters, input_rank_ratio=input_rank_ratio,
                output_rank_ratio=output_rank_ratio, **kwargs)


def _ibn_no_expansion(filters):
  return _block('ibn_no_expansion', filters, residual=False)


# A block that changes depth or stride cannot add its input back: those say
# residual=False explicitly, matching the searched architectures.
CPU_SPEC = BackboneSpec(
    stem_filters=16, activation='swish6', use_se=True, stages=[
        ('C1', [_ibn_no_expansion(8)]),
        ('C2', [_ibn(16, 4, stride=2, residual=False)]),
        ('C3', [_ibn(32, 8, stride=2, residual=False),
                _ibn(32, 4), _ibn(32, 4), _ibn(32, 4)]),
        ('C4', [_ibn(72, 8, kernel_size=5, stride=2, residual=False),
                _ibn(72, 8), _ibn(72, 4, kernel_size=5), _ibn(72, 4),
                _ibn(72, 8, residual=False), _ibn(72, 8), _ibn(72, 8),
                _ibn(72, 8)]),
        ('C5', [_ibn(104, 8, kernel_size=5, stride=2, residual=False),
                _ibn(104, 4, kernel_size=5), _ibn(104, 4, kernel_size=5),
                _ibn(104, 4), _ibn(144, 8, residual=False)]),
    ])

DSP_SPEC = BackboneSpec(
    stem_filters=32, activation='relu6', use_se=False, stages=[
        ('C1', [_ibn_no_expansion(24)]),
        ('C2', [_fused(32, 4, stride=2, residual=False), _fused(32, 4),
                _ibn(32, 4), _tucker(32, 0.25, 0.75)]),
        ('C3', [_fused(64, 8, stride=2, residual=False), _ibn(64, 4),
                _fused(64, 4), _fused(64, 4)]),
        ('C4', [_fused(120, 8, stride=2, residual=False), _ibn(120, 4),
                _ibn(120, 8), _ibn(120, 8), _fused(144, 8, residual=False),
                _ibn(144, 8), _ibn(144, 8), _ibn(144, 8)]),
        ('C5', [_ibn(160, 4, stride=2, residual=False), _ibn(160, 4),
                _fused(160, 4), _tucker(160, 0.75, 0.75),
                _ibn(240, 8, residual=False)]),
    ])

EDGETPU_SPEC = BackboneSpec(
    stem_filters=32, activation='relu6', use_se=False, stages=[
        ('C1', [_tucker(16, 0.25, 0.75, residual=False)]),
        ('C2', [_fused(16, 8, stride=2, residual=False), _fused(16, 4),
                _fused(16, 8), _fused(16, 4)]),
        ('C3', [_fused(40, 8, kernel_size=5, stride=2, residual=False),
                _fused(40, 4), _fused(40, 4), _fused(40, 4)]),
        ('C4', [_ibn(72, 8, stride=2, residual=False), _ibn(72, 8),
                _fused(72, 4), _fused(72, 4),
                _ibn(96, 8, kernel_size=5, residual=False),
                _ibn(96, 8, kernel_size=5), _ibn(96, 8), _ibn(96, 8)]),
        ('C5', [_ibn(120, 8, kernel_size=5, stride=2, residual=False),
                _ibn(120, 8), _ibn(120, 4, kernel_size=5), _ibn(120, 8),
                _ibn(384, 8, kernel_size=5, residual=False)]),
    ])

SPECS = {'cpu': CPU_SPEC, 'dsp': DSP_SPEC, 'edgetpu': EDGETPU_SPEC}


def scale_filters(filters, multiplier, base=8):
  """Rounds `filters * multiplier` half up to a multiple of `base` (at least `base`).

  Args:
    filters: a depth (int or tf.Dimension-like).
    multiplier: float width multiplier.
    base: the depth granularity.

  Returns:
    The scaled depth, an int.
  """
  rounded = int(int(filters) * multiplier / base + 0.5) * base
  return max(rounded, base)


def swish6(features):
  """Hard swish, x * relu6(x + 3) / 6: a piecewise-linear swish."""
  with tf.name_scope('swish6'):
    return features * tf.nn.relu6(features + np.float32(3)) * np.float32(1. / 6.)


_ACTIVATIONS = {'relu6': tf.nn.relu6, 'swish6': swish6}


def _he_normal():
  return tf.compat.v1.initializers.he_normal()


def _conv(inputs, filters, kernel_size, stride=1, activation_fn=tf.nn.relu6,
          normalizer_fn=slim.batch_norm):
  """A SAME-padded convolution with He initialization and the backbone's decay."""
  return slim.conv2d(inputs, filters, kernel_size, stride=stride, padding='SAME',
                     activation_fn=activation_fn, normalizer_fn=normalizer_fn,
                     weights_initializer=_he_normal(),
                     weights_regularizer=slim.l2_regularizer(WEIGHT_DECAY))


def _depthwise_conv(inputs, kernel_size, stride, activation_fn):
  """A depthwise kxk convolution with batch norm (slim scope 'SeparableConv2d')."""
  # He initialization counted over the k*k taps a depthwise kernel really
  # sees; 0.8796... undoes the variance a 2-sigma truncation removes.
  stddev = (2.0 / kernel_size**2)**0.5 / .87962566103423978
  return slim.separable_conv2d(
      inputs, None, kernel_size, stride=stride, padding='SAME',
      activation_fn=activation_fn, normalizer_fn=slim.batch_norm,
      weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=stddev),
      pointwise_initializer=_he_normal(),
      weights_regularizer=slim.l2_regularizer(WEIGHT_DECAY))


def _squeeze_and_excite(inputs, hidden_filters, activation_fn):
  """Rescales each channel by a gate computed from the global mean of all channels."""
  with tf.compat.v1.variable_scope(None, default_name='SqueezeExcite'):
    pooled = tf.reduce_mean(inputs, axis=[1, 2], keepdims=True)
    hidden = _conv(pooled, hidden_filters, 1, activation_fn=activation_fn,
                   normalizer_fn=None)
    gate = _conv(hidden, int(inputs.shape[-1]), 1, activation_fn=tf.nn.sigmoid,
                 normalizer_fn=None)
    return gate * inputs


def _project(inputs, filters, shortcut, residual):
  """The linear 1x1 projection ending every block, plus the shortcut when asked."""
  outputs = _conv(inputs, filters, 1, activation_fn=tf.identity)
  return outputs + shortcut if residual else outputs


def _expanded_depth(inputs, block):
  if block.expansion is None or block.expansion <= 1:
    raise ValueError('%s block needs expansion > 1, got %r' % (block.kind, block.expansion))
  return int(inputs.shape[-1]) * block.expansion


def _ibn_block(inputs, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='IBN'):
    expanded = _expanded_depth(inputs, block)
    net = _conv(inputs, expanded, 1, activation_fn=activation_fn)
    net = _depthwise_conv(net, block.kernel_size, block.stride, activation_fn)
    if use_se:
      net = _squeeze_and_excite(net, scale_filters(expanded, 0.25), activation_fn)
    return _project(net, filters, inputs, block.residual)


def _ibn_no_expansion_block(inputs, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='IBNNoExpansion'):
    net = _depthwise_conv(inputs, block.kernel_size, block.stride, activation_fn)
    if use_se:
      net = _squeeze_and_excite(net, scale_filters(net.shape[-1], 0.25), activation_fn)
    return _project(net, filters, inputs, block.residual)


def _fused_block(inputs, block, filters, activation_fn, use_se):
  with tf.compat.v1.variable_scope(None, default_name='FusedConv'):
    expanded = _expanded_depth(inputs, block)
    net = _conv(inputs, expanded, block.kernel_size, stride=block.stride,
                activation_fn=activation_fn)
    if use_se:
      net = _squeeze_and_excite(net, scale_filters(expanded, 0.25), activation_fn)
    return _project(net, filters, inputs, block.residual)


def _tucker_block(inputs, block, filters, activation_fn, use_se):
  del use_se  # The searched architectures never excite a Tucker block.
  with tf.compat.v1.variable_scope(None, default_name='TuckerConv'):
    input_rank = scale_filters(inputs.shape[-1], block.input_rank_ratio)
    net = _conv(inputs, input_rank, 1, activation_fn=activation_fn)
    output_rank = scale_filters(filters, block.output_rank_ratio)
    net = _conv(net, output_rank, block.kernel_size, stride=block.stride,
                activation_fn=activation_fn)
    return _project(net, filters, inputs, block.residual)


_BLOCK_BUILDERS = {
    'ibn': _ibn_block,
    'ibn_no_expansion': _ibn_no_expansion_block,
    'fused': _fused_block,
    'tucker': _tucker_block,
}


def build_backbone(spec, images, multiplier=1.0):
  """Builds a MobileDet backbone in the current variable scope.

  Args:
    spec: a BackboneSpec (CPU_SPEC, DSP_SPEC or EDGETPU_SPEC).
    images: [B, H, W, 3] float tensor, preprocessed to [-1, 1].
    multiplier: width multiplier of every layer (depths stay multiples of 8).

  Returns:
    {'C1'..'C5': tensor} of the stage outputs at strides 2 to 32.

  Raises:
    ValueError: on an unknown activation or block kind in `spec`.
  """
  if spec.activation not in _ACTIVATIONS:
    raise ValueError('spec.activation must be one of %s, got %r'
                     % (sorted(_ACTIVATIONS), spec.activation))
  activation_fn = _ACTIVATIONS[spec.activation]
  net = _conv(images, scale_filters(spec.stem_filters, multiplier), 3, stride=2,
              activation_fn=activation_fn)
  endpoints = {}
  for endpoint, blocks in spec.stages:
    for block in blocks:
      if block.kind not in _BLOCK_BUILDERS:
        raise ValueError('block kind must be one of %s, got %r'
                         % (sorted(_BLOCK_BUILDERS), block.kind))
      net = _BLOCK_BUILDERS[block.kind](net, block, scale_filters(block.filters, multiplier),
                                        activation_fn, spec.use_se)
    endpoints[endpoint] = net
  return endpoints
