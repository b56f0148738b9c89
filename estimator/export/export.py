"""Serving input receivers: how a SavedModel's inputs become model features.

`Estimator.export_saved_model(dir, serving_input_receiver_fn)` calls the
receiver fn in a fresh graph. It returns a `ServingInputReceiver` holding the
placeholders the server feeds (`receiver_tensors`) and the `features` the
model_fn sees (often parsed or decoded from the placeholders):

    def serving_input_receiver_fn():
      images = tf.compat.v1.placeholder(tf.float32, [None, 28, 28], name='images')
      return tfe.export.ServingInputReceiver({'x': images}, {'images': images})

Or ready-made:

    fn = tfe.export.build_raw_serving_input_receiver_fn(
        {'x': tf.compat.v1.placeholder(tf.float32, [None, 28, 28])})
    fn = tfe.export.build_parsing_serving_input_receiver_fn(
        {'x': tf.io.FixedLenFeature([784], tf.float32)})   # input 'examples'

A single tensor given as `features` becomes `{'feature': t}` and a single
receiver tensor `{'input': t}`; `TensorServingInputReceiver` passes its one
feature tensor to the model_fn unwrapped. Names, defaults and error texts are
tf.estimator 2.15's.
"""

import collections

import tensorflow as tf

__all__ = ['ServingInputReceiver', 'TensorServingInputReceiver',
           'SupervisedInputReceiver', 'UnsupervisedInputReceiver',
           'build_raw_serving_input_receiver_fn', 'build_parsing_serving_input_receiver_fn',
           'build_raw_supervised_input_receiver_fn']

SINGLE_FEATURE_DEFAULT_NAME = 'feature'
SINGLE_RECEIVER_DEFAULT_NAME = 'input'
SINGLE_LABEL_DEFAULT_NAME = 'label'

_TENSOR_TYPES = (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)


def _wrap_and_check(tensors, field_name, default_name, keys_must_be_str):
  """Wraps a lone tensor as {default_name: t}; checks keys and values.

  Args:
    tensors: a tensor or a dict of tensors.
    field_name: 'features', 'receiver_tensors' or 'labels' (for messages).
    default_name: key given to a lone tensor.
    keys_must_be_str: False allows int keys too (features and labels).

  Returns:
    A dict of tensors.
  """
  if tensors is None:
    raise ValueError('{}s must be defined.'.format(field_name))
  if not isinstance(tensors, dict):
    tensors = {default_name: tensors}
  key_types = (str,) if keys_must_be_str else (str, int)
  for name, tensor in tensors.items():
    if not isinstance(name, key_types):
      raise ValueError('{} keys must be strings{}: {}.'.format(
          field_name, '' if keys_must_be_str else ' or ints', name))
    if not isinstance(tensor, _TENSOR_TYPES):
      raise ValueError('{} must be a Tensor, SparseTensor, or RaggedTensor: {}.'.format(
          field_name, tensor))
  return tensors


def _check_alternatives(alternatives):
  """Validates receiver_tensors_alternatives: {name: tensor or dict}."""
  if alternatives is None:
    return None
  if not isinstance(alternatives, dict):
    raise ValueError('receiver_tensors_alternatives must be a dict: {}.'.format(alternatives))
  return {name: _wrap_and_check(tensors, 'receiver_tensors_alternatives',
                                SINGLE_RECEIVER_DEFAULT_NAME, True)
          for name, tensors in alternatives.items()}


