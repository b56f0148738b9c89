"""Heads: from logits to losses, metrics, predictions and export outputs.

A head is the part of a canned Estimator after the network: given the
logits of a batch it builds the loss for TRAIN, the metrics for EVAL, the
predictions for PREDICT and the serving signatures for export, and returns
the `EstimatorSpec`. It mirrors tf.estimator's v1 `_Head` (the one the
tf.estimator 2.15 canned classes are built on), with the V2 classes'
default `loss_reduction`:

    from estimator.canned import head as head_lib

    head = head_lib.classification_head(n_classes=3, weight_column='w',
                                        label_vocabulary=['cat', 'dog', 'eel'])

    def model_fn(features, labels, mode, config):
      logits = tf.compat.v1.layers.dense(features['x'], head.logits_dimension)
      optimizer = tfe.TowerOptimizer(tf.compat.v1.train.AdagradOptimizer(0.05))
      return head.create_estimator_spec(
          features, mode, logits, labels=labels,
          train_op_fn=lambda loss: optimizer.minimize(
              loss, global_step=tf.compat.v1.train.get_global_step()))

Heads:

* `classification_head(n_classes=2)`: binary, one logit per example, sigmoid
  cross entropy. Labels are 0/1 (float labels in [0, 1] are accepted) or
  strings of `label_vocabulary`.
* `classification_head(n_classes > 2)`: one logit per class, sparse softmax
  cross entropy; labels are ids in [0, n_classes) or strings of
  `label_vocabulary`.
* `regression_head(label_dimension=1)`: mean squared error on float labels
  of shape [batch, label_dimension]; predictions are the logits.

Loss: the unreduced per-example loss times the weights (`weight_column`, a
feature name or a `numeric_column`, default 1) reduced with `loss_reduction`
(a `tf.compat.v1.losses.Reduction` other than NONE; the default
SUM_OVER_BATCH_SIZE is the weighted sum divided by the number of loss
elements); `regularization_losses` are added to it.

EVAL metric keys (besides `loss` and `global_step`, which the Estimator
adds; plus `regularization_loss` when regularization losses are given):

* binary: accuracy, accuracy_baseline, auc, auc_precision_recall,
  average_loss, label/mean, precision, prediction/mean, recall;
* multi-class: accuracy, average_loss;
* regression: average_loss, label/mean, prediction/mean.

PREDICT keys: classifiers give logits, logistic (binary only),
probabilities, class_ids, classes, all_class_ids, all_classes; regressors
give predictions. Export signatures: classifiers 'serving_default' and
'classification' (a classify signature: scores = probabilities, classes =
all class names), 'predict' (every prediction), and the binary head also
'regression' (the logistic); regressors 'serving_default' and
'regression' (a regress signature) and 'predict'.

Differs on purpose from tf.estimator:

* labels outside the vocabulary fail with an error naming
  `label_vocabulary`, the vocabulary and the unknown labels (tf.estimator's
  table lookup failed with a bare range assertion); ids outside
  [0, n_classes) name `n_classes`;
* label names are looked up by comparison with the vocabulary instead of a
  hash table, so no table initializer is needed in any graph;
* heads are built by two factory functions only (no multi-head, no
  custom loss_fn, no thresholds).
"""

import tensorflow as tf

from estimator import model_fn as model_fn_lib
from estimator.export import export_output as tfe_export

__all__ = ['classification_head', 'regression_head', 'PredictionKeys', 'MetricKeys',
           'CLASSIFY_SERVING_KEY', 'REGRESS_SERVING_KEY', 'PREDICT_SERVING_KEY']

ModeKeys = model_fn_lib.ModeKeys
Reduction = tf.compat.v1.losses.Reduction

DEFAULT_SERVING_KEY = model_fn_lib.DEFAULT_SERVING_KEY
CLASSIFY_SERVING_KEY = 'classification'
REGRESS_SERVING_KEY = 'regression'
PREDICT_SERVING_KEY = 'predict'


