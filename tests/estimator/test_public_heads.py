"""tf.estimator 2.15's heads and head-based Estimators as `tfe.*` (issue 26, item 7).

The head tests are the examples of tf.estimator 2.15's own docstrings with
`tf.estimator.` replaced by `tfe.` (their numbers included), run in a
graph and a session instead of eagerly. The Estimator tests are the
`DNNEstimator` / `LinearEstimator` / `DNNLinearCombinedEstimator` docstring
calls on a small data set, a `MultiHead`, and a user model_fn calling
`head.create_estimator_spec(..., optimizer=...)`.
"""

import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests import test_util
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

fc = tf.compat.v1.feature_column


def _value(tensor):
  with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.local_variables_initializer())
    return session.run(tensor)


def test_binary_class_head_docstring_loss():
  with tf.Graph().as_default():
    head = tfe.BinaryClassHead()
    logits = np.array(((45,), (-41,),), dtype=np.float32)
    labels = np.array(((1,), (1,),), dtype=np.int32)
    features = {'x': np.array(((42,),), dtype=np.float32)}
    loss = head.loss(labels, logits, features=features)
    assert _value(loss) == pytest.approx(20.5)
    assert head.logits_dimension == 1
    preds = head.predictions(logits)
    assert _value(preds['class_ids']).tolist() == [[1], [0]]


def test_multi_class_head_docstring_loss():
  with tf.Graph().as_default():
    n_classes = 3
    head = tfe.MultiClassHead(n_classes)
    logits = np.array(((10, 0, 0), (0, 10, 0),), dtype=np.float32)
    labels = np.array(((1,), (1,)), dtype=np.int64)
    features = {'x': np.array(((42,),), dtype=np.float32)}
    loss = head.loss(labels, logits, features=features)
    assert _value(loss) == pytest.approx(5.0, abs=1e-3)


def test_multi_label_head_docstring_loss():
  with tf.Graph().as_default():
    n_classes = 2
    head = tfe.MultiLabelHead(n_classes)
    logits = np.array([[-1., 1.], [-1.5, 1.5]], dtype=np.float32)
    labels = np.array([[1, 0], [1, 1]], dtype=np.int64)
    features = {'x': np.array([[41], [42]], dtype=np.int32)}
    loss = head.loss(labels, logits, features=features)
    assert _value(loss) == pytest.approx((1.31326169 + 0.9514133) / 2, abs=1e-4)
    sparse = tf.SparseTensor(indices=[[0, 0], [1, 0], [1, 1]], values=[0, 0, 1],
                             dense_shape=[2, 2])
    assert _value(head.loss(sparse, logits)) == pytest.approx(_value(loss), abs=1e-6)


def test_regression_heads_docstring_losses():
  with tf.Graph().as_default():
    features = {'x': np.array(((42,),), dtype=np.float32)}
    head = tfe.RegressionHead()
    logits = np.array(((45,), (41,),), dtype=np.float32)
    labels = np.array(((43,), (44,),), dtype=np.int32)
    assert _value(head.loss(labels, logits, features=features)) == pytest.approx(6.5)

    head = tfe.PoissonRegressionHead()
    logits = np.array(((0,), (-1,),), dtype=np.float32)
    labels = np.array(((1,), (1,),), dtype=np.int32)
    expected = np.mean(np.exp([0.0, -1.0]) - np.array([0.0, -1.0]))
    assert _value(head.loss(labels, logits, features=features)) == pytest.approx(expected)
    assert _value(head.predictions(logits)['predictions']) == pytest.approx(
        np.exp([[0.0], [-1.0]]))

    head = tfe.LogisticRegressionHead()
    logits = np.array(((4,), (1,),), dtype=np.float32)
    labels = np.array(((1.,), (0.,),), dtype=np.float32)
    expected = np.mean([np.log1p(np.exp(-4.0)), np.log1p(np.exp(1.0))])
    assert _value(head.loss(labels, logits, features=features)) == pytest.approx(expected)


