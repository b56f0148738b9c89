"""tfe.LinearClassifier, tfe.LinearRegressor, tfe.BaselineClassifier and tfe.BaselineRegressor
as user code drives them: trained on small synthetic data over every kind of feature column
to a stated quality, evaluate/predict keys, an export reloaded in eager TF2 in a fresh
process, warm_start_from, optimizers by name and instance, ps partitioning, and
num_clones=2 on two virtual CPU devices training like one clone."""

import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from deployment import model_deploy
from tests import test_util
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
fc = tf.compat.v1.feature_column

COLORS = ['red', 'green', 'blue']
CITIES = ['city%d' % i for i in range(12)]
BINARY_EVAL_KEYS = ['accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall',
                    'average_loss', 'global_step', 'label/mean', 'loss', 'precision',
                    'prediction/mean', 'recall']
CLASSIFIER_PREDICT_KEYS = ['all_class_ids', 'all_classes', 'class_ids', 'classes', 'logits',
                           'probabilities']


def _config(**kwargs):
  kwargs.setdefault('tf_random_seed', 11)
  kwargs.setdefault('save_checkpoints_steps', None)
  kwargs.setdefault('save_checkpoints_secs', 600)
  kwargs.setdefault('log_step_count_steps', 100)
  return tfe.RunConfig(**kwargs)


def _columns():
  """One feature column of every kind the linear model takes."""
  age = fc.numeric_column('age', normalizer_fn=lambda x: (x - 50.0) / 25.0)
  color = fc.categorical_column_with_vocabulary_list('color', COLORS)
  slot = fc.categorical_column_with_identity('slot', num_buckets=4)
  return [
      age,
      fc.bucketized_column(age, boundaries=[25.0, 50.0, 75.0]),
      color,
      fc.categorical_column_with_hash_bucket('city', hash_bucket_size=40),
      slot,
      fc.crossed_column([color, slot], hash_bucket_size=30),
      fc.weighted_categorical_column(fc.categorical_column_with_identity('tag', 3), 'tag_w'),
  ]


def _data(n, seed):
  """Features for _columns() and a linear score over them (before any link)."""
  rng = np.random.RandomState(seed)
  x = {'age': rng.uniform(0, 100, n).astype(np.float32),
       'color': np.array(COLORS)[rng.randint(0, 3, n)],
       'city': np.array(CITIES)[rng.randint(0, len(CITIES), n)],
       'slot': rng.randint(0, 4, n).astype(np.int64),
       'tag': rng.randint(0, 3, n).astype(np.int64),
       'tag_w': rng.uniform(0, 2, n).astype(np.float32)}
  city_effect = np.array([1.0 if int(c[4:]) % 2 else -1.0 for c in x['city']])
  color_effect = np.select([x['color'] == 'red', x['color'] == 'green'], [1.5, -1.5], 0.0)
  score = (2.0 * (x['age'] - 50.0) / 25.0 + color_effect + city_effect
           + np.where((x['color'] == 'blue') & (x['slot'] == 2), 2.0, 0.0)
           + np.array([1.0, -1.0, 0.0])[x['tag']] * x['tag_w'])
  return x, score


def _input_fn(x, y=None, batch_size=32, train=True):
  return tfe.inputs.numpy_input_fn(x, y, batch_size=batch_size, shuffle=train,
                                   num_epochs=None if train else 1)


def _examples(x, indices):
  """Serialized tf.Examples of rows `indices` of the feature dict `x`."""
  out = []
  for i in indices:
    feature = {}
    for key, values in x.items():
      value = values[i]
      if isinstance(value, (str, np.str_)):
        feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
      elif np.issubdtype(type(value), np.integer):
        feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
      else:
        feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
    out.append(tf.train.Example(features=tf.train.Features(feature=feature))
               .SerializeToString())
  return out


_LOAD_PROGRAM = r'''
import json, sys
import tensorflow as tf
assert tf.executing_eagerly()
results = {}
for name, path, examples in json.load(open(sys.argv[1])):
  model = tf.saved_model.load(path)
  serialized = tf.constant([bytes.fromhex(e) for e in examples])
  results[name] = {'signatures': sorted(model.signatures.keys())}
  for key, fn in model.signatures.items():
    arg = list(fn.structured_input_signature[1])[0]
    out = fn(**{arg: serialized})
    results[name][key] = {k: v.numpy().tolist() if v.dtype != tf.string else
                          [[s.decode() for s in row] for row in v.numpy()]
                          for k, v in out.items() if k != 'classes' or v.dtype == tf.string}
print('RESULTS ' + json.dumps(results))
'''


