"""MobileNet v1 (Howard et al., 2017) in TF-Slim, named as its public checkpoints.

MobileNet v1 is one full 3x3 convolution followed by 13 depthwise-separable
blocks: a 3x3 depthwise convolution (one filter per channel) then a 1x1
"pointwise" convolution mixing channels, each with batch norm and relu6.
Five of the layers have stride 2, so the last map has stride 32:

    end point              stride  depth (x depth_multiplier, >= min_depth)
    Conv2d_0                    2     32
    Conv2d_1_pointwise          2     64
    Conv2d_3_pointwise          4    128
    Conv2d_5_pointwise          8    256
    Conv2d_11_pointwise        16    512
    Conv2d_13_pointwise        32   1024

Variables are `MobilenetV1/Conv2d_0/weights`,
`MobilenetV1/Conv2d_<k>_depthwise/depthwise_weights`,
`MobilenetV1/Conv2d_<k>_pointwise/weights`, each with `.../BatchNorm/{beta,
gamma,moving_mean,moving_variance}`, and the classifier's
`MobilenetV1/Logits/Conv2d_1c_1x1/{weights,biases}`: the names of the slim
ImageNet checkpoints and of the detection zoo's SSD MobileNet v1 backbones.

Usage:

    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(is_training=True)):
      logits, end_points = mobilenet_v1.mobilenet_v1(images, num_classes=1000)
    # or, for a detector's trunk:
      net, end_points = mobilenet_v1.mobilenet_v1_base(
          images, final_endpoint='Conv2d_13_pointwise', depth_multiplier=0.75)

A classification checkpoint trained with `mobilenet_v1` seeds an SSD
MobileNet v1 (fine_tune_checkpoint_type: classification): every
`MobilenetV1/` variable but the Logits ones is a base-network variable.

Differs on purpose:
  * fixed_padding pads each spatial axis for its own kernel size (upstream
    uses the kernel height for both; the same for the square kernels used).
"""

import collections
import functools

import tensorflow as tf
import tf_slim as slim

from models import feature_map_generators

# One layer of the network: a full convolution or a depthwise-separable pair.
Conv = collections.namedtuple('Conv', ['kernel', 'stride', 'depth'])
DepthSepConv = collections.namedtuple('DepthSepConv', ['kernel', 'stride', 'depth'])

# The published architecture; layer i builds end point Conv2d_i (or
# Conv2d_i_depthwise / Conv2d_i_pointwise).
MOBILENETV1_CONV_DEFS = [Conv(kernel=[3, 3], stride=2, depth=32)] + [
    DepthSepConv(kernel=[3, 3], stride=stride, depth=depth)
    for stride, depth in [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512),
                          (1, 512), (1, 512), (1, 512), (1, 512), (1, 512),
                          (2, 1024), (1, 1024)]]


def _end_point_names(conv_defs):
  """All end points conv_defs builds, in order."""
  names = []
  for index, conv_def in enumerate(conv_defs):
    if isinstance(conv_def, DepthSepConv):
      names += ['Conv2d_%d_depthwise' % index, 'Conv2d_%d_pointwise' % index]
    else:
      names.append('Conv2d_%d' % index)
  return names


