"""The canned heads (estimator/canned/head.py) and optimizers.py, used as a model_fn
author would: losses with weights and every reduction, eval metric keys and values,
predictions and export signatures, label_vocabulary, and the errors naming bad arguments."""

import math
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainer import estimator as tfe
from estimator.canned import head as head_lib
from estimator.canned import optimizers

tf.compat.v1.disable_eager_execution()

Reduction = tf.compat.v1.losses.Reduction
TRAIN, EVAL, PREDICT = tfe.ModeKeys.TRAIN, tfe.ModeKeys.EVAL, tfe.ModeKeys.PREDICT

BINARY_METRICS = ['accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall',
                  'average_loss', 'label/mean', 'precision', 'prediction/mean', 'recall']
CLASSIFIER_KEYS = ['all_class_ids', 'all_classes', 'class_ids', 'classes', 'logits',
                   'probabilities']


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def _spec(head, mode, logits, labels=None, features=None, regularization_losses=None):
  """(spec, session values) of the head's spec for constant logits/labels in a new graph.

  Returns the loss, the predictions, the metric values after one update (EVAL) and the
  variable `v` after one SGD step on `loss * v` (TRAIN).
  """
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.create_global_step()
    var = tf.compat.v1.get_variable('v', initializer=1.0)
    logits = tf.constant(logits, tf.float32) * var
    features = {k: tf.constant(v) for k, v in (features or {}).items()}

    def train_op_fn(loss):
      opt = optimizers.for_clones(optimizers.get_optimizer_instance('SGD', 0.1))
      return opt.minimize(loss, global_step=global_step)

    spec = head.create_estimator_spec(
        features, mode, logits, labels=None if labels is None else tf.constant(labels),
        train_op_fn=train_op_fn,
        regularization_losses=[tf.constant(r) for r in regularization_losses or []])
    with tf.compat.v1.Session() as session:
      session.run([tf.compat.v1.global_variables_initializer(),
                   tf.compat.v1.local_variables_initializer()])
      out = {'predictions': session.run(spec.predictions)}
      if mode == EVAL:
        session.run([update for _, update in spec.eval_metric_ops.values()])
        out['metrics'] = session.run({k: v for k, (v, _) in spec.eval_metric_ops.items()})
      if mode in (TRAIN, EVAL):
        out['loss'] = session.run(spec.loss)
      if mode == TRAIN:
        session.run(spec.train_op)
        out['v'], out['step'] = session.run([var, global_step])
    return spec, out


def test_binary_loss_weights_and_every_reduction():
  logits, labels, weights = [[1.0], [-2.0], [0.5]], [[1], [1], [0]], [[1.0], [3.0], [0.0]]
  per_example = np.array([math.log1p(math.exp(-1.0)), math.log1p(math.exp(2.0)),
                          math.log1p(math.exp(0.5))])
  weighted = per_example * np.array([1.0, 3.0, 0.0])
  expected = {Reduction.SUM: weighted.sum(),
              Reduction.SUM_OVER_BATCH_SIZE: weighted.sum() / 3,  # examples
              Reduction.MEAN: weighted.sum() / 4,  # sum of weights
              Reduction.SUM_BY_NONZERO_WEIGHTS: weighted.sum() / 2}
  for reduction, value in expected.items():
    head = head_lib.classification_head(2, weight_column='w', loss_reduction=reduction)
    _, out = _spec(head, TRAIN, logits, labels, {'w': weights})
    assert out['loss'] == pytest.approx(value, rel=1e-5), reduction
  # Rank-1 labels and weights work the same; the default reduction is SUM_OVER_BATCH_SIZE.
  head = head_lib.classification_head(2, weight_column=tf.compat.v1.feature_column.numeric_column(
      'w', normalizer_fn=lambda w: 2.0 * w))
  _, out = _spec(head, TRAIN, logits, [1, 1, 0], {'w': [1.0, 3.0, 0.0]})
  assert out['loss'] == pytest.approx(2 * weighted.sum() / 3, rel=1e-5)
  assert out['step'] == 1 and out['v'] != 1.0  # train_op_fn ran one step.