def _load_in_eager_tf2(tmp_path, exports):
  """Runs each export's signatures on its examples in a fresh eager TF2 process."""
  request = tmp_path / 'request.json'
  request.write_text(json.dumps([(name, path.decode() if isinstance(path, bytes) else path,
                                  [e.hex() for e in examples])
                                 for name, path, examples in exports]))
  result = subprocess.run([sys.executable, '-c', _LOAD_PROGRAM, str(request)], cwd=REPO_ROOT,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=240)
  assert result.returncode == 0, result.stderr[-3000:]
  line = [ln for ln in result.stdout.splitlines() if ln.startswith('RESULTS ')][-1]
  return json.loads(line[len('RESULTS '):])


def test_linear_classifier_binary_and_regressor_learn_export_and_reload(tmp_path):
  x, score = _data(1200, seed=1)
  x_eval, score_eval = _data(400, seed=2)
  columns = _columns()
  classifier = tfe.LinearClassifier(columns, model_dir=str(tmp_path / 'clf'), config=_config())
  classifier.train(_input_fn(x, (score > 0).astype(np.int64)), max_steps=400)
  metrics = classifier.evaluate(_input_fn(x_eval, (score_eval > 0).astype(np.int64),
                                          batch_size=100, train=False))
  assert sorted(metrics) == BINARY_EVAL_KEYS
  assert metrics['global_step'] == 400
  assert metrics['accuracy'] > 0.93 and metrics['auc'] > 0.98, metrics
  assert abs(metrics['label/mean'] - np.mean(score_eval > 0)) < 1e-6
  names = classifier.get_variable_names()
  for name in ('linear/linear_model/age/weights', 'linear/linear_model/bias_weights',
               'linear/linear_model/color_X_slot/weights', 'linear/linear_model/tag_weighted_by_'
               'tag_w/weights', 'linear/linear_model/city/weights'):
    assert name in names, names

  rows = list(range(8))
  predictions = list(classifier.predict(_input_fn({k: v[rows] for k, v in x_eval.items()},
                                                  train=False)))
  assert len(predictions) == 8
  assert sorted(predictions[0]) == sorted(CLASSIFIER_PREDICT_KEYS + ['logistic'])
  assert predictions[0]['all_classes'].tolist() == [b'0', b'1']
  spec = fc.make_parse_example_spec(columns)
  receiver_fn = tfe.export.build_parsing_serving_input_receiver_fn(spec)
  clf_export = classifier.export_saved_model(str(tmp_path / 'clf_export'), receiver_fn)

  regressor = tfe.LinearRegressor(columns, model_dir=str(tmp_path / 'reg'), config=_config(),
                                  optimizer='Adagrad')
  regressor.train(_input_fn(x, score.astype(np.float32)), max_steps=500)
  reg_metrics = regressor.evaluate(_input_fn(x_eval, score_eval.astype(np.float32),
                                             batch_size=100, train=False))
  assert sorted(reg_metrics) == ['average_loss', 'global_step', 'label/mean', 'loss',
                                 'prediction/mean']
  # The score's variance is about 3.5; a linear model over these columns can fit it.
  assert reg_metrics['average_loss'] < 0.1, reg_metrics
  reg_predictions = list(regressor.predict(_input_fn({k: v[rows] for k, v in x_eval.items()},
                                                     train=False)))
  assert sorted(reg_predictions[0]) == ['predictions']
  reg_export = regressor.export_saved_model(str(tmp_path / 'reg_export'), receiver_fn)

  examples = _examples(x_eval, rows)
  loaded = _load_in_eager_tf2(tmp_path, [('clf', clf_export, examples),
                                         ('reg', reg_export, examples)])
  clf, reg = loaded['clf'], loaded['reg']
  assert clf['signatures'] == ['classification', 'predict', 'regression', 'serving_default']
  np.testing.assert_allclose(np.array(clf['predict']['probabilities']),
                             [p['probabilities'] for p in predictions], rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(np.array(clf['serving_default']['scores']),
                             [p['probabilities'] for p in predictions], rtol=1e-4, atol=1e-6)
  assert clf['classification']['classes'] == [['0', '1']] * 8
  np.testing.assert_allclose(np.array(clf['regression']['outputs'])[:, 0],
                             [p['logistic'][0] for p in predictions], rtol=1e-4, atol=1e-6)
  assert reg['signatures'] == ['predict', 'regression', 'serving_default']
  np.testing.assert_allclose(np.array(reg['regression']['outputs'])[:, 0],
                             [p['predictions'][0] for p in reg_predictions], rtol=1e-4,
                             atol=1e-5)


def test_multi_class_with_vocabulary_weights_and_optimizer_instance(tmp_path):
  x, score = _data(900, seed=3)
  labels = np.array(['low', 'mid', 'high'])[np.digitize(score, [-1.0, 1.0])]
  x['w'] = np.where(labels == 'mid', 2.0, 1.0).astype(np.float32)
  x_eval, score_eval = _data(300, seed=4)
  labels_eval = np.array(['low', 'mid', 'high'])[np.digitize(score_eval, [-1.0, 1.0])]
  x_eval['w'] = np.ones(300, np.float32)
  classifier = tfe.LinearClassifier(
      _columns(), model_dir=str(tmp_path / 'm'), n_classes=3, weight_column='w',
      label_vocabulary=['low', 'mid', 'high'], config=_config(),
      optimizer=tf.compat.v1.train.AdagradOptimizer(learning_rate=0.5))
  classifier.train(_input_fn(x, labels), max_steps=400)
  metrics = classifier.evaluate(_input_fn(x_eval, labels_eval, batch_size=100, train=False))
  assert sorted(metrics) == ['accuracy', 'average_loss', 'global_step', 'loss']
  # Three ordered bands of one linear score: a linear softmax model separates most of them.
  assert metrics['accuracy'] > 0.85, metrics
  predictions = list(classifier.predict(_input_fn({k: v[:50] for k, v in x_eval.items()},
                                                  train=False)))
  assert sorted(predictions[0]) == CLASSIFIER_PREDICT_KEYS
  assert predictions[0]['all_classes'].tolist() == [b'low', b'mid', b'high']
  predicted = np.array([p['classes'][0].decode() for p in predictions])
  assert np.mean(predicted == labels_eval[:50]) > 0.8
  # A label outside the vocabulary fails naming it.
  with pytest.raises(tf.errors.InvalidArgumentError, match='unknown labels:.*medium'):
    classifier.evaluate(_input_fn({k: v[:4] for k, v in x_eval.items()},
                                  np.array(['low', 'medium', 'mid', 'high']), train=False))


def test_baselines_learn_the_label_distribution_and_mean(tmp_path):
  rng = np.random.RandomState(5)
  x = {'any': rng.uniform(size=400).astype(np.float32)}
  labels = (rng.uniform(size=400) < 0.7).astype(np.int64)
  baseline = tfe.BaselineClassifier(model_dir=str(tmp_path / 'b'), config=_config())
  baseline.train(_input_fn(x, labels), max_steps=300)
  metrics = baseline.evaluate(_input_fn(x, labels, batch_size=100, train=False))
  assert sorted(metrics) == BINARY_EVAL_KEYS
  assert baseline.get_variable_names().count('baseline/bias') == 1
  assert metrics['prediction/mean'] == pytest.approx(labels.mean(), abs=0.03)
  assert metrics['accuracy'] == pytest.approx(labels.mean(), abs=1e-6)  # always class 1
  prediction = next(baseline.predict(_input_fn({'any': x['any'][:2]}, train=False)))
  assert sorted(prediction) == sorted(CLASSIFIER_PREDICT_KEYS + ['logistic'])

  colors = np.array(['r', 'g', 'b'])[rng.choice(3, 600, p=[0.5, 0.3, 0.2])]
  multi = tfe.BaselineClassifier(model_dir=str(tmp_path / 'm'), n_classes=3,
                                 label_vocabulary=['r', 'g', 'b'], optimizer='Adagrad',
                                 config=_config())
  multi.train(_input_fn({'any': np.zeros(600, np.float32)}, colors), max_steps=300)
  prediction = next(multi.predict(_input_fn({'any': np.zeros(1, np.float32)}, train=False)))
  np.testing.assert_allclose(prediction['probabilities'],
                             [np.mean(colors == c) for c in 'rgb'], atol=0.04)
  assert prediction['classes'].tolist() == [b'r']

  y = rng.normal(3.0, 1.0, size=(400, 2)).astype(np.float32)
  weights = np.where(np.arange(400) < 200, 3.0, 1.0).astype(np.float32)
  regressor = tfe.BaselineRegressor(model_dir=str(tmp_path / 'r'), label_dimension=2,
                                    weight_column='w', config=_config())
  regressor.train(_input_fn({'any': x['any'], 'w': weights}, y), max_steps=400)
  reg_metrics = regressor.evaluate(_input_fn({'any': x['any'], 'w': weights}, y,
                                             batch_size=100, train=False))
  assert sorted(reg_metrics) == ['average_loss', 'global_step', 'label/mean', 'loss',
                                 'prediction/mean']
  weighted_mean = (y * weights[:, None]).sum(0) / weights.sum()
  prediction = next(regressor.predict(_input_fn({'any': x['any'][:1], 'w': weights[:1]},
                                                train=False)))
  np.testing.assert_allclose(prediction['predictions'], weighted_mean, atol=0.1)


def test_warm_start_from_a_trained_model(tmp_path):
  x, score = _data(300, seed=6)
  y = score.astype(np.float32)
  columns = _columns()
  source = tfe.LinearRegressor(columns, model_dir=str(tmp_path / 'src'), optimizer='SGD',
                               config=_config())
  source.train(_input_fn(x, y), max_steps=50)
  frozen = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=0.0)
  warm = tfe.LinearRegressor(columns, model_dir=str(tmp_path / 'warm'), optimizer=frozen,
                             warm_start_from=str(tmp_path / 'src'), config=_config())
  warm.train(_input_fn(x, y), max_steps=1)
  for name in source.get_variable_names():
    if name.startswith('linear/'):
      np.testing.assert_array_equal(warm.get_variable_value(name),
                                    source.get_variable_value(name), err_msg=name)
  # WarmStartSettings choose variables: only the age weights come over.
  partial = tfe.LinearRegressor(
      columns, model_dir=str(tmp_path / 'partial'), optimizer=lambda: frozen, config=_config(),
      warm_start_from=tfe.WarmStartSettings(str(tmp_path / 'src'), '.*/age/weights'))
  partial.train(_input_fn(x, y), max_steps=1)
  age = 'linear/linear_model/age/weights'
  np.testing.assert_array_equal(partial.get_variable_value(age), source.get_variable_value(age))
  assert not partial.get_variable_value('linear/linear_model/bias_weights').any()