def mobilenet_v1_base(inputs, final_endpoint='Conv2d_13_pointwise', min_depth=8,
                      depth_multiplier=1.0, conv_defs=None, output_stride=None,
                      use_explicit_padding=False, scope=None):
  """Builds MobileNet v1 from `inputs` up to and including `final_endpoint`.

  Args:
    inputs: [B, H, W, C] float tensor.
    final_endpoint: last end point to build, e.g. 'Conv2d_11_pointwise'.
    min_depth: smallest depth of a layer (binds when depth_multiplier < 1).
    depth_multiplier: width multiplier of every layer; must be > 0.
    conv_defs: list of Conv / DepthSepConv; default MOBILENETV1_CONV_DEFS.
    output_stride: 8, 16 or 32 (or None for 32): past this stride, strided
      layers keep the resolution and the following depthwise convolutions
      are dilated instead (atrous, for dense prediction).
    use_explicit_padding: pad with fixed_padding and convolve VALID, so the
      output sizes do not depend on SAME padding's odd-size rule.
    scope: variable scope (name or VariableScope); default 'MobilenetV1'.

  Returns:
    (net, end_points): the final_endpoint tensor and a dict of every end
    point built, name -> tensor.

  Raises:
    ValueError: on depth_multiplier <= 0, an output_stride outside
      {8, 16, 32}, an unknown final_endpoint or an unknown layer type.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be greater than zero, got %s' % depth_multiplier)
  if output_stride is not None and output_stride not in (8, 16, 32):
    raise ValueError('output_stride must be 8, 16 or 32, got %s' % output_stride)
  conv_defs = MOBILENETV1_CONV_DEFS if conv_defs is None else conv_defs
  if final_endpoint not in _end_point_names(conv_defs):
    raise ValueError('final_endpoint %r is not an end point of MobileNet v1; choose one of %s'
                     % (final_endpoint, _end_point_names(conv_defs)))
  depth_of = feature_map_generators.get_depth_fn(depth_multiplier, min_depth)
  padding = 'VALID' if use_explicit_padding else 'SAME'

  def pad(net, kernel, rate=1):
    return feature_map_generators.fixed_padding(net, kernel, rate) if use_explicit_padding \
        else net

  end_points = {}
  with tf.compat.v1.variable_scope(scope, 'MobilenetV1', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
      stride_so_far = 1   # total stride of the maps built so far
      rate = 1            # dilation once output_stride is reached
      net = inputs
      for index, conv_def in enumerate(conv_defs):
        if output_stride is not None and stride_so_far == output_stride:
          # Keep the resolution; the layers after this one see a dilated
          # grid instead.
          stride, layer_rate = 1, rate
          rate *= conv_def.stride
        else:
          stride, layer_rate = conv_def.stride, 1
          stride_so_far *= conv_def.stride

        if isinstance(conv_def, Conv):
          name = 'Conv2d_%d' % index
          net = slim.conv2d(pad(net, conv_def.kernel), depth_of(conv_def.depth),
                            conv_def.kernel, stride=stride, scope=name)
          end_points[name] = net
        elif isinstance(conv_def, DepthSepConv):
          name = 'Conv2d_%d_depthwise' % index
          # num_outputs=None: a depthwise convolution only, no pointwise part.
          net = slim.separable_conv2d(pad(net, conv_def.kernel, layer_rate), None,
                                      conv_def.kernel, depth_multiplier=1, stride=stride,
                                      rate=layer_rate, scope=name)
          end_points[name] = net
          if name == final_endpoint:
            return net, end_points
          name = 'Conv2d_%d_pointwise' % index
          net = slim.conv2d(net, depth_of(conv_def.depth), [1, 1], stride=1, scope=name)
          end_points[name] = net
        else:
          raise ValueError('conv_defs[%d] is a %s; expected Conv or DepthSepConv'
                           % (index, type(conv_def).__name__))
        if name == final_endpoint:
          return net, end_points
  raise AssertionError('unreachable: final_endpoint was checked')


def _pool_kernel(net, kernel_size):
  """kernel_size, shrunk to the map's static size when the map is smaller."""
  height, width = net.shape.as_list()[1:3]
  if height is None or width is None:
    return kernel_size
  return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def _pooled_features(net, global_pool, end_points):
  """Averages the last feature map (whole map, or 7x7 VALID windows) into end_points."""
  if global_pool:
    end_points['global_pool'] = tf.reduce_mean(net, axis=[1, 2], keepdims=True,
                                               name='global_pool')
    return end_points['global_pool']
  end_points['AvgPool_1a'] = slim.avg_pool2d(net, _pool_kernel(net, [7, 7]),
                                             padding='VALID', scope='AvgPool_1a')
  return end_points['AvgPool_1a']


def _logits_head(pooled, num_classes, dropout_keep_prob, spatial_squeeze):
  """Dropout, then a 1x1 convolution to `num_classes` logits (squeezed if asked)."""
  dropped = slim.dropout(pooled, keep_prob=dropout_keep_prob, scope='Dropout_1b')
  logits = slim.conv2d(dropped, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                       scope='Conv2d_1c_1x1')
  return tf.squeeze(logits, [1, 2], name='SpatialSqueeze') if spatial_squeeze else logits


