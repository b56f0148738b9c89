"""Two-stage detector backbone from Inception v2 (BN-Inception): type 'faster_rcnn_inception_v2'.

The region proposal network reads Inception v2 up to Mixed_4e (576 channels
at stride 16, built by tf_slim.nets.inception_v2.inception_v2_base). The
network's last three mixed blocks become the per-proposal head:

    block     branches (nominal depths)                                 output
    Mixed_5a  1x1 128 > 3x3/2 192 | 1x1 192 > 3x3 256 > 3x3/2 256 | maxpool/2   1024, stride 2
    Mixed_5b  1x1 352 | 1x1 192 > 3x3 320 | 1x1 160 > 3x3 224 > 3x3 224 |
              avgpool > 1x1 128                                          1024
    Mixed_5c  as Mixed_5b, but 192 in branch 2's 1x1 and a max-pool in branch 3

so a 14x14 crop of Mixed_4e gives 7x7x1024 box features. slim's
`inception_v2_base` cannot start from an intermediate map, so these three
blocks are written here, with the variable names and shapes of the
classification network (`InceptionV2/Mixed_5b/Branch_2/Conv2d_0c_3x3/...`),
which the zoo and classification checkpoints hold. `depth_multiplier` scales
every depth (floored at `min_depth`) in both stages.

Every convolution is followed by batch norm with a learned scale (decay
0.9997, epsilon 0.001), frozen unless `batch_norm_trainable` and
`is_training`.

Usage:

    extractor = FasterRCNNInceptionV2FeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    images = extractor.preprocess(resized_images)   # [0, 255] -> [-1, 1]
    rpn_features, _ = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')  # [B, H/16, W/16, 576]
    box_features = extractor.extract_box_classifier_features(
        crops_14x14, scope='SecondStageFeatureExtractor')  # [N, 7, 7, 1024]

Differs on purpose:
  * `weight_decay` adds an L2 regularizer to the convolutions' weights when
    it is positive; the OD API ignores it for this backbone. (Its builder
    never sets it, so zoo configs behave the same.)
"""

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v2

from models import faster_rcnn_feature_extractor

_BACKBONE_SCOPE = 'InceptionV2'
_SUPPORTED_STRIDES = (8, 16)
_MIN_IMAGE_DIM = 33


def _truncated_normal(stddev):
  return tf.compat.v1.truncated_normal_initializer(0.0, stddev)


