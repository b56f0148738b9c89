"""`DNNClassifier` and `DNNRegressor`: tf.estimator 2.15's feed-forward canned estimators.

`tf.estimator.DNNClassifier(...)` (or the tf.compat.v1 class) ports as
`tfe.DNNClassifier(...)` with the same arguments, graph and checkpoint names:

    import estimator as tfe
    fc = tf.compat.v1.feature_column
    city = fc.categorical_column_with_hash_bucket('city', 1000)
    est = tfe.DNNClassifier(
        hidden_units=[64, 32],
        feature_columns=[fc.embedding_column(city, 8), fc.numeric_column('age')],
        n_classes=3, dropout=0.1, model_dir='/tmp/dnn')
    est.train(train_input_fn, max_steps=1000)
    est.evaluate(eval_input_fn)   # accuracy, average_loss, loss, global_step
    est.export_saved_model('/tmp/export', tfe.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec([fc.embedding_column(city, 8), fc.numeric_column('age')])))

The model: `tf.compat.v1.feature_column.input_layer` over `feature_columns`
(scope `dnn/input_from_feature_columns`), one dense layer per entry of
`hidden_units` (`dnn/hiddenlayer_<i>`, glorot-uniform kernel, then dropout
while training, then batch normalization with momentum 0.999 when
`batch_norm`), and a linear `dnn/logits` layer with the head's logits
dimension. The head (head.py) turns the logits into the loss, metrics,
predictions and export signatures. The optimizer is 'Adagrad' with learning
rate 0.05 unless given (a name, a `tf.compat.v1.train.Optimizer`, a Keras
optimizer or a callable returning one; see optimizers.py). `DNNEstimator`
is the same model with a head of your choice (heads.py).

On a cluster every variable is partitioned over the ps tasks as
tf.estimator did (see partitioning.py): embedding tables of the input layer
with `input_layer_partitioner` (default: 64 MiB slices), hidden layers with
256 KiB slices. With `RunConfig(num_clones=N)` the optimizer is wrapped in
`tfe.TowerOptimizer`, so N clones average their gradients (replicate.py).

Differs on purpose:
* Arguments are in the order of tf.estimator 2.15's `tf.estimator.DNN*`
  (V2) classes, with their `loss_reduction` default SUM_OVER_BATCH_SIZE
  (tf.compat.v1's classes summed over the batch); the v1 argument
  `input_layer_partitioner` is accepted as the last keyword argument.
* Optimizer names give `tf.compat.v1.train` optimizers (graph mode), not
  Keras ones.
* The layers are plain `tf.compat.v1.layers` calls, not a Keras Model; the
  variable names are the same.
* Parts of a variable split over several ps tasks are pinned to ps task
  `i % num_ps` (partitioning.py) instead of round-robin.

Shared embeddings: `tf.compat.v1.feature_column.shared_embedding_columns`
go through `input_layer` like any column; `tf.feature_column.shared_embeddings`
(v2, which `input_layer` refuses) are looked up after the other columns
(`input_from_feature_columns`), their table named
`dnn/input_from_feature_columns/<shared name>`.
"""

import numbers

import tensorflow as tf
# The column classes, to tell v2-only shared embeddings from the columns input_layer takes.
from tensorflow.python.feature_column import feature_column as fc_v1
from tensorflow.python.feature_column import feature_column_v2 as fc_v2

from estimator import estimator as estimator_lib
from estimator import model_fn as model_fn_lib
from estimator.canned import head as head_lib
from estimator.canned import linear as linear_lib
from estimator.canned import optimizers
from estimator.canned import partitioning

__all__ = ['DNNClassifier', 'DNNRegressor', 'DNNEstimator']

# tf.estimator's default learning rate for the DNN optimizer given by name.
_LEARNING_RATE = 0.05
_BATCH_NORM_MOMENTUM = 0.999
_SUM_OVER_BATCH_SIZE = tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE


def check_features(features):
  """Raises ValueError unless `features` is a dict (what feature columns need)."""
  if not isinstance(features, dict):
    raise ValueError('features should be a dictionary of `Tensor`s. '
                     'Given type: {}'.format(type(features)))


