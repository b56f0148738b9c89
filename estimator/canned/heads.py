"""tf.estimator 2.15's public heads: `tfe.BinaryClassHead`, `MultiClassHead`, regression heads.

`MultiLabelHead` and `MultiHead` are in multi_heads.py, on the layer below.

A head turns a network's logits into the loss, metrics, predictions and
export signatures of an `EstimatorSpec`. Users pass one to the head-based
Estimators or call it from their own model_fn, as with tf.estimator:

    head = tfe.MultiClassHead(n_classes=3, label_vocabulary=['a', 'b', 'c'])
    est = tfe.DNNEstimator(head=head, hidden_units=[32], feature_columns=columns)

    def model_fn(features, labels, mode):
      logits = tf.compat.v1.layers.dense(features['x'], head.logits_dimension)
      return head.create_estimator_spec(
          features, mode, logits, labels=labels,
          optimizer=tf_keras.optimizers.Adagrad(0.1))   # or train_op_fn=...

Constructor arguments and defaults are tf.estimator 2.15's (`weight_column`,
`label_vocabulary`, `thresholds`, `loss_reduction=SUM_OVER_BATCH_SIZE`,
`loss_fn`, `name`, ...). The machinery (labels, losses, the metrics of
head.py's table, predictions, signatures) is head.py's internal heads; this
module adds what the public classes have on top:

* `loss_reduction` is a Keras `tf_keras.losses.Reduction` value ('sum',
  'sum_over_batch_size'; 'auto' means the latter) or a
  `tf.compat.v1.losses.Reduction` value, NONE refused;
* `name`: metric keys get a '/<name>' suffix (`accuracy/head1`); a
  `MultiHead` needs it to key labels, logits and predictions;
* `thresholds` (binary and multi-label): `accuracy/positive_threshold_<t>`,
  `precision/...`, `recall/...` for each threshold t in (0, 1);
* `loss_fn(labels, logits[, features])` returns the unreduced loss in place
  of the head's own;
* `loss(labels, logits, features=None, mode=None, regularization_losses=None)`,
  `predictions(logits, keys=None)`, and `create_estimator_spec(...,
  optimizer=..., trainable_variables=..., update_ops=...)` with an optimizer
  (name, v1 or Keras) instead of `train_op_fn`.

Regression heads put an inverse link on the logits: `RegressionHead(
inverse_link_fn=...)`, `PoissonRegressionHead` (log-Poisson loss, exp link),
`LogisticRegressionHead` (sigmoid cross entropy, labels in [0, 1], sigmoid
link); the loss is always taken on the logits, and with a link the
predictions hold both `predictions` and `logits`.

Differs on purpose: `metrics()` / `update_metrics()` (Keras metric objects
for eager code) are not provided: evaluate() reports the head's metrics, and
`tfe.add_metrics` adds your own; calling them raises NotImplementedError
saying so. Multi-label labels are dense multi-hot [batch, n_classes] or a
SparseTensor of class ids (strings with `label_vocabulary`).
"""

import tensorflow as tf

from estimator import model_fn as model_fn_lib
from estimator import util
from estimator.canned import head as head_lib
from estimator.canned import optimizers

__all__ = ['BinaryClassHead', 'MultiClassHead', 'RegressionHead', 'PoissonRegressionHead',
           'LogisticRegressionHead']

ModeKeys = model_fn_lib.ModeKeys
MetricKeys = head_lib.MetricKeys
PredictionKeys = head_lib.PredictionKeys
_V1 = tf.compat.v1.losses.Reduction
# Keras (tf.losses.Reduction in 2.15) and v1 reduction values -> the v1 value the heads use.
_REDUCTIONS = {'auto': _V1.SUM_OVER_BATCH_SIZE, 'sum': _V1.SUM,
               'sum_over_batch_size': _V1.SUM_OVER_BATCH_SIZE}
_REDUCTIONS.update({r: r for r in _V1.all() if r != _V1.NONE})
SUM_OVER_BATCH_SIZE = 'sum_over_batch_size'
_LOSS_FN_ARGS = ('labels', 'logits', 'features')


def _v1_reduction(loss_reduction):
  if loss_reduction not in _REDUCTIONS:
    raise ValueError('Invalid loss_reduction: {}. See `tf.losses.Reduction` for valid '
                     'options (NONE is not allowed).'.format(loss_reduction))
  return _REDUCTIONS[loss_reduction]


