"""What a model exports per serving signature: Predict, Classification, Regression.

A model_fn in PREDICT mode may return `export_outputs={key: ExportOutput}`;
each entry becomes one SignatureDef of the SavedModel written by
`Estimator.export_saved_model`, built against the serving receiver's tensors:

* `PredictOutput(outputs)` -> a 'tensorflow/serving/predict' signature whose
  inputs are all receiver tensors and whose outputs are `outputs` (a tensor
  alone is named 'output');
* `ClassificationOutput(scores=None, classes=None)` -> a 'classify'
  signature; `classes` must be a string tensor, `scores` a float tensor;
* `RegressionOutput(value)` -> a 'regress' signature on a float tensor;
* `EvalOutput(loss, predictions, metrics)` / `TrainOutput(...)` -> the
  'eval' / 'train' signature of an `export_saved_model(...,
  experimental_mode=ModeKeys.EVAL / TRAIN)` export (the Estimator builds
  them from the EstimatorSpec; a model_fn need not).

Classification and regression signatures take exactly one *string* input
(serialized tf.Examples); against any other receiver they cannot be built and
`export_saved_model` leaves them out, logging why (tf.estimator does the same).

Usage:

    export_outputs = {
        'serving_default': tfe.export.PredictOutput({'probabilities': probs}),
        'classify': tfe.export.ClassificationOutput(scores=probs),
    }
"""

import abc

import tensorflow as tf

__all__ = ['ExportOutput', 'PredictOutput', 'ClassificationOutput', 'RegressionOutput',
           'EvalOutput', 'TrainOutput']

_signature_def_utils = tf.compat.v1.saved_model.signature_def_utils


def _is_tensor(value):
  return isinstance(value, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor))


class ExportOutput(abc.ABC):
  """One exported output of a model; `as_signature_def` makes its SignatureDef."""

  @abc.abstractmethod
  def as_signature_def(self, receiver_tensors):
    """Returns a SignatureDef for these outputs fed by `receiver_tensors` (a dict)."""


def _single_string_input(receiver_tensors, kind):
  """The one string tensor of `receiver_tensors`, else ValueError (kind names the output)."""
  if len(receiver_tensors) != 1:
    raise ValueError('{} input must be a single string Tensor; got {}'.format(
        kind, receiver_tensors))
  (examples,) = receiver_tensors.values()
  if not isinstance(examples, tf.Tensor) or examples.dtype != tf.string:
    raise ValueError('{} input must be a single string Tensor; got {}'.format(
        kind, receiver_tensors))
  return examples


class ClassificationOutput(ExportOutput):
  """Classification scores and/or class names for a 'classify' signature."""

  def __init__(self, scores=None, classes=None):
    """Args: scores: float32 Tensor [batch, num_classes]; classes: string Tensor."""
    if scores is not None and not (isinstance(scores, tf.Tensor) and scores.dtype.is_floating):
      raise ValueError('Classification scores must be a float32 Tensor; got {}'.format(scores))
    if classes is not None and not (isinstance(classes, tf.Tensor) and
                                    classes.dtype == tf.string):
      raise ValueError('Classification classes must be a string Tensor; got {}'.format(classes))
    if scores is None and classes is None:
      raise ValueError('Cannot create a ClassificationOutput with empty arguments. At least '
                       'one of `scores` and `classes` must be defined.')
    self._scores = scores
    self._classes = classes

  @property
  def scores(self):
    return self._scores

  @property
  def classes(self):
    return self._classes

  def as_signature_def(self, receiver_tensors):
    examples = _single_string_input(receiver_tensors, 'Classification')
    return _signature_def_utils.classification_signature_def(
        examples, self._classes, self._scores)


class RegressionOutput(ExportOutput):
  """One regressed float value per example for a 'regress' signature."""

  def __init__(self, value):
    """Args: value: float32 Tensor [batch] or [batch, 1]."""
    if not (isinstance(value, tf.Tensor) and value.dtype.is_floating):
      raise ValueError('Regression output value must be a float32 Tensor; got {}'.format(value))
    self._value = value

  @property
  def value(self):
    return self._value

  def as_signature_def(self, receiver_tensors):
    examples = _single_string_input(receiver_tensors, 'Regression')
    return _signature_def_utils.regression_signature_def(examples, self._value)