class FasterRCNNInceptionV2FeatureExtractor(
    faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """Inception v2 cut after Mixed_4e; Mixed_5a..Mixed_5c are the second stage.

  Args:
    is_training, first_stage_features_stride, batch_norm_trainable,
    reuse_weights, weight_decay: see FasterRCNNFeatureExtractor. Only the
      nominal stride 16 is reachable; 8 is accepted (as the OD API does) but
      the map still has stride 16.
    depth_multiplier: scales every layer's depth.
    min_depth: the smallest depth a scaled layer gets.

  Raises:
    ValueError: if first_stage_features_stride is not 8 or 16.
  """

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0, depth_multiplier=1.0, min_depth=16):
    if first_stage_features_stride not in _SUPPORTED_STRIDES:
      raise ValueError('first_stage_features_stride must be 8 or 16 for Inception v2, got %r'
                       % (first_stage_features_stride,))
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth
    super().__init__(is_training, first_stage_features_stride, batch_norm_trainable,
                     reuse_weights, weight_decay)

  def preprocess(self, resized_inputs):
    """Maps [0, 255] pixels linearly to [-1, 1]."""
    return resized_inputs * (2.0 / 255.0) - 1.0

  def _depth(self, nominal):
    return max(int(nominal * self._depth_multiplier), self._min_depth)

  def _arg_scope(self):
    """Batch norm (and optional weight decay) on every (separable) convolution."""
    regularizer = (slim.l2_regularizer(self._weight_decay) if self._weight_decay > 0
                   else None)
    batch_norm = dict(is_training=self._train_batch_norm, scale=True, decay=0.9997,
                      epsilon=0.001)
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], normalizer_fn=slim.batch_norm,
                        normalizer_params=batch_norm,
                        weights_regularizer=regularizer) as scope:
      return scope

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """Runs Inception v2 up to Mixed_4e.

    Args:
      preprocessed_inputs: float [B, H, W, 3], H and W at least 33.
      scope: unused (the base class has opened it).

    Returns:
      (Mixed_4e [B, ceil(H / 16), ceil(W / 16), 576 scaled], {end point: tensor}).

    Raises:
      ValueError: if preprocessed_inputs is not 4-D.
    """
    del scope
    if preprocessed_inputs.shape.ndims != 4:
      raise ValueError('preprocessed_inputs must be [batch, height, width, channels], got '
                       'shape %s' % preprocessed_inputs.shape)
    large_enough = tf.compat.v1.assert_greater_equal(
        tf.shape(preprocessed_inputs)[1:3], _MIN_IMAGE_DIM,
        message='Inception v2 needs images of at least %d pixels per side' % _MIN_IMAGE_DIM)
    with tf.control_dependencies([large_enough]), slim.arg_scope(self._arg_scope()):
      with tf.compat.v1.variable_scope(_BACKBONE_SCOPE,
                                       reuse=self._reuse_weights) as backbone_scope:
        features, endpoints = inception_v2.inception_v2_base(
            preprocessed_inputs, final_endpoint='Mixed_4e', min_depth=self._min_depth,
            depth_multiplier=self._depth_multiplier, scope=backbone_scope)
    return features, endpoints

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Runs Mixed_5a, Mixed_5b and Mixed_5c on the cropped proposals.

    Args:
      proposal_feature_maps: float [N, crop_h, crop_w, 576 scaled].
      scope: unused (the base class has opened it).

    Returns:
      float [N, ceil(crop_h / 2), ceil(crop_w / 2), 1024 scaled].
    """
    del scope
    with tf.compat.v1.variable_scope(_BACKBONE_SCOPE, reuse=self._reuse_weights):
      with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1,
                          padding='SAME'), slim.arg_scope(self._arg_scope()):
        net = self._mixed_5a(proposal_feature_maps)
        net = self._mixed_5b_or_5c(net, 'Mixed_5b', branch_2_depth=160,
                                   pool=slim.avg_pool2d, pool_name='AvgPool_0a_3x3')
        return self._mixed_5b_or_5c(net, 'Mixed_5c', branch_2_depth=192,
                                    pool=slim.max_pool2d, pool_name='MaxPool_0a_3x3')

  def _reduce(self, net, nominal_depth, stddev=0.09):
    """The 1x1 bottleneck convolution opening a branch, named Conv2d_0a_1x1."""
    return slim.conv2d(net, self._depth(nominal_depth), [1, 1],
                       weights_initializer=_truncated_normal(stddev), scope='Conv2d_0a_1x1')

  def _mixed_5a(self, net):
    """The reduction block: three stride-2 branches, concatenated (depth 1024 nominal)."""
    with tf.compat.v1.variable_scope('Mixed_5a'):
      with tf.compat.v1.variable_scope('Branch_0'):
        branch_0 = slim.conv2d(self._reduce(net, 128), self._depth(192), [3, 3], stride=2,
                               scope='Conv2d_1a_3x3')
      with tf.compat.v1.variable_scope('Branch_1'):
        branch_1 = slim.conv2d(self._reduce(net, 192), self._depth(256), [3, 3],
                               scope='Conv2d_0b_3x3')
        branch_1 = slim.conv2d(branch_1, self._depth(256), [3, 3], stride=2,
                               scope='Conv2d_1a_3x3')
      with tf.compat.v1.variable_scope('Branch_2'):
        branch_2 = slim.max_pool2d(net, [3, 3], stride=2, scope='MaxPool_1a_3x3')
      return tf.concat([branch_0, branch_1, branch_2], axis=3)

  def _mixed_5b_or_5c(self, net, name, branch_2_depth, pool, pool_name):
    """A stride-1 four-branch block (depth 1024 nominal).

    Args:
      net: the previous block's output.
      name: 'Mixed_5b' or 'Mixed_5c'.
      branch_2_depth: nominal depth of branch 2's 1x1 bottleneck.
      pool: the 3x3 pooling op opening branch 3, named `pool_name`.
      pool_name: its scope name.
    """
    with tf.compat.v1.variable_scope(name):
      with tf.compat.v1.variable_scope('Branch_0'):
        branch_0 = slim.conv2d(net, self._depth(352), [1, 1], scope='Conv2d_0a_1x1')
      with tf.compat.v1.variable_scope('Branch_1'):
        branch_1 = slim.conv2d(self._reduce(net, 192), self._depth(320), [3, 3],
                               scope='Conv2d_0b_3x3')
      with tf.compat.v1.variable_scope('Branch_2'):
        branch_2 = slim.conv2d(self._reduce(net, branch_2_depth), self._depth(224), [3, 3],
                               scope='Conv2d_0b_3x3')
        branch_2 = slim.conv2d(branch_2, self._depth(224), [3, 3], scope='Conv2d_0c_3x3')
      with tf.compat.v1.variable_scope('Branch_3'):
        branch_3 = slim.conv2d(pool(net, [3, 3], scope=pool_name), self._depth(128), [1, 1],
                               weights_initializer=_truncated_normal(0.1),
                               scope='Conv2d_0b_1x1')
      return tf.concat([branch_0, branch_1, branch_2, branch_3], axis=3)