def test_binary_eval_metrics_predictions_and_signatures():
  head = head_lib.classification_head(2)
  logits, labels = [[2.0], [-1.0], [0.5], [-3.0]], [[1], [1], [0], [0]]
  _, out = _spec(head, EVAL, logits, labels)
  metrics = out['metrics']
  assert sorted(metrics) == BINARY_METRICS
  p = _sigmoid(np.array(logits)[:, 0])
  losses = -np.log(np.where(np.array(labels)[:, 0] == 1, p, 1 - p))
  assert metrics['average_loss'] == pytest.approx(losses.mean(), rel=1e-5)
  assert out['loss'] == pytest.approx(losses.mean(), rel=1e-5)
  assert metrics['accuracy'] == pytest.approx(0.5)  # predicted 1, 0, 1, 0
  assert metrics['precision'] == pytest.approx(0.5) and metrics['recall'] == pytest.approx(0.5)
  assert metrics['label/mean'] == pytest.approx(0.5)
  assert metrics['accuracy_baseline'] == pytest.approx(0.5)
  assert metrics['prediction/mean'] == pytest.approx(p.mean(), rel=1e-5)
  assert metrics['auc'] == pytest.approx(0.75, abs=0.01)

  spec, out = _spec(head, PREDICT, logits)
  predictions = out['predictions']
  assert sorted(predictions) == sorted(CLASSIFIER_KEYS + ['logistic'])
  np.testing.assert_allclose(predictions['logistic'][:, 0], p, rtol=1e-5)
  np.testing.assert_allclose(predictions['probabilities'], np.stack([1 - p, p], 1), rtol=1e-5)
  assert predictions['class_ids'].tolist() == [[1], [0], [1], [0]]
  assert predictions['classes'].tolist() == [[b'1'], [b'0'], [b'1'], [b'0']]
  assert predictions['all_class_ids'].tolist() == [[0, 1]] * 4
  assert predictions['all_classes'].tolist() == [[b'0', b'1']] * 4
  outputs = spec.export_outputs
  assert sorted(outputs) == ['classification', 'predict', 'regression', 'serving_default']
  assert isinstance(outputs['serving_default'], tfe.export.ClassificationOutput)
  assert outputs['serving_default'] is outputs['classification']
  assert isinstance(outputs['regression'], tfe.export.RegressionOutput)
  assert isinstance(outputs['predict'], tfe.export.PredictOutput)


def test_binary_weighted_metrics_and_regularization():
  head = head_lib.classification_head(2, weight_column='w')
  logits, labels, weights = [[2.0], [-1.0], [0.5]], [[1], [1], [0]], [[3.0], [1.0], [0.0]]
  reg = [0.25, 0.5]
  _, out = _spec(head, EVAL, logits, labels, {'w': weights}, regularization_losses=reg)
  metrics = out['metrics']
  assert sorted(metrics) == sorted(BINARY_METRICS + ['regularization_loss'])
  assert metrics['regularization_loss'] == pytest.approx(0.75)
  assert metrics['accuracy'] == pytest.approx(0.75)  # right on the weight-3 example only.
  assert metrics['label/mean'] == pytest.approx(1.0)  # the weight-0 example has label 0.
  per_example = np.array([math.log1p(math.exp(-2.0)), math.log1p(math.exp(1.0))])
  assert metrics['average_loss'] == pytest.approx((3 * per_example[0] + per_example[1]) / 4,
                                                  rel=1e-5)
  assert out['loss'] == pytest.approx((3 * per_example[0] + per_example[1]) / 3 + 0.75,
                                      rel=1e-5)


