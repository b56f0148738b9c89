"""`tfe.MultiLabelHead` and `tfe.MultiHead` (tf.estimator 2.15's), on head.py's machinery.

    head1 = tfe.MultiLabelHead(n_classes=2, name='head1')
    head2 = tfe.MultiLabelHead(n_classes=3, name='head2')
    head = tfe.MultiHead([head1, head2])
    est = tfe.DNNEstimator(head=head, hidden_units=[16], feature_columns=columns)
    # input_fn labels: {'head1': multi_hot_2, 'head2': multi_hot_3}

MultiLabelHead: each example has any number of the n_classes labels. The
loss is sigmoid cross entropy averaged over the classes, then weighted and
reduced over the batch. Labels are multi-hot [batch, n_classes] (0/1), or a
SparseTensor of class ids, or of strings of `label_vocabulary`. EVAL keys:
average_loss, auc, auc_precision_recall (over every (example, class) pair),
the `thresholds` metrics, and for each entry of
`classes_for_class_based_metrics` (an id or a vocabulary string)
`probability_mean/<c>`, `auc/<c>`, `auc_precision_recall/<c>` where <c> is
`class<id>` or the string. PREDICT: logits, probabilities, all_class_ids,
all_classes; the default signature classifies (scores = probabilities).

MultiHead: several named heads on one network. Logits are a dict {head
name: logits} or one tensor split along its last axis in head order; labels
a dict {head name: labels}. The loss is the sum of the heads' losses, each
times its `head_weights` entry (default 1). EVAL has every head's metrics
(suffixed '/<head name>') plus `loss/<head name>`; predictions are keyed
`(head name, key)`; export signatures: the first head's default signature as
'serving_default', each head's default as '<head name>', its others as
'<head name>/<key>', and 'predict' with every prediction as
'<head name>/<key>'.
"""

import tensorflow as tf

from estimator import model_fn as model_fn_lib
from estimator.canned import head as head_lib
from estimator.canned import heads as heads_lib
from estimator.export import export_output as tfe_export

__all__ = ['MultiLabelHead', 'MultiHead']

ModeKeys = model_fn_lib.ModeKeys
MetricKeys = head_lib.MetricKeys
PredictionKeys = head_lib.PredictionKeys