class PredictionKeys(object):
  """Keys of the predictions dict (tf.estimator's names)."""

  CLASSES = 'classes'
  CLASS_IDS = 'class_ids'
  ALL_CLASSES = 'all_classes'
  ALL_CLASS_IDS = 'all_class_ids'
  LOGISTIC = 'logistic'
  LOGITS = 'logits'
  PREDICTIONS = 'predictions'
  PROBABILITIES = 'probabilities'


class MetricKeys(object):
  """Keys of the evaluation metrics (tf.estimator's names)."""

  LOSS = 'loss'
  LOSS_MEAN = 'average_loss'
  LOSS_REGULARIZATION = 'regularization_loss'
  ACCURACY = 'accuracy'
  PRECISION = 'precision'
  RECALL = 'recall'
  ACCURACY_BASELINE = 'accuracy_baseline'
  AUC = 'auc'
  AUC_PR = 'auc_precision_recall'
  LABEL_MEAN = 'label/mean'
  PREDICTION_MEAN = 'prediction/mean'


def _check_loss_reduction(loss_reduction):
  if loss_reduction not in Reduction.all() or loss_reduction == Reduction.NONE:
    raise ValueError('Invalid loss_reduction: {} (one of {} other than NONE)'.format(
        loss_reduction, sorted(set(Reduction.all()) - {Reduction.NONE})))


def _check_weight_column(weight_column):
  """Raises TypeError unless weight_column is None, a string or a numeric column."""
  if weight_column is None or isinstance(weight_column, str):
    return
  if not (hasattr(weight_column, 'key') and hasattr(weight_column, 'normalizer_fn')):
    raise TypeError('weight_column must be a feature name (string) or a numeric_column, '
                    'given: {!r}'.format(weight_column))


def _weights(features, weight_column):
  """The example weights, float32 [batch, 1] (1.0 without a weight_column)."""
  if weight_column is None:
    return 1.0
  key = weight_column if isinstance(weight_column, str) else weight_column.key
  if not isinstance(features, dict) or key not in features:
    raise KeyError('weight_column {!r} is not among the features {}'.format(
        key, sorted(features) if isinstance(features, dict) else type(features)))
  weights = features[key]
  if isinstance(weights, tf.SparseTensor):
    raise ValueError('weight_column {!r} must be a dense Tensor, got a SparseTensor'.format(key))
  weights = tf.convert_to_tensor(weights)
  if not (weights.dtype.is_floating or weights.dtype.is_integer):
    raise ValueError('weight_column {!r} should be castable to float. Given dtype: {}'.format(
        key, weights.dtype))
  weights = tf.cast(weights, tf.float32)
  if not isinstance(weight_column, str) and weight_column.normalizer_fn is not None:
    weights = weight_column.normalizer_fn(weights)
  if weights.shape.rank == 1:
    weights = tf.expand_dims(weights, -1)
  return weights


def _labels_as_column(labels, expected_dim):
  """Dense labels reshaped to [batch, expected_dim] (rank-1 labels get a last axis)."""
  if labels is None:
    raise ValueError('You must provide a labels Tensor. Given: None. Suggested '
                     'troubleshooting steps: Check that your data contain your label feature. '
                     'Check that your input_fn properly parses and returns labels.')
  if isinstance(labels, dict):
    raise ValueError('labels must be a single Tensor for this head, got a dict with keys '
                     '{}'.format(sorted(labels)))
  if isinstance(labels, tf.SparseTensor):
    raise ValueError('SparseTensor labels are not supported.')
  labels = tf.convert_to_tensor(labels)
  if labels.shape.rank == 1:
    labels = tf.expand_dims(labels, -1)
  last = labels.shape[-1] if labels.shape.rank else None
  if labels.shape.rank is not None and (labels.shape.rank != 2 or
                                        (last is not None and last != expected_dim)):
    raise ValueError('Mismatched label shape. Expected labels dimension={}.  Received {}. '
                     'Labels must have shape [batch_size] or [batch_size, {}].'.format(
                         expected_dim, labels.shape.as_list(), expected_dim))
  return labels