def test_partitioned_weights_train_like_whole_ones_and_follow_the_ps_count(tmp_path,
                                                                          monkeypatch):
  x, score = _data(256, seed=7)
  y = score.astype(np.float32)
  columns = _columns()
  values = []
  for name, partitioner in (('whole', None), ('parts', tf.compat.v1.fixed_size_partitioner(3))):
    est = tfe.LinearRegressor(columns, model_dir=str(tmp_path / name), config=_config(),
                              optimizer='SGD', partitioner=partitioner)
    est.train(_input_fn(x, y, train=False), max_steps=5)
    values.append({n: est.get_variable_value(n) for n in est.get_variable_names()
                   if n.startswith('linear/')})
  assert sorted(values[0]) == sorted(values[1])  # Checkpoints hold whole variables.
  for name in values[0]:
    np.testing.assert_allclose(values[1][name], values[0][name], rtol=1e-5, atol=1e-6)

  # In a cluster with 3 ps tasks, a table over 2 x 64 MiB is split in 3 (graph only).
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['localhost:1'], 'ps': ['localhost:2', 'localhost:3',
                                                   'localhost:4']},
      'task': {'type': 'chief', 'index': 0}}))
  config = tfe.RunConfig()
  assert config.num_ps_replicas == 3
  big = fc.categorical_column_with_hash_bucket('city', hash_bucket_size=40 << 20)
  est = tfe.LinearClassifier([big, columns[0]], model_dir=str(tmp_path / 'ps'), config=config)
  with tf.Graph().as_default() as graph:
    features = {'city': tf.constant([['a']]), 'age': tf.constant([[1.0]])}
    est.model_fn(features, None, tfe.ModeKeys.PREDICT, est.config)
    names = sorted(v.op.name for v in graph.get_collection('variables'))
  assert [n for n in names if '/city/' in n] == [
      'linear/linear_model/city/weights/part_%d' % i for i in range(3)]
  assert [n for n in names if '/age/' in n] == ['linear/linear_model/age/weights/part_0']


