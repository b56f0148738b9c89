"""`DNNLinearCombinedClassifier` / `Regressor`: tf.estimator 2.15's wide-and-deep models.

The logits are the sum of a linear model over `linear_feature_columns`
(scope `linear`, as LinearClassifier: sparse columns, crosses, buckets) and a
DNN over `dnn_feature_columns` (scope `dnn`, as DNNClassifier). Each part
has its own optimizer (linear: 'Ftrl', DNN: 'Adagrad' by default, with
tf.estimator's learning rates 0.005 capped by 1/sqrt(number of linear
columns), and 0.001); one train op applies both and increments the global
step once.

    import estimator as tfe
    fc = tf.compat.v1.feature_column
    city = fc.categorical_column_with_hash_bucket('city', 1000)
    color = fc.categorical_column_with_vocabulary_list('color', ['red', 'green'])
    est = tfe.DNNLinearCombinedClassifier(
        linear_feature_columns=[fc.crossed_column([city, color], 5000)],
        dnn_feature_columns=[fc.embedding_column(city, 8), fc.indicator_column(color)],
        dnn_hidden_units=[32, 16], n_classes=2, model_dir='/tmp/wide_deep')
    est.train(train_input_fn, max_steps=1000)

On a cluster the linear weights and the DNN's embedding tables are
partitioned over the ps tasks (`input_layer_partitioner`, default 64 MiB
slices; partitioning.py). With `RunConfig(num_clones=N)` both optimizers
are wrapped in `tfe.TowerOptimizer`; the clones' gradients are averaged per
optimizer and the global step still moves once per step (replicate.py).

Differs on purpose:
* Arguments are in the order of the `tf.estimator.DNNLinearCombined*` (V2)
  classes, with their `loss_reduction` default SUM_OVER_BATCH_SIZE; the v1
  argument `input_layer_partitioner` is accepted as the last keyword
  argument. Optimizer names give `tf.compat.v1.train` optimizers.
* Split variables are pinned to ps task `i % num_ps` (partitioning.py).
"""

import math

import tensorflow as tf

from estimator import estimator as estimator_lib
from estimator.canned import dnn as dnn_lib
from estimator.canned import head as head_lib
from estimator.canned import linear as linear_lib
from estimator.canned import optimizers
from estimator.canned import partitioning

__all__ = ['DNNLinearCombinedClassifier', 'DNNLinearCombinedRegressor',
           'DNNLinearCombinedEstimator']

# tf.estimator's default learning rates of the two optimizers given by name.
_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005
_SUM_OVER_BATCH_SIZE = tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE
_SPARSE_COMBINERS = ('mean', 'sqrtn', 'sum')


def _linear_learning_rate(num_linear_feature_columns):
  return min(_LINEAR_LEARNING_RATE, 1.0 / math.sqrt(num_linear_feature_columns))


def _check_not_sync_replicas(optimizer, argument):
  if isinstance(optimizer, tf.compat.v1.train.SyncReplicasOptimizer):
    raise ValueError(
        '{}: SyncReplicasOptimizer does not support multi optimizers case. Therefore, it is '
        'not supported in DNNLinearCombined model. If you want to use this optimizer, please '
        'use either DNN or Linear model.'.format(argument))


def _check_arguments(linear_feature_columns, linear_optimizer, dnn_feature_columns,
                     dnn_optimizer, dnn_hidden_units, dnn_dropout, linear_sparse_combiner):
  """Returns (linear columns, dnn columns, hidden units) as tuples, or raises ValueError."""
  if not linear_feature_columns and not dnn_feature_columns:
    raise ValueError('Either linear_feature_columns or dnn_feature_columns must be defined.')
  if linear_feature_columns:
    linear_feature_columns = linear_lib.check_feature_columns(linear_feature_columns,
                                                              'linear_feature_columns')
    linear_lib.check_optimizer(linear_optimizer, 'linear_optimizer')
    if linear_sparse_combiner not in _SPARSE_COMBINERS:
      raise ValueError('linear_sparse_combiner must be one of {}, got {!r}'.format(
          _SPARSE_COMBINERS, linear_sparse_combiner))
  if dnn_feature_columns:
    if not dnn_hidden_units:
      raise ValueError('dnn_hidden_units must be defined when dnn_feature_columns is '
                       'specified.')
    dnn_hidden_units, dnn_feature_columns = dnn_lib.check_dnn_arguments(
        dnn_hidden_units, dnn_feature_columns, dnn_dropout, dnn_optimizer, prefix='dnn_')
  return tuple(linear_feature_columns or ()), tuple(dnn_feature_columns or ()), dnn_hidden_units