def _check_logits(logits, logits_dimension):
  logits = tf.convert_to_tensor(logits)
  if not logits.dtype.is_floating:
    raise ValueError('logits must be a float Tensor, got dtype {}'.format(logits.dtype))
  if logits.shape.rank is not None and (
      logits.shape.rank != 2 or logits.shape[-1] not in (None, logits_dimension)):
    raise ValueError('logits shape must be [batch_size, {}], got {}.'.format(
        logits_dimension, logits.shape.as_list()))
  return tf.cast(logits, tf.float32)


def _same_batch(labels, logits):
  """`labels` with a run-time check that its batch size is the logits'."""
  check = tf.debugging.assert_equal(
      tf.shape(labels)[0], tf.shape(logits)[0],
      message='labels and logits must have the same batch size')
  with tf.control_dependencies([check]):
    return tf.identity(labels)


class _Head(object):
  """What every head shares: the loss reduction and building the EstimatorSpec."""

  def __init__(self, logits_dimension, weight_column, loss_reduction):
    _check_loss_reduction(loss_reduction)
    _check_weight_column(weight_column)
    self._logits_dimension = logits_dimension
    self._weight_column = weight_column
    self._loss_reduction = loss_reduction

  @property
  def logits_dimension(self):
    """Size of the last logits axis the network must produce."""
    return self._logits_dimension

  @property
  def weight_column(self):
    return self._weight_column

  @property
  def loss_reduction(self):
    return self._loss_reduction

  # Subclasses implement these three.
  def _labels(self, labels, logits):
    """Labels as the loss and metrics need them."""
    raise NotImplementedError

  def _predictions(self, logits):
    """The predictions dict."""
    raise NotImplementedError

  def _unreduced_loss(self, labels, logits):
    """Per-example loss, [batch, 1] (or [batch, label_dimension])."""
    raise NotImplementedError

  def _metrics(self, labels, predictions, unreduced_loss, weights):
    """The head's eval metric ops (without loss / regularization_loss)."""
    raise NotImplementedError

  def _export_outputs(self, predictions):
    raise NotImplementedError

  def create_loss(self, features, mode, logits, labels):
    """Returns (training_loss, unreduced_loss, weights, processed_labels).

    Args:
      features: dict of the batch's features (for the weight column).
      mode: a ModeKeys value (unused; part of tf.estimator's interface).
      logits: float Tensor [batch, logits_dimension].
      labels: the batch's labels.
    """
    del mode
    logits = _check_logits(logits, self._logits_dimension)
    labels = self._labels(labels, logits)
    unreduced_loss = self._unreduced_loss(labels, logits)
    weights = _weights(features, self._weight_column)
    training_loss = tf.compat.v1.losses.compute_weighted_loss(
        unreduced_loss, weights=weights, reduction=self._loss_reduction, loss_collection=None)
    return training_loss, unreduced_loss, weights, labels

  def create_estimator_spec(self, features, mode, logits, labels=None, train_op_fn=None,
                            regularization_losses=None):
    """Builds the EstimatorSpec for `mode` from the network's `logits`.

    Args:
      features: dict of the batch's features.
      mode: a ModeKeys value.
      logits: float Tensor [batch, logits_dimension].
      labels: the batch's labels (required in TRAIN and EVAL).
      train_op_fn: `fn(loss) -> train_op` (required in TRAIN); the caller builds
        the optimizer (wrapped in TowerOptimizer for num_clones) and global step.
      regularization_losses: list of scalar losses added to the training loss.

    Returns:
      An `EstimatorSpec`.

    Raises:
      ValueError: for bad logits or labels, or TRAIN without train_op_fn.
    """
    with tf.compat.v1.name_scope('head'):
      logits = _check_logits(logits, self._logits_dimension)
      predictions = self._predictions(logits)
      if mode == ModeKeys.PREDICT:
        return model_fn_lib.EstimatorSpec(
            mode, predictions=predictions,
            export_outputs=self._export_outputs(predictions))
      training_loss, unreduced_loss, weights, labels = self.create_loss(
          features, mode, logits, labels)
      regularization_loss = None
      loss = training_loss
      if regularization_losses:
        regularization_loss = tf.math.add_n(list(regularization_losses))
        loss = tf.math.add(training_loss, regularization_loss, name='regularized_loss')
      if mode == ModeKeys.EVAL:
        metrics = self._metrics(labels, predictions, unreduced_loss, weights)
        if regularization_loss is not None:
          metrics[MetricKeys.LOSS_REGULARIZATION] = tf.compat.v1.metrics.mean(
              regularization_loss, name=MetricKeys.LOSS_REGULARIZATION)
        return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=loss,
                                          eval_metric_ops=metrics)
      if mode != ModeKeys.TRAIN:
        raise ValueError('mode={} unrecognized.'.format(mode))
      if train_op_fn is None:
        raise ValueError('train_op_fn cannot be None in TRAIN mode.')
    tf.compat.v1.summary.scalar(MetricKeys.LOSS, loss)
    tf.compat.v1.summary.scalar(MetricKeys.LOSS_MEAN, tf.compat.v1.losses.compute_weighted_loss(
        unreduced_loss, weights=weights, reduction=Reduction.MEAN, loss_collection=None))
    if regularization_loss is not None:
      tf.compat.v1.summary.scalar(MetricKeys.LOSS_REGULARIZATION, regularization_loss)
    train_op = train_op_fn(loss)
    return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=loss,
                                      train_op=train_op)