def test_multi_head_docstring_loss_and_predictions():
  with tf.Graph().as_default():
    head1 = tfe.MultiLabelHead(n_classes=2, name='head1')
    head2 = tfe.MultiLabelHead(n_classes=3, name='head2')
    multi_head = tfe.MultiHead([head1, head2])
    logits = {
        'head1': np.array([[-10., 10.], [-15., 10.]], dtype=np.float32),
        'head2': np.array([[20., -20., 20.], [-30., 20., -20.]], dtype=np.float32),
    }
    labels = {
        'head1': np.array([[1, 0], [1, 1]], dtype=np.int64),
        'head2': np.array([[0, 1, 0], [1, 1, 0]], dtype=np.int64),
    }
    features = {'x': np.array(((42,),), dtype=np.float32)}
    loss = multi_head.loss(logits=logits, labels=labels, features=features)
    assert _value(loss) == pytest.approx(23.75, abs=1e-3)
    preds = multi_head.predictions(logits)
    np.testing.assert_allclose(_value(preds[('head1', 'logits')]), logits['head1'])
    assert multi_head.logits_dimension == 5 and multi_head.name == 'head1_head2'


def test_loss_reduction_sum_and_bad_arguments():
  with tf.Graph().as_default():
    head = tfe.RegressionHead(loss_reduction=tf_keras.losses.Reduction.SUM)
    loss = head.loss(np.array([[43.], [44.]]), np.array([[45.], [41.]], dtype=np.float32))
    assert _value(loss) == pytest.approx(13.0)
  with pytest.raises(ValueError, match='Invalid loss_reduction'):
    tfe.BinaryClassHead(loss_reduction=tf_keras.losses.Reduction.NONE)
  with pytest.raises(ValueError, match='n_classes must be > 2'):
    tfe.MultiClassHead(n_classes=2)
  with pytest.raises(ValueError, match=r'thresholds not in \(0, 1\)'):
    tfe.BinaryClassHead(thresholds=[1.5])
  with pytest.raises(NotImplementedError, match='add_metrics'):
    tfe.BinaryClassHead().metrics()


def test_multi_label_head_eval_spec_metric_keys_and_values():
  with tf.Graph().as_default():
    tf.compat.v1.train.create_global_step()
    head = tfe.MultiLabelHead(n_classes=2, weight_column='w', thresholds=[0.5],
                              label_vocabulary=['cat', 'dog'],
                              classes_for_class_based_metrics=[1, 'cat'])
    logits = np.array([[-1., 1.], [-1.5, 1.5]], dtype=np.float32)
    labels = tf.SparseTensor(indices=[[0, 1], [1, 0], [1, 1]], values=['dog', 'cat', 'dog'],
                             dense_shape=[2, 2])
    features = {'w': np.array([[1.0], [2.0]], dtype=np.float32)}
    spec = head.create_estimator_spec(features, tfe.ModeKeys.EVAL, logits, labels=labels)
    assert set(spec.eval_metric_ops) == {
        'average_loss', 'auc', 'auc_precision_recall', 'accuracy/positive_threshold_0.5',
        'precision/positive_threshold_0.5', 'recall/positive_threshold_0.5',
        'probability_mean/class1', 'auc/class1', 'auc_precision_recall/class1',
        'probability_mean/cat', 'auc/cat', 'auc_precision_recall/cat'}
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.local_variables_initializer())
      session.run([update for _, update in spec.eval_metric_ops.values()])
      values = session.run({k: v for k, (v, _) in spec.eval_metric_ops.items()})
    # Predicted positives (p > 0.5) are class 1 in both examples; labels are
    # [[0, 1], [1, 1]]: entries weighted 1, 1, 2, 2, the third wrong -> 4 / 6.
    assert values['accuracy/positive_threshold_0.5'] == pytest.approx(4.0 / 6.0)
    assert values['probability_mean/class1'] == pytest.approx(
        (1 / (1 + np.exp(-1.0)) + 2 / (1 + np.exp(-1.5))) / 3, rel=1e-5)
    # Sigmoid cross entropy averaged over the two classes, then weighted 1 and 2.
    per_example = [np.log1p(np.exp(-1.0)),
                   np.mean([np.log1p(np.exp(1.5)), np.log1p(np.exp(-1.5))])]
    assert values['average_loss'] == pytest.approx(
        np.average(per_example, weights=[1, 2]), rel=1e-5)


def _config():
  return tfe.RunConfig(tf_random_seed=1, session_config=test_util.session_config(num_cpus=1))


def _multi_label_data(n=64):
  rng = np.random.RandomState(0)
  x = rng.uniform(-1, 1, size=[n, 2]).astype(np.float32)
  labels = np.stack([x[:, 0] > 0, x[:, 1] > 0, x.sum(axis=1) > 0], axis=1).astype(np.int64)
  return {'x': x}, labels


