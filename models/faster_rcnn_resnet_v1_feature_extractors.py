"""Two-stage detector backbones from ResNet v1 (tf_slim.nets.resnet_v1).

A ResNet v1 is four blocks of bottleneck units after a 7x7 stride-2 conv and
a stride-2 max-pool. The region proposal network reads block3's output
(1024 channels, stride 16); block4 (three units of depth 2048, 512 in the
bottleneck, no further stride) becomes the per-proposal head that the second
stage runs on every cropped proposal.

    type                    extractor                            units per block
    faster_rcnn_resnet50    FasterRCNNResnet50FeatureExtractor   3, 4, 6, 3
    faster_rcnn_resnet101   FasterRCNNResnet101FeatureExtractor  3, 4, 23, 3
    faster_rcnn_resnet152   FasterRCNNResnet152FeatureExtractor  3, 8, 36, 3

`first_stage_features_stride` 16 is the nominal network; 8 keeps block3 at
stride 8 with atrous (dilated) convolutions instead of its last stride, the
`*_atrous_*` zoo configs.

The first stage builds slim's whole classification network (block4 included,
though only block3 is read) inside `FirstStageFeatureExtractor`, because the
OD API does and its zoo checkpoints therefore hold
`FirstStageFeatureExtractor/resnet_v1_50/block4/...` too; a model that lacked
those variables would not restore them. The unread block4 costs nothing at
run time (a session only evaluates what its fetches need).

Batch norm follows the MSRA checkpoints slim's ResNets were converted from
(epsilon 1e-5, with a learned scale) and stays frozen, in inference mode,
unless `batch_norm_trainable` and `is_training` are both set: one or two
images per step are too few for batch statistics.

Usage:

    extractor = FasterRCNNResnet50FeatureExtractor(
        is_training=True, first_stage_features_stride=16)
    images = extractor.preprocess(resized_images)   # VGG channel means removed
    rpn_features, _ = extractor.extract_proposal_features(
        images, scope='FirstStageFeatureExtractor')  # [B, H/16, W/16, 1024]
    box_features = extractor.extract_box_classifier_features(
        crops_7x7, scope='SecondStageFeatureExtractor')  # [N, 7, 7, 2048]

A classification checkpoint of slim's resnet_v1_50 restores both stages:
`restore_from_classification_checkpoint_fn` strips the stage scopes, so both
`FirstStageFeatureExtractor/resnet_v1_50/block1/...` and
`SecondStageFeatureExtractor/resnet_v1_50/block4/...` are read from
`resnet_v1_50/...`. The two block4 copies share one checkpoint name; as in
the OD API, the map keeps the one created last (the second stage's), and the
first stage's unread copy keeps its initializer.
"""

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_utils
from tf_slim.nets import resnet_v1

from models import faster_rcnn_feature_extractor

# The per-channel (R, G, B) means of the ImageNet training set that VGG and
# the MSRA ResNets subtract from [0, 255] pixels.
_VGG_CHANNEL_MEANS = (123.68, 116.779, 103.939)

# The strides the first stage can produce: nominal, or atrous block3.
_SUPPORTED_STRIDES = (8, 16)

# ResNet's 7x7 stride-2 conv and pooling need at least this many pixels per side.
_MIN_IMAGE_DIM = 33


