"""`BaselineClassifier` and `BaselineRegressor`: a bias only, to beat.

The model ignores the features (they only give the batch size) and learns
one bias per logit, so a classifier predicts the label distribution of the
training data (weighted by `weight_column`) and a regressor the labels'
mean — the score any real model has to beat:

    baseline = tfe.BaselineClassifier(n_classes=3, model_dir='/tmp/baseline')
    baseline.train(train_input_fn, max_steps=100)
    baseline.evaluate(eval_input_fn)['accuracy']

Arguments, their order and defaults are tf.estimator 2.15's
`tf.estimator.BaselineClassifier` / `BaselineRegressor`; the default
optimizer is 'Ftrl' (names get learning rate 0.3, as the original; see
optimizers.py). The only variable is `baseline/bias`, as in tf.estimator.
Losses, metrics, predictions and export signatures come from head.py.

Differs on purpose: optimizer names give `tf.compat.v1.train` optimizers
(graph mode), not Keras ones.
"""

import tensorflow as tf

from estimator import estimator as estimator_lib
from estimator.canned import head as head_lib
from estimator.canned import linear
from estimator.canned import optimizers

__all__ = ['BaselineClassifier', 'BaselineRegressor']

_LEARNING_RATE = 0.3
Reduction = tf.compat.v1.losses.Reduction


def _batch_size(features, weight_column):
  """The batch size of the features (the weight column aside), checked to agree."""
  if not isinstance(features, dict):
    features = {'': features}
  weight_key = weight_column if isinstance(weight_column, str) else getattr(
      weight_column, 'key', None)
  sizes = []
  for key in sorted(features):
    if key == weight_key:
      continue
    value = features[key]
    if isinstance(value, tf.SparseTensor):
      sizes.append(value.dense_shape[0])
    else:
      sizes.append(tf.shape(value, out_type=tf.int64)[0])
  if not sizes:
    raise ValueError('A baseline needs at least one feature besides the weight column to know '
                     'the batch size; features has keys {}'.format(sorted(features)))
  checks = [tf.debugging.assert_equal(sizes[0], size,
                                      message='features must all have the same batch size')
            for size in sizes[1:]]
  with tf.control_dependencies(checks):
    return tf.identity(sizes[0])


def _baseline_model_fn(features, labels, mode, head, optimizer, weight_column):
  """The model_fn of both baselines: logits = bias for every example."""
  units = head.logits_dimension
  batch_size = _batch_size(features, weight_column)
  with tf.compat.v1.variable_scope('baseline'):
    bias = tf.compat.v1.get_variable('bias', shape=[units],
                                     initializer=tf.compat.v1.zeros_initializer())
  logits = bias * tf.ones(tf.stack([batch_size, tf.constant(units, tf.int64)]))
  if units > 1:
    tf.compat.v1.summary.histogram('bias', bias)
  else:
    tf.compat.v1.summary.scalar('bias', bias[0])

  def train_op_fn(loss):
    opt = optimizers.get_optimizer_instance(optimizer, learning_rate=_LEARNING_RATE)
    return optimizers.for_clones(opt).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())

  if not isinstance(features, dict):
    features = {}
  return head.create_estimator_spec(features, mode, logits, labels=labels,
                                    train_op_fn=train_op_fn)


class _BaselineEstimator(estimator_lib.Estimator):

  def __init__(self, head, model_dir, optimizer, config, weight_column):
    if optimizer is None:
      raise ValueError('optimizer must be given (a name, an Optimizer or a callable), got None')
    linear.check_optimizer(optimizer)

    def _model_fn(features, labels, mode):
      return _baseline_model_fn(features, labels, mode, head, optimizer, weight_column)

    super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config)


class BaselineClassifier(_BaselineEstimator):
  """Predicts the training label distribution; see the module doc."""

  def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
               optimizer='Ftrl', config=None, loss_reduction=Reduction.SUM_OVER_BATCH_SIZE):
    """Builds the classifier.

    Args:
      model_dir: where checkpoints and events go (default: the config's or a temp dir).
      n_classes: number of label classes, > 1.
      weight_column: None, a feature name or a numeric_column of example weights.
      label_vocabulary: None (labels are ids in [0, n_classes)) or the class strings.
      optimizer: name, `tf.compat.v1.train.Optimizer` or callable returning one.
      config: a `tfe.RunConfig`.
      loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.

    Raises:
      ValueError: for a bad argument, naming it.
    """
    head = head_lib.classification_head(n_classes, weight_column=weight_column,
                                        label_vocabulary=label_vocabulary,
                                        loss_reduction=loss_reduction)
    super().__init__(head, model_dir, optimizer, config, weight_column)


class BaselineRegressor(_BaselineEstimator):
  """Predicts the training labels' mean; see the module doc."""

  def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer='Ftrl',
               config=None, loss_reduction=Reduction.SUM_OVER_BATCH_SIZE):
    """Builds the regressor.

    Args:
      model_dir: where checkpoints and events go (default: the config's or a temp dir).
      label_dimension: number of regression targets per example, >= 1.
      weight_column: None, a feature name or a numeric_column of example weights.
      optimizer: name, `tf.compat.v1.train.Optimizer` or callable returning one.
      config: a `tfe.RunConfig`.
      loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.

    Raises:
      ValueError: for a bad argument, naming it.
    """
    head = head_lib.regression_head(label_dimension, weight_column=weight_column,
                                    loss_reduction=loss_reduction)
    super().__init__(head, model_dir, optimizer, config, weight_column)
