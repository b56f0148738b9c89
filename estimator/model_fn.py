"""`ModeKeys` and `EstimatorSpec`: what a model_fn receives and returns.

A model_fn builds the graph for one mode and describes it with an
`EstimatorSpec`; the `Estimator` then runs that graph. Which fields are needed
depends on the mode (the rules and error texts of tf.estimator 2.15):

* TRAIN needs `loss` and `train_op`;
* EVAL needs `loss` (and usually `eval_metric_ops`);
* PREDICT needs `predictions` (and optionally `export_outputs`).

Usage (`import tf_slim as slim`; tf.compat.v1.layers work as well, see
core/COMPAT.md):

    def model_fn(features, labels, mode, params):
      logits = slim.fully_connected(features['x'], params['num_classes'], activation_fn=None)
      predictions = {'classes': tf.argmax(logits, 1), 'probabilities': tf.nn.softmax(logits)}
      if mode == tfe.ModeKeys.PREDICT:
        return tfe.EstimatorSpec(mode, predictions=predictions)
      loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
      train_op = None
      if mode == tfe.ModeKeys.TRAIN:
        train_op = tf.compat.v1.train.AdamOptimizer().minimize(
            loss, tf.compat.v1.train.get_global_step())
      return tfe.EstimatorSpec(
          mode, predictions=predictions, loss=loss, train_op=train_op,
          eval_metric_ops={'accuracy': tf.compat.v1.metrics.accuracy(
              labels, predictions['classes'])})
"""

import collections

import tensorflow as tf

from estimator import util
from estimator.export import export_output as export_output_lib

__all__ = ['ModeKeys', 'EstimatorSpec']

DEFAULT_SERVING_KEY = 'serving_default'


class ModeKeys(object):
  """The three modes a model_fn is called in (values as tf.estimator)."""

  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'

  @classmethod
  def all(cls):
    return (cls.TRAIN, cls.EVAL, cls.PREDICT)


_SPEC_FIELDS = ['mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops',
                'export_outputs', 'training_chief_hooks', 'training_hooks', 'scaffold',
                'evaluation_hooks', 'prediction_hooks']


def _is_tensor_like(value):
  return isinstance(value, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor))


def _check_default_graph(value, name):
  """Raises ValueError when `value` (a tensor or op) is not in the default graph."""
  graph = getattr(value, 'graph', None)
  if graph is not None and graph is not tf.compat.v1.get_default_graph():
    raise ValueError('{0} with "{1}" must be from the default graph. Possible causes of '
                     'this error include: \n\n1) {0} was created outside the context '
                     'of the default graph.\n\n2) The object passed through to '
                     'EstimatorSpec was not created in the most recent call to '
                     '"model_fn".'.format(name, value))


def _validate_loss(loss, mode):
  """Returns `loss` as a scalar tensor, or None when absent and allowed."""
  if loss is None:
    if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
      raise ValueError('Missing loss.')
    return None
  if isinstance(loss, tf.Variable):
    loss = loss.value()
  if not isinstance(loss, tf.Tensor):
    raise TypeError('loss must be Tensor, given: {}'.format(loss))
  _check_default_graph(loss, 'loss')
  num_elements = loss.shape.num_elements()
  if num_elements is not None and num_elements != 1:
    raise ValueError('Loss must be scalar, given: {}'.format(loss))
  if loss.shape.rank != 0:
    # A shape-[1] loss is accepted and made scalar, as tf.estimator does.
    loss = tf.reshape(loss, [])
  return loss


def _validate_train_op(train_op, mode):
  if train_op is None:
    if mode == ModeKeys.TRAIN:
      raise ValueError('Missing train_op.')
    return None
  if isinstance(train_op, tf.Variable):
    train_op = train_op.op
  if not isinstance(train_op, (tf.Operation, tf.Tensor)):
    raise TypeError('train_op must be Operation or Tensor, given: {}'.format(train_op))
  _check_default_graph(train_op, 'train_op')
  return train_op


def _validate_predictions(predictions, mode):
  if predictions is None:
    if mode == ModeKeys.PREDICT:
      raise ValueError('Missing predictions.')
    return {}
  if isinstance(predictions, dict):
    for key, value in predictions.items():
      if not _is_tensor_like(value):
        raise TypeError('predictions[{}] must be Tensor, given: {}'.format(key, value))
      _check_default_graph(value, 'prediction values')
  else:
    if not _is_tensor_like(predictions):
      raise TypeError('predictions must be Tensor or dict of Tensor, given: {}'.format(
          predictions))
    _check_default_graph(predictions, 'prediction values')
  return predictions


def _metric_variables(metric):
  return list(getattr(metric, 'variables', []) or [])