def check_dnn_arguments(hidden_units, feature_columns, dropout, optimizer, prefix=''):
  """Checks the DNN constructor arguments; returns (hidden_units, feature_columns) as tuples.

  Args:
    hidden_units: iterable of positive layer widths.
    feature_columns: iterable of v1 feature columns (at least one).
    dropout: None or a probability in [0, 1).
    optimizer: the optimizer argument (name, Optimizer or callable).
    prefix: argument-name prefix in messages ('dnn_' for DNNLinearCombined).

  Raises:
    ValueError: naming the offending argument.
  """
  if hidden_units is None or isinstance(hidden_units, (str, bytes, numbers.Number)):
    raise ValueError('{}hidden_units must be an iterable of layer sizes, got {!r}.'.format(
        prefix, hidden_units))
  hidden_units = tuple(hidden_units)
  if not hidden_units or not all(isinstance(u, numbers.Integral) and u > 0 for u in hidden_units):
    raise ValueError('{}hidden_units must be a non-empty list of positive ints, got {!r}.'.format(
        prefix, hidden_units))
  hidden_units = tuple(int(u) for u in hidden_units)
  feature_columns = linear_lib.check_feature_columns(feature_columns, prefix + 'feature_columns')
  if dropout is not None and not 0 <= dropout < 1:
    raise ValueError('{}dropout must be None or in [0, 1), got {!r}.'.format(prefix, dropout))
  linear_lib.check_optimizer(optimizer, prefix + 'optimizer')
  return hidden_units, feature_columns


def _layer_summary(value, tag):
  tf.compat.v1.summary.scalar('%s/fraction_of_zero_values' % tag, tf.math.zero_fraction(value))
  tf.compat.v1.summary.histogram('%s/activation' % tag, value)


def _is_v1_column(column):
  # v2 shared embeddings subclass the v1 base too, with methods that only raise.
  return (isinstance(column, fc_v1._FeatureColumn) and  # pylint: disable=protected-access
          not isinstance(column, fc_v2.SharedEmbeddingColumn))


def input_from_feature_columns(features, feature_columns):
  """[batch, n] dense input: `input_layer`, then any v2-only shared embeddings.

  `tf.feature_column.shared_embeddings` (v2) makes columns that the v1
  `input_layer` refuses; they are looked up on their own, after the other
  columns and sorted by name, their one shared table created in the current
  variable scope (`<scope>/<shared name>`). Models without them build exactly
  the graph (and variable names) they always did.
  """
  v1_columns = [c for c in feature_columns if _is_v1_column(c)]
  v2_columns = sorted((c for c in feature_columns if not _is_v1_column(c)),
                      key=lambda c: c.name)
  for column in v2_columns:
    if not isinstance(column, fc_v2.SharedEmbeddingColumn):
      raise ValueError(
          'feature_columns: {} ({}) is a v2-only column other than a shared embedding; use '
          'its tf.compat.v1.feature_column equivalent.'.format(column.name, type(column)))
  parts = []
  if v1_columns:
    parts.append(tf.compat.v1.feature_column.input_layer(features, v1_columns))
  if v2_columns:
    cache = fc_v2.FeatureTransformationCache(features)
    for column in v2_columns:
      dense = column.get_dense_tensor(cache, None)
      parts.append(tf.reshape(dense, [-1, column.variable_shape.num_elements()]))
  return parts[0] if len(parts) == 1 else tf.concat(parts, axis=1)


