"""Inception-ResNet-v2 (Szegedy et al., 2016), the trunk only, in TF-Slim.

tf_slim 1.1.0 ships no Inception-ResNet, so the network is written here with
the variable names and shapes of slim's classification checkpoint
`inception_resnet_v2_2016_08_30` (and of the OD API's zoo detectors built on
it), so either restores.

The net is a stem, one Inception block, and three runs of residual blocks
with a grid reduction between runs:

    scope / end point     what                        299x299, VALID   depth
    Conv2d_1a_3x3 ..      the stem: 5 convolutions,   35x35            192
      MaxPool_5a_3x3        2 max pools
    Mixed_5b              Inception block             35x35            320
    Repeat                10 x block35, scale 0.17    35x35            320
    Mixed_6a              reduction                   17x17           1088
    Repeat_1              20 x block17, scale 0.10    17x17           1088
      (end point PreAuxLogits)
    Mixed_7a              reduction                   8x8             2080
    Repeat_2, Block8      9 x block8, scale 0.20,     8x8             2080
                            then one unscaled without activation
    Conv2d_7b_1x1         1x1 convolution             8x8             1536

A residual block runs two or three towers of convolutions ('Branch_0', ...),
concatenates them, projects back to the input depth with a biased 1x1
convolution ('Conv2d_1x1', no batch norm, no activation), scales that by a
small constant (training stability) and adds it to its input.

`align_feature_maps=True` turns every VALID padding into SAME, so each map is
ceil(input size / its stride) and stays aligned with the image (what a
detector wants). `output_stride=8` keeps Mixed_6a at stride 8 and dilates
the block17 run by 2 instead (atrous), which only works up to PreAuxLogits.

Usage:

    with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope()):
      net, end_points = inception_resnet_v2.inception_resnet_v2_base(
          images, final_endpoint='PreAuxLogits', output_stride=16,
          align_feature_maps=True)        # 96x96 images -> [B, 6, 6, 1088]

Differs on purpose from slim's version:
  * `final_endpoint` and the `output_stride` / `final_endpoint` combination
    are checked before anything is built.
"""

import collections

import tensorflow as tf
import tf_slim as slim

DEFAULT_SCOPE = 'InceptionResnetV2'

ENDPOINTS = ('Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3',
             'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a',
             'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1')

# The last end point an atrous (output stride 8) network can reach.
_LAST_ATROUS_ENDPOINT = 'PreAuxLogits'

# One layer of a tower. depth is the number of filters, or 'max' / 'avg' for
# a pooling layer. A `reduces` layer is where a reduction block shrinks the
# grid: it takes the block's reduction stride and padding.
Layer = collections.namedtuple('Layer', ['name', 'depth', 'kernel', 'reduces'])


def _layer(name, depth, kernel, reduces=False):
  return Layer(name, depth, kernel, reduces)


