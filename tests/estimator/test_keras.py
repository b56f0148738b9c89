"""tfe.keras.model_to_estimator (estimator/keras.py), used as user code would.

Small tf_keras models train on synthetic data through the Estimator: the
Estimator starts from the Keras weights (predict and evaluate before training
give Keras's own numbers), trains to a stated quality, evaluates the compiled
metrics under their Keras names, and exports a SavedModel that a fresh eager
TF2 process serves. This module runs in graph mode like its neighbours (the
model is then a TF1-flavoured Keras model); `test_eager_user_program` runs a
TF2 program (eager Keras model, Keras 2.11+ optimizer) in a fresh interpreter.
"""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from trainer import estimator as tfe
from estimator import keras as keras_lib

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_EXAMPLES = 512
BATCH = 64


def _data(seed=0):
  """Two inputs; a 3-class label from `a` and a regression target from `a` and `b`."""
  rng = np.random.default_rng(seed)
  a = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
  b = rng.normal(size=(NUM_EXAMPLES, 2)).astype(np.float32)
  cls = np.digitize(a[:, 0] + a[:, 1], [-0.5, 0.5]).astype(np.int64)
  reg = (a[:, 2] - 2.0 * b[:, 0] + 0.5).astype(np.float32)[:, None]
  return {'a': a, 'b': b}, {'cls': cls, 'reg': reg}


def _two_headed_model(seed=1):
  tf_keras.utils.set_random_seed(seed)
  a = tf_keras.Input((4,), name='a')
  b = tf_keras.Input((2,), name='b')
  hidden = tf_keras.layers.Dense(16, activation='relu', name='hidden')(a)
  hidden = tf_keras.layers.BatchNormalization(name='bn')(hidden)
  cls = tf_keras.layers.Dense(3, activation='softmax', name='cls')(hidden)
  both = tf_keras.layers.Concatenate(name='concat')([a, b])
  reg = tf_keras.layers.Dense(1, name='reg',
                              kernel_regularizer=tf_keras.regularizers.l2(1e-4))(both)
  model = tf_keras.Model([a, b], [cls, reg])
  model.compile(optimizer=tf_keras.optimizers.legacy.Adam(0.02),
                loss={'cls': 'sparse_categorical_crossentropy', 'reg': 'mse'},
                loss_weights={'cls': 1.0, 'reg': 0.5},
                metrics={'cls': ['accuracy'], 'reg': [tf_keras.metrics.MeanAbsoluteError()]})
  return model


def _input_fn(features, labels, repeat=False):
  def input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return (dataset.repeat() if repeat else dataset).batch(BATCH)
  return input_fn


def _predict_input_fn(features):
  return lambda: tf.data.Dataset.from_tensor_slices(features).batch(BATCH)


def _stack(predictions, key):
  return np.stack([p[key] for p in predictions])


@pytest.fixture(scope='module')
def two_headed(tmp_path_factory):
  """The model, its Keras numbers before conversion, and a trained Estimator of it."""
  features, labels = _data()
  model = _two_headed_model()
  keras_predictions = model.predict(features, batch_size=BATCH, verbose=0)
  keras_eval = dict(zip(model.metrics_names,
                        model.evaluate(features, labels, batch_size=BATCH, verbose=0)))
  model_dir = str(tmp_path_factory.mktemp('two_headed'))
  est = tfe.keras.model_to_estimator(keras_model=model, model_dir=model_dir)
  before = list(est.predict(_predict_input_fn(features)))
  eval_before = est.evaluate(_input_fn(features, labels))
  est.train(_input_fn(features, labels, repeat=True), steps=300)
  return dict(features=features, labels=labels, model=model, est=est, model_dir=model_dir,
              keras_predictions=keras_predictions, keras_eval=keras_eval, before=before,
              eval_before=eval_before, eval_after=est.evaluate(_input_fn(features, labels)))


def test_estimator_starts_from_the_keras_weights(two_headed):
  keras_cls, keras_reg = two_headed['keras_predictions']
  assert set(two_headed['before'][0]) == {'cls', 'reg'}
  np.testing.assert_allclose(_stack(two_headed['before'], 'cls'), keras_cls, atol=1e-6)
  np.testing.assert_allclose(_stack(two_headed['before'], 'reg'), keras_reg, atol=1e-5)