def _trainable(scope_name):
  return tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES,
                                     scope=scope_name + '/')


def _combined_model_fn_for(head, **settings):
  """The model_fn(features, labels, mode, config) of a wide-and-deep Estimator with `head`.

  Args:
    head: the head the Estimator was built with (from its n_classes etc., or the user's).
    **settings: `_dnn_linear_combined_model_fn`'s keyword arguments after `head`, but `config`.
  """
  def model_fn(features, labels, mode, config):
    return _dnn_linear_combined_model_fn(features, labels, mode, head, config=config, **settings)
  return model_fn


def _dnn_linear_combined_model_fn(features, labels, mode, head, linear_feature_columns=(),
                                  linear_optimizer='Ftrl', dnn_feature_columns=(),
                                  dnn_optimizer='Adagrad', dnn_hidden_units=None,
                                  dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
                                  input_layer_partitioner=None, config=None, batch_norm=False,
                                  linear_sparse_combiner='sum'):
  """The wide-and-deep model_fn shared by the classifier and the regressor."""
  dnn_lib.check_features(features)
  input_layer_partitioner = (input_layer_partitioner or
                             partitioning.input_layer_partitioner(config))
  spread_parts = partitioning.spread_parts_getter(config, mode)
  parts = []  # (scope name, logits, optimizer, default learning rate, argument name)
  if dnn_feature_columns:
    with tf.compat.v1.variable_scope(
        'dnn', values=tuple(features.values()),
        partitioner=partitioning.hidden_layer_partitioner(config),
        custom_getter=spread_parts) as scope:
      logits = dnn_lib.dnn_logits(features, mode, head.logits_dimension, dnn_hidden_units,
                                  dnn_feature_columns, dnn_activation_fn, dnn_dropout,
                                  input_layer_partitioner, batch_norm)
    parts.append((scope.name, logits, dnn_optimizer, _DNN_LEARNING_RATE, 'dnn_optimizer'))
  if linear_feature_columns:
    with tf.compat.v1.variable_scope(
        'linear', values=tuple(features.values()), partitioner=input_layer_partitioner,
        custom_getter=spread_parts) as scope:
      logits = linear_lib.linear_logits(features, linear_feature_columns,
                                        head.logits_dimension, linear_sparse_combiner)
      tf.compat.v1.summary.scalar('%s/fraction_of_zero_values' % scope.name,
                                  tf.math.zero_fraction(logits))
      tf.compat.v1.summary.histogram('%s/activation' % scope.name, logits)
    parts.append((scope.name, logits, linear_optimizer,
                  _linear_learning_rate(len(linear_feature_columns)), 'linear_optimizer'))
  logits = parts[0][1] if len(parts) == 1 else parts[0][1] + parts[1][1]

  def train_op_fn(loss):
    updates = []
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
      for scope_name, _, optimizer, learning_rate, argument in parts:
        instance = optimizers.get_optimizer_instance(optimizer, learning_rate=learning_rate)
        _check_not_sync_replicas(instance, argument)
        updates.append(optimizers.for_clones(instance).minimize(
            loss, var_list=_trainable(scope_name)))
    with tf.control_dependencies(updates):
      return tf.compat.v1.assign_add(tf.compat.v1.train.get_global_step(), 1).op

  return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                    train_op_fn=train_op_fn)


def _checked_combined_model_fn(head, linear_feature_columns, linear_optimizer,
                               dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                               dnn_activation_fn, dnn_dropout, batch_norm,
                               linear_sparse_combiner, input_layer_partitioner):
  """The wide-and-deep model_fn over `head`, from checked arguments (all three classes).

  Returns:
    model_fn(features, labels, mode, config).

  Raises:
    ValueError: naming the offending argument.
  """
  linear_columns, dnn_columns, hidden_units = _check_arguments(
      linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
      dnn_hidden_units, dnn_dropout, linear_sparse_combiner)
  return _combined_model_fn_for(
      head, linear_feature_columns=linear_columns, linear_optimizer=linear_optimizer,
      dnn_feature_columns=dnn_columns, dnn_optimizer=dnn_optimizer,
      dnn_hidden_units=hidden_units, dnn_activation_fn=dnn_activation_fn,
      dnn_dropout=dnn_dropout, input_layer_partitioner=input_layer_partitioner,
      batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner)