# Towers (Branch_0, Branch_1, ...) of each block, in concatenation order.
_MIXED_5B = (
    (_layer('Conv2d_1x1', 96, 1),),
    (_layer('Conv2d_0a_1x1', 48, 1), _layer('Conv2d_0b_5x5', 64, 5)),
    (_layer('Conv2d_0a_1x1', 64, 1), _layer('Conv2d_0b_3x3', 96, 3),
     _layer('Conv2d_0c_3x3', 96, 3)),
    (_layer('AvgPool_0a_3x3', 'avg', 3), _layer('Conv2d_0b_1x1', 64, 1)),
)
_MIXED_6A = (
    (_layer('Conv2d_1a_3x3', 384, 3, reduces=True),),
    (_layer('Conv2d_0a_1x1', 256, 1), _layer('Conv2d_0b_3x3', 256, 3),
     _layer('Conv2d_1a_3x3', 384, 3, reduces=True)),
    (_layer('MaxPool_1a_3x3', 'max', 3, reduces=True),),
)
_MIXED_7A = (
    (_layer('Conv2d_0a_1x1', 256, 1), _layer('Conv2d_1a_3x3', 384, 3, reduces=True)),
    (_layer('Conv2d_0a_1x1', 256, 1), _layer('Conv2d_1a_3x3', 288, 3, reduces=True)),
    (_layer('Conv2d_0a_1x1', 256, 1), _layer('Conv2d_0b_3x3', 288, 3),
     _layer('Conv2d_1a_3x3', 320, 3, reduces=True)),
    (_layer('MaxPool_1a_3x3', 'max', 3, reduces=True),),
)
_BLOCK35 = (
    (_layer('Conv2d_1x1', 32, 1),),
    (_layer('Conv2d_0a_1x1', 32, 1), _layer('Conv2d_0b_3x3', 32, 3)),
    (_layer('Conv2d_0a_1x1', 32, 1), _layer('Conv2d_0b_3x3', 48, 3),
     _layer('Conv2d_0c_3x3', 64, 3)),
)
_BLOCK17 = (
    (_layer('Conv2d_1x1', 192, 1),),
    (_layer('Conv2d_0a_1x1', 128, 1), _layer('Conv2d_0b_1x7', 160, [1, 7]),
     _layer('Conv2d_0c_7x1', 192, [7, 1])),
)
_BLOCK8 = (
    (_layer('Conv2d_1x1', 192, 1),),
    (_layer('Conv2d_0a_1x1', 192, 1), _layer('Conv2d_0b_1x3', 224, [1, 3]),
     _layer('Conv2d_0c_3x1', 256, [3, 1])),
)


def _towers(net, towers, stride=1, padding='SAME'):
  """Runs each tower on `net` in its own 'Branch_<i>' scope; concatenates the ends.

  Args:
    net: float [B, H, W, D].
    towers: sequence of towers, each a sequence of `Layer`s.
    stride, padding: what the `reduces` layers use (the others keep the
      enclosing arg_scope's stride 1, SAME).

  Returns:
    The towers' outputs concatenated along depth.
  """
  ends = []
  for index, tower in enumerate(towers):
    with tf.compat.v1.variable_scope('Branch_%d' % index):
      out = net
      for layer in tower:
        where = dict(stride=stride, padding=padding) if layer.reduces else {}
        if layer.depth == 'max':
          out = slim.max_pool2d(out, layer.kernel, scope=layer.name, **where)
        elif layer.depth == 'avg':
          out = slim.avg_pool2d(out, layer.kernel, scope=layer.name, **where)
        else:
          out = slim.conv2d(out, layer.depth, layer.kernel, scope=layer.name, **where)
      ends.append(out)
  return tf.concat(ends, axis=3)


def _residual(net, towers, scale, activation_fn, scope, default_name, reuse):
  """net + scale * project(towers(net)), then `activation_fn` (if any).

  The projection back to the input depth has a bias and no batch norm. With
  relu6 the scaled residual is clipped to [-6, 6] as well, so that the sum
  stays within a band around the input.

  Args:
    net: float [B, H, W, D]; the result has the same shape.
    towers: the block's towers (see `_towers`).
    scale: multiplier of the projected residual.
    activation_fn: applied to the sum, or None.
    scope, default_name, reuse: of the block's variable scope.
  """
  with tf.compat.v1.variable_scope(scope, default_name, [net], reuse=reuse):
    mixed = _towers(net, towers)
    residual = slim.conv2d(mixed, net.shape[3], 1, normalizer_fn=None, activation_fn=None,
                           scope='Conv2d_1x1')
    residual = residual * scale
    if activation_fn == tf.nn.relu6:
      residual = tf.clip_by_value(residual, -6.0, 6.0)
    net = net + residual
    return activation_fn(net) if activation_fn else net


