"""Serving receivers, export outputs and signature rules of tfe.export (tf.estimator's)."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import saved_model

tf.compat.v1.disable_eager_execution()

export = tfe.export


@pytest.fixture(autouse=True)
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _ph(dtype=tf.float32, shape=(None, 3), name=None):
  return tf.compat.v1.placeholder(dtype, shape, name=name)


def test_serving_input_receiver_wraps_single_tensors():
  x = _ph()
  receiver = export.ServingInputReceiver(x, x)
  assert receiver.features == {'feature': x}
  assert receiver.receiver_tensors == {'input': x}
  assert receiver.receiver_tensors_alternatives is None
  receiver = export.ServingInputReceiver({1: x}, {'x': x}, {'alt': x})
  assert receiver.features == {1: x}
  assert receiver.receiver_tensors_alternatives == {'alt': {'input': x}}


def test_serving_input_receiver_errors():
  x = _ph()
  with pytest.raises(ValueError, match='features must be defined.'):
    export.ServingInputReceiver(None, x)
  with pytest.raises(ValueError, match='receiver_tensor keys must be strings: 1.'):
    export.ServingInputReceiver(x, {1: x})
  with pytest.raises(ValueError, match='feature must be a Tensor, SparseTensor, or RaggedTensor'):
    export.ServingInputReceiver({'x': np.ones(3)}, x)
  with pytest.raises(ValueError, match='receiver_tensors_alternatives must be a dict'):
    export.ServingInputReceiver(x, x, [x])


def test_tensor_serving_input_receiver_passes_tensor_unwrapped():
  x = _ph()
  receiver = export.TensorServingInputReceiver(x, {'x': x})
  assert receiver.features is x
  with pytest.raises(ValueError, match='features must be defined.'):
    export.TensorServingInputReceiver(None, x)


def test_build_parsing_serving_input_receiver_fn():
  spec = {'x': tf.io.FixedLenFeature([2], tf.float32), 'k': tf.io.VarLenFeature(tf.int64)}
  receiver = export.build_parsing_serving_input_receiver_fn(spec, default_batch_size=4)()
  serialized = receiver.receiver_tensors['examples']
  assert list(receiver.receiver_tensors) == ['examples']
  assert serialized.op.name == 'input_example_tensor' and serialized.dtype == tf.string
  assert serialized.shape.as_list() == [4]
  assert isinstance(receiver.features['k'], tf.SparseTensor)
  example = tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0])),
      'k': tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))}))
  with tf.compat.v1.Session() as sess:
    x = sess.run(receiver.features['x'],
                 {serialized: [example.SerializeToString()] * 4})
  np.testing.assert_allclose(x, [[1.0, 2.0]] * 4)


def test_build_raw_serving_input_receiver_fn():
  features = {'images': tf.zeros([32, 8, 8], name='images'), 'ids': tf.zeros([32], tf.int64)}
  receiver = export.build_raw_serving_input_receiver_fn(features, default_batch_size=None)()
  assert receiver.receiver_tensors['images'].shape.as_list() == [None, 8, 8]
  assert receiver.receiver_tensors['images'].op.type == 'Placeholder'
  assert receiver.receiver_tensors['images'].op.name.startswith('images')
  assert receiver.receiver_tensors['ids'].dtype == tf.int64
  assert receiver.features['images'] is receiver.receiver_tensors['images']


def test_export_output_validation():
  scores, classes = _ph(), _ph(tf.string)
  with pytest.raises(ValueError, match='Classification scores must be a float32 Tensor'):
    export.ClassificationOutput(scores=classes)
  with pytest.raises(ValueError, match='Classification classes must be a string Tensor'):
    export.ClassificationOutput(classes=scores)
  with pytest.raises(ValueError, match='Cannot create a ClassificationOutput with empty'):
    export.ClassificationOutput()
  with pytest.raises(ValueError, match='Regression output value must be a float32 Tensor'):
    export.RegressionOutput(classes)
  with pytest.raises(ValueError, match='Prediction output key must be a string'):
    export.PredictOutput({1: scores})
  with pytest.raises(ValueError, match='Prediction output value must be a Tensor'):
    export.PredictOutput({'a': 1.0})
  assert list(export.PredictOutput(scores).outputs) == ['output']


def test_signature_defs_and_exclusions():
  scores = _ph()
  examples = _ph(tf.string, [None])
  floats = _ph()
  outputs = {'serving_default': export.PredictOutput({'scores': scores}),
             'classify': export.ClassificationOutput(scores=scores),
             'regress': export.RegressionOutput(scores[:, 0])}
  sigs = saved_model.build_all_signature_defs({'examples': examples}, outputs)
  assert sigs['serving_default'].method_name == 'tensorflow/serving/predict'
  assert sigs['classify'].method_name == 'tensorflow/serving/classify'
  assert list(sigs['classify'].inputs) == ['inputs']
  assert sigs['regress'].method_name == 'tensorflow/serving/regress'
  # A float input cannot feed classify/regress: those are excluded, predict kept.
  sigs = saved_model.build_all_signature_defs(
      floats, outputs, receiver_tensors_alternatives={'raw': {'examples': examples}})
  assert set(sigs) == {'serving_default', 'raw:serving_default', 'raw:classify',
                       'raw:regress'}
  assert list(sigs['serving_default'].inputs) == ['input']
  with pytest.raises(ValueError, match='export_outputs must be a dict'):
    saved_model.build_all_signature_defs(floats, [outputs['classify']])


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
