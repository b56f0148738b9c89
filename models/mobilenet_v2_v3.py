"""MobileNet v2, v3 (large, small) and MobileNet-EdgeTPU, as tf_slim.nets lacks them.

Each network comes as a `*_base` function (the convolutional trunk, for
detection) and a classifier (trunk plus a 'Logits' head), with the variable
names of the public slim classification checkpoints, so either restores from
them and an SSD's feature extractor fine-tunes from a classifier trained here:

    network                 scope              stride 16 / stride 32 end points
    mobilenet_v2            MobilenetV2        layer_15/expansion_output, layer_19
    mobilenet_v3_large      MobilenetV3        layer_14/expansion_output, layer_17
    mobilenet_v3_small      MobilenetV3        layer_10/expansion_output, layer_13
    mobilenet_edgetpu       MobilenetEdgeTPU   layer_18/expansion_output, layer_23

('layer_k' is the k-th layer's output; see models/mobilenet_blocks.py.) The
*_DETECTION architectures halve the depth of v3's last stride-32 layers, as
the OD API's SSD MobileNet v3 zoo models do; MOBILENET_V2_FPN_LITE ends in a
256-deep layer_19 (the OD API's FPN-lite backbone).

Usage (classification):

    with slim.arg_scope(mobilenet_v2_v3.training_scope(is_training=True)):
      logits, end_points = mobilenet_v2_v3.mobilenet_v2(images, num_classes=1001,
                                                        is_training=True)

Usage (a detection trunk):

    with slim.arg_scope(mobilenet_v2_v3.training_scope(is_training=True, bn_decay=0.9997)):
      _, end_points = mobilenet_v2_v3.mobilenet_v2_base(images, min_depth=16,
                                                        final_endpoint='layer_19')

Differs on purpose:
  * training_scope does not set dropout's keep probability; the classifiers
    take dropout_keep_prob (default 0.8) instead.
  * the classifiers pool with a mean over the feature map (no variables, so
    checkpoints are unaffected).
"""

import tensorflow as tf
import tf_slim as slim

from models.mobilenet_blocks import Architecture
from models.mobilenet_blocks import BottleneckLayer as Bottleneck
from models.mobilenet_blocks import ConvLayer as Conv
from models.mobilenet_blocks import PoolLayer
from models.mobilenet_blocks import build_mobilenet
from models.mobilenet_blocks import hard_swish

_RELU = tf.nn.relu
_HSWISH = hard_swish


def _v2_layers(head_depth):
  """MobileNet v2's layers, written as the paper's (t, c, n, s) stage table."""
  stages = [  # expansion t, depth c, repeats n, first stride s
      (1, 16, 1, 1),
      (6, 24, 2, 2),
      (6, 32, 3, 2),
      (6, 64, 4, 2),
      (6, 96, 3, 1),
      (6, 160, 3, 2),
      (6, 320, 1, 1),
  ]
  layers = [Conv(32, kernel=3, stride=2)]
  for expansion, depth, repeats, stride in stages:
    for repeat in range(repeats):
      # Expansion 1 means "no expansion": never round the inner depth up.
      layers.append(Bottleneck(depth, expansion=expansion, stride=stride if repeat == 0 else 1,
                               expansion_divisor=1 if expansion == 1 else 8))
  layers.append(Conv(head_depth, kernel=1))
  return layers


def _v3_layers(rows, stem_activation, head):
  """Stem + one Bottleneck per (kernel, expansion, depth, se, activation, stride) row + head."""
  layers = [Conv(16, kernel=3, stride=2, activation_fn=stem_activation)]
  for kernel, expansion, depth, se, activation, stride in rows:
    layers.append(Bottleneck(depth, expansion=expansion, kernel=kernel, stride=stride,
                             activation_fn=activation, squeeze_excite=se))
  return layers + head


_V3_LARGE_ROWS = [  # kernel, expansion, depth, squeeze-excite, activation, stride
    (3, 1, 16, False, _RELU, 1),
    (3, 4, 24, False, _RELU, 2),
    (3, 3, 24, False, _RELU, 1),
    (5, 3, 40, True, _RELU, 2),
    (5, 3, 40, True, _RELU, 1),
    (5, 3, 40, True, _RELU, 1),
    (3, 6, 80, False, _HSWISH, 2),
    (3, 2.5, 80, False, _HSWISH, 1),
    (3, 184 / 80, 80, False, _HSWISH, 1),
    (3, 184 / 80, 80, False, _HSWISH, 1),
    (3, 6, 112, True, _HSWISH, 1),
    (3, 6, 112, True, _HSWISH, 1),
    (5, 6, 160, True, _HSWISH, 2),
    (5, 6, 160, True, _HSWISH, 1),
    (5, 6, 160, True, _HSWISH, 1),
]

