"""Small convolutional backbones shared by the classifier and the SSD.

Two CPU-friendly nets in the spirit of MobileNet v1 (depthwise-separable
convolutions, Howard et al., 2017) and ResNet (basic residual units, He et
al., 2016), plus a tiny plain CNN. Each `*_base` function builds the
convolutional trunk under its own variable scope and returns the last layer
and a dict of named end points; the same variable names appear whether the
trunk sits in a classifier or (under `FeatureExtractor/`) in an SSD, which is
what lets an SSD fine-tune its backbone from a classification checkpoint.

    end point                   stride   depth (depth_multiplier = 1)
    SmallMobilenetV1/Conv2d_5_pointwise   8     256
    SmallMobilenetV1/Conv2d_7_pointwise  16     512
    SmallMobilenetV1/Conv2d_9_pointwise  32     512
    SmallResnet/block2                    8     128
    SmallResnet/block3                   16     256
    SmallResnet/block4                   32     256

Usage:

    with slim.arg_scope(backbones.arg_scope(is_training=True, weight_decay=4e-5)):
      net, end_points = backbones.small_mobilenet_v1_base(images, depth_multiplier=0.5)
    stride8 = end_points['Conv2d_5_pointwise']
"""

import tensorflow as tf
import tf_slim as slim

MOBILENET_SCOPE = 'SmallMobilenetV1'
RESNET_SCOPE = 'SmallResnet'
SMALL_CNN_SCOPE = 'SmallCNN'

# (kind, stride, depth): 'conv' is a full 3x3 convolution, 'sep' a 3x3
# depthwise convolution followed by a 1x1 pointwise one.
_MOBILENET_LAYERS = [
    ('conv', 2, 32),
    ('sep', 1, 64),
    ('sep', 2, 128),
    ('sep', 1, 128),
    ('sep', 2, 256),
    ('sep', 1, 256),   # Conv2d_5_pointwise: stride 8
    ('sep', 2, 512),
    ('sep', 1, 512),   # Conv2d_7_pointwise: stride 16
    ('sep', 2, 512),
    ('sep', 1, 512),   # Conv2d_9_pointwise: stride 32
]

# (block name, stride, depth); every block is two basic residual units.
_RESNET_BLOCKS = [
    ('block1', 2, 64),    # stride 4
    ('block2', 2, 128),   # stride 8
    ('block3', 2, 256),   # stride 16
    ('block4', 2, 256),   # stride 32
]

# The end points an SSD takes its first feature maps from, per backbone.
FEATURE_END_POINTS = {
    MOBILENET_SCOPE: ['Conv2d_5_pointwise', 'Conv2d_7_pointwise', 'Conv2d_9_pointwise'],
    RESNET_SCOPE: ['block2', 'block3', 'block4'],
}


def scaled_depth(depth, depth_multiplier, min_depth):
  """Returns max(int(depth * depth_multiplier), min_depth)."""
  return max(int(depth * depth_multiplier), min_depth)


def arg_scope(is_training, weight_decay=4e-5, use_batch_norm=True, batch_norm_decay=0.99,
              activation_fn=tf.nn.relu6):
  """Returns the slim arg_scope every backbone layer is built under.

  Args:
    is_training: batch norm uses batch statistics and updates its moving
      averages (UPDATE_OPS) when True.
    weight_decay: L2 regularization of convolution weights (adds to
      REGULARIZATION_LOSSES); 0 disables it.
    use_batch_norm: batch norm after every convolution (then no biases).
    batch_norm_decay: moving-average decay; short schedules want ~0.99.
    activation_fn: non-linearity after every convolution.

  Returns:
    An arg_scope dict for `slim.arg_scope`.
  """
  regularizer = slim.l2_regularizer(weight_decay) if weight_decay > 0 else None
  batch_norm_params = {
      'is_training': is_training,
      'decay': batch_norm_decay,
      'epsilon': 0.001,
      'center': True,
      'scale': True,
  }
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_initializer=slim.variance_scaling_initializer(),
                      weights_regularizer=regularizer,
                      activation_fn=activation_fn,
                      normalizer_fn=slim.batch_norm if use_batch_norm else None,
                      normalizer_params=batch_norm_params if use_batch_norm else None,
                      padding='SAME'):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.dropout], is_training=is_training) as scope:
        return scope