class FasterRCNNResnetV1FeatureExtractor(faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor):
  """A ResNet v1 cut after block3; block4 is the second stage.

  Args:
    architecture: the backbone's variable scope and checkpoint prefix, e.g.
      'resnet_v1_50'.
    resnet_model: the tf_slim.nets.resnet_v1 network function of that depth.
    is_training, first_stage_features_stride, batch_norm_trainable,
    reuse_weights, weight_decay: see FasterRCNNFeatureExtractor.
    activation_fn: nonlinearity after each conv that has one.

  Raises:
    ValueError: if first_stage_features_stride is not 8 or 16.
  """

  def __init__(self, architecture, resnet_model, is_training, first_stage_features_stride,
               batch_norm_trainable=False, reuse_weights=None, weight_decay=0.0,
               activation_fn=tf.nn.relu):
    if first_stage_features_stride not in _SUPPORTED_STRIDES:
      raise ValueError('first_stage_features_stride must be 8 or 16 for %s, got %r'
                       % (architecture, first_stage_features_stride))
    self._architecture = architecture
    self._resnet_model = resnet_model
    self._activation_fn = activation_fn
    super().__init__(is_training, first_stage_features_stride, batch_norm_trainable,
                     reuse_weights, weight_decay)

  def preprocess(self, resized_inputs):
    """Subtracts the VGG channel means from RGB images in [0, 255].

    Args:
      resized_inputs: float [B, H, W, C]. Inputs whose channel count is not 3
        are returned unchanged (there are no means to subtract).

    Returns:
      float [B, H, W, C].
    """
    if resized_inputs.shape.as_list()[3] != 3:
      return resized_inputs
    return resized_inputs - tf.constant(_VGG_CHANNEL_MEANS, dtype=resized_inputs.dtype)

  def _arg_scope(self):
    """slim's ResNet arg_scope with the MSRA batch norm and our activation."""
    base = resnet_utils.resnet_arg_scope(weight_decay=self._weight_decay,
                                         batch_norm_epsilon=1e-5, batch_norm_scale=True)
    with slim.arg_scope(base):
      with slim.arg_scope([slim.conv2d], activation_fn=self._activation_fn) as scope:
        return scope

  def _extract_proposal_features(self, preprocessed_inputs, scope):
    """Runs slim's ResNet at the configured stride and returns block3.

    Args:
      preprocessed_inputs: float [B, H, W, 3], H and W at least 33.
      scope: the enclosing scope's name (unused: the end points are looked up
        under the backbone's actual variable scope).

    Returns:
      (block3 output [B, ceil(H / stride), ceil(W / stride), 1024], the
      network's end points keyed by full scope name).

    Raises:
      ValueError: if preprocessed_inputs is not 4-D.
    """
    del scope
    if preprocessed_inputs.shape.ndims != 4:
      raise ValueError('preprocessed_inputs must be [batch, height, width, channels], got '
                       'shape %s' % preprocessed_inputs.shape)
    large_enough = tf.compat.v1.assert_greater_equal(
        tf.shape(preprocessed_inputs)[1:3], _MIN_IMAGE_DIM,
        message='%s needs images of at least %d pixels per side'
        % (self._architecture, _MIN_IMAGE_DIM))
    with tf.control_dependencies([large_enough]), slim.arg_scope(self._arg_scope()):
      with tf.compat.v1.variable_scope(self._architecture,
                                       reuse=self._reuse_weights) as backbone_scope:
        _, endpoints = self._resnet_model(
            preprocessed_inputs, num_classes=None, is_training=self._train_batch_norm,
            global_pool=False, output_stride=self._first_stage_features_stride,
            scope=backbone_scope)
    return endpoints[backbone_scope.name + '/block3'], endpoints

  def _extract_box_classifier_features(self, proposal_feature_maps, scope):
    """Runs block4 (3 units, depth 2048, stride 1) on the cropped proposals.

    Args:
      proposal_feature_maps: float [N, crop_h, crop_w, 1024].
      scope: unused (the base class has opened it).

    Returns:
      float [N, crop_h, crop_w, 2048].
    """
    del scope
    block4 = resnet_v1.resnet_v1_block('block4', base_depth=512, num_units=3, stride=1)
    with tf.compat.v1.variable_scope(self._architecture, reuse=self._reuse_weights):
      with slim.arg_scope(self._arg_scope()):
        with slim.arg_scope([slim.batch_norm], is_training=self._train_batch_norm):
          return resnet_utils.stack_blocks_dense(proposal_feature_maps, [block4])


class FasterRCNNResnet50FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """ResNet-50 v1 (type 'faster_rcnn_resnet50'); arguments as the base class's."""

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0, activation_fn=tf.nn.relu):
    super().__init__('resnet_v1_50', resnet_v1.resnet_v1_50, is_training,
                     first_stage_features_stride, batch_norm_trainable, reuse_weights,
                     weight_decay, activation_fn)


class FasterRCNNResnet101FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """ResNet-101 v1 (type 'faster_rcnn_resnet101'); arguments as the base class's."""

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0, activation_fn=tf.nn.relu):
    super().__init__('resnet_v1_101', resnet_v1.resnet_v1_101, is_training,
                     first_stage_features_stride, batch_norm_trainable, reuse_weights,
                     weight_decay, activation_fn)


class FasterRCNNResnet152FeatureExtractor(FasterRCNNResnetV1FeatureExtractor):
  """ResNet-152 v1 (type 'faster_rcnn_resnet152'); arguments as the base class's."""

  def __init__(self, is_training, first_stage_features_stride, batch_norm_trainable=False,
               reuse_weights=None, weight_decay=0.0, activation_fn=tf.nn.relu):
    super().__init__('resnet_v1_152', resnet_v1.resnet_v1_152, is_training,
                     first_stage_features_stride, batch_norm_trainable, reuse_weights,
                     weight_decay, activation_fn)