class MultiLabelHead(heads_lib._PublicHead, head_lib._ClassificationHead):  # pylint: disable=protected-access
  """Zero or more of n_classes labels per example; sigmoid cross entropy."""

  def __init__(self, n_classes, weight_column=None, thresholds=None, label_vocabulary=None,
               loss_reduction=heads_lib.SUM_OVER_BATCH_SIZE, loss_fn=None,
               classes_for_class_based_metrics=None, name=None):
    if n_classes is None or n_classes < 2:
      raise ValueError('n_classes must be > 1 for multi-label classification. '
                       'Given: {}'.format(n_classes))
    head_lib._ClassificationHead.__init__(  # pylint: disable=protected-access
        self, n_classes, n_classes, weight_column, label_vocabulary,
        heads_lib._v1_reduction(loss_reduction))  # pylint: disable=protected-access
    self._init_public(name, loss_fn, thresholds)
    self._public_reduction = loss_reduction
    self._class_metrics = [self._class_id(c) for c in classes_for_class_based_metrics or ()]

  @property
  def loss_reduction(self):
    return self._public_reduction

  def _class_id(self, class_):
    """(id, key suffix) of an entry of classes_for_class_based_metrics."""
    if isinstance(class_, str):
      if not self._label_vocabulary or class_ not in self._label_vocabulary:
        raise ValueError('classes_for_class_based_metrics: {!r} is not in label_vocabulary '
                         '{}'.format(class_, self._label_vocabulary))
      return self._label_vocabulary.index(class_), class_
    if not 0 <= class_ < self._n_classes:
      raise ValueError('classes_for_class_based_metrics must be in [0, n_classes), given '
                       '{!r} with n_classes={}'.format(class_, self._n_classes))
    return int(class_), 'class%d' % class_

  def _sparse_ids(self, labels):
    values = labels.values
    if self._label_vocabulary is not None:
      matches = tf.equal(values[:, None], tf.constant(self._label_vocabulary, tf.string)[None])
      check = tf.debugging.Assert(
          tf.reduce_all(tf.reduce_any(matches, axis=-1)),
          ['Labels must be in label_vocabulary [%s]; labels:' % ', '.join(
              self._label_vocabulary), values], summarize=10)
      with tf.control_dependencies([check]):
        values = tf.argmax(tf.cast(matches, tf.int32), axis=-1)
    values = self._assert_in_range(tf.cast(values, tf.int64))
    return tf.SparseTensor(labels.indices, values, labels.dense_shape)

  def _labels(self, labels, logits):
    """float32 multi-hot labels [batch, n_classes]."""
    if labels is None:
      raise ValueError('You must provide a labels Tensor. Given: None.')
    if isinstance(labels, tf.compat.v1.SparseTensorValue):
      labels = tf.SparseTensor.from_value(labels)
    if isinstance(labels, tf.SparseTensor):
      labels = tf.cast(tf.sparse.to_indicator(self._sparse_ids(labels), self._n_classes),
                       tf.int64)
    labels = tf.convert_to_tensor(labels)
    if labels.shape.rank is not None and (labels.shape.rank != 2 or
                                          labels.shape[-1] not in (None, self._n_classes)):
      raise ValueError('Mismatched label shape. Expected labels dimension={}. Received {}. '
                       'Multi-label labels are multi-hot [batch_size, {}] or a SparseTensor '
                       'of class ids.'.format(self._n_classes, labels.shape.as_list(),
                                              self._n_classes))
    labels = head_lib._same_batch(labels, logits)  # pylint: disable=protected-access
    check = tf.debugging.Assert(
        tf.reduce_all((labels >= 0) & (labels <= 1)),
        ['Multi-hot labels must be 0 or 1; labels:', labels], summarize=10)
    with tf.control_dependencies([check]):
      return tf.cast(labels, tf.float32)

  def _predictions(self, logits):
    with tf.compat.v1.name_scope('predictions'):
      predictions = {
          PredictionKeys.LOGITS: logits,
          PredictionKeys.PROBABILITIES: tf.math.sigmoid(logits,
                                                        name=PredictionKeys.PROBABILITIES),
      }
      return self._all_classes_predictions(logits, predictions)

  def _unreduced_loss(self, labels, logits):
    if self._loss_fn is not None:
      return super()._unreduced_loss(labels, logits)
    per_class = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return tf.reduce_mean(per_class, axis=-1, keepdims=True)

  def _threshold_probabilities(self, predictions):
    return predictions[PredictionKeys.PROBABILITIES]

  def _head_metrics(self, labels, predictions, unreduced_loss, weights):
    # _PublicHead._metrics adds the threshold metrics and the name suffix.
    probabilities = predictions[PredictionKeys.PROBABILITIES]
    w = head_lib._broadcast_weights(weights, labels)  # pylint: disable=protected-access
    with tf.compat.v1.name_scope('metrics'):
      metrics = {
          MetricKeys.LOSS_MEAN: head_lib._mean_metric(  # pylint: disable=protected-access
              unreduced_loss, weights, MetricKeys.LOSS_MEAN),
          MetricKeys.AUC: tf.compat.v1.metrics.auc(labels, probabilities, weights=w,
                                                   curve='ROC'),
          MetricKeys.AUC_PR: tf.compat.v1.metrics.auc(labels, probabilities, weights=w,
                                                      curve='PR'),
      }
      for class_id, suffix in self._class_metrics:
        class_w = None if w is None else w[:, class_id]
        metrics['probability_mean/' + suffix] = tf.compat.v1.metrics.mean(
            probabilities[:, class_id], weights=class_w)
        metrics['auc/' + suffix] = tf.compat.v1.metrics.auc(
            labels[:, class_id], probabilities[:, class_id], weights=class_w, curve='ROC')
        metrics['auc_precision_recall/' + suffix] = tf.compat.v1.metrics.auc(
            labels[:, class_id], probabilities[:, class_id], weights=class_w, curve='PR')
      return metrics


