"""`LinearClassifier` and `LinearRegressor`: tf.estimator's linear models.

A weighted sum of the feature columns plus a bias, trained by default with
FTRL, through `tf.compat.v1.feature_column.linear_model` (which handles dense
columns — numeric, bucketized, embedding, indicator — and sparse ones —
vocabulary, hash bucket, identity, crossed, weighted categorical — with one
weight row per bucket):

    fc = tf.compat.v1.feature_column
    age = fc.numeric_column('age', normalizer_fn=lambda x: (x - 40.0) / 10.0)
    city = fc.categorical_column_with_hash_bucket('city', 100)
    columns = [age, fc.bucketized_column(age, [-1.0, 0.0, 1.0]), city,
               fc.crossed_column([city, 'job'], 1000)]
    est = tfe.LinearClassifier(columns, n_classes=3, label_vocabulary=['a', 'b', 'c'],
                               model_dir='/tmp/linear')
    est.train(train_input_fn, max_steps=1000)
    est.evaluate(eval_input_fn)       # accuracy, average_loss, loss, global_step
    est.export_saved_model('/tmp/linear/export', tfe.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(columns)))

Arguments, their order and defaults are tf.estimator 2.15's
`tf.estimator.LinearClassifier` / `LinearRegressor`; `optimizer` is a name
('Ftrl', 'Adagrad', 'Adam', 'RMSProp', 'SGD'; learning rate 0.2), a
`tf.compat.v1.train.Optimizer`, a Keras optimizer (translated to its v1
twin, optimizers.py), or a callable returning one; None means FTRL
with learning rate min(0.2, 1 / sqrt(number of feature columns)) (the
original's rules). Losses, metrics, predictions and export signatures come
from head.py. Variables are named as tf.estimator's
(`linear/linear_model/<column>/weights`, `linear/linear_model/bias_weights`),
so its checkpoints warm-start these models.

In a ps cluster (TF_CONFIG with `ps` tasks), the weights are partitioned along
their first axis over up to `config.num_ps_replicas` shards of at least 64 MiB
(`min_max_variable_partitioner`, as the original), part i on ps task
i % num_ps (`partitioning.py`); `partitioner=` overrides the rule.
With `RunConfig(num_clones=N)` the optimizer is wrapped in `TowerOptimizer`,
so N clones train as one clone on the whole batch (for a loss_reduction that
averages, as the default; with SUM each step moves 1/N as far, because the
clones' gradients are averaged).

Differs on purpose from tf.estimator 2.15:

* `partitioner` (a v1 argument the V2 classes dropped) is accepted as the last
  keyword argument, so positional calls keep the V2 order;
* optimizer names give `tf.compat.v1.train` optimizers, not Keras ones
  (graph mode), and the SDCA optimizer (`LinearSDCA`) is not ported.
"""

import math

import tensorflow as tf

from estimator import estimator as estimator_lib
from estimator.canned import head as head_lib
from estimator.canned import optimizers
from estimator.canned import partitioning

__all__ = ['LinearClassifier', 'LinearRegressor', 'LinearEstimator']

_LEARNING_RATE = 0.2
_SPARSE_COMBINERS = ('mean', 'sqrtn', 'sum')
Reduction = tf.compat.v1.losses.Reduction


def _default_optimizer(feature_columns):
  return tf.compat.v1.train.FtrlOptimizer(
      learning_rate=min(_LEARNING_RATE, 1.0 / math.sqrt(len(feature_columns))))