def test_multi_class_with_label_vocabulary():
  head = head_lib.classification_head(3, label_vocabulary=['cat', 'dog', 'eel'])
  assert head.logits_dimension == 3
  logits = [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
  labels = [['dog'], ['eel'], ['eel']]
  _, out = _spec(head, EVAL, logits, labels)
  assert sorted(out['metrics']) == ['accuracy', 'average_loss']
  assert out['metrics']['accuracy'] == pytest.approx(2 / 3)
  log_softmax = np.array(logits) - np.log(np.exp(logits).sum(1, keepdims=True))
  expected = -np.mean([log_softmax[0, 1], log_softmax[1, 2], log_softmax[2, 2]])
  assert out['loss'] == pytest.approx(expected, rel=1e-5)
  assert out['metrics']['average_loss'] == pytest.approx(expected, rel=1e-5)

  spec, out = _spec(head, PREDICT, logits)
  predictions = out['predictions']
  assert sorted(predictions) == CLASSIFIER_KEYS
  assert predictions['class_ids'].tolist() == [[1], [0], [2]]
  assert predictions['classes'].tolist() == [[b'dog'], [b'cat'], [b'eel']]
  assert predictions['all_classes'].tolist() == [[b'cat', b'dog', b'eel']] * 3
  np.testing.assert_allclose(predictions['probabilities'].sum(1), 1.0, rtol=1e-6)
  assert sorted(spec.export_outputs) == ['classification', 'predict', 'serving_default']


def test_multi_class_ids_sum_reduction_and_train():
  head = head_lib.classification_head(4, loss_reduction=Reduction.SUM)
  logits = [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
  _, out = _spec(head, TRAIN, logits, np.array([3, 0], np.int64))
  assert out['loss'] == pytest.approx(2 * math.log(4), rel=1e-5)
  assert out['step'] == 1


def test_regression_loss_metrics_predictions_and_signatures():
  head = head_lib.regression_head(label_dimension=2, weight_column='w')
  assert head.logits_dimension == 2
  logits, labels, weights = [[1.0, 2.0], [3.0, 5.0]], [[1.0, 1.0], [2.0, 2.0]], [1.0, 3.0]
  _, out = _spec(head, EVAL, logits, labels, {'w': weights})
  metrics = out['metrics']
  assert sorted(metrics) == ['average_loss', 'label/mean', 'prediction/mean']
  squared = np.array([[0.0, 1.0], [1.0, 9.0]])
  weighted = squared * np.array([[1.0], [3.0]])
  assert out['loss'] == pytest.approx(weighted.sum() / 4, rel=1e-5)
  assert metrics['average_loss'] == pytest.approx(weighted.sum() / 8, rel=1e-5)
  assert metrics['label/mean'] == pytest.approx((1 + 1 + 6 + 6) / 8, rel=1e-5)
  assert metrics['prediction/mean'] == pytest.approx((1 + 2 + 9 + 15) / 8, rel=1e-5)
  spec, out = _spec(head_lib.regression_head(), PREDICT, [[1.5], [-2.0]])
  assert sorted(out['predictions']) == ['predictions']
  np.testing.assert_allclose(out['predictions']['predictions'], [[1.5], [-2.0]])
  assert sorted(spec.export_outputs) == ['predict', 'regression', 'serving_default']
  assert isinstance(spec.export_outputs['serving_default'], tfe.export.RegressionOutput)
  # Integer labels are regressed as floats.
  _, out = _spec(head_lib.regression_head(), TRAIN, [[1.0], [2.0]], [3, 2])
  assert out['loss'] == pytest.approx((4 + 0) / 2)


def test_labels_outside_the_vocabulary_or_range_fail_naming_them():
  head = head_lib.classification_head(3, label_vocabulary=['cat', 'dog', 'eel'])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'label_vocabulary \[cat, dog, eel\]; unknown labels:.*cow'):
    _spec(head, EVAL, [[0.0, 0.0, 0.0]] * 2, [['cat'], ['cow']])
  with pytest.raises(ValueError, match='Labels dtype should be string if there is a vocabulary'):
    _spec(head, EVAL, [[0.0, 0.0, 0.0]], [[1]])
  binary = head_lib.classification_head(2, label_vocabulary=['no', 'yes'])
  with pytest.raises(tf.errors.InvalidArgumentError, match='unknown labels:.*maybe'):
    _spec(binary, TRAIN, [[0.0]], [['maybe']])
  _, out = _spec(binary, EVAL, [[3.0], [-3.0]], [['yes'], ['no']])
  assert out['metrics']['accuracy'] == 1.0
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'\[0, n_classes - 1\] with n_classes=3.*\[3\]'):
    _spec(head_lib.classification_head(3), EVAL, [[0.0, 0.0, 0.0]] * 2, [[1], [3]])
  with pytest.raises(tf.errors.InvalidArgumentError, match='n_classes=2'):
    _spec(head_lib.classification_head(2), EVAL, [[0.0]], [[2]])
  with pytest.raises(ValueError, match='Labels dtype should be integer'):
    _spec(head_lib.classification_head(3), EVAL, [[0.0, 0.0, 0.0]], [[1.0]])


