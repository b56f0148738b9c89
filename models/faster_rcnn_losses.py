"""The training losses of the two-stage detectors (Faster R-CNN, R-FCN, Mask R-CNN).

Three losses, each normalized as the OD API normalizes them:

* RPN: the proposal target assigner labels anchors object/background, the
  first stage sampler keeps a balanced minibatch of them per image;
  smooth L1 on the matched anchors' offsets and softmax cross-entropy on the
  objectness, each summed over the minibatch, divided by the minibatch's
  size, averaged over images.
* Box classifier: the detection target assigner labels each proposal with a
  class (or background); the box encoding of the target class is
  regressed (smooth L1) and the class logits classified; the per-proposal
  losses are divided by (real proposals of the image x images) and summed
  over real proposals, or chosen by a hard example miner.
* Masks: the groundtruth mask of each positive proposal's object is cropped
  to the proposal at the predicted mask size; sigmoid cross-entropy of the
  target class's mask logits, divided by (positive proposals x mask pixels).

    rpn = rpn_losses(assigner, sampler, 256, anchors, encodings, logits,
                     gt_boxes_list, gt_weights_list)
    loc, cls, targets = box_classifier_losses(...)

All boxes are normalized to the preprocessed image (see
faster_rcnn_proposals).

Differs on purpose from the OD API: mask targets are cropped straight from
each image's groundtruth masks (crop_and_resize picks the matched mask by
index) instead of first gathering a full-size mask per proposal, and with
`masks_in_true_image_frame` the proposals are mapped into the unpadded image
instead of resizing and padding the masks with the image resizer; with a
hard example miner every image of the batch is mined (the OD API mines only
the first).
"""

import collections

import tensorflow as tf

from core import losses as losses_lib
from core import matcher as matcher_lib
from models import faster_rcnn_proposals as proposals_lib

BoxClassifierTargets = collections.namedtuple(
    'BoxClassifierTargets', ['one_hot_classes', 'reg_weights', 'matches', 'valid'])


def _sampled_anchor_indicator(sampler, minibatch_size, cls_targets, cls_weights):
  """float [B, M]: 1 for the anchors in each image's RPN minibatch."""
  batch = cls_targets.shape[0]
  picked = [sampler.subsample(weights > 0.0, minibatch_size, targets > 0.0)
            for targets, weights in zip(tf.unstack(cls_targets, num=batch),
                                        tf.unstack(cls_weights, num=batch))]
  return tf.cast(tf.stack(picked), tf.float32)


def rpn_losses(assigner, sampler, minibatch_size, anchors, box_encodings, objectness_logits,
               groundtruth_boxes_list, groundtruth_weights_list):
  """Unweighted RPN (localization, objectness) losses.

  Args:
    assigner: the proposal TargetAssigner.
    sampler: BalancedPositiveNegativeSampler.
    minibatch_size: anchors per image in the loss (first_stage_minibatch_size).
    anchors: float [M, 4] normalized.
    box_encodings: float [B, M, 4].
    objectness_logits: float [B, M, 2].
    groundtruth_boxes_list: per image float [N_i, 4] normalized.
    groundtruth_weights_list: per image float [N_i].

  Returns:
    (localization_loss, objectness_loss) scalars.
  """
  batch = len(groundtruth_boxes_list)
  targets = [assigner.assign(anchors, boxes, None, groundtruth_weights=weights)
             for boxes, weights in zip(groundtruth_boxes_list, groundtruth_weights_list)]
  cls_targets = tf.stack([t[0][:, 0] for t in targets])
  cls_weights = tf.stack([t[1] for t in targets])
  reg_targets = tf.stack([t[2] for t in targets])
  reg_weights = tf.stack([t[3] for t in targets])
  cls_targets.set_shape([batch, None])
  cls_weights.set_shape([batch, None])
  sampled = _sampled_anchor_indicator(sampler, minibatch_size, cls_targets, cls_weights)
  normalizer = tf.maximum(tf.reduce_sum(sampled, axis=1), 1.0)
  localization = losses_lib.WeightedSmoothL1LocalizationLoss()(
      box_encodings, reg_targets, weights=sampled * reg_weights)
  objectness = losses_lib.WeightedSoftmaxClassificationLoss()(
      objectness_logits, tf.one_hot(tf.cast(cls_targets, tf.int32), depth=2),
      weights=sampled)
  return (tf.reduce_mean(tf.reduce_sum(localization, axis=1) / normalizer),
          tf.reduce_mean(tf.reduce_sum(objectness, axis=1) / normalizer))


