"""Online hard example mining for single-shot detectors.

Most anchors are easy background; summing their loss swamps the few positives.
The miner keeps, per image, the anchors with the highest loss: it runs
non-max suppression over the decoded predicted boxes scored by their loss (so
near-duplicate anchors are not all picked), optionally caps the negatives at
`max_negatives_per_positive` times the positives (at least
`min_negatives_per_image`), and returns the localization and classification
losses summed over the kept anchors only.

Usage:

    miner = hard_example_miner.HardExampleMiner(
        num_hard_examples=3000, iou_threshold=0.99, loss_type='cls',
        max_negatives_per_positive=3, min_negatives_per_image=3)
    loc_loss, cls_loss = miner(location_losses, cls_losses,   # [B, M] each
                               decoded_boxes_list, match_list)
"""

import tensorflow as tf


class HardExampleMiner:
  """Selects hard examples per image by loss-scored NMS.

  Args:
    num_hard_examples: at most this many anchors per image (None: all).
    iou_threshold: NMS overlap above which a lower-loss anchor is dropped.
    loss_type: 'cls', 'loc' or 'both': which loss ranks the anchors.
    cls_loss_weight: weight of the classification loss in 'both'.
    loc_loss_weight: weight of the localization loss in 'both'.
    max_negatives_per_positive: cap on negatives per positive (None: no cap).
    min_negatives_per_image: negatives kept even for images with no positive.

  Raises:
    ValueError: on an unknown loss_type.
  """

  def __init__(self,
               num_hard_examples=64,
               iou_threshold=0.7,
               loss_type='both',
               cls_loss_weight=0.05,
               loc_loss_weight=0.06,
               max_negatives_per_positive=None,
               min_negatives_per_image=0):
    if loss_type not in ('cls', 'loc', 'both'):
      raise ValueError("hard_example_miner loss_type must be 'cls', 'loc' or 'both', got %r"
                       % (loss_type,))
    self._num_hard_examples = num_hard_examples
    self._iou_threshold = iou_threshold
    self._loss_type = loss_type
    self._cls_loss_weight = cls_loss_weight
    self._loc_loss_weight = loc_loss_weight
    self._max_negatives_per_positive = (
        float(max_negatives_per_positive) if max_negatives_per_positive else None)
    self._min_negatives_per_image = min_negatives_per_image
    self._num_positives_list = None
    self._num_negatives_list = None

  def __call__(self, location_losses, cls_losses, decoded_boxes_list, match_list=None):
    """Returns (localization_loss, classification_loss) summed over mined anchors.

    Args:
      location_losses: float [B, M] per-anchor localization losses.
      cls_losses: float [B, M] per-anchor classification losses.
      decoded_boxes_list: per image, float [M, 4] predicted boxes.
      match_list: optional per-image Match (needed for negative capping).

    Raises:
      ValueError: if the list lengths disagree with the batch.
    """
    batch = len(decoded_boxes_list)
    if match_list is None:
      if self._max_negatives_per_positive is not None:
        raise ValueError('match_list is required with max_negatives_per_positive')
      match_list = [None] * batch
    if len(match_list) != batch:
      raise ValueError('decoded_boxes_list has %d images but match_list %d'
                       % (batch, len(match_list)))
    loc_list = tf.unstack(location_losses, num=batch)
    cls_list = tf.unstack(cls_losses, num=batch)
    mined_loc, mined_cls = [], []
    num_pos, num_neg = [], []
    with tf.compat.v1.name_scope('HardExampleMiner'):
      for boxes, loc, cls, match in zip(decoded_boxes_list, loc_list, cls_list, match_list):
        if self._loss_type == 'cls':
          image_losses = cls
        elif self._loss_type == 'loc':
          image_losses = loc
        else:
          image_losses = cls * self._cls_loss_weight + loc * self._loc_loss_weight
        max_output = self._num_hard_examples or tf.size(image_losses)
        selected = tf.image.non_max_suppression(
            boxes, tf.stop_gradient(image_losses), max_output,
            iou_threshold=self._iou_threshold)
        if match is not None and self._max_negatives_per_positive is not None:
          selected, pos, neg = self._subsample_negatives(selected, match)
          num_pos.append(pos)
          num_neg.append(neg)
        mined_loc.append(tf.reduce_sum(tf.gather(loc, selected)))
        mined_cls.append(tf.reduce_sum(tf.gather(cls, selected)))
      self._num_positives_list = num_pos or None
      self._num_negatives_list = num_neg or None
      return tf.add_n(mined_loc), tf.add_n(mined_cls)

  def _subsample_negatives(self, indices, match):
    """Keeps all positives and the first allowed number of negatives."""
    positive = tf.gather(match.matched_column_indicator(), indices)
    negative = tf.gather(match.unmatched_column_indicator(), indices)
    num_positives = tf.reduce_sum(tf.cast(positive, tf.int32))
    max_negatives = tf.maximum(
        self._min_negatives_per_image,
        tf.cast(self._max_negatives_per_positive * tf.cast(num_positives, tf.float32),
                tf.int32))
    negative_rank = tf.cumsum(tf.cast(negative, tf.int32))
    keep_negative = tf.logical_and(negative, negative_rank <= max_negatives)
    keep = tf.logical_or(positive, keep_negative)
    kept = tf.boolean_mask(indices, keep)
    num_negatives = tf.size(kept) - num_positives
    return kept, num_positives, num_negatives

  def summarize(self):
    """Adds scalar summaries of the mined positives and negatives per image."""
    if self._num_positives_list and self._num_negatives_list:
      with tf.compat.v1.name_scope('HardExampleMiner'):
        pos = tf.cast(tf.stack(self._num_positives_list), tf.float32)
        neg = tf.cast(tf.stack(self._num_negatives_list), tf.float32)
        tf.compat.v1.summary.scalar('HardExampleMiner/NumPositives', tf.reduce_mean(pos))
        tf.compat.v1.summary.scalar('HardExampleMiner/NumNegatives', tf.reduce_mean(neg))