def test_keras_weights_checkpoint_in_model_dir(two_headed):
  prefix = os.path.join(two_headed['model_dir'], 'keras', 'keras_model.ckpt')
  saved = dict(tf.train.list_variables(prefix))
  model = two_headed['model']
  assert set(saved) == {w.name[:-len(':0')] for w in model.weights} | {'global_step'}
  kernel = [w for w in model.weights if w.name == 'hidden/kernel:0'][0]
  np.testing.assert_array_equal(tf.train.load_variable(prefix, 'hidden/kernel'),
                                tf_keras.backend.get_value(kernel))
  # Batch-norm statistics are weights too.
  assert 'bn/moving_variance' in saved


def test_evaluate_before_training_gives_keras_evaluate(two_headed):
  keras_eval, results = two_headed['keras_eval'], two_headed['eval_before']
  # The compiled metrics under Keras's names; as tf.estimator, no per-output losses.
  assert set(results) == {'cls_accuracy', 'reg_mean_absolute_error', 'loss', 'global_step'}
  assert results['global_step'] == 0
  for name, value in keras_eval.items():
    if name in ('cls_loss', 'reg_loss'):
      continue
    np.testing.assert_allclose(results[name], value, rtol=1e-5, err_msg=name)


def test_training_reaches_the_stated_quality(two_headed):
  before, after = two_headed['eval_before'], two_headed['eval_after']
  assert after['global_step'] == 300
  assert after['cls_accuracy'] > 0.9, after
  assert after['reg_mean_absolute_error'] < 0.15, after
  assert after['loss'] < 0.25 * before['loss'], (before, after)
  # The training step also ran the batch-norm updates (the statistics moved off 0 / 1).
  est = two_headed['est']
  assert np.abs(est.get_variable_value('bn/moving_mean')).max() > 0.05
  assert np.abs(est.get_variable_value('bn/moving_variance') - 1.0).max() > 0.05


def test_export_serves_in_eager_tf2(two_headed, tmp_path):
  est, features = two_headed['est'], two_headed['features']

  def serving_input_receiver_fn():
    inputs = {'a': tf.compat.v1.placeholder(tf.float32, [None, 4], name='a'),
              'b': tf.compat.v1.placeholder(tf.float32, [None, 2], name='b')}
    return tfe.export.ServingInputReceiver(inputs, inputs)

  path = est.export_saved_model(str(tmp_path / 'export'), serving_input_receiver_fn)
  served = _serve_eagerly(tf.compat.as_str_any(path), {k: v[:8] for k, v in features.items()},
                          str(tmp_path))
  predicted = list(est.predict(_predict_input_fn({k: v[:8] for k, v in features.items()})))
  np.testing.assert_allclose(served['cls'], _stack(predicted, 'cls'), atol=1e-6)
  np.testing.assert_allclose(served['reg'], _stack(predicted, 'reg'), atol=1e-5)


SERVE = r'''
import pickle, sys
import tensorflow as tf
assert tf.executing_eagerly()
with open(sys.argv[1], 'rb') as f:
  path, inputs = pickle.load(f)
signature = tf.saved_model.load(path).signatures['serving_default']
outputs = signature(**{k: tf.constant(v) for k, v in inputs.items()})
with open(sys.argv[2], 'wb') as f:
  pickle.dump({k: v.numpy() for k, v in outputs.items()}, f)
'''


def _serve_eagerly(path, inputs, tmp_dir):
  """Runs the export's serving_default in a fresh TF2 (eager) interpreter."""
  job, result = os.path.join(tmp_dir, 'job.pkl'), os.path.join(tmp_dir, 'result.pkl')
  with open(job, 'wb') as f:
    pickle.dump((path, inputs), f)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
  proc = subprocess.run([sys.executable, '-c', SERVE, job, result], capture_output=True,
                        text=True, env=env, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(result, 'rb') as f:
    return pickle.load(f)


def test_existing_checkpoint_is_kept_on_a_second_conversion(two_headed):
  # A restarted job converts again: the Estimator resumes from its own checkpoint.
  est = tfe.keras.model_to_estimator(keras_model=_two_headed_model(seed=5),
                                     model_dir=two_headed['model_dir'])
  results = est.evaluate(_input_fn(two_headed['features'], two_headed['labels']))
  assert results == two_headed['eval_after']


class Scale(tf_keras.layers.Layer):
  """A custom layer: the HDF5 file needs it in custom_objects."""

  def __init__(self, factor, **kwargs):
    super().__init__(**kwargs)
    self.factor = factor

  def call(self, inputs):
    return inputs * self.factor

  def get_config(self):
    return dict(super().get_config(), factor=self.factor)


def _binary_data(seed=2):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(NUM_EXAMPLES, 3)).astype(np.float32)
  return x, (x[:, 0] - x[:, 2] > 0).astype(np.float32)[:, None]