class ServingInputReceiver(collections.namedtuple(
    'ServingInputReceiver', ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """Features for the model_fn plus the tensors a serving request feeds."""

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    """Args: features: tensor or dict; receiver_tensors: tensor or dict; alternatives: dict."""
    features = _wrap_and_check(features, 'feature', SINGLE_FEATURE_DEFAULT_NAME, False)
    receiver_tensors = _wrap_and_check(receiver_tensors, 'receiver_tensor',
                                       SINGLE_RECEIVER_DEFAULT_NAME, True)
    return super(ServingInputReceiver, cls).__new__(
        cls, features=features, receiver_tensors=receiver_tensors,
        receiver_tensors_alternatives=_check_alternatives(receiver_tensors_alternatives))


class TensorServingInputReceiver(collections.namedtuple(
    'TensorServingInputReceiver',
    ['features', 'receiver_tensors', 'receiver_tensors_alternatives'])):
  """Like ServingInputReceiver, but the model_fn gets one feature tensor, unwrapped."""

  def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
    """Args: features: one tensor; receiver_tensors: tensor or dict; alternatives: dict."""
    if features is None:
      raise ValueError('features must be defined.')
    receiver = ServingInputReceiver(features, receiver_tensors,
                                    receiver_tensors_alternatives)
    return super(TensorServingInputReceiver, cls).__new__(
        cls, features=receiver.features[SINGLE_FEATURE_DEFAULT_NAME],
        receiver_tensors=receiver.receiver_tensors,
        receiver_tensors_alternatives=receiver.receiver_tensors_alternatives)


class SupervisedInputReceiver(collections.namedtuple(
    'SupervisedInputReceiver', ['features', 'labels', 'receiver_tensors'])):
  """Features and labels (for TRAIN/EVAL exports) plus the fed tensors.

  Features and labels reach the model_fn as given (a lone tensor stays a
  tensor, as in tf.estimator); they are only checked.
  """

  def __new__(cls, features, labels, receiver_tensors):
    _wrap_and_check(features, 'feature', SINGLE_FEATURE_DEFAULT_NAME, False)
    _wrap_and_check(labels, 'label', SINGLE_LABEL_DEFAULT_NAME, False)
    receiver_tensors = _wrap_and_check(receiver_tensors, 'receiver_tensor',
                                       SINGLE_RECEIVER_DEFAULT_NAME, True)
    return super(SupervisedInputReceiver, cls).__new__(
        cls, features=features, labels=labels, receiver_tensors=receiver_tensors)


UnsupervisedInputReceiver = ServingInputReceiver


def build_parsing_serving_input_receiver_fn(feature_spec, default_batch_size=None):
  """A receiver fn parsing serialized tf.Examples fed as input 'examples'.

  Args:
    feature_spec: dict {name: FixedLenFeature / VarLenFeature / ...}.
    default_batch_size: batch size of the placeholder (None: any).

  Returns:
    A serving_input_receiver_fn.
  """
  def serving_input_receiver_fn():
    serialized = tf.compat.v1.placeholder(
        dtype=tf.string, shape=[default_batch_size], name='input_example_tensor')
    features = tf.compat.v1.io.parse_example(serialized, feature_spec)
    return ServingInputReceiver(features, {'examples': serialized})
  return serving_input_receiver_fn


def _placeholder_like(tensor, default_batch_size):
  """A placeholder with the dtype and (batch-replaced) shape of `tensor`."""
  shape = tensor.shape
  if shape.rank is not None and shape.rank > 0:
    shape = [default_batch_size] + shape.as_list()[1:]
  name = tensor.op.name if hasattr(tensor, 'op') else None
  return tf.compat.v1.placeholder(dtype=tensor.dtype, shape=shape, name=name)


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
  """A receiver fn feeding one placeholder per feature, named like the feature.

  Args:
    features: a tensor or dict {name: tensor} giving dtypes and shapes
      (the first dimension is replaced by `default_batch_size`).
    default_batch_size: batch size of the placeholders (None: any).

  Returns:
    A serving_input_receiver_fn.
  """
  def serving_input_receiver_fn():
    if isinstance(features, dict):
      receivers = {name: _placeholder_like(t, default_batch_size)
                   for name, t in features.items()}
      return ServingInputReceiver(receivers.copy(), receivers)
    receiver = _placeholder_like(features, default_batch_size)
    return TensorServingInputReceiver(receiver, receiver)
  return serving_input_receiver_fn


def build_raw_supervised_input_receiver_fn(features, labels, default_batch_size=None):
  """A receiver fn for TRAIN / EVAL exports: one placeholder per feature and per label.

  Args:
    features: a tensor or dict {name: tensor} giving dtypes and shapes.
    labels: a tensor or dict {name: tensor} likewise.
    default_batch_size: batch size of the placeholders (None: any).

  Returns:
    A fn returning a `SupervisedInputReceiver` whose receiver tensors are the
    feature and label placeholders together (a lone feature is fed as
    'input', a lone label as 'label').

  Raises:
    ValueError: when a feature and a label share a name.
  """
  feature_keys = set(features) if isinstance(features, dict) else {SINGLE_RECEIVER_DEFAULT_NAME}
  label_keys = set(labels) if isinstance(labels, dict) else {SINGLE_LABEL_DEFAULT_NAME}
  overlap = feature_keys & label_keys
  if overlap:
    raise ValueError('Features and labels must have distinct keys. Found overlapping keys: '
                     '{}'.format(sorted(overlap)))

  def placeholders(tensors, single_name):
    if isinstance(tensors, dict):
      made = {name: _placeholder_like(t, default_batch_size) for name, t in tensors.items()}
      return made, made
    made = _placeholder_like(tensors, default_batch_size)
    return made, {single_name: made}

  def supervised_input_receiver_fn():
    feature_tensors, feature_receivers = placeholders(features, SINGLE_RECEIVER_DEFAULT_NAME)
    label_tensors, label_receivers = placeholders(labels, SINGLE_LABEL_DEFAULT_NAME)
    return SupervisedInputReceiver(feature_tensors, label_tensors,
                                   dict(feature_receivers, **label_receivers))
  return supervised_input_receiver_fn