class PredictOutput(ExportOutput):
  """Arbitrary named output tensors for a 'predict' signature."""

  _SINGLE_OUTPUT_DEFAULT_NAME = 'output'

  def __init__(self, outputs):
    """Args: outputs: a Tensor (named 'output') or dict {str: Tensor}."""
    if not isinstance(outputs, dict):
      outputs = {self._SINGLE_OUTPUT_DEFAULT_NAME: outputs}
    for key, value in outputs.items():
      if not isinstance(key, str):
        raise ValueError('Prediction output key must be a string; got {}.'.format(key))
      if not _is_tensor(value):
        raise ValueError('Prediction output value must be a Tensor; got {}.'.format(value))
    self._outputs = dict(outputs)

  @property
  def outputs(self):
    return self._outputs

  def as_signature_def(self, receiver_tensors):
    return _signature_def_utils.predict_signature_def(receiver_tensors, self._outputs)


class _SupervisedOutput(ExportOutput):
  """Loss, predictions and metrics of a TRAIN or EVAL graph, for a supervised signature.

  The signature's outputs are flat: 'loss' (or 'loss/<key>'), 'predictions'
  (or 'predictions/<key>'), and 'metrics/<name>/value' plus
  'metrics/<name>/update_op' per metric. An update op that is an Operation
  is exported as an empty tensor that runs it (a SignatureDef holds tensors
  only). Tuple keys (a MultiHead's) are joined with '/'.
  """

  LOSS_NAME = 'loss'
  PREDICTIONS_NAME = 'predictions'
  METRICS_NAME = 'metrics'
  METRIC_VALUE_SUFFIX = 'value'
  METRIC_UPDATE_SUFFIX = 'update_op'
  _METHOD_NAME = None

  def __init__(self, loss=None, predictions=None, metrics=None):
    """Args: loss, predictions: a Tensor or dict of Tensors; metrics: dict of (value, update)."""
    self._loss = self._flatten(self.LOSS_NAME, loss)
    self._predictions = self._flatten(self.PREDICTIONS_NAME, predictions)
    self._metrics = {}
    for name, metric in (metrics or {}).items():
      if hasattr(metric, 'result') and hasattr(metric, 'updates'):
        value, update = metric.result(), (metric.updates[0] if metric.updates else None)
      else:
        value, update = metric
      prefix = '{}/{}'.format(self.METRICS_NAME, self._key(name))
      self._metrics[prefix + '/' + self.METRIC_VALUE_SUFFIX] = value
      if update is not None:
        if not isinstance(update, tf.Tensor):
          with tf.control_dependencies([update]):
            update = tf.constant([], name='metric_op_wrapper')
        self._metrics[prefix + '/' + self.METRIC_UPDATE_SUFFIX] = update

  @staticmethod
  def _key(key):
    return '/'.join(str(k) for k in key) if isinstance(key, tuple) else str(key)

  def _flatten(self, prefix, value):
    if value is None:
      return {}
    if not isinstance(value, dict):
      return {prefix: value}
    return {'{}/{}'.format(prefix, self._key(k)): v for k, v in value.items()}

  @property
  def loss(self):
    return self._loss

  @property
  def predictions(self):
    return self._predictions

  @property
  def metrics(self):
    return self._metrics

  @property
  def outputs(self):
    return dict(self._loss, **self._predictions, **self._metrics)

  def as_signature_def(self, receiver_tensors):
    info = tf.compat.v1.saved_model.build_tensor_info
    return tf.compat.v1.saved_model.build_signature_def(
        inputs={k: info(v) for k, v in receiver_tensors.items()},
        outputs={k: info(v) for k, v in self.outputs.items()},
        method_name=self._METHOD_NAME)


class TrainOutput(_SupervisedOutput):
  """The TRAIN graph's loss, predictions and metrics ('tensorflow/supervised/training')."""

  _METHOD_NAME = 'tensorflow/supervised/training'


class EvalOutput(_SupervisedOutput):
  """The EVAL graph's loss, predictions and metrics ('tensorflow/supervised/eval')."""

  _METHOD_NAME = 'tensorflow/supervised/eval'
