"""What a model exports per serving signature: Predict, Classification, Regression.

A model_fn in PREDICT mode may return `export_outputs={key: ExportOutput}`;
each entry becomes one SignatureDef of the SavedModel written by
`Estimator.export_saved_model`, built against the serving receiver's tensors:

* `PredictOutput(outputs)` -> a 'tensorflow/serving/predict' signature whose
  inputs are all receiver tensors and whose outputs are `outputs` (a tensor
  alone is named 'output');
* `ClassificationOutput(scores=None, classes=None)` -> a 'classify'
  signature; `classes` must be a string tensor, `scores` a float tensor;
* `RegressionOutput(value)` -> a 'regress' signature on a float tensor.

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

__all__ = ['ExportOutput', 'PredictOutput', 'ClassificationOutput', 'RegressionOutput']

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