def _mean_metric(values, weights, name):
  return tf.compat.v1.metrics.mean(values, weights=_broadcast_weights(weights, values),
                                   name=name)


def _broadcast_weights(weights, values):
  if isinstance(weights, float):
    return None
  return tf.broadcast_to(weights, tf.shape(values))


class _ClassificationHead(_Head):
  """Shared by the binary and multi-class heads: labels, class names."""

  def __init__(self, n_classes, logits_dimension, weight_column, label_vocabulary,
               loss_reduction):
    if label_vocabulary is not None:
      if not isinstance(label_vocabulary, (list, tuple)):
        raise ValueError('label_vocabulary should be a list or a tuple. Given type: {}'.format(
            type(label_vocabulary)))
      if not all(isinstance(v, str) for v in label_vocabulary):
        raise ValueError('label_vocabulary must hold strings only, given: {!r}'.format(
            label_vocabulary))
      if len(label_vocabulary) != n_classes:
        raise ValueError('label_vocabulary must have n_classes={} entries, given {}: {!r}'.format(
            n_classes, len(label_vocabulary), label_vocabulary))
      if len(set(label_vocabulary)) != len(label_vocabulary):
        raise ValueError('label_vocabulary has duplicates: {!r}'.format(label_vocabulary))
    super().__init__(logits_dimension, weight_column, loss_reduction)
    self._n_classes = n_classes
    self._label_vocabulary = tuple(label_vocabulary) if label_vocabulary else None

  @property
  def n_classes(self):
    return self._n_classes

  @property
  def label_vocabulary(self):
    return self._label_vocabulary

  def _label_ids(self, labels, logits):
    """int64 [batch, 1] class ids of the labels, checked against n_classes / vocabulary."""
    labels = _same_batch(_labels_as_column(labels, 1), logits)
    if self._label_vocabulary is not None:
      if labels.dtype != tf.string:
        raise ValueError('Labels dtype should be string if there is a vocabulary. Given: '
                         '{} (label_vocabulary={!r})'.format(labels.dtype,
                                                             list(self._label_vocabulary)))
      with tf.compat.v1.name_scope('class_id_lookup'):
        matches = tf.equal(labels, tf.constant(self._label_vocabulary, tf.string))
        known = tf.reduce_any(matches, axis=-1)
        check = tf.debugging.Assert(
            tf.reduce_all(known),
            ['Labels must be in label_vocabulary [%s]; unknown labels:'
             % ', '.join(self._label_vocabulary), tf.boolean_mask(labels[:, 0], ~known)],
            summarize=10)
        with tf.control_dependencies([check]):
          return tf.expand_dims(tf.argmax(tf.cast(matches, tf.int32), axis=-1), -1)
    return self._checked_ids(labels)

  def _checked_ids(self, labels):
    """Ids given as numbers: checked to lie in [0, n_classes)."""
    if not labels.dtype.is_integer:
      raise ValueError('Labels dtype should be integer (class ids) when label_vocabulary is '
                       'not given. Instead got {}.'.format(labels.dtype))
    return self._assert_in_range(tf.cast(labels, tf.int64))

  def _assert_in_range(self, labels):
    message = ('Labels must be class ids in [0, n_classes - 1] with n_classes=%d; '
               'out-of-range labels:' % self._n_classes)
    outside = tf.logical_or(labels < 0, labels > self._n_classes - 1)
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(outside)),
                                [message, tf.boolean_mask(labels, outside)], summarize=10)
    with tf.control_dependencies([check]):
      return tf.identity(labels)

  def _class_names(self, class_ids):
    """String names of int class ids (the vocabulary, else the id as a string)."""
    if self._label_vocabulary is not None:
      return tf.gather(tf.constant(self._label_vocabulary, tf.string), class_ids)
    return tf.strings.as_string(class_ids)

  def _all_classes_predictions(self, logits, predictions):
    batch = tf.shape(logits)[0]
    all_ids = tf.tile(tf.expand_dims(tf.range(self._n_classes, dtype=tf.int32), 0), [batch, 1])
    predictions[PredictionKeys.ALL_CLASS_IDS] = all_ids
    predictions[PredictionKeys.ALL_CLASSES] = self._class_names(all_ids)
    return predictions

  def _export_outputs(self, predictions):
    classify = tfe_export.ClassificationOutput(
        scores=predictions[PredictionKeys.PROBABILITIES],
        classes=predictions[PredictionKeys.ALL_CLASSES])
    return {DEFAULT_SERVING_KEY: classify, CLASSIFY_SERVING_KEY: classify,
            PREDICT_SERVING_KEY: tfe_export.PredictOutput(predictions)}