def _check_loss_fn(loss_fn):
  if loss_fn is None:
    return
  args = util.fn_args(loss_fn)
  if 'labels' not in args or 'logits' not in args:
    raise ValueError('loss_fn must contain argument: labels and logits. Given arguments: '
                     '{}'.format(args))
  extra = sorted(set(args) - set(_LOSS_FN_ARGS))
  if extra:
    raise ValueError('loss_fn has unexpected args: {}'.format(extra))


def _check_thresholds(thresholds):
  thresholds = tuple(thresholds or ())
  for threshold in thresholds:
    if not 0.0 < threshold < 1.0:
      raise ValueError('thresholds not in (0, 1): {}.'.format(thresholds))
  return thresholds


def _threshold_metrics(labels, probabilities, weights, thresholds):
  """accuracy / precision / recall at each threshold, over all label entries."""
  metrics = {}
  for t in thresholds:
    predicted = tf.cast(probabilities > t, tf.float32)
    suffix = '/positive_threshold_%g' % t
    metrics[MetricKeys.ACCURACY + suffix] = tf.compat.v1.metrics.accuracy(
        labels, predicted, weights=weights)
    metrics[MetricKeys.PRECISION + suffix] = tf.compat.v1.metrics.precision(
        labels, predicted, weights=weights)
    metrics[MetricKeys.RECALL + suffix] = tf.compat.v1.metrics.recall(
        labels, predicted, weights=weights)
  return metrics


class _PublicHead(object):
  """The public-API layer over one of head.py's internal heads (mixed in first)."""

  def _init_public(self, name, loss_fn, thresholds=()):
    _check_loss_fn(loss_fn)
    self._name = name
    self._loss_fn = loss_fn
    self._thresholds = _check_thresholds(thresholds)
    self._features = None

  @property
  def name(self):
    return self._name

  def summary_key(self, key):
    return '{}/{}'.format(key, self._name) if self._name else key

  def create_loss(self, features, mode, logits, labels):
    self._features = features  # For a loss_fn that takes features.
    return super().create_loss(features, mode, logits, labels)

  def _unreduced_loss(self, labels, logits):
    if self._loss_fn is None:
      return super()._unreduced_loss(labels, logits)
    kwargs = {'labels': labels, 'logits': logits}
    if 'features' in util.fn_args(self._loss_fn):
      kwargs['features'] = self._features
    return tf.cast(self._loss_fn(**kwargs), tf.float32)

  def _head_metrics(self, labels, predictions, unreduced_loss, weights):
    """The metrics proper (head.py's, unless a subclass computes its own)."""
    return super()._metrics(labels, predictions, unreduced_loss, weights)

  def _metrics(self, labels, predictions, unreduced_loss, weights):
    metrics = self._head_metrics(labels, predictions, unreduced_loss, weights)
    if self._thresholds:
      metrics.update(_threshold_metrics(
          labels, self._threshold_probabilities(predictions),
          head_lib._broadcast_weights(weights, labels), self._thresholds))  # pylint: disable=protected-access
    return {self.summary_key(k): v for k, v in metrics.items()}

  def _threshold_probabilities(self, predictions):
    return predictions[PredictionKeys.LOGISTIC]

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    """The reduced training loss (plus `regularization_losses`) of a batch."""
    training_loss = self.create_loss(features, mode, logits, labels)[0]
    if regularization_losses:
      training_loss += tf.math.add_n(list(regularization_losses))
    return training_loss

  def predictions(self, logits, keys=None):
    """The predictions dict of `logits` (only `keys` when given)."""
    predictions = self._predictions(head_lib._check_logits(logits, self.logits_dimension))  # pylint: disable=protected-access
    if keys is None:
      return predictions
    return {k: v for k, v in predictions.items() if k in keys}

  def metrics(self, regularization_losses=None):
    raise NotImplementedError(
        'Head.metrics() (Keras metric objects) is not provided by tfe heads: evaluate() '
        'reports the head\'s metrics; add your own with tfe.add_metrics(estimator, metric_fn).')

  def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None):
    self.metrics()

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    """tf.estimator's Head.create_estimator_spec: `optimizer` or `train_op_fn` in TRAIN."""
    train_op_fn = _train_op_fn(mode, optimizer, trainable_variables, train_op_fn, update_ops)
    return super().create_estimator_spec(features, mode, logits, labels=labels,
                                         train_op_fn=train_op_fn,
                                         regularization_losses=regularization_losses)