class MultiHead(object):
  """Several named heads trained together on one network's logits."""

  def __init__(self, heads, head_weights=None):
    """Args: heads: named tfe heads; head_weights: a float per head (default all 1)."""
    if not heads:
      raise ValueError('Must specify heads. Given: {}'.format(heads))
    if head_weights and len(head_weights) != len(heads):
      raise ValueError('heads and head_weights must have the same size. Given len(heads): '
                       '{}. Given len(head_weights): {}.'.format(len(heads), len(head_weights)))
    for head in heads:
      if not getattr(head, 'name', None):
        raise ValueError('All given heads must have name specified. Given: {}'.format(head))
      if isinstance(head, MultiHead):
        raise ValueError('A MultiHead cannot contain another MultiHead.')
    self._heads = tuple(heads)
    self._head_weights = tuple(head_weights) if head_weights else (1.0,) * len(heads)

  @property
  def name(self):
    return '_'.join(h.name for h in self._heads)

  @property
  def heads(self):
    return self._heads

  @property
  def logits_dimension(self):
    return sum(h.logits_dimension for h in self._heads)

  def _split_logits(self, logits):
    if isinstance(logits, dict):
      missing = [h.name for h in self._heads if h.name not in logits]
      if missing:
        raise ValueError('logits has no entry for heads {}; keys: {}'.format(
            missing, sorted(logits)))
      return [logits[h.name] for h in self._heads]
    return tf.split(logits, [h.logits_dimension for h in self._heads], axis=-1)

  def _labels_of(self, labels, head):
    if not isinstance(labels, dict) or head.name not in labels:
      raise ValueError('MultiHead labels must be a dict keyed by head name; no labels for '
                       'head {!r} in {}'.format(head.name, labels))
    return labels[head.name]

  def predictions(self, logits, keys=None):
    """{(head name, key): tensor} for every head."""
    merged = {}
    for head, head_logits in zip(self._heads, self._split_logits(logits)):
      for key, value in head.predictions(head_logits, keys).items():
        merged[(head.name, key)] = value
    return merged

  def _losses(self, features, mode, logits, labels):
    """[(head, logits, processed labels, loss, unreduced, weights)] per head."""
    per_head = []
    for head, head_logits in zip(self._heads, self._split_logits(logits)):
      head_logits = head_lib._check_logits(head_logits, head.logits_dimension)  # pylint: disable=protected-access
      loss, unreduced, weights, head_labels = head.create_loss(
          features, mode, head_logits, self._labels_of(labels, head))
      per_head.append((head, head_logits, head_labels, loss, unreduced, weights))
    return per_head

  def loss(self, labels, logits, features=None, mode=None, regularization_losses=None):
    """Weighted sum of the heads' training losses (plus regularization)."""
    per_head = self._losses(features, mode, logits, labels)
    total = tf.math.add_n([w * p[3] for w, p in zip(self._head_weights, per_head)])
    if regularization_losses:
      total += tf.math.add_n(list(regularization_losses))
    return total

  def _export_outputs(self, head_predictions):
    outputs, predict = {}, {}
    for index, head in enumerate(self._heads):
      for key, output in head._export_outputs(head_predictions[head.name]).items():  # pylint: disable=protected-access
        if key == head_lib.DEFAULT_SERVING_KEY:
          outputs[head.name] = output
          if index == 0:
            outputs[key] = output
        elif key != head_lib.PREDICT_SERVING_KEY:
          outputs['{}/{}'.format(head.name, key)] = output
      for key, value in head_predictions[head.name].items():
        predict['{}/{}'.format(head.name, key)] = value
    outputs[head_lib.PREDICT_SERVING_KEY] = tfe_export.PredictOutput(predict)
    return outputs

  def metrics(self, regularization_losses=None):
    self._heads[0].metrics()

  def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None):
    self._heads[0].metrics()

  def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                            trainable_variables=None, train_op_fn=None, update_ops=None,
                            regularization_losses=None):
    """The merged EstimatorSpec of all heads (see the module docstring)."""
    train_op_fn = heads_lib._train_op_fn(  # pylint: disable=protected-access
        mode, optimizer, trainable_variables, train_op_fn, update_ops)
    with tf.compat.v1.name_scope('multi_head'):
      head_logits = [head_lib._check_logits(l, h.logits_dimension)  # pylint: disable=protected-access
                     for h, l in zip(self._heads, self._split_logits(logits))]
      head_predictions = {h.name: h._predictions(l)  # pylint: disable=protected-access
                          for h, l in zip(self._heads, head_logits)}
      predictions = {(name, key): value for name, values in head_predictions.items()
                     for key, value in values.items()}
      if mode == ModeKeys.PREDICT:
        return model_fn_lib.EstimatorSpec(mode, predictions=predictions,
                                          export_outputs=self._export_outputs(head_predictions))
      per_head = self._losses(features, mode, dict(zip([h.name for h in self._heads],
                                                       head_logits)), labels)
      loss = tf.math.add_n([w * p[3] for w, p in zip(self._head_weights, per_head)])
      regularization_loss = None
      if regularization_losses:
        regularization_loss = tf.math.add_n(list(regularization_losses))
        loss += regularization_loss
      if mode == ModeKeys.EVAL:
        metrics = {}
        for head, _, head_labels, head_loss, unreduced, weights in per_head:
          metrics.update(head._metrics(head_labels, head_predictions[head.name],  # pylint: disable=protected-access
                                       unreduced, weights))
          metrics['{}/{}'.format(MetricKeys.LOSS, head.name)] = tf.compat.v1.metrics.mean(
              head_loss)
        if regularization_loss is not None:
          metrics[MetricKeys.LOSS_REGULARIZATION] = tf.compat.v1.metrics.mean(
              regularization_loss)
        return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=loss,
                                          eval_metric_ops=metrics)
    for head, _, _, head_loss, _, _ in per_head:
      tf.compat.v1.summary.scalar('{}/{}'.format(MetricKeys.LOSS, head.name), head_loss)
    return model_fn_lib.EstimatorSpec(mode, predictions=predictions, loss=loss,
                                      train_op=train_op_fn(loss))