_V3_SMALL_ROWS = [
    (3, 1, 16, True, _RELU, 2),
    (3, 72 / 16, 24, False, _RELU, 2),
    (3, 88 / 24, 24, False, _RELU, 1),
    (5, 4, 40, True, _HSWISH, 2),
    (5, 6, 40, True, _HSWISH, 1),
    (5, 6, 40, True, _HSWISH, 1),
    (5, 3, 48, True, _HSWISH, 1),
    (5, 3, 48, True, _HSWISH, 1),
    (5, 6, 96, True, _HSWISH, 2),
    (5, 6, 96, True, _HSWISH, 1),
    (5, 6, 96, True, _HSWISH, 1),
]


def _v3_head(conv_depth, embedding_depth):
  """1x1 conv, global pool, then a 1x1 conv with biases (v3's classification head)."""
  return [Conv(conv_depth, activation_fn=_HSWISH), PoolLayer(),
          Conv(embedding_depth, activation_fn=_HSWISH, batch_norm=False)]


def _edgetpu_layers():
  """MobileNet-EdgeTPU: fused bottlenecks at high resolution, depthwise ones after."""
  fused = [  # kernel 3: expansion, depth, stride
      (1, 16, 1), (8, 32, 2), (4, 32, 1), (4, 32, 1), (4, 32, 1),
      (8, 48, 2), (4, 48, 1), (4, 48, 1), (4, 48, 1)]
  depthwise = [  # kernel, expansion, depth, stride, residual
      (3, 8, 96, 2, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True),
      (3, 8, 96, 1, False), (3, 4, 96, 1, True), (3, 4, 96, 1, True), (3, 4, 96, 1, True),
      (5, 8, 160, 2, True), (5, 4, 160, 1, True), (5, 4, 160, 1, True), (5, 4, 160, 1, True),
      (3, 8, 192, 1, True)]
  layers = [Conv(32, kernel=3, stride=2)]
  layers += [Bottleneck(depth, expansion=expansion, stride=stride, fused=True)
             for expansion, depth, stride in fused]
  layers += [Bottleneck(depth, expansion=expansion, kernel=kernel, stride=stride,
                        residual=residual)
             for kernel, expansion, depth, stride, residual in depthwise]
  return layers + [Conv(1280)]


def _halve_depths(architecture, first, last):
  """Copy of `architecture` with layers first..last (0-based, inclusive) half as deep."""
  layers = list(architecture.layers)
  for index in range(first, last + 1):
    layers[index] = layers[index]._replace(depth=int(round(layers[index].depth * 0.5)))
  return architecture._replace(layers=layers)


MOBILENET_V2 = Architecture('MobilenetV2', tf.nn.relu6, _v2_layers(head_depth=1280))
MOBILENET_V2_FPN_LITE = Architecture('MobilenetV2', tf.nn.relu6, _v2_layers(head_depth=256))
MOBILENET_V3_LARGE = Architecture(
    'MobilenetV3', _RELU, _v3_layers(_V3_LARGE_ROWS, _HSWISH, _v3_head(960, 1280)))
MOBILENET_V3_SMALL = Architecture(
    'MobilenetV3', _RELU, _v3_layers(_V3_SMALL_ROWS, _HSWISH, _v3_head(576, 1024)))
MOBILENET_EDGETPU = Architecture('MobilenetEdgeTPU', _RELU, _edgetpu_layers())
# The OD API's SSD MobileNet v3: the stride-32 bottlenecks and the 1x1 conv after them halved.
MOBILENET_V3_LARGE_DETECTION = _halve_depths(MOBILENET_V3_LARGE, 13, 16)
MOBILENET_V3_SMALL_DETECTION = _halve_depths(MOBILENET_V3_SMALL, 9, 12)


