"""Random minibatches of anchors or proposals with a bounded share of positives.

A two-stage detector labels thousands of anchors (first stage) and hundreds of
proposals (second stage), nearly all of them background. Training on all of
them drowns the few positives, so each stage draws a minibatch instead:

  * at most `batch_size * positive_fraction` positives, chosen at random;
  * the rest of the batch from the negatives, chosen at random;
  * with fewer candidates than `batch_size`, simply fewer examples.

Only entries whose `indicator` is True are candidates (the others, e.g.
ignored anchors, are never drawn). With `batch_size=None` every positive is
kept and negatives are added in the ratio the fraction implies (with 0.25:
three negatives per positive).

Usage:

    sampler = BalancedPositiveNegativeSampler(positive_fraction=0.5)
    is_sampled = sampler.subsample(indicator=valid_anchors,    # bool [N]
                                   batch_size=256,
                                   labels=positive_anchors)   # bool [N]
    weights = tf.cast(is_sampled, tf.float32)   # 0/1 loss weights

`is_static=True` builds the same draw from fixed-shape ops only (for TPUs)
and then always returns exactly `batch_size` samples when there are at least
that many entries: when candidates run short it pads with non-candidates,
and when negatives run short it takes more positives.

Differs on purpose from the OD API's static variant: when the batch cannot be
filled (fewer than `batch_size` entries in all), it returns fewer samples
rather than marking entry 0 as an extra sample.
"""

import tensorflow as tf


def _random_subset(indicator, num_samples):
  """Keeps `num_samples` of the True entries of `indicator` at random.

  Args:
    indicator: bool [N].
    num_samples: int or int32 scalar tensor; all True entries are kept when
      there are no more than that.

  Returns:
    bool [N], True at the kept entries.
  """
  candidates = tf.reshape(tf.cast(tf.where(indicator), tf.int32), [-1])
  candidates = tf.random.shuffle(candidates)
  count = tf.minimum(tf.size(candidates), tf.cast(num_samples, tf.int32))
  chosen = candidates[:count]
  marks = tf.scatter_nd(chosen[:, None], tf.ones_like(chosen), tf.shape(indicator))
  return marks > 0


def _check_rank1_bool(name, tensor):
  if tensor.shape.ndims != 1:
    raise ValueError('%s must be a rank-1 tensor, got shape %s' % (name, tensor.shape))
  if tensor.dtype != tf.bool:
    raise ValueError('%s must be bool, got %s' % (name, tensor.dtype.name))


class BalancedPositiveNegativeSampler:
  """Draws minibatches with a bounded fraction of positives.

  Args:
    positive_fraction: the largest share of positives in a batch, in [0, 1].
    is_static: build the draw from fixed-shape ops (needs static N and an
      int batch_size).
  """

  def __init__(self, positive_fraction=0.5, is_static=False):
    if not 0 <= positive_fraction <= 1:
      raise ValueError('positive_fraction must be in [0, 1], got %s' % positive_fraction)
    self._positive_fraction = positive_fraction
    self._is_static = is_static

  @property
  def positive_fraction(self):
    return self._positive_fraction

  def subsample(self, indicator, batch_size, labels, scope=None):
    """Picks a random balanced minibatch.

    Args:
      indicator: bool [N], True for the entries that may be drawn.
      batch_size: int, the batch size; None keeps every positive and adds
        negatives in the ratio positive_fraction implies (not with is_static).
      labels: bool [N], True for positives, False for negatives.
      scope: optional name scope.

    Returns:
      bool [N], True for the drawn entries.

    Raises:
      ValueError: if indicator or labels are not rank-1 bool tensors, or
        (is_static) if N is not static or batch_size is not an int.
    """
    _check_rank1_bool('indicator', indicator)
    _check_rank1_bool('labels', labels)
    with tf.name_scope(scope or 'BalancedPositiveNegativeSampler'):
      if self._is_static:
        sampled = self._static_subsample(indicator, batch_size, labels)
      else:
        sampled = self._dynamic_subsample(indicator, batch_size, labels)
      sampled.set_shape(indicator.shape)
      return sampled

  def subsample_weights(self, weights, batch_size, labels, scope=None):
    """subsample() with indicator = weights > 0; returns float 0/1 weights."""
    sampled = self.subsample(weights > 0, batch_size, labels, scope=scope)
    return tf.cast(sampled, weights.dtype)

  def _dynamic_subsample(self, indicator, batch_size, labels):
    positives = tf.logical_and(indicator, labels)
    negatives = tf.logical_and(indicator, tf.logical_not(labels))
    if batch_size is None:
      max_positives = tf.reduce_sum(tf.cast(positives, tf.int32))
    else:
      max_positives = int(batch_size * self._positive_fraction)
    sampled_positives = _random_subset(positives, max_positives)
    num_positives = tf.reduce_sum(tf.cast(sampled_positives, tf.int32))
    if batch_size is None:
      if not self._positive_fraction:
        raise ValueError('batch_size None needs positive_fraction > 0 (it sets the '
                         'number of negatives per positive)')
      negatives_per_positive = (1 - self._positive_fraction) / self._positive_fraction
      max_negatives = tf.cast(
          negatives_per_positive * tf.cast(num_positives, tf.float32), tf.int32)
    else:
      max_negatives = batch_size - num_positives
    sampled_negatives = _random_subset(negatives, max_negatives)
    return tf.logical_or(sampled_positives, sampled_negatives)

  def _static_subsample(self, indicator, batch_size, labels):
    """The draw with static shapes: a random order, then running counts."""
    length = indicator.shape[0]
    if length is None or labels.shape[0] is None:
      raise ValueError('is_static needs indicator and labels of static length, got '
                       '%s and %s' % (indicator.shape, labels.shape))
    if not isinstance(batch_size, int):
      raise ValueError('batch_size must be an int when is_static is True, got %r'
                       % (batch_size,))
    # Too few candidates: the first non-candidates make up the difference.
    shortfall = batch_size - tf.reduce_sum(tf.cast(indicator, tf.int32))
    non_candidate_count = tf.cumsum(tf.cast(tf.logical_not(indicator), tf.int32))
    indicator = tf.logical_or(indicator, non_candidate_count <= shortfall)

    order = tf.random.shuffle(tf.range(length))
    shuffled_pos = tf.cast(tf.gather(tf.logical_and(indicator, labels), order), tf.int32)
    shuffled_neg = tf.cast(
        tf.gather(tf.logical_and(indicator, tf.logical_not(labels)), order), tf.int32)
    total_pos = tf.reduce_sum(shuffled_pos)
    total_neg = tf.reduce_sum(shuffled_neg)
    take_pos = tf.minimum(int(batch_size * self._positive_fraction), total_pos)
    take_neg = tf.minimum(batch_size - take_pos, total_neg)
    # Negatives ran short: fill the batch with further positives.
    take_pos = tf.minimum(batch_size - take_neg, total_pos)
    picked = tf.logical_or(
        tf.logical_and(shuffled_pos > 0, tf.cumsum(shuffled_pos) <= take_pos),
        tf.logical_and(shuffled_neg > 0, tf.cumsum(shuffled_neg) <= take_neg))
    picked = tf.scatter_nd(order[:, None], tf.cast(picked, tf.int32), [length])
    return picked > 0