def _train_op_fn(mode, optimizer, trainable_variables, train_op_fn, update_ops):
  """The train_op_fn to use: the given one, or `optimizer.minimize` with the global step."""
  if optimizer is not None and train_op_fn is not None:
    raise ValueError('train_op_fn and optimizer cannot both be set.')
  if mode == ModeKeys.TRAIN and optimizer is None and train_op_fn is None:
    raise ValueError('train_op_fn and optimizer cannot both be None.')
  if optimizer is None:
    return train_op_fn

  def minimize(loss):
    instance = optimizers.for_clones(optimizers.get_optimizer_instance(optimizer))
    with tf.control_dependencies(list(update_ops or [])):
      return instance.minimize(loss, global_step=tf.compat.v1.train.get_global_step(),
                               var_list=trainable_variables)
  return minimize


class BinaryClassHead(_PublicHead, head_lib._BinaryClassHead):  # pylint: disable=protected-access
  """Binary classification: one logit, sigmoid cross entropy."""

  def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
               loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
    head_lib._BinaryClassHead.__init__(  # pylint: disable=protected-access
        self, weight_column, label_vocabulary, _v1_reduction(loss_reduction))
    self._init_public(name, loss_fn, thresholds)
    self._public_reduction = loss_reduction

  @property
  def loss_reduction(self):
    return self._public_reduction


class MultiClassHead(_PublicHead, head_lib._MultiClassHead):  # pylint: disable=protected-access
  """n_classes > 2 classes, softmax cross entropy."""

  def __init__(self, n_classes, weight_column=None, label_vocabulary=None,
               loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
    if n_classes is None or n_classes <= 2:
      raise ValueError('n_classes must be > 2: {}.'.format(n_classes))
    head_lib._MultiClassHead.__init__(  # pylint: disable=protected-access
        self, n_classes, weight_column, label_vocabulary, _v1_reduction(loss_reduction))
    self._init_public(name, loss_fn)
    self._public_reduction = loss_reduction

  @property
  def loss_reduction(self):
    return self._public_reduction


class RegressionHead(_PublicHead, head_lib._RegressionHead):  # pylint: disable=protected-access
  """Regression on `label_dimension` targets; squared error on the logits by default."""

  def __init__(self, label_dimension=1, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
               loss_fn=None, inverse_link_fn=None, name=None):
    if label_dimension < 1:
      raise ValueError('Invalid label_dimension {}.'.format(label_dimension))
    head_lib._RegressionHead.__init__(  # pylint: disable=protected-access
        self, label_dimension, weight_column, _v1_reduction(loss_reduction))
    self._init_public(name, loss_fn)
    self._public_reduction = loss_reduction
    self._inverse_link_fn = inverse_link_fn

  @property
  def loss_reduction(self):
    return self._public_reduction

  def _predictions(self, logits):
    if self._inverse_link_fn is None:
      return super()._predictions(logits)
    return {PredictionKeys.PREDICTIONS: tf.identity(self._inverse_link_fn(logits),
                                                    name=PredictionKeys.PREDICTIONS),
            PredictionKeys.LOGITS: logits}


class PoissonRegressionHead(RegressionHead):
  """Counts: log-Poisson loss on the logits, predictions exp(logits)."""

  def __init__(self, label_dimension=1, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
               compute_full_loss=True, name=None):
    self._compute_full_loss = compute_full_loss
    super().__init__(label_dimension=label_dimension, weight_column=weight_column,
                     loss_reduction=loss_reduction, loss_fn=self._poisson_loss,
                     inverse_link_fn=tf.math.exp, name=name)

  def _poisson_loss(self, labels, logits):
    return tf.nn.log_poisson_loss(targets=labels, log_input=logits,
                                  compute_full_loss=self._compute_full_loss)


class LogisticRegressionHead(RegressionHead):
  """Targets in [0, 1]: sigmoid cross entropy on the logits, predictions sigmoid(logits)."""

  def __init__(self, label_dimension=1, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
               name=None):
    super().__init__(label_dimension=label_dimension, weight_column=weight_column,
                     loss_reduction=loss_reduction, loss_fn=self._logistic_loss,
                     inverse_link_fn=tf.math.sigmoid, name=name)

  def _logistic_loss(self, labels, logits):
    check = tf.debugging.Assert(
        tf.reduce_all((labels >= 0.0) & (labels <= 1.0)),
        ['Labels must be in range [0, 1]', labels], summarize=10)
    with tf.control_dependencies([check]):
      return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