def training_scope(is_training=True, weight_decay=4e-5, stddev=0.09, bn_decay=0.997,
                   bn_epsilon=0.001):
  """Returns the slim arg_scope these networks are trained under.

  Convolutions get a truncated-normal initializer and batch norm; only full
  (not depthwise) convolutions are L2-regularized.

  Args:
    is_training: batch norm's is_training; None leaves it unset (to an
      enclosing arg_scope or the caller).
    weight_decay: L2 weight of the conv2d weights.
    stddev: stddev of the truncated-normal initializer; negative selects
      Xavier (Glorot uniform) initialization.
    bn_decay: batch-norm moving-average decay.
    bn_epsilon: batch-norm epsilon.

  Returns:
    An arg_scope dict for `slim.arg_scope`.
  """
  if stddev < 0:
    initializer = slim.initializers.xavier_initializer()
  else:
    initializer = tf.compat.v1.truncated_normal_initializer(stddev=stddev)
  norm_params = {'decay': bn_decay, 'epsilon': bn_epsilon}
  if is_training is not None:
    norm_params['is_training'] = is_training
  with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.separable_conv2d],
                      weights_initializer=initializer, normalizer_fn=slim.batch_norm), \
      slim.arg_scope([slim.batch_norm], **norm_params), \
      slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay)), \
      slim.arg_scope([slim.separable_conv2d], weights_regularizer=None) as scope:
    return scope


def _base_fn(default_architecture, doc_name, architecture_name):
  """Makes the `*_base` function of one network."""
  def base(inputs, depth_multiplier=1.0, min_depth=8, final_endpoint=None,
           use_explicit_padding=False, is_training=None, architecture=None, scope=None,
           reuse=None):
    architecture = architecture or default_architecture
    return build_mobilenet(inputs, architecture, depth_multiplier=depth_multiplier,
                           min_depth=min_depth, final_endpoint=final_endpoint,
                           use_explicit_padding=use_explicit_padding,
                           is_training=is_training, scope=scope or architecture.scope,
                           reuse=reuse)
  base.__name__ = doc_name + '_base'
  base.__doc__ = """Builds the %s trunk (no pooling, no logits).

  Args:
    inputs: float [B, H, W, 3] images in [-1, 1].
    depth_multiplier: width multiplier (> 0).
    min_depth: smallest layer depth after the multiplier.
    final_endpoint: 'layer_k' to stop after (default: every layer).
    use_explicit_padding: fixed padding + VALID convolutions.
    is_training: batch norm's is_training (None: from the arg_scope).
    architecture: a variant (default %s).
    scope: variable scope (default the architecture's, e.g. %r).
    reuse: variable reuse.

  Returns:
    (net, end_points) as mobilenet_blocks.build_mobilenet.
  """ % (doc_name, architecture_name, default_architecture.scope)
  return base


mobilenet_v2_base = _base_fn(MOBILENET_V2, 'mobilenet_v2', 'MOBILENET_V2')
mobilenet_v3_large_base = _base_fn(MOBILENET_V3_LARGE, 'mobilenet_v3_large',
                                   'MOBILENET_V3_LARGE')
mobilenet_v3_small_base = _base_fn(MOBILENET_V3_SMALL, 'mobilenet_v3_small',
                                   'MOBILENET_V3_SMALL')
mobilenet_edgetpu_base = _base_fn(MOBILENET_EDGETPU, 'mobilenet_edgetpu', 'MOBILENET_EDGETPU')


def _classifier(inputs, architecture, num_classes, depth_multiplier, is_training,
                dropout_keep_prob, keep_last_layer_depth, prediction_fn, reuse, scope):
  """Trunk + 'Logits' head: mean pool, dropout, 1x1 conv with biases to num_classes."""
  if inputs.shape.ndims != 4:
    raise ValueError('inputs must be [batch, height, width, channels], got %s' % inputs.shape)
  with tf.compat.v1.variable_scope(scope or architecture.scope, values=[inputs],
                                   reuse=reuse) as net_scope:
    net, end_points = build_mobilenet(inputs, architecture, depth_multiplier=depth_multiplier,
                                      is_training=is_training,
                                      keep_last_layer_depth=keep_last_layer_depth,
                                      scope=net_scope)
    with tf.compat.v1.variable_scope('Logits'):
      net = tf.reduce_mean(net, axis=[1, 2], keepdims=True, name='global_pool')
      end_points['global_pool'] = net
      if not num_classes:
        return net, end_points
      net = slim.dropout(net, keep_prob=dropout_keep_prob, is_training=is_training,
                         scope='Dropout')
      logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                           biases_initializer=tf.compat.v1.zeros_initializer(),
                           scope='Conv2d_1c_1x1')
      logits = tf.squeeze(logits, [1, 2], name='output')
    end_points['Logits'] = logits
    if prediction_fn:
      end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


