"""EstimatorSpec validation and ModeKeys: tf.estimator 2.15's rules and error texts."""

import sys

import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator import model_fn as model_fn_lib

tf.compat.v1.disable_eager_execution()

TRAIN, EVAL, PREDICT = tfe.ModeKeys.TRAIN, tfe.ModeKeys.EVAL, tfe.ModeKeys.PREDICT


@pytest.fixture(autouse=True)
def graph():
  with tf.Graph().as_default() as g:
    yield g


def _loss():
  return tf.constant(1.0)


def _train_op():
  return tf.no_op()


def test_mode_keys_values():
  assert (TRAIN, EVAL, PREDICT) == ('train', 'eval', 'infer')


def test_valid_specs_per_mode():
  spec = tfe.EstimatorSpec(TRAIN, loss=_loss(), train_op=_train_op())
  assert spec.mode == TRAIN and spec.predictions == {} and spec.eval_metric_ops == {}
  assert isinstance(spec.scaffold, tf.compat.v1.train.Scaffold)
  assert spec.training_hooks == () and spec.export_outputs is None
  spec = tfe.EstimatorSpec(EVAL, loss=_loss())
  assert spec.train_op is None
  spec = tfe.EstimatorSpec(PREDICT, predictions={'y': tf.constant([1.0])})
  assert spec.loss is None
  assert list(spec.export_outputs) == ['serving_default']
  assert isinstance(spec.export_outputs['serving_default'], tfe.export.PredictOutput)


@pytest.mark.parametrize('mode, kwargs, error, text', [
    (TRAIN, {'loss': 'L'}, ValueError, 'Missing train_op.'),
    (TRAIN, {'train_op': 'T'}, ValueError, 'Missing loss.'),
    (EVAL, {}, ValueError, 'Missing loss.'),
    (PREDICT, {}, ValueError, 'Missing predictions.'),
    ('fit', {'loss': 'L'}, ValueError, 'mode=fit unrecognized.'),
])
def test_missing_fields(mode, kwargs, error, text):
  values = {'L': _loss(), 'T': _train_op()}
  with pytest.raises(error, match='^' + text.replace('.', r'\.')):
    tfe.EstimatorSpec(mode, **{k: values[v] for k, v in kwargs.items()})


def test_loss_must_be_scalar_and_shape_1_is_reshaped():
  with pytest.raises(ValueError, match='Loss must be scalar, given: '):
    tfe.EstimatorSpec(EVAL, loss=tf.constant([1.0, 2.0]))
  spec = tfe.EstimatorSpec(EVAL, loss=tf.constant([3.0]))
  assert spec.loss.shape.rank == 0
  with pytest.raises(TypeError, match='loss must be Tensor'):
    tfe.EstimatorSpec(EVAL, loss=1.0)


def test_train_op_variable_becomes_its_op_and_bad_type_fails():
  var = tf.compat.v1.get_variable('v', [], use_resource=False)
  spec = tfe.EstimatorSpec(TRAIN, loss=_loss(), train_op=var)
  assert isinstance(spec.train_op, tf.Operation)
  with pytest.raises(TypeError, match='train_op must be Operation or Tensor'):
    tfe.EstimatorSpec(TRAIN, loss=_loss(), train_op='step')


def test_tensors_must_come_from_default_graph():
  with tf.Graph().as_default():
    other = tf.constant(1.0)
  with pytest.raises(ValueError, match='loss with "Tensor.*" must be from the default graph'):
    tfe.EstimatorSpec(EVAL, loss=other)
  with pytest.raises(ValueError, match='prediction values with .* must be from the default'):
    tfe.EstimatorSpec(PREDICT, predictions={'y': other})


def test_predictions_type():
  with pytest.raises(TypeError, match=r'predictions\[y\] must be Tensor'):
    tfe.EstimatorSpec(PREDICT, predictions={'y': 1.0})
  with pytest.raises(TypeError, match='predictions must be Tensor or dict of Tensor'):
    tfe.EstimatorSpec(PREDICT, predictions=[1.0])


def test_eval_metric_ops_validation():
  mean = tf.compat.v1.metrics.mean(tf.constant(1.0))
  spec = tfe.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'m': mean})
  assert spec.eval_metric_ops['m'] == mean
  with pytest.raises(TypeError, match='eval_metric_ops must be a dict'):
    tfe.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops=[mean])
  with pytest.raises(TypeError, match=r'Values of eval_metric_ops must be \(metric_value, '
                     r'update_op\) tuples, given: .* for key: m'):
    tfe.EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={'m': mean[0]})


def test_hooks_and_scaffold_types():
  with pytest.raises(TypeError, match='All hooks must be SessionRunHook instances'):
    tfe.EstimatorSpec(EVAL, loss=_loss(), evaluation_hooks=['hook'])
  hook = tf.compat.v1.train.StopAtStepHook(last_step=1)
  spec = tfe.EstimatorSpec(TRAIN, loss=_loss(), train_op=_train_op(), training_hooks=[hook])
  assert spec.training_hooks == (hook,)
  with pytest.raises(TypeError, match='scaffold must be tf.train.Scaffold'):
    tfe.EstimatorSpec(EVAL, loss=_loss(), scaffold='s')


def test_export_outputs_default_signature_rules():
  y = tf.constant([[0.2, 0.8]])
  predict = tfe.export.PredictOutput({'y': y})
  classify = tfe.export.ClassificationOutput(scores=y)
  # One non-default output is also the default.
  spec = tfe.EstimatorSpec(PREDICT, predictions=y, export_outputs={'classify': classify})
  assert spec.export_outputs['serving_default'] is classify
  spec = tfe.EstimatorSpec(PREDICT, predictions=y, export_outputs={
      'serving_default': predict, 'classify': classify})
  assert set(spec.export_outputs) == {'serving_default', 'classify'}
  with pytest.raises(ValueError, match='Multiple export_outputs were provided, but none of '
                     'them is specified as the default'):
    tfe.EstimatorSpec(PREDICT, predictions=y, export_outputs={'a': predict, 'b': classify})
  with pytest.raises(TypeError, match='Values in export_outputs must be ExportOutput'):
    tfe.EstimatorSpec(PREDICT, predictions=y, export_outputs={'a': y})
  # Outside PREDICT export_outputs are not validated (tf.estimator).
  spec = tfe.EstimatorSpec(EVAL, loss=_loss(), export_outputs={'a': 'anything'})
  assert spec.export_outputs == {'a': 'anything'}


def test_replace_keeps_validation_and_mode():
  spec = tfe.EstimatorSpec(EVAL, loss=_loss())
  with pytest.raises(ValueError, match='mode of EstimatorSpec cannot be changed.'):
    spec._replace(mode=TRAIN)
  with pytest.raises(ValueError, match='Missing loss.'):
    spec._replace(loss=None)
  assert model_fn_lib.DEFAULT_SERVING_KEY == 'serving_default'


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