def small_mobilenet_v1_base(inputs, depth_multiplier=1.0, min_depth=8, scope=MOBILENET_SCOPE):
  """Builds the depthwise-separable trunk.

  Args:
    inputs: float [batch, height, width, 3] in [-1, 1].
    depth_multiplier: scales every layer's depth.
    min_depth: no layer is thinner than this.
    scope: variable scope.

  Returns:
    (net, end_points): the stride-32 output and {layer name: tensor}.

  Raises:
    ValueError: if depth_multiplier is not positive.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be positive, got %s' % depth_multiplier)
  end_points = {}
  with tf.compat.v1.variable_scope(scope, values=[inputs]):
    net = inputs
    for index, (kind, stride, depth) in enumerate(_MOBILENET_LAYERS):
      depth = scaled_depth(depth, depth_multiplier, min_depth)
      if kind == 'conv':
        name = 'Conv2d_%d' % index
        net = slim.conv2d(net, depth, [3, 3], stride=stride, scope=name)
        end_points[name] = net
      else:
        name = 'Conv2d_%d_depthwise' % index
        net = slim.separable_conv2d(net, None, [3, 3], depth_multiplier=1, stride=stride,
                                    scope=name)
        end_points[name] = net
        name = 'Conv2d_%d_pointwise' % index
        net = slim.conv2d(net, depth, [1, 1], stride=1, scope=name)
        end_points[name] = net
  return net, end_points


def _residual_unit(net, depth, stride, scope):
  """Two 3x3 convolutions plus a (projected when needed) shortcut."""
  with tf.compat.v1.variable_scope(scope, values=[net]):
    depth_in = net.shape[-1]
    if depth_in == depth and stride == 1:
      shortcut = net
    else:
      shortcut = slim.conv2d(net, depth, [1, 1], stride=stride, activation_fn=None,
                             scope='shortcut')
    residual = slim.conv2d(net, depth, [3, 3], stride=stride, scope='conv1')
    residual = slim.conv2d(residual, depth, [3, 3], stride=1, activation_fn=None,
                           scope='conv2')
    return tf.nn.relu(shortcut + residual)


def small_resnet_base(inputs, depth_multiplier=1.0, min_depth=8, scope=RESNET_SCOPE):
  """Builds the residual trunk: a stride-2 stem and four stride-2 blocks.

  Args:
    inputs: float [batch, height, width, 3] in [-1, 1].
    depth_multiplier: scales every layer's depth.
    min_depth: no layer is thinner than this.
    scope: variable scope.

  Returns:
    (net, end_points) with end points 'conv1', 'block1'..'block4'.

  Raises:
    ValueError: if depth_multiplier is not positive.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be positive, got %s' % depth_multiplier)
  end_points = {}
  with tf.compat.v1.variable_scope(scope, values=[inputs]):
    with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu):
      net = slim.conv2d(inputs, scaled_depth(32, depth_multiplier, min_depth), [3, 3],
                        stride=2, scope='conv1')
      end_points['conv1'] = net
      for name, stride, depth in _RESNET_BLOCKS:
        depth = scaled_depth(depth, depth_multiplier, min_depth)
        with tf.compat.v1.variable_scope(name):
          net = _residual_unit(net, depth, stride, 'unit_1')
          net = _residual_unit(net, depth, 1, 'unit_2')
        end_points[name] = net
  return net, end_points


def small_cnn_base(inputs, depth_multiplier=1.0, min_depth=8, scope=SMALL_CNN_SCOPE):
  """Three conv + max-pool stages: a fast net for tests and the demo.

  Args:
    inputs: float [batch, height, width, 3].
    depth_multiplier: scales every layer's depth.
    min_depth: no layer is thinner than this.
    scope: variable scope.

  Returns:
    (net, end_points) with end points 'conv1'..'conv3'.
  """
  end_points = {}
  with tf.compat.v1.variable_scope(scope, values=[inputs]):
    net = inputs
    for index, depth in enumerate([32, 64, 128], start=1):
      net = slim.conv2d(net, scaled_depth(depth, depth_multiplier, min_depth), [3, 3],
                        scope='conv%d' % index)
      end_points['conv%d' % index] = net
      net = slim.max_pool2d(net, [2, 2], stride=2, padding='SAME', scope='pool%d' % index)
  return net, end_points


BASES = {
    'small_mobilenet_v1': (small_mobilenet_v1_base, MOBILENET_SCOPE),
    'small_resnet': (small_resnet_base, RESNET_SCOPE),
    'small_cnn': (small_cnn_base, SMALL_CNN_SCOPE),
}