def test_sequential_from_keras_model_path_with_custom_objects(tmp_path):
  tf_keras.utils.set_random_seed(3)
  model = tf_keras.Sequential([
      tf_keras.layers.Dense(8, activation='tanh', input_shape=(3,), name='dense'),
      Scale(2.0, name='scale'),
      tf_keras.layers.Dense(1, activation='sigmoid', name='out')])
  model.compile(optimizer='sgd', loss='binary_crossentropy',
                metrics=['accuracy', tf_keras.metrics.AUC(name='auc')])
  path = str(tmp_path / 'model.h5')
  model.save(path)
  x, y = _binary_data()
  keras_predictions = model.predict(x, batch_size=BATCH, verbose=0)
  with pytest.raises(ValueError, match='Unknown layer'):
    tfe.keras.model_to_estimator(keras_model_path=path, model_dir=str(tmp_path / 'bad'))
  est = tfe.keras.model_to_estimator(keras_model_path=path, custom_objects={'Scale': Scale},
                                     model_dir=str(tmp_path / 'est'))
  # One-input, one-output model: plain tensors for features and labels.
  predict_fn = lambda: tf.data.Dataset.from_tensor_slices(x).batch(BATCH)  # noqa: E731
  np.testing.assert_allclose(_stack(est.predict(predict_fn), 'out'), keras_predictions,
                             atol=1e-6)
  est.train(_input_fn(x, y, repeat=True), steps=400)
  results = est.evaluate(_input_fn(x, y))
  assert set(results) == {'accuracy', 'auc', 'loss', 'global_step'}
  assert results['accuracy'] > 0.9 and results['auc'] > 0.97, results


def test_metric_names_map_and_export_outputs(tmp_path):
  x, y = _binary_data()
  model = tf_keras.Sequential([tf_keras.layers.Dense(1, activation='sigmoid', name='out',
                                                     input_shape=(3,))])
  model.compile(optimizer='sgd', loss='binary_crossentropy', metrics=['accuracy'])
  est = tfe.keras.model_to_estimator(
      keras_model=model, model_dir=str(tmp_path / 'est'),
      metric_names_map={'accuracy': 'acc'}, export_outputs={'out': tfe.export.RegressionOutput})
  assert set(est.evaluate(_input_fn(x, y))) == {'acc', 'loss', 'global_step'}

  # A regress signature takes serialized tf.Examples (TF's rule).
  receiver_fn = tfe.export.build_parsing_serving_input_receiver_fn(
      {'x': tf.io.FixedLenFeature([3], tf.float32)})
  path = tf.compat.as_str_any(est.export_saved_model(str(tmp_path / 'export'), receiver_fn))
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta_graph = tf.compat.v1.saved_model.load(sess, ['serve'], path)
  assert set(meta_graph.signature_def) == {'serving_default', 'out'}
  assert meta_graph.signature_def['out'].method_name == 'tensorflow/serving/regress'


def test_model_dir_from_run_config(tmp_path):
  x, y = _binary_data()
  model = tf_keras.Sequential([tf_keras.layers.Dense(1, activation='sigmoid', name='out',
                                                     input_shape=(3,))])
  model.compile(optimizer='sgd', loss='binary_crossentropy')
  model_dir = str(tmp_path / 'from_config')
  config = tfe.RunConfig(model_dir=model_dir, save_checkpoints_steps=5)
  est = tfe.keras.model_to_estimator(keras_model=model, config=config)
  assert est.model_dir == model_dir
  assert tf.train.list_variables(os.path.join(model_dir, 'keras', 'keras_model.ckpt'))
  est.train(_input_fn(x, y, repeat=True), steps=10)
  assert est.latest_checkpoint() == os.path.join(model_dir, 'model.ckpt-10')
  with pytest.raises(ValueError, match='num_clones=2'):
    tfe.keras.model_to_estimator(keras_model=model, config=tfe.RunConfig(num_clones=2))