class _BinaryClassHead(_ClassificationHead):
  """Two classes, one logit per example, sigmoid cross entropy."""

  def __init__(self, weight_column, label_vocabulary, loss_reduction):
    super().__init__(2, 1, weight_column, label_vocabulary, loss_reduction)

  def _labels(self, labels, logits):
    """float32 [batch, 1] labels in [0, 1]."""
    if self._label_vocabulary is not None:
      return tf.cast(self._label_ids(labels, logits), tf.float32)
    labels = _same_batch(_labels_as_column(labels, 1), logits)
    if not (labels.dtype.is_integer or labels.dtype.is_floating or labels.dtype == tf.bool):
      raise ValueError('Labels dtype should be integer or float (0/1) when label_vocabulary '
                       'is not given. Instead got {}.'.format(labels.dtype))
    return self._assert_in_range(tf.cast(labels, tf.float32))

  def _predictions(self, logits):
    with tf.compat.v1.name_scope('predictions'):
      logistic = tf.math.sigmoid(logits, name=PredictionKeys.LOGISTIC)
      probabilities = tf.concat([1.0 - logistic, logistic], axis=-1,
                                name=PredictionKeys.PROBABILITIES)
      class_ids = tf.cast(logits > 0.0, tf.int64, name=PredictionKeys.CLASS_IDS)
      predictions = {
          PredictionKeys.LOGITS: logits,
          PredictionKeys.LOGISTIC: logistic,
          PredictionKeys.PROBABILITIES: probabilities,
          PredictionKeys.CLASS_IDS: class_ids,
          PredictionKeys.CLASSES: self._class_names(class_ids),
      }
      return self._all_classes_predictions(logits, predictions)

  def _unreduced_loss(self, labels, logits):
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

  def _metrics(self, labels, predictions, unreduced_loss, weights):
    with tf.compat.v1.name_scope('metrics'):
      class_ids = predictions[PredictionKeys.CLASS_IDS]
      logistic = predictions[PredictionKeys.LOGISTIC]
      w = _broadcast_weights(weights, labels)
      label_mean = tf.compat.v1.metrics.mean(labels, weights=w, name=MetricKeys.LABEL_MEAN)
      baseline = (tf.maximum(label_mean[0], 1.0 - label_mean[0]),
                  tf.maximum(label_mean[1], 1.0 - label_mean[1]))
      return {
          MetricKeys.LOSS_MEAN: _mean_metric(unreduced_loss, weights, MetricKeys.LOSS_MEAN),
          MetricKeys.ACCURACY: tf.compat.v1.metrics.accuracy(
              labels, tf.cast(class_ids, tf.float32), weights=w, name=MetricKeys.ACCURACY),
          MetricKeys.PRECISION: tf.compat.v1.metrics.precision(
              labels, class_ids, weights=w, name=MetricKeys.PRECISION),
          MetricKeys.RECALL: tf.compat.v1.metrics.recall(
              labels, class_ids, weights=w, name=MetricKeys.RECALL),
          MetricKeys.PREDICTION_MEAN: tf.compat.v1.metrics.mean(
              logistic, weights=w, name='prediction_mean'),
          MetricKeys.LABEL_MEAN: label_mean,
          MetricKeys.ACCURACY_BASELINE: baseline,
          MetricKeys.AUC: tf.compat.v1.metrics.auc(labels, logistic, weights=w, curve='ROC',
                                                   name=MetricKeys.AUC),
          MetricKeys.AUC_PR: tf.compat.v1.metrics.auc(labels, logistic, weights=w, curve='PR',
                                                      name=MetricKeys.AUC_PR),
      }

  def _export_outputs(self, predictions):
    outputs = super()._export_outputs(predictions)
    outputs[REGRESS_SERVING_KEY] = tfe_export.RegressionOutput(
        value=predictions[PredictionKeys.LOGISTIC])
    return outputs


