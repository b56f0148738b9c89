"""R-FCN's second stage: position-sensitive score maps, pooled per proposal.

R-FCN has no per-proposal network. Three 1x1 convolutions run once over the
whole feature map [B, H, W, D]:

    <scope>/reduce_depth        D -> depth (arg_scope activation, relu in the zoo)
    <scope>/refined_locations   depth -> bins * num_classes * code   (linear)
    <scope>/class_predictions   depth -> bins * (num_classes + 1)    (linear)

with bins = bins_y * bins_x. Each proposal then reads the two score maps by
position-sensitive pooling (`two_stage_ops.position_sensitive_crop_regions`,
global_pool): bin k of the box averages channel group k, and the bins are
averaged into one vector per proposal. These are the OD API's TF1 names, so
zoo checkpoints restore (rfcn_resnet101_coco: 2048 -> 1024, 3x3 bins,
3240 = 9 * 90 * 4 location and 819 = 9 * 91 class channels).

Scope convention (the OD API's): `predict(..., scope='SecondStageBoxPredictor')`
opens that variable scope itself.

Usage:

    predictor = RfcnBoxPredictor(is_training=True, num_classes=90,
                                 conv_hyperparams_fn=conv_fn, num_spatial_bins=[3, 3],
                                 depth=1024, crop_size=[18, 18], box_code_size=4)
    out = predictor.predict([features], [1], scope='SecondStageBoxPredictor',
                            proposal_boxes=normalized_proposals)      # [B, P, 4]
    out['box_encodings'][0]                          # [B * P, 1, 90, 4]
    out['class_predictions_with_background'][0]      # [B * P, 1, 91]
"""

import tensorflow as tf
import tf_slim as slim

from models import two_stage_ops
from models.two_stage_box_predictors import (BOX_ENCODINGS,
                                             CLASS_PREDICTIONS_WITH_BACKGROUND,
                                             check_single_feature_map)


class RfcnBoxPredictor:
  """R-FCN's box and class predictions from position-sensitive score maps.

  Args:
    is_training: unused by the layers themselves (batch norm, if any, follows
      conv_hyperparams_fn); kept for the OD API's signature.
    num_classes: number of object classes, without the background.
    conv_hyperparams_fn: fn() -> slim arg_scope for the 1x1 convs.
    num_spatial_bins: [bins_y, bins_x].
    depth: output depth of reduce_depth.
    crop_size: [crop_h, crop_w] of each proposal's crop, divisible by the bins.
    box_code_size: numbers per box encoding.
  """

  def __init__(self, is_training, num_classes, conv_hyperparams_fn, num_spatial_bins,
               depth, crop_size, box_code_size):
    if len(num_spatial_bins) != 2 or len(crop_size) != 2:
      raise ValueError('num_spatial_bins and crop_size must be [y, x] pairs, got %r and %r'
                       % (num_spatial_bins, crop_size))
    self._is_training = is_training
    self._num_classes = num_classes
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._num_spatial_bins = list(num_spatial_bins)
    self._depth = depth
    self._crop_size = list(crop_size)
    self._box_code_size = box_code_size

  @property
  def num_classes(self):
    return self._num_classes

  @property
  def is_keras_model(self):
    return False

  def predict(self, image_features, num_predictions_per_location, scope=None,
              proposal_boxes=None):
    """Scores every proposal.

    Args:
      image_features: [feature map [B, H, W, D]].
      num_predictions_per_location: [1].
      scope: variable scope to open ('SecondStageBoxPredictor' in the
        meta-architecture); None builds in the current scope.
      proposal_boxes: float [B, P, 4] normalized proposals.

    Returns:
      {BOX_ENCODINGS: [[B * P, 1, num_classes, code]],
       CLASS_PREDICTIONS_WITH_BACKGROUND: [[B * P, 1, num_classes + 1]]}.

    Raises:
      ValueError: without proposal_boxes, or with more than one feature map.
    """
    check_single_feature_map(image_features, num_predictions_per_location)
    if proposal_boxes is None:
      raise ValueError('proposal_boxes is required')
    if scope is None:
      return self._predict(image_features[0], proposal_boxes)
    with tf.compat.v1.variable_scope(scope):
      return self._predict(image_features[0], proposal_boxes)

  def _pool(self, score_map, proposal_boxes, slots):
    """Position-sensitive average of score_map per proposal -> [B * P, slots]."""
    pooled = two_stage_ops.batch_position_sensitive_crop_regions(
        score_map, proposal_boxes, self._crop_size, self._num_spatial_bins,
        global_pool=True)
    return tf.reshape(pooled, [-1, slots])

  def _predict(self, features, proposal_boxes):
    bins = self._num_spatial_bins[0] * self._num_spatial_bins[1]
    code_slots = self._num_classes * self._box_code_size
    class_slots = self._num_classes + 1
    with slim.arg_scope(self._conv_hyperparams_fn()):
      net = slim.conv2d(features, self._depth, [1, 1], scope='reduce_depth')
      location_map = slim.conv2d(net, bins * code_slots, [1, 1], activation_fn=None,
                                 scope='refined_locations')
      class_map = slim.conv2d(net, bins * class_slots, [1, 1], activation_fn=None,
                              scope='class_predictions')
    box_encodings = tf.reshape(self._pool(location_map, proposal_boxes, code_slots),
                               [-1, 1, self._num_classes, self._box_code_size])
    class_logits = tf.reshape(self._pool(class_map, proposal_boxes, class_slots),
                              [-1, 1, class_slots])
    return {BOX_ENCODINGS: [box_encodings],
            CLASS_PREDICTIONS_WITH_BACKGROUND: [class_logits]}