def dnn_logits(features, mode, units, hidden_units, feature_columns, activation_fn, dropout,
               input_layer_partitioner, batch_norm):
  """Builds the DNN tower under the current variable scope; returns the logits.

  Args:
    features: dict of feature tensors.
    mode: a `ModeKeys` value (dropout and batch-norm statistics in TRAIN only).
    units: logits dimension.
    hidden_units: layer widths.
    feature_columns: v1 dense feature columns for `input_layer`.
    activation_fn: activation of the hidden layers.
    dropout: None or the drop probability.
    input_layer_partitioner: partitioner of the input layer's variables.
    batch_norm: batch normalization after each hidden layer.

  Returns:
    A float tensor [batch, units].
  """
  is_training = mode == model_fn_lib.ModeKeys.TRAIN
  scope_name = tf.compat.v1.get_variable_scope().name
  prefix = scope_name + '/' if scope_name else ''
  with tf.compat.v1.variable_scope('input_from_feature_columns',
                                   partitioner=input_layer_partitioner):
    net = input_from_feature_columns(features, feature_columns)
  for index, width in enumerate(hidden_units):
    with tf.compat.v1.variable_scope('hiddenlayer_%d' % index) as layer_scope:
      net = tf.compat.v1.layers.dense(
          net, width, activation=activation_fn,
          kernel_initializer=tf.compat.v1.glorot_uniform_initializer(), name=layer_scope)
      if dropout is not None and is_training:
        net = tf.compat.v1.layers.dropout(net, rate=dropout, training=True)
      if batch_norm:
        net = tf.compat.v1.layers.batch_normalization(
            net, momentum=_BATCH_NORM_MOMENTUM, training=is_training,
            name='batchnorm_%d' % index)
    _layer_summary(net, '%shiddenlayer_%d' % (prefix, index))
  with tf.compat.v1.variable_scope('logits') as logits_scope:
    logits = tf.compat.v1.layers.dense(
        net, units, activation=None,
        kernel_initializer=tf.compat.v1.glorot_uniform_initializer(), name=logits_scope)
  _layer_summary(logits, '%slogits' % prefix)
  return logits


def _dnn_model_fn_for(head, **settings):
  """The model_fn(features, labels, mode, config) of a DNN Estimator with `head`.

  Args:
    head: the head the Estimator was built with (from its n_classes etc., or the user's).
    **settings: `_dnn_model_fn`'s keyword arguments after `head`, but `config`.
  """
  def model_fn(features, labels, mode, config):
    return _dnn_model_fn(features, labels, mode, head, config=config, **settings)
  return model_fn


def _dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns,
                  optimizer='Adagrad', activation_fn=tf.nn.relu, dropout=None,
                  input_layer_partitioner=None, config=None, batch_norm=False):
  """The DNN model_fn shared by DNNClassifier and DNNRegressor."""
  check_features(features)
  input_layer_partitioner = (input_layer_partitioner or
                             partitioning.input_layer_partitioner(config))
  with tf.compat.v1.variable_scope(
      'dnn', values=tuple(features.values()),
      partitioner=partitioning.hidden_layer_partitioner(config),
      custom_getter=partitioning.spread_parts_getter(config, mode)) as scope:
    dnn_scope = scope.name
    logits = dnn_logits(features, mode, head.logits_dimension, hidden_units, feature_columns,
                        activation_fn, dropout, input_layer_partitioner, batch_norm)

  def train_op_fn(loss):
    instance = optimizers.get_optimizer_instance(optimizer, learning_rate=_LEARNING_RATE)
    update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    trainable = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES,
                                            scope=dnn_scope + '/')
    with tf.control_dependencies(update_ops):
      # TowerOptimizer: transparent in one clone, combines the clones' gradients otherwise.
      return optimizers.for_clones(instance).minimize(
          loss, global_step=tf.compat.v1.train.get_global_step(), var_list=trainable)

  return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                    train_op_fn=train_op_fn)


def _checked_dnn_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn,
                          dropout, batch_norm, input_layer_partitioner):
  """The model_fn of DNNClassifier, DNNRegressor and DNNEstimator, from checked arguments.

  Returns:
    model_fn(features, labels, mode, config) over `head`.

  Raises:
    ValueError: naming the offending argument.
  """
  hidden_units, feature_columns = check_dnn_arguments(hidden_units, feature_columns, dropout,
                                                      optimizer)
  return _dnn_model_fn_for(
      head, hidden_units=hidden_units, feature_columns=feature_columns, optimizer=optimizer,
      activation_fn=activation_fn, dropout=dropout,
      input_layer_partitioner=input_layer_partitioner, batch_norm=batch_norm)