def check_feature_columns(feature_columns, argument='feature_columns'):
  """A tuple of the columns; ValueError naming `argument` when empty or not columns."""
  if feature_columns is None:
    raise ValueError('{} must be given (a list of feature columns)'.format(argument))
  if isinstance(feature_columns, dict) or isinstance(feature_columns, str):
    raise ValueError('{} must be a list of feature columns, got {!r}'.format(
        argument, feature_columns))
  try:
    columns = tuple(feature_columns)
  except TypeError:
    columns = (feature_columns,)
  if not columns:
    raise ValueError('{} must not be empty'.format(argument))
  for column in columns:
    # v1-only columns (shared_embedding_columns) have just the private spelling.
    if not hasattr(column, 'name') or not (hasattr(column, 'parse_example_spec') or
                                           hasattr(column, '_parse_example_spec')):
      raise ValueError('{}: every item must be a feature column (tf.compat.v1.feature_column.*'
                       '), got {!r}'.format(argument, column))
  return columns


def check_optimizer(optimizer, argument='optimizer'):
  """Fails early for an optimizer name or object the model_fn could not use."""
  if optimizer is None or optimizers.check_keras_optimizer(optimizer) is not None:
    return
  if callable(optimizer):
    return
  if isinstance(optimizer, str):
    if optimizer not in optimizers.OPTIMIZER_NAMES:
      raise ValueError('Unsupported optimizer name for {}: {}. Supported names are: {}'.format(
          argument, optimizer, tuple(sorted(optimizers.OPTIMIZER_NAMES))))
    return
  if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
    raise ValueError('{} must be a name in {}, a tf.compat.v1.train.Optimizer, a Keras '
                     'optimizer or a callable returning one, got {!r}'.format(
                         argument, tuple(sorted(optimizers.OPTIMIZER_NAMES)), optimizer))


def _fraction_of_zeros(variables):
  """Fraction of the entries of `variables` (partitioned or not) that are zero."""
  sizes, zeros = [], []
  for var in variables:
    sizes.append(tf.cast(tf.size(var), tf.float32))
    zeros.append(tf.cast(tf.math.count_nonzero(tf.equal(var, 0.0)), tf.float32))
  return tf.math.add_n(zeros) / tf.maximum(tf.math.add_n(sizes), 1.0)


def linear_logits(features, feature_columns, units, sparse_combiner):
  """[batch, units] logits of a linear model; adds bias / sparsity summaries.

  Call inside `variable_scope('linear')` (with a partitioner if wanted).
  """
  cols_to_vars = {}
  logits = tf.compat.v1.feature_column.linear_model(
      features, feature_columns, units=units, sparse_combiner=sparse_combiner,
      cols_to_vars=cols_to_vars)
  bias = cols_to_vars.pop('bias')
  bias = bias[0] if len(bias) == 1 else tf.concat(bias, axis=0)
  if units > 1:
    tf.compat.v1.summary.histogram('bias', bias)
  else:
    tf.compat.v1.summary.scalar('bias', bias[0])
  weights = [part for parts in cols_to_vars.values() for part in parts]
  if weights:
    tf.compat.v1.summary.scalar('fraction_of_zero_weights', _fraction_of_zeros(weights))
  return logits


def _linear_model_fn(features, labels, mode, head, feature_columns, optimizer, partitioner,
                     config, sparse_combiner):
  """The model_fn of both linear Estimators."""
  if not isinstance(features, dict):
    raise ValueError('features should be a dictionary of `Tensor`s. Given type: {}'.format(
        type(features)))
  partitioner = partitioner or partitioning.input_layer_partitioner(config)
  with tf.compat.v1.variable_scope(
      'linear', partitioner=partitioner,
      custom_getter=partitioning.spread_parts_getter(config, mode)):
    logits = linear_logits(features, feature_columns, head.logits_dimension, sparse_combiner)

  def train_op_fn(loss):
    opt = optimizers.get_optimizer_instance(
        optimizer or _default_optimizer(feature_columns), learning_rate=_LEARNING_RATE)
    return optimizers.for_clones(opt).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())

  return head.create_estimator_spec(features, mode, logits, labels=labels,
                                    train_op_fn=train_op_fn)


def _check_sparse_combiner(sparse_combiner):
  if sparse_combiner not in _SPARSE_COMBINERS:
    raise ValueError('sparse_combiner must be one of {}, got {!r}'.format(
        _SPARSE_COMBINERS, sparse_combiner))