class _MultiClassHead(_ClassificationHead):
  """n_classes > 2, one logit per class, sparse softmax cross entropy."""

  def __init__(self, n_classes, weight_column, label_vocabulary, loss_reduction):
    super().__init__(n_classes, n_classes, weight_column, label_vocabulary, loss_reduction)

  def _labels(self, labels, logits):
    return self._label_ids(labels, logits)

  def _predictions(self, logits):
    with tf.compat.v1.name_scope('predictions'):
      class_ids = tf.expand_dims(tf.argmax(logits, axis=-1), -1,
                                 name=PredictionKeys.CLASS_IDS)
      predictions = {
          PredictionKeys.LOGITS: logits,
          PredictionKeys.PROBABILITIES: tf.nn.softmax(logits,
                                                      name=PredictionKeys.PROBABILITIES),
          PredictionKeys.CLASS_IDS: class_ids,
          PredictionKeys.CLASSES: self._class_names(class_ids),
      }
      return self._all_classes_predictions(logits, predictions)

  def _unreduced_loss(self, labels, logits):
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels[:, 0], logits=logits)
    return tf.expand_dims(loss, -1)

  def _metrics(self, labels, predictions, unreduced_loss, weights):
    with tf.compat.v1.name_scope('metrics'):
      return {
          MetricKeys.LOSS_MEAN: _mean_metric(unreduced_loss, weights, MetricKeys.LOSS_MEAN),
          MetricKeys.ACCURACY: tf.compat.v1.metrics.accuracy(
              labels, predictions[PredictionKeys.CLASS_IDS],
              weights=_broadcast_weights(weights, labels), name=MetricKeys.ACCURACY),
      }