class _CloneDevicesHook(tf.compat.v1.train.SessionRunHook):
  """Records the devices of the second clone's head (loss) ops."""

  def begin(self):
    self.devices = {op.device for op in tf.compat.v1.get_default_graph().get_operations()
                    if op.name.startswith('clone_1/head/')}


def _train_clones(model_dir, num_clones, make_estimator, x, y):
  deploy = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_devices=['/device:CPU:%d' % i for i in range(num_clones)])
  config = _config(deployment_config=deploy,
                   session_config=test_util.session_config(num_cpus=2))
  est = make_estimator(str(model_dir), config)
  hook = _CloneDevicesHook()
  est.train(_input_fn(x, y, batch_size=32, train=False), max_steps=12, hooks=[hook])
  return est, hook.devices


@pytest.mark.parametrize('kind', ['linear_classifier', 'baseline_regressor'])
def test_two_clones_train_like_one(tmp_path, kind):
  x, score = _data(384, seed=8)
  if kind == 'linear_classifier':
    y = (score > 0).astype(np.int64)
    columns = _columns()

    def make_estimator(model_dir, config):
      return tfe.LinearClassifier(columns, model_dir=model_dir, config=config)
  else:
    y = score.astype(np.float32)

    def make_estimator(model_dir, config):
      return tfe.BaselineRegressor(model_dir=model_dir, config=config, optimizer='SGD')
  one, _ = _train_clones(tmp_path / 'one', 1, make_estimator, x, y)
  two, devices = _train_clones(tmp_path / 'two', 2, make_estimator, x, y)
  assert devices and all(d.endswith('CPU:1') for d in devices), devices
  names = one.get_variable_names()
  assert names == two.get_variable_names()
  assert any(n.startswith(('linear/', 'baseline/')) for n in names)
  for name in names:
    np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-4, atol=1e-6, err_msg=name)