def assign_box_classifier_targets(assigner, num_classes, proposal_boxes, num_proposals,
                                  groundtruth_boxes_list, groundtruth_labels_list,
                                  groundtruth_weights_list):
  """Detection targets of every (padded) proposal.

  Args:
    assigner: the detection TargetAssigner.
    num_classes: classes without background.
    proposal_boxes: float [B, P, 4] normalized.
    num_proposals: int32 [B].
    groundtruth_boxes_list: per image float [N_i, 4].
    groundtruth_labels_list: per image float [N_i, num_classes + 1].
    groundtruth_weights_list: per image float [N_i].

  Returns:
    (cls_targets [B, P, K+1], cls_weights [B, P], reg_targets [B, P, 4],
     BoxClassifierTargets).
  """
  batch = len(groundtruth_boxes_list)
  background = tf.one_hot(0, num_classes + 1, dtype=tf.float32)
  outputs = [assigner.assign(boxes, gt_boxes, gt_labels, unmatched_class_label=background,
                             groundtruth_weights=gt_weights)
             for boxes, gt_boxes, gt_labels, gt_weights in zip(
                 tf.unstack(proposal_boxes, num=batch), groundtruth_boxes_list,
                 groundtruth_labels_list, groundtruth_weights_list)]
  cls_targets = tf.stack([o[0] for o in outputs])
  one_hot = tf.one_hot(tf.argmax(cls_targets, axis=2), num_classes + 1)
  valid = proposals_lib.valid_proposal_indicator(num_proposals, tf.shape(proposal_boxes)[1])
  targets = BoxClassifierTargets(one_hot, tf.stack([o[3] for o in outputs]),
                                 [o[4] for o in outputs], valid)
  return cls_targets, tf.stack([o[1] for o in outputs]), tf.stack([o[2] for o in outputs]), targets


def select_target_class(per_class, one_hot_with_background):
  """Picks each row's entry for its target class.

  Args:
    per_class: float [B, P, q, ...] with q = 1 (shared by all classes) or
      num_classes.
    one_hot_with_background: float [B, P, num_classes + 1].

  Returns:
    float [B, P, ...]; background rows get zeros when q > 1.
  """
  if per_class.shape[2] == 1:
    return per_class[:, :, 0]
  with_background = tf.concat([tf.zeros_like(per_class[:, :, :1]), per_class], axis=2)
  weights = one_hot_with_background
  for _ in range(per_class.shape.ndims - 3):
    weights = weights[..., None]
  return tf.reduce_sum(with_background * weights, axis=2)


def _mined_losses(miner, proposal_boxes, loc_losses, cls_losses, num_proposals, matches):
  """Sums the miner's picks over the real proposals of every image."""
  batch = len(matches)
  mined = []
  for boxes, loc, cls, num, match in zip(
      tf.unstack(proposal_boxes, num=batch), tf.unstack(loc_losses, num=batch),
      tf.unstack(cls_losses, num=batch), tf.unstack(num_proposals, num=batch), matches):
    real_match = matcher_lib.Match(match.match_results[:num])
    mined.append(miner(loc[None, :num], cls[None, :num], [boxes[:num]], [real_match]))
  return tf.add_n([m[0] for m in mined]), tf.add_n([m[1] for m in mined])