class DNNClassifier(estimator_lib.Estimator):
  """A classifier over dense feature columns with fully connected hidden layers.

  Arguments as `tf.estimator.DNNClassifier` (see the module
  docstring); loss is softmax (or sigmoid, for two classes) cross entropy.
  """

  def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
               weight_column=None, label_vocabulary=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
               loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False,
               input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      hidden_units: widths of the hidden layers, e.g. [64, 32].
      feature_columns: v1 dense feature columns (numeric, bucketized,
        embedding, indicator ...).
      model_dir: where checkpoints and events go.
      n_classes: number of classes (2: binary, logistic).
      weight_column: feature key or numeric column of example weights.
      label_vocabulary: the string labels, in class-id order.
      optimizer: name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), a
        `tf.compat.v1.train.Optimizer`, or a callable returning one.
      activation_fn: activation of the hidden layers.
      dropout: None, or the probability of dropping a hidden unit in training.
      config: a `tfe.RunConfig`.
      warm_start_from: checkpoint path or `tfe.WarmStartSettings`.
      loss_reduction: a `tf.compat.v1.losses.Reduction` other than NONE.
      batch_norm: batch normalization after each hidden layer.
      input_layer_partitioner: partitioner of the input layer (default: split
        over the ps tasks in 64 MiB slices).

    Raises:
      ValueError: naming the offending argument.
    """
    head = head_lib.classification_head(n_classes, weight_column=weight_column,
                                        label_vocabulary=label_vocabulary,
                                        loss_reduction=loss_reduction)
    model_fn = _checked_dnn_model_fn(head, hidden_units, feature_columns, optimizer,
                                     activation_fn, dropout, batch_norm, input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNRegressor(estimator_lib.Estimator):
  """A regressor over dense feature columns with fully connected hidden layers.

  Arguments as `tf.estimator.DNNRegressor` (see the module
  docstring); loss is the mean squared error.
  """

  def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
               weight_column=None, optimizer='Adagrad', activation_fn=tf.nn.relu,
               dropout=None, config=None, warm_start_from=None,
               loss_reduction=_SUM_OVER_BATCH_SIZE, batch_norm=False,
               input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      label_dimension: number of regression targets per example.
      The others: as DNNClassifier's.

    Raises:
      ValueError: naming the offending argument.
    """
    head = head_lib.regression_head(label_dimension=label_dimension,
                                    weight_column=weight_column,
                                    loss_reduction=loss_reduction)
    model_fn = _checked_dnn_model_fn(head, hidden_units, feature_columns, optimizer,
                                     activation_fn, dropout, batch_norm, input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


class DNNEstimator(estimator_lib.Estimator):
  """A DNN over feature columns with a head of your choice (`tfe.MultiLabelHead(...)` ...).

  Arguments as `tf.estimator.DNNEstimator`; the model is DNNClassifier's, the
  loss, metrics, predictions and signatures are the head's.
  """

  def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer='Adagrad',
               activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
               batch_norm=False, input_layer_partitioner=None):
    """Builds the estimator.

    Args:
      head: a head (`tfe.BinaryClassHead`, `tfe.MultiHead`, ...).
      hidden_units: widths of the hidden layers.
      feature_columns: dense feature columns.
      model_dir: where checkpoints and events go.
      optimizer: name, v1 or Keras optimizer, or callable returning one.
      activation_fn: activation of the hidden layers.
      dropout: None, or the probability of dropping a hidden unit in training.
      config: a `tfe.RunConfig`.
      warm_start_from: checkpoint path or `tfe.WarmStartSettings`.
      batch_norm: batch normalization after each hidden layer.
      input_layer_partitioner: partitioner of the input layer.

    Raises:
      ValueError: naming the offending argument.
    """
    model_fn = _checked_dnn_model_fn(head, hidden_units, feature_columns, optimizer,
                                     activation_fn, dropout, batch_norm, input_layer_partitioner)
    super().__init__(model_fn=model_fn, model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)
