"""Per-anchor weighted losses for detectors.

Every loss takes a prediction and a target of the same shape plus per-anchor
weights, and returns the *unreduced* loss so that the caller can normalize it
(by the number of matches) or hand it to a hard example miner:

    loss                             prediction / target        returns
    WeightedSmoothL1LocalizationLoss [B, M, 4] box encodings    [B, M]
    WeightedL2LocalizationLoss       [B, M, 4] box encodings    [B, M]
    WeightedSigmoidClassificationLoss [B, M, K] logits / 0-1    [B, M, K]
    SigmoidFocalClassificationLoss   [B, M, K] logits / 0-1     [B, M, K]
    WeightedSoftmaxClassificationLoss [B, M, K] logits/one-hot  [B, M]

`weights` is [B, M] (or [B, M, K] for the sigmoid losses). Smooth L1 (the
Huber loss) is 0.5 x^2 / delta for |x| < delta and |x| - 0.5 delta beyond,
summed over the four coordinates.

Usage:

    loc_loss = losses.WeightedSmoothL1LocalizationLoss()
    per_anchor = loc_loss(box_encodings, reg_targets, weights=reg_weights)
    total = tf.reduce_sum(per_anchor) / tf.maximum(num_matches, 1.0)
"""

import abc

import tensorflow as tf


class Loss(abc.ABC):
  """Base class: handles NaN targets and the name scope."""

  def __call__(self, prediction_tensor, target_tensor, ignore_nan_targets=False,
               scope=None, **params):
    """Returns the unreduced loss.

    Args:
      prediction_tensor: float [B, M, d] predictions.
      target_tensor: float [B, M, d] targets.
      ignore_nan_targets: replace NaN targets by the prediction (zero loss).
      scope: name scope.
      **params: loss-specific arguments, e.g. weights.
    """
    with tf.compat.v1.name_scope(scope, type(self).__name__,
                                 [prediction_tensor, target_tensor]):
      if ignore_nan_targets:
        target_tensor = tf.where(tf.math.is_nan(target_tensor), prediction_tensor,
                                 target_tensor)
      return self._compute_loss(prediction_tensor, target_tensor, **params)

  @abc.abstractmethod
  def _compute_loss(self, prediction_tensor, target_tensor, **params):
    """Returns the unreduced loss tensor."""


def _expand_weights(weights, like):
  """Broadcasts [B, M] weights against a [B, M, K] tensor."""
  weights = tf.cast(weights, like.dtype)
  if weights.shape.ndims == 2:
    weights = tf.expand_dims(weights, 2)
  return weights


class WeightedSmoothL1LocalizationLoss(Loss):
  """Smooth L1 (Huber) loss summed over the code dimension.

  Args:
    delta: where the loss turns from quadratic to linear.
  """

  def __init__(self, delta=1.0):
    if delta <= 0:
      raise ValueError('smooth L1 delta must be positive, got %s' % delta)
    self._delta = delta

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Args: weights float [B, M]. Returns float [B, M]."""
    diff = tf.abs(prediction_tensor - target_tensor)
    quadratic = 0.5 * tf.square(diff) / self._delta
    linear = diff - 0.5 * self._delta
    per_coordinate = tf.where(diff < self._delta, quadratic, linear)
    return tf.reduce_sum(per_coordinate, axis=2) * tf.cast(weights, per_coordinate.dtype)


class WeightedL2LocalizationLoss(Loss):
  """Half the squared error of the weighted code, summed over the code dimension."""

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Args: weights float [B, M]. Returns float [B, M]."""
    weighted_difference = (prediction_tensor - target_tensor) * _expand_weights(
        weights, prediction_tensor)
    return tf.reduce_sum(0.5 * tf.square(weighted_difference), axis=2)


class WeightedSigmoidClassificationLoss(Loss):
  """Independent sigmoid cross-entropy per class."""

  def _compute_loss(self, prediction_tensor, target_tensor, weights, class_indices=None):
    """Returns [B, M, K] losses.

    Args:
      weights: float [B, M] or [B, M, K].
      class_indices: optional int list: only these classes contribute.
    """
    weights = _expand_weights(weights, prediction_tensor)
    if class_indices is not None:
      mask = tf.reduce_sum(tf.one_hot(class_indices, prediction_tensor.shape[2]), axis=0)
      weights *= tf.reshape(mask, [1, 1, -1])
    loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=target_tensor,
                                                   logits=prediction_tensor)
    return loss * weights


class SigmoidFocalClassificationLoss(Loss):
  """Focal loss: sigmoid cross-entropy down-weighting easy examples.

  Args:
    gamma: focusing exponent on (1 - p_t).
    alpha: optional weight of positives (1 - alpha for negatives).
  """

  def __init__(self, gamma=2.0, alpha=0.25):
    self._gamma = gamma
    self._alpha = alpha

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Args: weights float [B, M] or [B, M, K]. Returns float [B, M, K]."""
    weights = _expand_weights(weights, prediction_tensor)
    cross_entropy = tf.nn.sigmoid_cross_entropy_with_logits(labels=target_tensor,
                                                            logits=prediction_tensor)
    probs = tf.sigmoid(prediction_tensor)
    p_t = target_tensor * probs + (1.0 - target_tensor) * (1.0 - probs)
    modulating = tf.pow(1.0 - p_t, self._gamma) if self._gamma else 1.0
    alpha_weight = 1.0
    if self._alpha is not None:
      alpha_weight = target_tensor * self._alpha + (1.0 - target_tensor) * (1.0 - self._alpha)
    return modulating * alpha_weight * cross_entropy * weights


class WeightedSoftmaxClassificationLoss(Loss):
  """Softmax cross-entropy over the class dimension.

  Args:
    logit_scale: logits are divided by this (a softmax temperature).
  """

  def __init__(self, logit_scale=1.0):
    if logit_scale <= 0:
      raise ValueError('softmax logit_scale must be positive, got %s' % logit_scale)
    self._logit_scale = logit_scale

  def _compute_loss(self, prediction_tensor, target_tensor, weights):
    """Args: weights float [B, M] (or [B, M, K], reduced by max). Returns [B, M]."""
    weights = tf.cast(weights, prediction_tensor.dtype)
    if weights.shape.ndims == 3:
      weights = tf.reduce_max(weights, axis=2)
    logits = prediction_tensor / self._logit_scale
    loss = tf.nn.softmax_cross_entropy_with_logits(labels=tf.stop_gradient(target_tensor),
                                                   logits=logits)
    return loss * weights