class _LinearEstimator(estimator_lib.Estimator):
  """Builds the model_fn for a head; the public classes only choose the head."""

  def __init__(self, head, feature_columns, model_dir, optimizer, config, warm_start_from,
               sparse_combiner, partitioner):
    feature_columns = check_feature_columns(feature_columns)
    check_optimizer(optimizer)
    _check_sparse_combiner(sparse_combiner)
    self._head = head

    def _model_fn(features, labels, mode, config):
      return _linear_model_fn(features, labels, mode, head, feature_columns, optimizer,
                              partitioner, config, sparse_combiner)

    super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class LinearClassifier(_LinearEstimator):
  """Linear classifier (binary with n_classes=2, else multi-class); see the module doc."""

  def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
               label_vocabulary=None, optimizer='Ftrl', config=None, warm_start_from=None,
               loss_reduction=Reduction.SUM_OVER_BATCH_SIZE, sparse_combiner='sum',
               partitioner=None):
    """Builds the classifier.

    Args:
      feature_columns: iterable of feature columns (the model's inputs).
      model_dir: where checkpoints and events go (default: the config's or a temp dir).
      n_classes: number of label classes, > 1.
      weight_column: None, a feature name or a numeric_column of example weights.
      label_vocabulary: None (labels are ids in [0, n_classes)) or the class strings.
      optimizer: name, `tf.compat.v1.train.Optimizer`, callable returning one, or None.
      config: a `tfe.RunConfig`.
      warm_start_from: checkpoint / SavedModel path or `tfe.WarmStartSettings`.
      loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.
      sparse_combiner: 'sum', 'mean' or 'sqrtn' for multivalent categorical columns.
      partitioner: variable partitioner (default: by config.num_ps_replicas).

    Raises:
      ValueError: for a bad argument, naming it.
    """
    head = head_lib.classification_head(n_classes, weight_column=weight_column,
                                        label_vocabulary=label_vocabulary,
                                        loss_reduction=loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, warm_start_from,
                     sparse_combiner, partitioner)


class LinearRegressor(_LinearEstimator):
  """Linear regression on `label_dimension` targets; see the module doc."""

  def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
               optimizer='Ftrl', config=None, warm_start_from=None,
               loss_reduction=Reduction.SUM_OVER_BATCH_SIZE, sparse_combiner='sum',
               partitioner=None):
    """Builds the regressor.

    Args:
      label_dimension: number of regression targets per example, >= 1.
      The others: as LinearClassifier's.

    Raises:
      ValueError: for a bad argument, naming it.
    """
    head = head_lib.regression_head(label_dimension, weight_column=weight_column,
                                    loss_reduction=loss_reduction)
    super().__init__(head, feature_columns, model_dir, optimizer, config, warm_start_from,
                     sparse_combiner, partitioner)


class LinearEstimator(_LinearEstimator):
  """A linear model with a head of your choice; arguments as `tf.estimator.LinearEstimator`."""

  def __init__(self, head, feature_columns, model_dir=None, optimizer='Ftrl', config=None,
               sparse_combiner='sum', warm_start_from=None, partitioner=None):
    """Builds the estimator.

    Args:
      head: a head (`tfe.RegressionHead`, `tfe.MultiLabelHead`, `tfe.MultiHead` ...).
      feature_columns: iterable of feature columns.
      model_dir: where checkpoints and events go.
      optimizer: name, v1 or Keras optimizer, callable returning one, or None.
      config: a `tfe.RunConfig`.
      sparse_combiner: 'sum', 'mean' or 'sqrtn'.
      warm_start_from: checkpoint / SavedModel path or `tfe.WarmStartSettings`.
      partitioner: variable partitioner (default: by config.num_ps_replicas).

    Raises:
      ValueError: for a bad argument, naming it.
    """
    super().__init__(head, feature_columns, model_dir, optimizer, config, warm_start_from,
                     sparse_combiner, partitioner)