def mobilenet_v1(inputs, num_classes=1000, dropout_keep_prob=0.999, is_training=True,
                 min_depth=8, depth_multiplier=1.0, conv_defs=None,
                 prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None,
                 scope='MobilenetV1', global_pool=False):
  """MobileNet v1 image classifier: the base network, pooling, dropout, 1x1 logits.

  Args:
    inputs: [B, H, W, C] float tensor (224x224 for the ImageNet checkpoints).
    num_classes: number of logits; 0 or None returns the pooled features.
    dropout_keep_prob: keep probability of the dropout before the logits.
    is_training: whether batch norm and dropout train.
    min_depth, depth_multiplier, conv_defs: as in mobilenet_v1_base.
    prediction_fn: fn(logits, scope=...) giving end_points['Predictions'].
    spatial_squeeze: return logits [B, num_classes] instead of [B, 1, 1, num_classes].
    reuse: reuse the variables of `scope`.
    scope: variable scope.
    global_pool: average over the whole map; otherwise a 7x7 VALID average
      pool (smaller for small inputs), so large inputs give a grid of logits.

  Returns:
    (logits, end_points); with num_classes 0/None, (pooled features, end_points).

  Raises:
    ValueError: if inputs is not rank 4.
  """
  if inputs.shape.ndims != 4:
    raise ValueError('mobilenet_v1 inputs must be [batch, height, width, channels], got '
                     'shape %s' % inputs.shape)
  with tf.compat.v1.variable_scope(scope, 'MobilenetV1', [inputs], reuse=reuse) as net_scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
      net, end_points = mobilenet_v1_base(inputs, min_depth=min_depth,
                                          depth_multiplier=depth_multiplier,
                                          conv_defs=conv_defs, scope=net_scope)
      with tf.compat.v1.variable_scope('Logits'):
        pooled = _pooled_features(net, global_pool, end_points)
        if not num_classes:
          return pooled, end_points
        logits = _logits_head(pooled, num_classes, dropout_keep_prob, spatial_squeeze)
      end_points['Logits'] = logits
      if prediction_fn:
        end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


mobilenet_v1.default_image_size = 224


def _with_depth(depth_multiplier):
  variant = functools.partial(mobilenet_v1, depth_multiplier=depth_multiplier)
  functools.update_wrapper(variant, mobilenet_v1)
  return variant


mobilenet_v1_075 = _with_depth(0.75)
mobilenet_v1_050 = _with_depth(0.50)
mobilenet_v1_025 = _with_depth(0.25)


def mobilenet_v1_arg_scope(is_training=True, weight_decay=0.00004, stddev=0.09,
                           regularize_depthwise=False, batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001,
                           batch_norm_updates_collections=tf.compat.v1.GraphKeys.UPDATE_OPS,
                           normalizer_fn=slim.batch_norm):
  """The slim arg_scope MobileNet v1 was trained with.

  Convolutions: truncated-normal(stddev) weights, relu6, `normalizer_fn`
  (batch norm with scale and center); L2 weight decay on the full and
  pointwise convolutions, and on the depthwise ones when regularize_depthwise.

  Args:
    is_training: batch norm's is_training; None leaves it to an enclosing
      arg_scope (or slim's default).
    weight_decay: L2 regularization strength.
    stddev: standard deviation of the truncated-normal initializer.
    regularize_depthwise: regularize the depthwise weights too.
    batch_norm_decay: moving-average decay of batch norm.
    batch_norm_epsilon: variance epsilon of batch norm.
    batch_norm_updates_collections: collection of the moving-average updates.
    normalizer_fn: normalizer after each convolution (None for none).

  Returns:
    The arg_scope dict, for `with slim.arg_scope(...)`.
  """
  normalization = dict(center=True, scale=True, decay=batch_norm_decay,
                       epsilon=batch_norm_epsilon,
                       updates_collections=batch_norm_updates_collections)
  if is_training is not None:
    normalization['is_training'] = is_training
  l2 = slim.l2_regularizer(weight_decay)
  depthwise_l2 = l2 if regularize_depthwise else None
  initializer = tf.compat.v1.truncated_normal_initializer(stddev=stddev)
  with slim.arg_scope([slim.batch_norm], **normalization), \
       slim.arg_scope([slim.conv2d], weights_regularizer=l2), \
       slim.arg_scope([slim.separable_conv2d], weights_regularizer=depthwise_l2), \
       slim.arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=tf.nn.relu6,
                      weights_initializer=initializer,
                      normalizer_fn=normalizer_fn) as scope:
    return scope