def test_bad_arguments_and_inputs_are_named():
  with pytest.raises(ValueError, match='n_classes must be > 1'):
    head_lib.classification_head(1)
  with pytest.raises(ValueError, match='label_vocabulary should be a list or a tuple'):
    head_lib.classification_head(2, label_vocabulary='ab')
  with pytest.raises(ValueError, match='label_vocabulary must have n_classes=3 entries'):
    head_lib.classification_head(3, label_vocabulary=['a', 'b'])
  with pytest.raises(ValueError, match='label_vocabulary must hold strings'):
    head_lib.classification_head(2, label_vocabulary=[0, 1])
  with pytest.raises(ValueError, match='Invalid loss_reduction: none'):
    head_lib.classification_head(2, loss_reduction=Reduction.NONE)
  with pytest.raises(ValueError, match='Invalid loss_reduction: bogus'):
    head_lib.regression_head(loss_reduction='bogus')
  with pytest.raises(ValueError, match='Invalid label_dimension 0'):
    head_lib.regression_head(0)
  with pytest.raises(TypeError, match='weight_column must be a feature name'):
    head_lib.regression_head(weight_column=3)
  head = head_lib.regression_head(2)
  with pytest.raises(ValueError, match='Expected labels dimension=2'):
    _spec(head, EVAL, [[0.0, 0.0]], [[1.0, 2.0, 3.0]])
  with pytest.raises(ValueError, match=r'logits shape must be \[batch_size, 2\]'):
    _spec(head, EVAL, [[0.0, 0.0, 0.0]], [[1.0, 2.0]])
  with pytest.raises(ValueError, match='You must provide a labels Tensor'):
    _spec(head, TRAIN, [[0.0, 0.0]])
  with pytest.raises(KeyError, match="weight_column 'w' is not among the features"):
    _spec(head_lib.regression_head(weight_column='w'), EVAL, [[0.0]], [[1.0]], {'x': [1.0]})
  with pytest.raises(ValueError, match='train_op_fn cannot be None'):
    with tf.Graph().as_default():
      head.create_estimator_spec({}, TRAIN, tf.zeros([1, 2]), labels=tf.zeros([1, 2]))


def test_optimizer_by_name_instance_and_callable():
  with tf.Graph().as_default():
    names = {'Adagrad': tf.compat.v1.train.AdagradOptimizer,
             'Adam': tf.compat.v1.train.AdamOptimizer,
             'Ftrl': tf.compat.v1.train.FtrlOptimizer,
             'RMSProp': tf.compat.v1.train.RMSPropOptimizer,
             'SGD': tf.compat.v1.train.GradientDescentOptimizer}
    for name, cls in names.items():
      opt = optimizers.get_optimizer_instance(name, learning_rate=0.05)
      rate = getattr(opt, '_learning_rate', getattr(opt, '_lr', None))  # Adam calls it _lr.
      assert type(opt) is cls and rate == 0.05, name
    adam = tf.compat.v1.train.AdamOptimizer(0.01)
    assert optimizers.get_optimizer_instance(adam, learning_rate=0.5) is adam
    assert optimizers.get_optimizer_instance(lambda: adam) is adam
    wrapped = optimizers.for_clones(adam)
    assert isinstance(wrapped, tfe.TowerOptimizer) and optimizers.for_clones(wrapped) is wrapped
    with pytest.raises(ValueError, match=r"Unsupported optimizer name: Sgd\. Supported names "
                       r"are: \('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'\)"):
      optimizers.get_optimizer_instance('Sgd', learning_rate=0.1)
    with pytest.raises(ValueError, match='learning_rate must be specified when opt is string'):
      optimizers.get_optimizer_instance('Adam')
    with pytest.raises(ValueError, match='The given object is not an Optimizer instance'):
      optimizers.get_optimizer_instance(lambda: 'Adam')
    # A Keras optimizer becomes its tf.compat.v1.train twin (issue 26, item 9).
    assert isinstance(optimizers.get_optimizer_instance(tf.keras.optimizers.SGD()),
                      tf.compat.v1.train.GradientDescentOptimizer)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
