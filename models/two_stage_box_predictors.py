"""The second-stage heads of Faster R-CNN and Mask R-CNN: `MaskRCNNBoxPredictor`.

After the second-stage feature extractor, every proposal is a small feature
map [N, h, w, D] (N = proposals of all images). The predictor turns it into

  * stage 2 (every proposal):
      box_encodings                      [N, 1, num_classes, code] (or [N, 1, 1, code]
                                         with share_box_across_classes)
      class_predictions_with_background  [N, 1, num_classes + 1] logits, column 0
                                         the background;
  * stage 3 (Mask R-CNN, on the final detections' crops):
      mask_predictions                   [N, 1, num_classes (or 1), mask_h, mask_w]
                                         per-pixel logits.

Box and class heads average the crop over space, optionally apply dropout,
and end in one fully connected layer each (arg_scope `fc_hyperparams_fn()`):

    <scope>/BoxEncodingPredictor/{weights [D, num_classes * code], biases}
    <scope>/ClassPredictor/{weights [D, num_classes + 1], biases}

The mask head (arg_scope `conv_hyperparams_fn()`) resizes the crop
bilinearly (align_corners) to mask_h x mask_w, applies
mask_prediction_num_conv_layers - 1 3x3 convs of mask_prediction_conv_depth
channels and a final linear 3x3 conv with one channel per class:

    <scope>/Conv, <scope>/Conv_1, ..., the last one with num_classes outputs

With convolve_then_upsample_masks the crop is convolved first, upsampled by
nearest neighbour (integer factor) to the mask size, convolved once more,
then predicted (one conv more than the default). A
mask_prediction_conv_depth of 0 derives the depth from D and num_classes:
2 ** round((2 * log2(D) + 3 * log2(num_classes)) / 5) (256 for D = 2048 and
90 classes). These are the OD API's TF1 names, so zoo checkpoints restore.

Scope convention (the OD API's): `predict(..., scope='SecondStageBoxPredictor')`
opens that variable scope itself; the caller must not open it too. Stage 2
and stage 3 may be called separately with the same scope.

Usage:

    predictor = MaskRCNNBoxPredictor(is_training=True, num_classes=90,
                                     fc_hyperparams_fn=fc_fn, use_dropout=False,
                                     dropout_keep_prob=1.0, box_code_size=4,
                                     conv_hyperparams_fn=conv_fn,
                                     predict_instance_masks=True)
    out = predictor.predict([box_features], [1], scope='SecondStageBoxPredictor')
    out['box_encodings'][0]                        # [N, 1, 90, 4]
    masks = predictor.predict([mask_features], [1], scope='SecondStageBoxPredictor',
                              prediction_stage=3)['mask_predictions'][0]

Differs on purpose: with use_dropout the box and class heads share one dropout
mask (the OD API draws one per head).
"""

import math

import tensorflow as tf
import tf_slim as slim

BOX_ENCODINGS = 'box_encodings'
CLASS_PREDICTIONS_WITH_BACKGROUND = 'class_predictions_with_background'
MASK_PREDICTIONS = 'mask_predictions'


def check_single_feature_map(image_features, num_predictions_per_location):
  """Raises ValueError unless there is one feature map with one prediction per location."""
  if len(image_features) != 1:
    raise ValueError('image_features must hold exactly one feature map, got %d'
                     % len(image_features))
  if list(num_predictions_per_location) != [1]:
    raise ValueError('num_predictions_per_location must be [1], got %r'
                     % (num_predictions_per_location,))


def derived_mask_conv_depth(num_feature_channels, num_classes):
  """The mask convs' depth when mask_prediction_conv_depth is 0.

  A power of two between the feature depth and the class count, in log space
  weighted 2 (features) : 3 (classes).
  """
  log_depth = (2.0 * math.log2(num_feature_channels) + 3.0 * math.log2(num_classes)) / 5.0
  return int(2 ** round(log_depth))