def _validate_eval_metric_ops(eval_metric_ops):
  """Checks the (value, update_op) pairs / Keras metrics; returns a dict."""
  if eval_metric_ops is None:
    return {}
  if not isinstance(eval_metric_ops, dict):
    raise TypeError('eval_metric_ops must be a dict, given: {}'.format(eval_metric_ops))
  graph = tf.compat.v1.get_default_graph()
  for key, value in eval_metric_ops.items():
    if hasattr(value, 'update_state') and hasattr(value, 'result'):
      # A Keras metric: it must have been updated in this graph.
      if not getattr(value, 'updates', None):
        raise ValueError('Please call update_state(...) on the "{}" metric'.format(key))
      for var in _metric_variables(value):
        for collection in (tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                           tf.compat.v1.GraphKeys.METRIC_VARIABLES):
          if var not in graph.get_collection(collection):
            graph.add_to_collection(collection, var)
      continue
    if not isinstance(value, tuple) or len(value) != 2:
      raise TypeError('Values of eval_metric_ops must be (metric_value, update_op) tuples, '
                      'given: {} for key: {}'.format(value, key))
    for part in value:
      _check_default_graph(part, 'eval_metric_ops')
  return dict(eval_metric_ops)


def _validate_hooks(hooks):
  return util.check_each_is(hooks, tf.compat.v1.train.SessionRunHook,
                            'All hooks must be SessionRunHook instances, given: {}', tuple)


def _validate_scaffold(scaffold):
  scaffold = scaffold or tf.compat.v1.train.Scaffold()
  if not isinstance(scaffold, tf.compat.v1.train.Scaffold):
    raise TypeError('scaffold must be tf.train.Scaffold. Given: {}'.format(scaffold))
  return scaffold


def get_export_outputs(export_outputs, predictions):
  """Applies the default-signature rules of tf.estimator to `export_outputs`.

  Args:
    export_outputs: None or dict {signature key: ExportOutput}.
    predictions: the model_fn's predictions (tensor or dict).

  Returns:
    A dict with a 'serving_default' entry.

  Raises:
    TypeError: when `export_outputs` is not a dict of ExportOutput.
    ValueError: with several outputs and none named 'serving_default'.
  """
  if export_outputs is None:
    return {DEFAULT_SERVING_KEY: export_output_lib.PredictOutput(predictions)}
  if not isinstance(export_outputs, dict):
    raise TypeError('export_outputs must be dict, given: {}'.format(export_outputs))
  for value in export_outputs.values():
    if not isinstance(value, export_output_lib.ExportOutput):
      raise TypeError('Values in export_outputs must be ExportOutput objects. '
                      'Given: {}'.format(export_outputs))
  export_outputs = dict(export_outputs)
  if DEFAULT_SERVING_KEY not in export_outputs:
    if len(export_outputs) == 1:
      (value,) = export_outputs.values()
      export_outputs[DEFAULT_SERVING_KEY] = value
    elif len(export_outputs) > 1:
      raise ValueError('Multiple export_outputs were provided, but none of them is '
                       'specified as the default.  Do this by naming one of them with '
                       'signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY.')
  return export_outputs


class EstimatorSpec(collections.namedtuple('EstimatorSpec', _SPEC_FIELDS)):
  """What a model_fn hands back for one mode: its tensors, ops, hooks and scaffold."""

  def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
              export_outputs=None, training_chief_hooks=None, training_hooks=None,
              scaffold=None, evaluation_hooks=None, prediction_hooks=None):
    """Checks the fields for `mode` and fills in the defaults.

    Args:
      mode: a `ModeKeys` value.
      predictions: Tensor or dict of Tensor (required in PREDICT).
      loss: scalar Tensor (required in TRAIN and EVAL).
      train_op: Operation/Tensor running one training step (required in TRAIN).
      eval_metric_ops: dict {name: (value, update_op) or Keras metric}.
      export_outputs: dict {signature key: ExportOutput} (PREDICT only).
      training_chief_hooks: hooks run on the chief when training.
      training_hooks: hooks run on all workers when training.
      scaffold: a `tf.compat.v1.train.Scaffold` (default: a new one).
      evaluation_hooks: hooks run during evaluation.
      prediction_hooks: hooks run during prediction.

    Returns:
      The spec.

    Raises:
      ValueError / TypeError: with tf.estimator's texts for invalid fields.
    """
    if mode not in ModeKeys.all():
      raise ValueError('mode={} unrecognized.'.format(mode))
    loss = _validate_loss(loss, mode)
    train_op = _validate_train_op(train_op, mode)
    predictions = _validate_predictions(predictions, mode)
    eval_metric_ops = _validate_eval_metric_ops(eval_metric_ops)
    if mode == ModeKeys.PREDICT:
      export_outputs = get_export_outputs(export_outputs, predictions)
    return super(EstimatorSpec, cls).__new__(
        cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
        eval_metric_ops=eval_metric_ops, export_outputs=export_outputs,
        training_chief_hooks=_validate_hooks(training_chief_hooks),
        training_hooks=_validate_hooks(training_hooks),
        scaffold=_validate_scaffold(scaffold),
        evaluation_hooks=_validate_hooks(evaluation_hooks),
        prediction_hooks=_validate_hooks(prediction_hooks))

  def _replace(self, **kwds):
    if 'mode' in kwds and self.mode != kwds['mode']:
      raise ValueError('mode of EstimatorSpec cannot be changed.')
    fields = self._asdict()
    fields.update(kwds)
    return EstimatorSpec(**fields)