def test_bad_models_get_clear_errors(tmp_path):
  uncompiled = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
  with pytest.raises(ValueError, match='has not been compiled yet'):
    tfe.keras.model_to_estimator(keras_model=uncompiled, model_dir=str(tmp_path / 'a'))

  class Subclassed(tf_keras.Model):

    def __init__(self):
      super().__init__()
      self.dense = tf_keras.layers.Dense(1)

    def call(self, inputs):
      return self.dense(inputs)

  subclassed = Subclassed()
  subclassed.compile(optimizer='sgd', loss='mse')
  with pytest.raises(ValueError, match='subclassed model without a static graph'):
    tfe.keras.model_to_estimator(keras_model=subclassed, model_dir=str(tmp_path / 'b'))
  with pytest.raises(ValueError, match='Either `keras_model` or `keras_model_path`'):
    tfe.keras.model_to_estimator(model_dir=str(tmp_path / 'c'))
  with pytest.raises(ValueError, match='but not both'):
    tfe.keras.model_to_estimator(keras_model=uncompiled, keras_model_path='x.h5')
  with pytest.raises(TypeError, match='must be a compiled tf_keras.Model'):
    tfe.keras.model_to_estimator(keras_model=object(), model_dir=str(tmp_path / 'd'))
  assert not os.path.exists(str(tmp_path / 'a'))


def test_features_must_be_keyed_by_input_names(two_headed, tmp_path):
  features, labels = two_headed['features'], two_headed['labels']
  est = tfe.keras.model_to_estimator(keras_model=_two_headed_model(),
                                     model_dir=str(tmp_path / 'est'))
  with pytest.raises(ValueError, match=r"missing \['b'\]"):
    est.evaluate(_input_fn({'a': features['a'], 'B': features['b']}, labels))
  with pytest.raises(ValueError, match="labels must be keyed by the Keras model's output"):
    est.evaluate(_input_fn(features, {'cls': labels['cls']}))


# A TF2 program: eager tf_keras model with a Keras 2.11+ optimizer, converted and trained.
EAGER_USER_PROGRAM = r'''
import json, sys
import numpy as np
import tensorflow as tf
import tf_keras
from trainer import estimator as tfe
assert tf.executing_eagerly()
rng = np.random.default_rng(0)
x = rng.normal(size=(512, 4)).astype(np.float32)
y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
tf_keras.utils.set_random_seed(0)
inputs = tf_keras.Input((4,), name='x')
hidden = tf_keras.layers.Dense(8, activation='relu', name='hidden')(inputs)
probs = tf_keras.layers.Dense(2, activation='softmax', name='probs')(hidden)
model = tf_keras.Model(inputs, probs)
model.compile(optimizer=tf_keras.optimizers.Adam(0.05), loss='sparse_categorical_crossentropy',
              metrics=['accuracy'])
keras_probs = model.predict(x[:16], verbose=0)
est = tfe.keras.model_to_estimator(keras_model=model, model_dir=sys.argv[1])
predict_fn = lambda: tf.data.Dataset.from_tensor_slices({'x': x[:16]}).batch(8)
before = np.stack([p['probs'] for p in est.predict(predict_fn)])
train_fn = lambda: tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(64)
est.train(train_fn, steps=100)
results = est.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({'x': x}, y)).batch(64))
print(json.dumps({'max_diff': float(np.abs(before - keras_probs).max()),
                  'results': {k: float(v) for k, v in results.items()}}))
'''


def test_eager_user_program(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  proc = subprocess.run([sys.executable, '-c', EAGER_USER_PROGRAM, str(tmp_path / 'model')],
                        capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT)
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  assert report['max_diff'] < 1e-6, report
  assert report['results']['global_step'] == 100
  assert report['results']['accuracy'] > 0.95, report
  assert set(report['results']) == {'accuracy', 'loss', 'global_step'}


def test_keras_3_models_are_refused(tmp_path):
  keras3 = pytest.importorskip('keras')
  if not keras3.__version__.startswith('3.'):
    pytest.skip('keras is not Keras 3 here')
  model = keras3.Sequential([keras3.Input((3,)), keras3.layers.Dense(1)])
  with pytest.raises(TypeError, match='Keras 3 model'):
    keras_lib.model_to_estimator(keras_model=model, model_dir=str(tmp_path / 'k3'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