def _pooled_features(features, is_training, use_dropout, dropout_keep_prob):
  """[N, h, w, D] -> [N, D]: spatial mean, then optional dropout."""
  pooled = tf.reduce_mean(features, axis=[1, 2], keepdims=True, name='AvgPool')
  pooled = slim.flatten(pooled)
  if use_dropout:
    pooled = slim.dropout(pooled, keep_prob=dropout_keep_prob, is_training=is_training)
  return pooled


def _upsample_nearest(features, height, width):
  """Repeats each pixel so that [N, h, w, C] becomes [N, height, width, C]."""
  in_height, in_width = features.shape[1], features.shape[2]
  if in_height is None or in_width is None:
    raise ValueError('convolve_then_upsample_masks needs crops of static size, got %s'
                     % features.shape)
  features = tf.repeat(features, height // in_height, axis=1)
  return tf.repeat(features, width // in_width, axis=2)


class MaskRCNNBoxPredictor:
  """Fully connected box/class heads and an optional convolutional mask head.

  Args:
    is_training: whether dropout is active.
    num_classes: number of object classes, without the background.
    fc_hyperparams_fn: fn() -> slim arg_scope for slim.fully_connected.
    use_dropout: apply dropout to the pooled features.
    dropout_keep_prob: keep probability of that dropout.
    box_code_size: numbers per box encoding (4 for the Faster R-CNN coder).
    conv_hyperparams_fn: fn() -> slim arg_scope for the mask convs (required
      with predict_instance_masks).
    predict_instance_masks: build the stage-3 mask head.
    mask_height, mask_width: size of the predicted masks.
    mask_prediction_num_conv_layers: convs of the mask head, the final
      prediction conv included.
    mask_prediction_conv_depth: depth of the hidden mask convs; 0 derives it.
    masks_are_class_agnostic: predict one mask instead of one per class.
    share_box_across_classes: predict one box instead of one per class.
    convolve_then_upsample_masks: convolve at crop size, then upsample.
  """

  def __init__(self, is_training, num_classes, fc_hyperparams_fn, use_dropout,
               dropout_keep_prob, box_code_size, conv_hyperparams_fn=None,
               predict_instance_masks=False, mask_height=15, mask_width=15,
               mask_prediction_num_conv_layers=2, mask_prediction_conv_depth=256,
               masks_are_class_agnostic=False, share_box_across_classes=False,
               convolve_then_upsample_masks=False):
    if predict_instance_masks and conv_hyperparams_fn is None:
      raise ValueError('conv_hyperparams_fn is required with predict_instance_masks')
    if predict_instance_masks and mask_prediction_num_conv_layers < 1:
      raise ValueError('mask_prediction_num_conv_layers must be >= 1, got %d'
                       % mask_prediction_num_conv_layers)
    self._is_training = is_training
    self._num_classes = num_classes
    self._fc_hyperparams_fn = fc_hyperparams_fn
    self._use_dropout = use_dropout
    self._dropout_keep_prob = dropout_keep_prob
    self._box_code_size = box_code_size
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._predict_instance_masks = predict_instance_masks
    self._mask_size = (mask_height, mask_width)
    self._mask_num_layers = mask_prediction_num_conv_layers
    self._mask_conv_depth = mask_prediction_conv_depth
    self._masks_are_class_agnostic = masks_are_class_agnostic
    self._share_box_across_classes = share_box_across_classes
    self._convolve_then_upsample = convolve_then_upsample_masks

  @property
  def num_classes(self):
    return self._num_classes

  @property
  def is_keras_model(self):
    return False

  def get_second_stage_prediction_heads(self):
    return BOX_ENCODINGS, CLASS_PREDICTIONS_WITH_BACKGROUND

  def get_third_stage_prediction_heads(self):
    return [MASK_PREDICTIONS] if self._predict_instance_masks else []

  def predict(self, image_features, num_predictions_per_location, scope=None,
              prediction_stage=2):
    """Runs the heads of one stage.

    Args:
      image_features: [features [N, h, w, D]], the crops of N proposals.
      num_predictions_per_location: [1].
      scope: variable scope to open (the meta-architecture passes
        'SecondStageBoxPredictor'); None builds in the current scope.
      prediction_stage: 2 (boxes and classes) or 3 (masks).

    Returns:
      stage 2: {BOX_ENCODINGS: [[N, 1, num_classes or 1, code]],
                CLASS_PREDICTIONS_WITH_BACKGROUND: [[N, 1, num_classes + 1]]};
      stage 3: {MASK_PREDICTIONS: [[N, 1, num_classes or 1, mask_h, mask_w]]}
               ({} without predict_instance_masks).

    Raises:
      ValueError: on more than one feature map, num_predictions_per_location
        other than [1], or a prediction_stage other than 2 or 3.
    """
    check_single_feature_map(image_features, num_predictions_per_location)
    if prediction_stage not in (2, 3):
      raise ValueError('prediction_stage must be 2 or 3, got %r' % (prediction_stage,))
    features = image_features[0]
    if scope is None:
      return self._predict_stage(features, prediction_stage)
    with tf.compat.v1.variable_scope(scope):
      return self._predict_stage(features, prediction_stage)

  def _predict_stage(self, features, prediction_stage):
    if prediction_stage == 2:
      pooled = _pooled_features(features, self._is_training, self._use_dropout,
                                self._dropout_keep_prob)
      return {BOX_ENCODINGS: [self._box_encodings(pooled)],
              CLASS_PREDICTIONS_WITH_BACKGROUND: [self._class_predictions(pooled)]}
    if not self._predict_instance_masks:
      return {}
    return {MASK_PREDICTIONS: [self._mask_predictions(features)]}

  def _box_encodings(self, pooled):
    """[N, D] -> [N, 1, num_boxes, code]."""
    num_boxes = 1 if self._share_box_across_classes else self._num_classes
    with slim.arg_scope(self._fc_hyperparams_fn()):
      encodings = slim.fully_connected(pooled, num_boxes * self._box_code_size,
                                       activation_fn=None, reuse=tf.compat.v1.AUTO_REUSE,
                                       scope='BoxEncodingPredictor')
    return tf.reshape(encodings, [-1, 1, num_boxes, self._box_code_size])

  def _class_predictions(self, pooled):
    """[N, D] -> [N, 1, num_classes + 1] logits."""
    with slim.arg_scope(self._fc_hyperparams_fn()):
      logits = slim.fully_connected(pooled, self._num_classes + 1, activation_fn=None,
                                    reuse=tf.compat.v1.AUTO_REUSE, scope='ClassPredictor')
    return tf.reshape(logits, [-1, 1, self._num_classes + 1])

  def _hidden_mask_depth(self, features):
    if self._mask_conv_depth:
      return self._mask_conv_depth
    depth = features.shape[-1]
    if depth is None:
      raise ValueError('mask_prediction_conv_depth 0 needs features of static depth, got %s'
                       % features.shape)
    return derived_mask_conv_depth(depth, self._num_classes)

  def _mask_predictions(self, features):
    """[N, h, w, D] -> [N, 1, num_masks, mask_h, mask_w] logits (convs Conv, Conv_1, ...)."""
    depth = self._hidden_mask_depth(features)
    mask_height, mask_width = self._mask_size
    with slim.arg_scope(self._conv_hyperparams_fn()):
      if not self._convolve_then_upsample:
        features = tf.compat.v1.image.resize_bilinear(
            features, [mask_height, mask_width], align_corners=True)
      for _ in range(self._mask_num_layers - 1):
        features = slim.conv2d(features, depth, [3, 3])
      if self._convolve_then_upsample:
        features = _upsample_nearest(features, mask_height, mask_width)
        features = slim.conv2d(features, depth, [3, 3])
      num_masks = 1 if self._masks_are_class_agnostic else self._num_classes
      logits = slim.conv2d(features, num_masks, [3, 3], activation_fn=None,
                           normalizer_fn=None)
    return tf.expand_dims(tf.transpose(logits, [0, 3, 1, 2]), axis=1,
                          name='MaskPredictor')
