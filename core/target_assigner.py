"""Training targets for every anchor from groundtruth boxes and labels.

The target assigner ties the pieces together: similarity (IoU) between
groundtruth and anchors, a matcher deciding positives/negatives/ignored, and
a box coder producing regression targets. Per anchor it returns

    cls_targets  [M, K+1]  the matched box's one-hot label, background
                           ([1, 0, ..., 0]) for unmatched and ignored anchors
    cls_weights  [M]       1 for matched and unmatched, 0 for ignored anchors
    reg_targets  [M, 4]    encoded matched box, zeros elsewhere
    reg_weights  [M]       1 (times the box weight) for matched anchors only

Usage:

    assigner = target_assigner.TargetAssigner(
        matcher_lib.ArgMaxMatcher(0.5, 0.4), box_coder.FasterRcnnBoxCoder())
    (cls_t, cls_w, reg_t, reg_w, match) = assigner.assign(
        anchors, gt_boxes, gt_labels_with_background)
    batch = target_assigner.batch_assign_targets(assigner, anchors,
                                                 gt_boxes_list, gt_labels_list)
"""

import collections

import tensorflow as tf

from core import box_list_ops

BatchTargets = collections.namedtuple(
    'BatchTargets', ['cls_targets', 'cls_weights', 'reg_targets', 'reg_weights', 'matches'])


class TargetAssigner:
  """Assigns classification and regression targets to anchors.

  Args:
    matcher: e.g. matcher.ArgMaxMatcher.
    box_coder: e.g. box_coder.FasterRcnnBoxCoder.
    similarity_fn: fn(groundtruth_boxes [N, 4], anchors [M, 4]) -> [N, M]
      (default box_list_ops.iou).
    negative_class_weight: classification weight of unmatched anchors.
  """

  def __init__(self, matcher, box_coder, similarity_fn=None, negative_class_weight=1.0):
    self._matcher = matcher
    self._box_coder = box_coder
    self._similarity_fn = similarity_fn or box_list_ops.iou
    self._negative_class_weight = negative_class_weight

  @property
  def box_coder(self):
    return self._box_coder

  def assign(self, anchors, groundtruth_boxes, groundtruth_labels=None,
             unmatched_class_label=None, groundtruth_weights=None, scope=None):
    """Assigns targets for one image.

    Args:
      anchors: float [M, 4].
      groundtruth_boxes: float [N, 4] (N may be 0).
      groundtruth_labels: float [N, d] labels; default a [N, 1] column of ones.
      unmatched_class_label: float [d] label of unmatched/ignored anchors;
        default zeros.
      groundtruth_weights: optional float [N] per-box weights.
      scope: name scope.

    Returns:
      (cls_targets [M, d], cls_weights [M], reg_targets [M, 4],
       reg_weights [M], Match).
    """
    with tf.compat.v1.name_scope(scope, 'TargetAssigner'):
      groundtruth_boxes = tf.convert_to_tensor(groundtruth_boxes, tf.float32)
      num_gt = tf.shape(groundtruth_boxes)[0]
      if groundtruth_labels is None:
        groundtruth_labels = tf.ones(tf.stack([num_gt, 1]), tf.float32)
      groundtruth_labels = tf.cast(groundtruth_labels, tf.float32)
      label_depth = groundtruth_labels.shape[1]
      if unmatched_class_label is None:
        unmatched_class_label = tf.zeros([label_depth], tf.float32)
      unmatched_class_label = tf.cast(unmatched_class_label, tf.float32)
      if groundtruth_weights is None:
        groundtruth_weights = tf.ones(tf.stack([num_gt]), tf.float32)
      groundtruth_weights = tf.cast(groundtruth_weights, tf.float32)

      similarity = self._similarity_fn(groundtruth_boxes, anchors)
      match = self._matcher.match(similarity, valid_rows=groundtruth_weights > 0.0)

      matched_boxes = match.gather_based_on_match(
          groundtruth_boxes, tf.zeros([4]), tf.zeros([4]))
      encoded = self._box_coder.encode(matched_boxes, anchors)
      matched = match.matched_column_indicator()
      reg_targets = tf.where(tf.tile(matched[:, None], [1, self._box_coder.code_size]),
                             encoded, tf.zeros_like(encoded))
      reg_weights = match.gather_based_on_match(groundtruth_weights, 0.0, 0.0)

      cls_targets = match.gather_based_on_match(
          groundtruth_labels, unmatched_class_label, unmatched_class_label)
      cls_weights = match.gather_based_on_match(
          groundtruth_weights, self._negative_class_weight, 0.0)
      return cls_targets, cls_weights, reg_targets, reg_weights, match


def batch_assign_targets(assigner, anchors, groundtruth_boxes_list,
                         groundtruth_labels_list, unmatched_class_label=None,
                         groundtruth_weights_list=None):
  """Assigns targets for each image of a batch against shared anchors.

  Args:
    assigner: a TargetAssigner.
    anchors: float [M, 4].
    groundtruth_boxes_list: per image, float [N_i, 4].
    groundtruth_labels_list: per image, float [N_i, d].
    unmatched_class_label: float [d] label of unmatched anchors.
    groundtruth_weights_list: optional per-image float [N_i] weights.

  Returns:
    BatchTargets of stacked tensors ([B, M, d], [B, M], [B, M, 4], [B, M])
    and the list of per-image Match objects.
  """
  if len(groundtruth_boxes_list) != len(groundtruth_labels_list):
    raise ValueError('groundtruth_boxes_list has %d images but groundtruth_labels_list %d'
                     % (len(groundtruth_boxes_list), len(groundtruth_labels_list)))
  if groundtruth_weights_list is None:
    groundtruth_weights_list = [None] * len(groundtruth_boxes_list)
  outputs = [assigner.assign(anchors, boxes, labels, unmatched_class_label, weights)
             for boxes, labels, weights in zip(
                 groundtruth_boxes_list, groundtruth_labels_list, groundtruth_weights_list)]
  cls_t, cls_w, reg_t, reg_w, matches = zip(*outputs)
  return BatchTargets(tf.stack(cls_t), tf.stack(cls_w), tf.stack(reg_t), tf.stack(reg_w),
                      list(matches))