def test_constructor_arguments_are_tf_estimators():
  def arguments(cls):
    return [(p.name, p.default) for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != 'self']
  empty, mean = inspect.Parameter.empty, tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE
  assert arguments(tfe.LinearClassifier) == [
      ('feature_columns', empty), ('model_dir', None), ('n_classes', 2),
      ('weight_column', None), ('label_vocabulary', None), ('optimizer', 'Ftrl'),
      ('config', None), ('warm_start_from', None), ('loss_reduction', mean),
      ('sparse_combiner', 'sum'), ('partitioner', None)]
  assert arguments(tfe.LinearRegressor) == [
      ('feature_columns', empty), ('model_dir', None), ('label_dimension', 1),
      ('weight_column', None), ('optimizer', 'Ftrl'), ('config', None),
      ('warm_start_from', None), ('loss_reduction', mean), ('sparse_combiner', 'sum'),
      ('partitioner', None)]
  assert arguments(tfe.BaselineClassifier) == [
      ('model_dir', None), ('n_classes', 2), ('weight_column', None),
      ('label_vocabulary', None), ('optimizer', 'Ftrl'), ('config', None),
      ('loss_reduction', mean)]
  assert arguments(tfe.BaselineRegressor) == [
      ('model_dir', None), ('label_dimension', 1), ('weight_column', None),
      ('optimizer', 'Ftrl'), ('config', None), ('loss_reduction', mean)]


def test_bad_arguments_are_named(tmp_path):
  columns = _columns()
  with pytest.raises(ValueError, match='feature_columns must not be empty'):
    tfe.LinearClassifier([], model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='feature_columns: every item must be a feature column'):
    tfe.LinearRegressor(['age'], model_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r"Unsupported optimizer name for optimizer: Adamax"):
    tfe.LinearClassifier(columns, model_dir=str(tmp_path), optimizer='Adamax')
  with pytest.raises(ValueError, match='optimizer must be a name in'):
    tfe.BaselineRegressor(model_dir=str(tmp_path), optimizer=0.1)
  with pytest.raises(ValueError, match="sparse_combiner must be one of .* got 'max'"):
    tfe.LinearRegressor(columns, model_dir=str(tmp_path), sparse_combiner='max')
  with pytest.raises(ValueError, match='n_classes must be > 1'):
    tfe.LinearClassifier(columns, model_dir=str(tmp_path), n_classes=1)
  with pytest.raises(ValueError, match='Invalid loss_reduction: none'):
    tfe.BaselineClassifier(model_dir=str(tmp_path), loss_reduction='none')
  est = tfe.LinearRegressor(columns, model_dir=str(tmp_path))
  with pytest.raises(ValueError, match='features should be a dictionary'):
    est.train(lambda: (tf.constant([[1.0]]), tf.constant([[1.0]])), steps=1)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