_CLASSIFIER_ARGS_DOC = """
  Args:
    inputs: float [B, H, W, 3] images in [-1, 1].
    num_classes: logits per image; 0 or None returns the pooled features
      [B, 1, 1, C] instead (no 'Logits/Conv2d_1c_1x1' layer).
    depth_multiplier: width multiplier (> 0).
    is_training: batch norm and dropout in training mode.
    dropout_keep_prob: keep probability of the dropout before the logits.
    finegrain_classification_mode: keep the last layer's depth unscaled%s.
    prediction_fn: fn(logits, scope) -> end_points['Predictions'].
    reuse: variable reuse.
    scope: variable scope (default %r).

  Returns:
    (logits [B, num_classes], end_points).

  Raises:
    ValueError: if inputs is not rank 4 or depth_multiplier is not positive.
  """


def mobilenet_v2(inputs, num_classes=1001, depth_multiplier=1.0, is_training=False,
                 dropout_keep_prob=0.8, finegrain_classification_mode=False,
                 prediction_fn=slim.softmax, reuse=None, scope=None):
  return _classifier(inputs, MOBILENET_V2, num_classes, depth_multiplier, is_training,
                     dropout_keep_prob, finegrain_classification_mode and depth_multiplier < 1,
                     prediction_fn, reuse, scope)


mobilenet_v2.__doc__ = ('MobileNet v2 classifier (Sandler et al., 2018).\n'
                        + _CLASSIFIER_ARGS_DOC % (' when depth_multiplier < 1', 'MobilenetV2'))


def mobilenet_v3_large(inputs, num_classes=1001, depth_multiplier=1.0, is_training=False,
                       dropout_keep_prob=0.8, finegrain_classification_mode=False,
                       prediction_fn=slim.softmax, reuse=None, scope=None):
  return _classifier(inputs, MOBILENET_V3_LARGE, num_classes, depth_multiplier, is_training,
                     dropout_keep_prob, finegrain_classification_mode, prediction_fn, reuse,
                     scope)


mobilenet_v3_large.__doc__ = ('MobileNet v3 large classifier (Howard et al., 2019).\n'
                              + _CLASSIFIER_ARGS_DOC % ('', 'MobilenetV3'))


def mobilenet_v3_small(inputs, num_classes=1001, depth_multiplier=1.0, is_training=False,
                       dropout_keep_prob=0.8, finegrain_classification_mode=False,
                       prediction_fn=slim.softmax, reuse=None, scope=None):
  return _classifier(inputs, MOBILENET_V3_SMALL, num_classes, depth_multiplier, is_training,
                     dropout_keep_prob, finegrain_classification_mode, prediction_fn, reuse,
                     scope)


mobilenet_v3_small.__doc__ = ('MobileNet v3 small classifier (Howard et al., 2019).\n'
                              + _CLASSIFIER_ARGS_DOC % ('', 'MobilenetV3'))


def mobilenet_edgetpu(inputs, num_classes=1001, depth_multiplier=1.0, is_training=False,
                      dropout_keep_prob=0.8, finegrain_classification_mode=False,
                      prediction_fn=slim.softmax, reuse=None, scope=None):
  return _classifier(inputs, MOBILENET_EDGETPU, num_classes, depth_multiplier, is_training,
                     dropout_keep_prob, finegrain_classification_mode, prediction_fn, reuse,
                     scope)


mobilenet_edgetpu.__doc__ = ('MobileNet-EdgeTPU classifier.\n'
                             + _CLASSIFIER_ARGS_DOC % ('', 'MobilenetEdgeTPU'))

for _net in (mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small, mobilenet_edgetpu):
  _net.default_image_size = 224
del _net

# name -> (classifier fn, base fn, default architecture), for registries and builders.
NETWORKS = {
    'mobilenet_v2': (mobilenet_v2, mobilenet_v2_base, MOBILENET_V2),
    'mobilenet_v3_large': (mobilenet_v3_large, mobilenet_v3_large_base, MOBILENET_V3_LARGE),
    'mobilenet_v3_small': (mobilenet_v3_small, mobilenet_v3_small_base, MOBILENET_V3_SMALL),
    'mobilenet_edgetpu': (mobilenet_edgetpu, mobilenet_edgetpu_base, MOBILENET_EDGETPU),
}