def repeat_block(net, block, count, scope, **block_kwargs):
  """`count` blocks in a row, in `scope`, named '<block name>_1' ... '<block name>_<count>'.

  The naming of slim.repeat without a scope (its scope would also become the
  blocks' prefix), but with the run's scope given, so it does not depend on
  how many runs came before.
  """
  with tf.compat.v1.variable_scope(scope, values=[net]):
    for index in range(1, count + 1):
      net = block(net, scope='%s_%d' % (block.__name__, index), **block_kwargs)
  return net


def block35(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """The 35x35 residual block (three towers, 128 deep, projected to the input depth)."""
  return _residual(net, _BLOCK35, scale, activation_fn, scope, 'Block35', reuse)


def block17(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """The 17x17 residual block (1x7 and 7x1 convolutions, 384 deep before projection)."""
  return _residual(net, _BLOCK17, scale, activation_fn, scope, 'Block17', reuse)


def block8(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """The 8x8 residual block (1x3 and 3x1 convolutions, 448 deep before projection)."""
  return _residual(net, _BLOCK8, scale, activation_fn, scope, 'Block8', reuse)


def mixed_7a(net, padding='VALID'):
  """The 17x17 -> 8x8 reduction to 2080 channels, in scope 'Mixed_7a'.

  Expects the enclosing arg_scope to set stride 1 and SAME padding for the
  layers that do not reduce.
  """
  with tf.compat.v1.variable_scope('Mixed_7a'):
    return _towers(net, _MIXED_7A, stride=2, padding=padding)


def block8_tail(net, activation_fn=tf.nn.relu, repeat_scope='Repeat_2'):
  """Everything after Mixed_7a: 9 x block8, a last block8, Conv2d_7b_1x1.

  The last block8 ('Block8') has unit scale and no activation. The first
  stage of a Faster R-CNN has no 'Repeat_2', so its second stage names the
  run 'Repeat' (`repeat_scope`).

  Returns:
    float [B, H, W, 1536].
  """
  net = repeat_block(net, block8, 9, repeat_scope, scale=0.20, activation_fn=activation_fn)
  net = block8(net, activation_fn=None, scope='Block8')
  return slim.conv2d(net, 1536, 1, scope='Conv2d_7b_1x1')


def _check_arguments(final_endpoint, output_stride):
  if final_endpoint not in ENDPOINTS:
    raise ValueError('final_endpoint must be one of %s, got %r' % (ENDPOINTS, final_endpoint))
  if output_stride not in (8, 16):
    raise ValueError('output_stride must be 8 or 16, got %r' % (output_stride,))
  if (output_stride == 8 and
      ENDPOINTS.index(final_endpoint) > ENDPOINTS.index(_LAST_ATROUS_ENDPOINT)):
    raise ValueError('output_stride 8 reaches only up to final_endpoint %r, got %r'
                     % (_LAST_ATROUS_ENDPOINT, final_endpoint))


def _stages(output_stride, padding, activation_fn):
  """[(end point name, fn(net) -> net)] of the whole trunk, in order."""
  atrous = output_stride == 8
  conv, max_pool = slim.conv2d, slim.max_pool2d

  def block17_run(net):
    # Atrous: Mixed_6a kept the stride-8 grid, so dilate to keep the field of view.
    with slim.arg_scope([slim.conv2d], rate=2 if atrous else 1):
      return repeat_block(net, block17, 20, 'Repeat_1', scale=0.10,
                          activation_fn=activation_fn)

  def mixed_5b(net):
    with tf.compat.v1.variable_scope('Mixed_5b'):
      return _towers(net, _MIXED_5B)

  def block35_run_and_mixed_6a(net):
    net = repeat_block(net, block35, 10, 'Repeat', scale=0.17, activation_fn=activation_fn)
    with tf.compat.v1.variable_scope('Mixed_6a'):
      return _towers(net, _MIXED_6A, stride=1 if atrous else 2, padding=padding)

  return [
      ('Conv2d_1a_3x3', lambda net: conv(net, 32, 3, stride=2, padding=padding,
                                         scope='Conv2d_1a_3x3')),
      ('Conv2d_2a_3x3', lambda net: conv(net, 32, 3, padding=padding, scope='Conv2d_2a_3x3')),
      ('Conv2d_2b_3x3', lambda net: conv(net, 64, 3, scope='Conv2d_2b_3x3')),
      ('MaxPool_3a_3x3', lambda net: max_pool(net, 3, stride=2, padding=padding,
                                              scope='MaxPool_3a_3x3')),
      ('Conv2d_3b_1x1', lambda net: conv(net, 80, 1, padding=padding, scope='Conv2d_3b_1x1')),
      ('Conv2d_4a_3x3', lambda net: conv(net, 192, 3, padding=padding,
                                         scope='Conv2d_4a_3x3')),
      ('MaxPool_5a_3x3', lambda net: max_pool(net, 3, stride=2, padding=padding,
                                              scope='MaxPool_5a_3x3')),
      ('Mixed_5b', mixed_5b),
      ('Mixed_6a', block35_run_and_mixed_6a),
      ('PreAuxLogits', block17_run),
      ('Mixed_7a', lambda net: mixed_7a(net, padding)),
      ('Conv2d_7b_1x1', lambda net: block8_tail(net, activation_fn, 'Repeat_2')),
  ]


def inception_resnet_v2_base(inputs, final_endpoint='Conv2d_7b_1x1', output_stride=16,
                             align_feature_maps=False, scope=None,
                             activation_fn=tf.nn.relu):
  """Builds Inception-ResNet-v2 from `inputs` up to `final_endpoint`.

  Args:
    inputs: float [B, H, W, 3] (values in [-1, 1] for the slim checkpoint).
    final_endpoint: the last end point to build, one of ENDPOINTS.
    output_stride: 16, or 8 (atrous; only up to 'PreAuxLogits').
    align_feature_maps: use SAME instead of VALID padding everywhere.
    scope: variable scope (name or VariableScope); default 'InceptionResnetV2'.
    activation_fn: activation after each residual addition (not after the
      last 'Block8').

  Returns:
    (the final end point's tensor, {end point name: tensor} up to it).

  Raises:
    ValueError: for an unknown `final_endpoint`, an `output_stride` other than
      8 or 16, or output stride 8 with an end point after 'PreAuxLogits'.
  """
  _check_arguments(final_endpoint, output_stride)
  padding = 'SAME' if align_feature_maps else 'VALID'
  end_points = {}
  with tf.compat.v1.variable_scope(scope, DEFAULT_SCOPE, [inputs]):
    with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1,
                        padding='SAME'):
      net = inputs
      for name, stage in _stages(output_stride, padding, activation_fn):
        net = stage(net)
        end_points[name] = net
        if name == final_endpoint:
          return net, end_points
  raise AssertionError('unreachable: final_endpoint was checked')


def inception_resnet_v2_arg_scope(weight_decay=0.00004, batch_norm_decay=0.9997,
                                  batch_norm_epsilon=0.001, activation_fn=tf.nn.relu,
                                  batch_norm_updates_collections=(
                                      tf.compat.v1.GraphKeys.UPDATE_OPS),
                                  batch_norm_scale=False):
  """The arg_scope the slim checkpoint was trained with.

  L2 decay on conv and fully connected weights and biases; every conv has
  batch norm (without gamma unless `batch_norm_scale`) and `activation_fn`.
  The residual projections override both (they have biases instead).

  Returns:
    An arg_scope dict for `slim.arg_scope`.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  batch_norm_params = dict(decay=batch_norm_decay, epsilon=batch_norm_epsilon,
                           updates_collections=batch_norm_updates_collections,
                           fused=None, scale=batch_norm_scale)
  with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_regularizer=regularizer,
                      biases_regularizer=regularizer):
    with slim.arg_scope([slim.conv2d], activation_fn=activation_fn,
                        normalizer_fn=slim.batch_norm,
                        normalizer_params=batch_norm_params) as scope:
      return scope