def box_classifier_losses(assigner, num_classes, classification_loss, hard_example_miner,
                          refined_box_encodings, class_logits, proposal_boxes, num_proposals,
                          groundtruth_boxes_list, groundtruth_labels_list,
                          groundtruth_weights_list):
  """Unweighted second stage (localization, classification) losses.

  Args:
    assigner: the detection TargetAssigner.
    num_classes: classes without background.
    classification_loss: a core.losses classification loss.
    hard_example_miner: optional HardExampleMiner.
    refined_box_encodings: float [B * P, q, 4].
    class_logits: float [B * P, num_classes + 1].
    proposal_boxes: float [B, P, 4] normalized.
    num_proposals: int32 [B].
    groundtruth_boxes_list, groundtruth_labels_list, groundtruth_weights_list:
      per image groundtruth (labels with the background column).

  Returns:
    (localization_loss, classification_loss, BoxClassifierTargets).
  """
  batch = len(groundtruth_boxes_list)
  max_proposals = tf.shape(proposal_boxes)[1]
  cls_targets, cls_weights, reg_targets, targets = assign_box_classifier_targets(
      assigner, num_classes, proposal_boxes, num_proposals, groundtruth_boxes_list,
      groundtruth_labels_list, groundtruth_weights_list)
  encodings = tf.reshape(refined_box_encodings, tf.stack(
      [batch, max_proposals, refined_box_encodings.shape[1], 4]))
  encodings.set_shape([batch, None, refined_box_encodings.shape[1], 4])
  encodings = select_target_class(encodings, targets.one_hot_classes)
  logits = tf.reshape(class_logits, tf.stack([batch, max_proposals, num_classes + 1]))
  normalizer = batch * tf.cast(tf.maximum(num_proposals, 1), tf.float32)[:, None]
  loc_losses = losses_lib.WeightedSmoothL1LocalizationLoss()(
      encodings, reg_targets, weights=targets.reg_weights) / normalizer
  cls_losses = classification_loss(logits, cls_targets, weights=cls_weights)
  if cls_losses.shape.ndims == 3:
    cls_losses = tf.reduce_sum(cls_losses, axis=2)
  cls_losses /= normalizer
  if hard_example_miner is not None:
    loc, cls = _mined_losses(hard_example_miner, proposal_boxes, loc_losses, cls_losses,
                             num_proposals, targets.matches)
    return loc, cls, targets
  valid = tf.cast(targets.valid, tf.float32)
  return (tf.reduce_sum(loc_losses * valid), tf.reduce_sum(cls_losses * valid), targets)


def _mask_targets_one_image(masks, boxes, match, crop_size):
  """[P, h, w] crops of each proposal's matched groundtruth mask (zeros if none)."""
  masks = tf.cast(masks, tf.float32)[..., None]
  empty = tf.zeros(tf.concat([[1], tf.shape(masks)[1:]], axis=0))
  # Row 0 is an empty mask for unmatched proposals (and images without objects).
  masks = tf.concat([empty, masks], axis=0)
  indices = tf.maximum(match.match_results, -1) + 1
  crops = tf.image.crop_and_resize(masks, boxes, indices, crop_size)
  return crops[..., 0]


def mask_loss(mask_logits, proposal_boxes, targets, groundtruth_masks_list,
              masks_in_true_image_frame=None):
  """Unweighted mask loss over the positive proposals.

  Args:
    mask_logits: float [B * P, q, mask_h, mask_w] (q = 1 or num_classes).
    proposal_boxes: float [B, P, 4] normalized to the preprocessed image.
    targets: BoxClassifierTargets of the same proposals.
    groundtruth_masks_list: per image [N_i, H_i, W_i] masks (any dtype).
    masks_in_true_image_frame: optional float [B, 4] windows of the true
      image: the masks cover that window (not the padded image).

  Returns:
    scalar loss.
  """
  batch = len(groundtruth_masks_list)
  mask_height, mask_width = int(mask_logits.shape[2]), int(mask_logits.shape[3])
  logits = tf.reshape(mask_logits, tf.stack(
      [batch, -1, mask_logits.shape[1], mask_height * mask_width]))
  logits.set_shape([batch, None, mask_logits.shape[1], mask_height * mask_width])
  logits = select_target_class(logits, targets.one_hot_classes)
  boxes = proposal_boxes
  if masks_in_true_image_frame is not None:
    boxes = proposals_lib.to_window_frame(boxes, masks_in_true_image_frame, clip=False)
  mask_targets = tf.stack([
      _mask_targets_one_image(masks, image_boxes, match, [mask_height, mask_width])
      for masks, image_boxes, match in zip(groundtruth_masks_list,
                                           tf.unstack(boxes, num=batch), targets.matches)])
  mask_targets = tf.stop_gradient(
      tf.reshape(mask_targets, tf.stack([batch, -1, mask_height * mask_width])))
  weights = targets.reg_weights * tf.cast(targets.valid, tf.float32)
  losses = losses_lib.WeightedSigmoidClassificationLoss()(logits, mask_targets,
                                                          weights=weights)
  normalizer = tf.maximum(tf.reduce_sum(weights) * mask_height * mask_width, 1.0)
  return tf.reduce_sum(losses) / normalizer