class DNNLinearCombinedClassifier(estimator_lib.Estimator):
  """A wide-and-deep classifier: linear logits plus DNN logits, two optimizers.

  Arguments as `tf.estimator.DNNLinearCombinedClassifier` (see the
  module docstring).
  """

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, n_classes=2,
               weight_column=None, label_vocabulary=None, config=None, warm_start_from=None,
               loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False,
               linear_sparse_combiner='sum', input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      model_dir: where checkpoints and events go.
      linear_feature_columns: v1 feature columns of the linear part.
      linear_optimizer: name, `tf.compat.v1.train.Optimizer` or callable for
        the linear part (default Ftrl).
      dnn_feature_columns: v1 dense feature columns of the DNN part.
      dnn_optimizer: name, optimizer or callable for the DNN (default Adagrad).
      dnn_hidden_units: widths of the DNN's hidden layers (required with
        dnn_feature_columns).
      dnn_activation_fn: activation of the hidden layers.
      dnn_dropout: None, or the probability of dropping a hidden unit.
      n_classes: number of classes (2: binary, logistic).
      weight_column: feature key or numeric column of example weights.
      label_vocabulary: the string labels, in class-id order.
      config: a `tfe.RunConfig`.
      warm_start_from: checkpoint path or `tfe.WarmStartSettings`.
      loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.
      batch_norm: batch normalization after each hidden layer.
      linear_sparse_combiner: 'sum', 'mean' or 'sqrtn' for multivalent
        categorical columns of the linear part.
      input_layer_partitioner: partitioner of the DNN input layer and the
        linear weights (default: split over the ps tasks in 64 MiB slices).

    Raises:
      ValueError: naming the offending argument.
    """
    head = head_lib.classification_head(n_classes, weight_column=weight_column,
                                        label_vocabulary=label_vocabulary,
                                        loss_reduction=loss_reduction)
    model_fn = _checked_combined_model_fn(
        head, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner,
        input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(estimator_lib.Estimator):
  """A wide-and-deep regressor: linear predictions plus DNN predictions, two optimizers.

  Arguments as `tf.estimator.DNNLinearCombinedRegressor` (see the
  module docstring).
  """

  def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer='Ftrl',
               dnn_feature_columns=None, dnn_optimizer='Adagrad', dnn_hidden_units=None,
               dnn_activation_fn=tf.nn.relu, dnn_dropout=None, label_dimension=1,
               weight_column=None, config=None, warm_start_from=None,
               loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False,
               linear_sparse_combiner='sum', input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      label_dimension: number of regression targets per example.
      The others: as DNNLinearCombinedClassifier's.

    Raises:
      ValueError: naming the offending argument.
    """
    head = head_lib.regression_head(label_dimension=label_dimension,
                                    weight_column=weight_column,
                                    loss_reduction=loss_reduction)
    model_fn = _checked_combined_model_fn(
        head, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner,
        input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNLinearCombinedEstimator(estimator_lib.Estimator):
  """Wide and deep with a head of your choice; arguments as tf.estimator's class."""

  def __init__(self, head, model_dir=None, linear_feature_columns=None,
               linear_optimizer='Ftrl', dnn_feature_columns=None, dnn_optimizer='Adagrad',
               dnn_hidden_units=None, dnn_activation_fn=tf.nn.relu, dnn_dropout=None,
               config=None, batch_norm=False, linear_sparse_combiner='sum',
               warm_start_from=None, input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      head: a head (`tfe.MultiLabelHead(n_classes=3)`, ...).
      model_dir: where checkpoints and events go.
      linear_feature_columns: feature columns of the linear part.
      linear_optimizer: name, optimizer (v1 or Keras) or callable (default Ftrl).
      dnn_feature_columns: dense feature columns of the DNN part.
      dnn_optimizer: name, optimizer or callable (default Adagrad).
      dnn_hidden_units: widths of the DNN's hidden layers.
      dnn_activation_fn: activation of the hidden layers.
      dnn_dropout: None, or the probability of dropping a hidden unit.
      config: a `tfe.RunConfig`.
      batch_norm: batch normalization after each hidden layer.
      linear_sparse_combiner: 'sum', 'mean' or 'sqrtn'.
      warm_start_from: checkpoint path or `tfe.WarmStartSettings` (keyword only
        in spirit: tf.estimator's V2 class had none).
      input_layer_partitioner: partitioner of the DNN input layer and the
        linear weights.

    Raises:
      ValueError: naming the offending argument.
    """
    model_fn = _checked_combined_model_fn(
        head, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner,
        input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)
