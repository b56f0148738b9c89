"""Canned Estimators given Keras optimizers and shared embedding columns (issue 26, item 9).

The calls are tf.estimator 2.15's own docstring examples with
`tf.estimator.` replaced by `tfe.` and `tf.keras` by `tf_keras` (Keras 2,
which graph-mode programs use; Keras 3's optimizers cannot even be built
once eager execution is off): `optimizer=tf_keras.optimizers.Ftrl(
learning_rate=0.1, l1_regularization_strength=0.001)`,
`optimizer=lambda: tf_keras.optimizers.Adam(learning_rate=
tf.compat.v1.train.exponential_decay(...))`, wide-and-deep with Keras
optimizers for both parts, and DNN models over `shared_embedding_columns`
(v1) and `tf.feature_column.shared_embeddings` (v2).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests import test_util
from trainer import estimator as tfe
from estimator.canned import optimizers

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

fc = tf.compat.v1.feature_column
COLORS = ['red', 'green', 'blue']


def _data(n=64):
  rng = np.random.RandomState(0)
  a = rng.choice(COLORS, n)
  b = rng.choice(COLORS, n)
  labels = ((a == 'red') | (b == 'blue')).astype(np.int64).reshape([-1, 1])
  return {'a': a.reshape([-1, 1]), 'b': b.reshape([-1, 1]),
          'x': rng.uniform(size=[n, 1]).astype(np.float32)}, labels


def _input_fn():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(16)


def _eval_input_fn():
  features, labels = _data()
  return tf.data.Dataset.from_tensor_slices((features, labels)).batch(64)


def _config():
  return tfe.RunConfig(tf_random_seed=1, session_config=test_util.session_config(num_cpus=1))


def _columns():
  a = fc.categorical_column_with_vocabulary_list('a', COLORS)
  b = fc.categorical_column_with_vocabulary_list('b', COLORS)
  return a, b


def test_linear_classifier_with_keras_ftrl_as_in_the_docstring(tmp_path):
  a, b = _columns()
  estimator = tfe.LinearClassifier(
      feature_columns=[a, fc.crossed_column([a, b], 20)],
      optimizer=tf_keras.optimizers.Ftrl(
          learning_rate=0.1,
          l1_regularization_strength=0.001
      ), model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn, steps=30)
  metrics = estimator.evaluate(_eval_input_fn)
  assert metrics['global_step'] == 30 and metrics['accuracy'] > 0.7
  # FTRL's accumulators exist: the v1 FtrlOptimizer ran, with Keras' settings.
  assert any(name.endswith('/Ftrl') for name in estimator.get_variable_names())


_EAGER_PROGRAM = '''
import numpy as np
import tensorflow as tf
from trainer import estimator as tfe

a = tf.feature_column.categorical_column_with_vocabulary_list('a', ['x', 'y'])
estimator = tfe.LinearClassifier(
    feature_columns=[a],
    optimizer=tf.keras.optimizers.Ftrl(
      learning_rate=0.1,
      l1_regularization_strength=0.001
    ), model_dir=%r)
features = {'a': np.array([['x'], ['y']] * 8)}
labels = np.array([[1], [0]] * 8)
estimator.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(4),
                steps=5)
print('global_step', estimator.get_variable_value('global_step'))
'''


def test_keras3_optimizer_from_an_eager_program_as_in_the_docstring(tmp_path):
  # tf.keras is Keras 3 on TF 2.21; its optimizers can only be built eagerly, so this is
  # the docstring's call in an ordinary (eager) TF2 program, in its own process.
  env = dict(os.environ, PYTHONPATH=REPO_ROOT)
  result = subprocess.run([sys.executable, '-c', _EAGER_PROGRAM % str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'global_step 5' in result.stdout


def test_keras_hyper_parameters_reach_the_v1_optimizer():
  with tf.Graph().as_default():
    ftrl = optimizers.get_optimizer_instance(tf_keras.optimizers.Ftrl(
        learning_rate=0.1, l1_regularization_strength=0.001, l2_regularization_strength=0.5))
    assert isinstance(ftrl, tf.compat.v1.train.FtrlOptimizer)
    assert (ftrl._learning_rate, ftrl._l1_regularization_strength,
            ftrl._l2_regularization_strength) == pytest.approx((0.1, 0.001, 0.5))
    sgd = optimizers.get_optimizer_instance(
        tf_keras.optimizers.legacy.SGD(learning_rate=0.01, momentum=0.9, nesterov=True))
    assert isinstance(sgd, tf.compat.v1.train.MomentumOptimizer)
    assert (sgd._momentum, sgd._use_nesterov) == (pytest.approx(0.9), True)
    adam = optimizers.get_optimizer_instance(tf_keras.optimizers.Adam(1e-3, beta_1=0.8))
    assert isinstance(adam, tf.compat.v1.train.AdamOptimizer) and adam._beta1 == 0.8


def test_a_keras_optimizer_made_in_the_graph_initializes_without_the_global_step():
  # tf_keras makes `iteration` and `learning_rate` variables as it is constructed; the
  # second's initializer read the global step, so in one init op with it the order
  # decided whether training started ("Could not find variable global_step").
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    made = []
    adam = optimizers.get_optimizer_instance(lambda: made.append(tf_keras.optimizers.Adam(
        learning_rate=tf.compat.v1.train.exponential_decay(0.1, step, 10, 0.5))) or made[0])
    assert isinstance(adam, tf.compat.v1.train.AdamOptimizer)
    keras_variables = [made[0]._iterations, made[0]._learning_rate]
    assert set(tf.compat.v1.global_variables()) == {step, *keras_variables}
    with tf.compat.v1.Session() as sess:
      # The global step left uninitialized: nothing of the Keras variables reads it.
      sess.run([variable.initializer for variable in keras_variables])
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step.assign(20))
      assert sess.run(adam._lr) == pytest.approx(0.025)


def test_dnn_classifier_with_a_callable_returning_keras_adam_with_decay(tmp_path):
  a, b = _columns()
  estimator = tfe.DNNClassifier(
      feature_columns=[fc.embedding_column(a, 3), fc.embedding_column(b, 3)],
      hidden_units=[8, 4],
      optimizer=lambda: tf_keras.optimizers.Adam(
          learning_rate=tf.compat.v1.train.exponential_decay(
              learning_rate=0.1,
              global_step=tf.compat.v1.train.get_global_step(),
              decay_steps=10000,
              decay_rate=0.96)), model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn, steps=30)
  assert estimator.evaluate(_eval_input_fn)['accuracy'] > 0.7


def test_wide_and_deep_with_keras_optimizers_for_both_parts(tmp_path):
  a, b = _columns()
  estimator = tfe.DNNLinearCombinedClassifier(
      linear_feature_columns=[fc.crossed_column([a, b], 20)],
      linear_optimizer=tf_keras.optimizers.Ftrl(learning_rate=0.1,
                                                l1_regularization_strength=0.001),
      dnn_feature_columns=[fc.embedding_column(a, 3), fc.numeric_column('x')],
      dnn_hidden_units=[8, 4],
      dnn_optimizer=tf_keras.optimizers.Adagrad(learning_rate=0.1),
      model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn, steps=30)
  assert estimator.evaluate(_eval_input_fn)['global_step'] == 30


def test_keras_settings_without_a_v1_twin_are_refused_by_name():
  with pytest.raises(ValueError, match='clipnorm'):
    tfe.LinearClassifier([_columns()[0]], optimizer=tf_keras.optimizers.SGD(0.1, clipnorm=1.0))
  with pytest.raises(ValueError, match='Nadam has no tf.compat.v1.train counterpart'):
    tfe.DNNClassifier([4], [fc.numeric_column('x')], optimizer=tf_keras.optimizers.Nadam())


def test_dnn_with_v1_shared_embedding_columns(tmp_path):
  a, b = _columns()
  shared = fc.shared_embedding_columns([a, b], dimension=3)
  estimator = tfe.DNNClassifier(hidden_units=[8], feature_columns=shared + [fc.numeric_column('x')],
                                model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn, steps=30)
  assert estimator.evaluate(_eval_input_fn)['accuracy'] > 0.7
  tables = [n for n in estimator.get_variable_names() if 'shared_embedding' in n and
            not n.endswith('Adagrad')]
  assert tables == ['dnn/input_from_feature_columns/input_layer/a_b_shared_embedding/'
                    'embedding_weights'], estimator.get_variable_names()


def test_wide_and_deep_with_v2_shared_embeddings(tmp_path):
  with tf.Graph().as_default():  # tf.feature_column.shared_embeddings refuses eager mode.
    a = tf.feature_column.categorical_column_with_vocabulary_list('a', COLORS)
    b = tf.feature_column.categorical_column_with_vocabulary_list('b', COLORS)
    shared = tf.feature_column.shared_embeddings([a, b], dimension=3)
  estimator = tfe.DNNLinearCombinedClassifier(
      linear_feature_columns=[a, b], dnn_feature_columns=shared, dnn_hidden_units=[8],
      model_dir=str(tmp_path), config=_config())
  estimator.train(_input_fn, steps=30)
  metrics = estimator.evaluate(_eval_input_fn)
  assert metrics['global_step'] == 30
  tables = [n for n in estimator.get_variable_names() if 'shared_embedding' in n and
            not n.endswith('Adagrad')]
  assert tables == ['dnn/input_from_feature_columns/a_b_shared_embedding'], (
      estimator.get_variable_names())


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