def _input_fn(labels_fn=lambda labels: labels, repeat=True):
  def input_fn():
    features, labels = _multi_label_data()
    ds = tf.data.Dataset.from_tensor_slices((features, labels_fn(labels)))
    return (ds.repeat() if repeat else ds).batch(16)
  return input_fn


def test_dnn_linear_combined_estimator_docstring_with_multi_label_head(tmp_path):
  x = fc.numeric_column('x', shape=[2])
  estimator = tfe.DNNLinearCombinedEstimator(
      head=tfe.MultiLabelHead(n_classes=3),
      # wide settings
      linear_feature_columns=[x],
      linear_optimizer=tf_keras.optimizers.Ftrl(learning_rate=0.1),
      # deep settings
      dnn_feature_columns=[x],
      dnn_hidden_units=[16, 8],
      dnn_optimizer=tf_keras.optimizers.Adagrad(learning_rate=0.1),
      model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn(), steps=40)
  metrics = estimator.evaluate(_input_fn(repeat=False))
  assert {'auc', 'auc_precision_recall', 'average_loss', 'loss', 'global_step'} <= set(metrics)
  assert metrics['auc'] > 0.8
  prediction = next(estimator.predict(_input_fn(repeat=False)))
  assert prediction['probabilities'].shape == (3,)


def test_linear_estimator_with_thresholds_and_weights(tmp_path):
  estimator = tfe.LinearEstimator(
      head=tfe.BinaryClassHead(thresholds=[0.3, 0.7], name='pos'),
      feature_columns=[fc.numeric_column('x', shape=[2])], model_dir=str(tmp_path),
      config=_config())
  binary = _input_fn(lambda labels: labels[:, :1])
  estimator.train(binary, steps=30)
  metrics = estimator.evaluate(_input_fn(lambda labels: labels[:, :1], repeat=False))
  assert {'accuracy/pos', 'auc/pos', 'accuracy/positive_threshold_0.3/pos',
          'recall/positive_threshold_0.7/pos'} <= set(metrics)
  assert metrics['accuracy/pos'] > 0.8


def test_dnn_estimator_with_a_multi_head(tmp_path):
  head = tfe.MultiHead([tfe.MultiLabelHead(n_classes=2, name='first_two'),
                        tfe.RegressionHead(name='total')], head_weights=[1.0, 0.5])
  estimator = tfe.DNNEstimator(head=head, hidden_units=[8],
                               feature_columns=[fc.numeric_column('x', shape=[2])],
                               model_dir=str(tmp_path), config=_config())
  split = (lambda labels: {'first_two': labels[:, :2],
                           'total': labels.sum(axis=1, keepdims=True).astype(np.float32)})
  estimator.train(_input_fn(split), steps=20)
  metrics = estimator.evaluate(_input_fn(split, repeat=False))
  assert {'auc/first_two', 'average_loss/total', 'loss/first_two', 'loss/total',
          'loss'} <= set(metrics)
  prediction = next(estimator.predict(_input_fn(split, repeat=False)))
  assert set(prediction) >= {('first_two', 'probabilities'), ('total', 'predictions')}
  export_dir = estimator.export_saved_model(
      str(tmp_path / 'export'), tfe.export.build_parsing_serving_input_receiver_fn(
          {'x': tf.io.FixedLenFeature([2], tf.float32)}))
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ['serve'], export_dir)
    assert {'serving_default', 'first_two', 'total', 'predict'} <= set(meta_graph.signature_def)


def test_user_model_fn_with_a_named_head_and_a_keras_optimizer(tmp_path):
  head = tfe.MultiClassHead(n_classes=3, name='kind')

  def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features['x'], head.logits_dimension)
    return head.create_estimator_spec(
        features=features, mode=mode, logits=logits, labels=labels,
        optimizer=tf_keras.optimizers.Adagrad(learning_rate=0.5),
        trainable_variables=tf.compat.v1.trainable_variables())

  three = _input_fn(lambda labels: labels[:, :2].sum(axis=1, keepdims=True))
  estimator = tfe.Estimator(model_fn, model_dir=str(tmp_path), config=_config())
  estimator.train(three, steps=30)
  metrics = estimator.evaluate(_input_fn(lambda labels: labels[:, :2].sum(
      axis=1, keepdims=True), repeat=False))
  assert metrics['global_step'] == 30
  assert metrics['accuracy/kind'] > 0.7 and 'average_loss/kind' in metrics


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