class _RegressionHead(_Head):
  """Mean squared error on [batch, label_dimension] float labels."""

  def __init__(self, label_dimension, weight_column, loss_reduction):
    super().__init__(label_dimension, weight_column, loss_reduction)

  def _labels(self, labels, logits):
    labels = _same_batch(_labels_as_column(labels, self._logits_dimension), logits)
    if not (labels.dtype.is_integer or labels.dtype.is_floating):
      raise ValueError('Labels dtype should be a number for regression, got {}.'.format(
          labels.dtype))
    return tf.cast(labels, tf.float32)

  def _predictions(self, logits):
    return {PredictionKeys.PREDICTIONS: tf.identity(logits, name=PredictionKeys.PREDICTIONS)}

  def _unreduced_loss(self, labels, logits):
    return tf.math.squared_difference(logits, labels)

  def _metrics(self, labels, predictions, unreduced_loss, weights):
    with tf.compat.v1.name_scope('metrics'):
      return {
          MetricKeys.LOSS_MEAN: _mean_metric(unreduced_loss, weights, MetricKeys.LOSS_MEAN),
          MetricKeys.PREDICTION_MEAN: _mean_metric(
              predictions[PredictionKeys.PREDICTIONS], weights, 'prediction_mean'),
          MetricKeys.LABEL_MEAN: _mean_metric(labels, weights, 'label_mean'),
      }

  def _export_outputs(self, predictions):
    regress = tfe_export.RegressionOutput(value=predictions[PredictionKeys.PREDICTIONS])
    return {DEFAULT_SERVING_KEY: regress, REGRESS_SERVING_KEY: regress,
            PREDICT_SERVING_KEY: tfe_export.PredictOutput(predictions)}


def classification_head(n_classes, weight_column=None, label_vocabulary=None,
                        loss_reduction=Reduction.SUM_OVER_BATCH_SIZE):
  """A binary (n_classes == 2) or multi-class (n_classes > 2) head.

  Args:
    n_classes: number of classes, > 1.
    weight_column: None, a feature name or a `numeric_column` giving example weights.
    label_vocabulary: None (labels are class ids) or the n_classes label strings.
    loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.

  Returns:
    A head with `logits_dimension` 1 (binary) or n_classes.

  Raises:
    ValueError: for n_classes <= 1 or a bad label_vocabulary / loss_reduction.
  """
  if not isinstance(n_classes, int) or isinstance(n_classes, bool) or n_classes <= 1:
    raise ValueError('n_classes must be > 1 for classification: {!r}'.format(n_classes))
  if n_classes == 2:
    return _BinaryClassHead(weight_column, label_vocabulary, loss_reduction)
  return _MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)


def regression_head(label_dimension=1, weight_column=None,
                    loss_reduction=Reduction.SUM_OVER_BATCH_SIZE):
  """A mean-squared-error regression head.

  Args:
    label_dimension: number of regression targets per example, >= 1.
    weight_column: None, a feature name or a `numeric_column` giving example weights.
    loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.

  Returns:
    A head with `logits_dimension` == label_dimension.

  Raises:
    ValueError: for label_dimension < 1 or a bad loss_reduction.
  """
  if not isinstance(label_dimension, int) or isinstance(label_dimension, bool) or (
      label_dimension < 1):
    raise ValueError('Invalid label_dimension {!r}: must be an integer >= 1.'.format(
        label_dimension))
  return _RegressionHead(label_dimension, weight_column, loss_reduction)
