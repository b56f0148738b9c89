"""tfe.DNNClassifier / DNNRegressor / DNNLinearCombinedClassifier / Regressor as user code.

Small synthetic tabular data (tests/estimator/canned_testlib.py: hashed city
embedded or linear, vocabulary color one-hot, numeric and bucketized age,
numeric x) trained to a stated quality; evaluate() and predict() keys as
tf.estimator 2.15; dropout and batch norm; tf.estimator's checkpoint names;
the SavedModel of a parsing receiver served from a fresh eager TF2 process;
num_clones=2 on two virtual CPU devices training like one clone.
"""

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
from tests.estimator import canned_testlib as lib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
fc = tf.compat.v1.feature_column

BINARY_EVAL_KEYS = {'accuracy', 'accuracy_baseline', 'auc', 'auc_precision_recall',
                    'average_loss', 'label/mean', 'loss', 'precision', 'prediction/mean',
                    'recall', 'global_step'}
MULTI_CLASS_EVAL_KEYS = {'accuracy', 'average_loss', 'loss', 'global_step'}
REGRESSION_EVAL_KEYS = {'average_loss', 'label/mean', 'loss', 'prediction/mean', 'global_step'}
BINARY_PREDICT_KEYS = {'logits', 'logistic', 'probabilities', 'class_ids', 'classes',
                       'all_class_ids', 'all_classes'}


def _config(**kwargs):
  kwargs.setdefault('tf_random_seed', 1)
  kwargs.setdefault('save_summary_steps', 1000)
  kwargs.setdefault('log_step_count_steps', 1000)
  return tfe.RunConfig(**kwargs)


def _data(task, train_size=1024):
  return lib.make_data(train_size, seed=0, task=task), lib.make_data(512, seed=1, task=task)


def _predictions(est, features):
  return list(est.predict(lib.eval_input_fn(features)))


def _wide_deep_classifier(model_dir, config=None, n_classes=2):
  return tfe.DNNLinearCombinedClassifier(
      model_dir=str(model_dir), linear_feature_columns=lib.linear_columns(),
      linear_optimizer=lambda: tf.compat.v1.train.FtrlOptimizer(0.1),
      dnn_feature_columns=lib.dnn_columns(),
      dnn_optimizer=tf.compat.v1.train.AdagradOptimizer(0.1), dnn_hidden_units=[16, 8],
      n_classes=n_classes, config=config or _config())


@pytest.fixture(scope='module')
def wide_deep_binary(tmp_path_factory):
  """A binary wide-and-deep classifier trained 300 steps (shared by the export test)."""
  (features, labels), _ = _data('binary')
  est = _wide_deep_classifier(tmp_path_factory.mktemp('wide_deep'))
  est.train(lib.train_input_fn(features, labels), max_steps=300)
  return est


def test_dnn_classifier_binary_learns_and_has_tf_estimator_keys(tmp_path):
  (features, labels), (eval_features, eval_labels) = _data('binary')
  est = tfe.DNNClassifier(hidden_units=[16, 8], feature_columns=lib.dnn_columns(),
                          model_dir=str(tmp_path), config=_config())
  est.train(lib.train_input_fn(features, labels), max_steps=600)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  assert set(metrics) == BINARY_EVAL_KEYS
  assert metrics['global_step'] == 600
  assert metrics['accuracy'] >= 0.92, metrics
  assert metrics['auc'] >= 0.97, metrics
  assert abs(metrics['label/mean'] - eval_labels.mean()) < 1e-6
  predictions = _predictions(est, eval_features)
  assert len(predictions) == 512
  assert set(predictions[0]) == BINARY_PREDICT_KEYS
  probabilities = np.stack([p['probabilities'] for p in predictions])
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
  class_ids = np.array([p['class_ids'][0] for p in predictions])
  np.testing.assert_array_equal(class_ids, probabilities.argmax(axis=1))
  assert predictions[0]['classes'][0] == str(class_ids[0]).encode()
  np.testing.assert_array_equal(predictions[0]['all_classes'], [b'0', b'1'])
  # tf.estimator's checkpoint names (partitioned variables saved under their full name).
  names = set(est.get_variable_names())
  assert {'dnn/hiddenlayer_0/kernel', 'dnn/hiddenlayer_0/bias', 'dnn/hiddenlayer_1/kernel',
          'dnn/logits/kernel', 'dnn/logits/bias', 'global_step',
          'dnn/input_from_feature_columns/input_layer/city_embedding/embedding_weights',
          'dnn/hiddenlayer_0/kernel/Adagrad'} <= names, names
  assert est.get_variable_value('dnn/input_from_feature_columns/input_layer/city_embedding/'
                                'embedding_weights').shape == (lib.HASH_BUCKETS, 4)


def test_dnn_classifier_multi_class_with_vocabulary_and_dropout(tmp_path):
  (features, labels), (eval_features, eval_labels) = _data('multiclass')
  vocabulary = ['low', 'mid', 'high']
  est = tfe.DNNClassifier(hidden_units=[32, 16], feature_columns=lib.dnn_columns(),
                          model_dir=str(tmp_path), n_classes=3, label_vocabulary=vocabulary,
                          dropout=0.1, optimizer='Adagrad', config=_config())
  string_labels = np.array(vocabulary)[labels]
  est.train(lib.train_input_fn(features, string_labels), max_steps=600)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, np.array(vocabulary)[eval_labels]))
  assert set(metrics) == MULTI_CLASS_EVAL_KEYS
  assert metrics['accuracy'] >= 0.85, metrics
  predictions = _predictions(est, eval_features)
  assert set(predictions[0]) == BINARY_PREDICT_KEYS - {'logistic'}
  assert predictions[0]['probabilities'].shape == (3,)
  np.testing.assert_array_equal(predictions[0]['all_classes'], [b'low', b'mid', b'high'])
  classes = [p['classes'][0].decode() for p in predictions]
  assert np.mean(np.array(classes) == np.array(vocabulary)[eval_labels]) >= 0.85


def test_dnn_regressor(tmp_path):
  (features, labels), (eval_features, eval_labels) = _data('regression')
  est = tfe.DNNRegressor(hidden_units=[16, 8], feature_columns=lib.dnn_columns(),
                         model_dir=str(tmp_path), config=_config())
  est.train(lib.train_input_fn(features, labels), max_steps=600)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  assert set(metrics) == REGRESSION_EVAL_KEYS
  # The target's variance is about 5; the model explains more than 95% of it.
  assert metrics['average_loss'] < 0.05 * eval_labels.var(), metrics
  predictions = _predictions(est, eval_features)
  assert set(predictions[0]) == {'predictions'}
  assert predictions[0]['predictions'].shape == (1,)
  predicted = np.array([p['predictions'][0] for p in predictions])
  np.testing.assert_allclose(np.mean((predicted - eval_labels) ** 2), metrics['average_loss'],
                             rtol=1e-4)


def test_dnn_classifier_with_batch_norm(tmp_path):
  (features, labels), (eval_features, eval_labels) = _data('binary')
  est = tfe.DNNClassifier(hidden_units=[16, 8], feature_columns=lib.dnn_columns(),
                          model_dir=str(tmp_path), batch_norm=True, config=_config())
  est.train(lib.train_input_fn(features, labels), max_steps=600)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  # Evaluation normalizes with the moving statistics, which follow tf.estimator's momentum
  # 0.999 and so still hold about 0.999**600 = 55% of their initial values: the ranking
  # (auc) is already good, the 0.5 threshold not yet.
  assert metrics['auc'] >= 0.97, metrics
  # The statistics were updated while training (the update ops ran with the train op).
  names = est.get_variable_names()
  for layer, width in ((0, 16), (1, 8)):
    scope = 'dnn/hiddenlayer_%d/batchnorm_%d/' % (layer, layer)
    assert {scope + v for v in ('gamma', 'beta', 'moving_mean', 'moving_variance')} <= set(
        names), names
    mean = est.get_variable_value(scope + 'moving_mean')
    assert mean.shape == (width,) and np.abs(mean).max() > 1e-2
    assert np.abs(est.get_variable_value(scope + 'moving_variance') - 1.0).max() > 1e-2


def test_wide_deep_classifier_trains_both_parts_one_step_at_a_time(wide_deep_binary):
  est = wide_deep_binary
  _, (eval_features, eval_labels) = _data('binary')
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  assert set(metrics) == BINARY_EVAL_KEYS
  assert metrics['global_step'] == 300  # One increment per step for two optimizers.
  assert metrics['accuracy'] >= 0.92, metrics
  names = set(est.get_variable_names())
  assert {'linear/linear_model/city/weights', 'linear/linear_model/color/weights',
          'linear/linear_model/x/weights', 'linear/linear_model/age_bucketized/weights',
          'linear/linear_model/bias_weights', 'linear/linear_model/city/weights/Ftrl',
          'dnn/hiddenlayer_0/kernel/Adagrad'} <= names, names
  assert np.abs(est.get_variable_value('linear/linear_model/city/weights')).max() > 0.1


def test_wide_deep_multi_class_and_regressor(tmp_path):
  (features, labels), (eval_features, eval_labels) = _data('multiclass')
  est = _wide_deep_classifier(tmp_path / 'multi', n_classes=3)
  est.train(lib.train_input_fn(features, labels), max_steps=300)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  assert set(metrics) == MULTI_CLASS_EVAL_KEYS
  assert metrics['accuracy'] >= 0.85, metrics

  (features, labels), (eval_features, eval_labels) = _data('regression')
  est = tfe.DNNLinearCombinedRegressor(
      model_dir=str(tmp_path / 'regression'), linear_feature_columns=lib.linear_columns(),
      linear_optimizer=tf.compat.v1.train.FtrlOptimizer(0.2), dnn_feature_columns=lib.dnn_columns(),
      dnn_optimizer='Adam', dnn_hidden_units=[16], dnn_dropout=0.05, config=_config())
  est.train(lib.train_input_fn(features, labels), max_steps=400)
  metrics = est.evaluate(lib.eval_input_fn(eval_features, eval_labels))
  assert set(metrics) == REGRESSION_EVAL_KEYS
  assert metrics['average_loss'] < 0.05 * eval_labels.var(), metrics
  assert set(_predictions(est, eval_features)[0]) == {'predictions'}


def test_export_with_parsing_receiver_serves_in_eager_tf2(wide_deep_binary, tmp_path):
  (features, labels), (eval_features, _) = _data('regression')
  regressor = tfe.DNNRegressor(hidden_units=[8], feature_columns=lib.dnn_columns(),
                               model_dir=str(tmp_path / 'regressor'), config=_config())
  regressor.train(lib.train_input_fn(features, labels), max_steps=50)
  spec = fc.make_parse_example_spec(lib.linear_columns() + lib.dnn_columns())
  receiver = tfe.export.build_parsing_serving_input_receiver_fn(spec)
  classifier_path = wide_deep_binary.export_saved_model(str(tmp_path / 'cls'), receiver).decode()
  regressor_path = regressor.export_saved_model(str(tmp_path / 'reg'), receiver).decode()

  sample = {k: v[:7] for k, v in eval_features.items()}
  np.save(str(tmp_path / 'examples.npy'), np.array(lib.serialized_examples(sample),
                                                    dtype=object), allow_pickle=True)
  script = (
      'import json, sys, numpy as np, tensorflow as tf\n'
      'assert tf.executing_eagerly()\n'
      'examples = tf.constant(list(np.load(sys.argv[3], allow_pickle=True)))\n'
      'out = {}\n'
      'cls = tf.saved_model.load(sys.argv[1])\n'
      'reg = tf.saved_model.load(sys.argv[2])\n'
      'out["cls_signatures"] = sorted(cls.signatures.keys())\n'
      'out["reg_signatures"] = sorted(reg.signatures.keys())\n'
      'out["scores"] = cls.signatures["serving_default"](inputs=examples)["scores"]'
      '.numpy().tolist()\n'
      'out["logistic"] = cls.signatures["regression"](inputs=examples)["outputs"]'
      '.numpy().tolist()\n'
      'predict = cls.signatures["predict"](examples=examples)\n'
      'out["predict_keys"] = sorted(predict.keys())\n'
      'out["class_ids"] = predict["class_ids"].numpy().tolist()\n'
      'out["regression"] = reg.signatures["serving_default"](inputs=examples)["outputs"]'
      '.numpy().tolist()\n'
      'print("RESULT " + json.dumps(out))\n')
  result = subprocess.run(
      [sys.executable, '-c', script, classifier_path, regressor_path,
       str(tmp_path / 'examples.npy')], capture_output=True, text=True, timeout=120,
      env=dict(os.environ, PYTHONPATH=REPO_ROOT, CUDA_VISIBLE_DEVICES='',
               TF_CPP_MIN_LOG_LEVEL='2'))
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.split('RESULT ', 1)[1])
  assert out['cls_signatures'] == ['classification', 'predict', 'regression', 'serving_default']
  assert out['reg_signatures'] == ['predict', 'regression', 'serving_default']
  expected = _predictions(wide_deep_binary, sample)
  np.testing.assert_allclose(out['scores'], [p['probabilities'] for p in expected], rtol=1e-4,
                             atol=1e-6)
  np.testing.assert_allclose(np.ravel(out['logistic']), [p['logistic'][0] for p in expected],
                             rtol=1e-4, atol=1e-6)
  assert set(out['predict_keys']) == BINARY_PREDICT_KEYS
  np.testing.assert_array_equal(np.ravel(out['class_ids']), [p['class_ids'][0] for p in expected])
  np.testing.assert_allclose(np.ravel(out['regression']),
                             [p['predictions'][0] for p in _predictions(regressor, sample)],
                             rtol=1e-4, atol=1e-5)


class _Clone1Devices(tf.compat.v1.train.SessionRunHook):
  """Records the devices of clone 1's matmuls."""

  def begin(self):
    self.devices = {op.device for op in tf.compat.v1.get_default_graph().get_operations()
                    if op.name.startswith('clone_1/') and op.type == 'MatMul'}


def _train_wide_deep_with_clones(model_dir, num_clones):
  deploy = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_devices=['/device:CPU:%d' % i for i in range(num_clones)])
  config = _config(session_config=test_util.session_config(num_cpus=2), deployment_config=deploy)
  est = _wide_deep_classifier(model_dir, config=config)
  (features, labels), _ = _data('binary', train_size=256)
  hook = _Clone1Devices()
  est.train(tfe.inputs.numpy_input_fn(features, labels, batch_size=32, num_epochs=None,
                                      shuffle=False), max_steps=20, hooks=[hook])
  return est, hook


def test_wide_deep_with_two_clones_trains_like_one(tmp_path):
  one, _ = _train_wide_deep_with_clones(tmp_path / 'one', 1)
  two, hook = _train_wide_deep_with_clones(tmp_path / 'two', 2)
  assert hook.devices and all(d.endswith('CPU:1') for d in hook.devices)
  names = one.get_variable_names()
  assert names == two.get_variable_names()
  assert two.get_variable_value('global_step') == 20
  for name in names:
    np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                               rtol=1e-4, atol=1e-5, err_msg=name)


class _CloneScopes(tf.compat.v1.train.SessionRunHook):
  """Records the clone scopes (`clone_N`) that hold a MatMul of the network."""

  def begin(self):
    self.scopes = {op.name.split('/')[0]
                   for op in tf.compat.v1.get_default_graph().get_operations()
                   if op.name.startswith('clone_') and op.type == 'MatMul'}


def test_dnn_classifier_num_clones_runconfig(tmp_path):
  config = _config(num_clones=2, clone_on_cpu=True)
  est = tfe.DNNClassifier(hidden_units=[8], feature_columns=lib.dnn_columns(),
                          model_dir=str(tmp_path), config=config)
  (features, labels), _ = _data('binary', train_size=256)
  hook = _CloneScopes()
  est.train(lib.train_input_fn(features, labels), max_steps=5, hooks=[hook])
  assert est.get_variable_value('global_step') == 5
  # RunConfig(num_clones=2) built the network twice, once per clone scope.
  assert hook.scopes == {'clone_0', 'clone_1'}, hook.scopes


def test_split_tables_are_pinned_to_the_ps_tasks_in_the_training_graph(tmp_path, monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['localhost:2000'], 'ps': ['localhost:2001', 'localhost:2002']},
      'task': {'type': 'chief', 'index': 0}}))
  config = tfe.RunConfig()
  assert config.num_ps_replicas == 2
  est = lib.wide_deep_for_cluster(str(tmp_path), config)
  features, labels = lib.make_data(8, task='binary')

  def variable_devices(mode, device_fn):
    # The Estimator trains under such a device function; evaluate() builds without one.
    with tf.Graph().as_default() as graph:
      with graph.device(device_fn):
        tf.compat.v1.train.create_global_step()
        est.model_fn({k: tf.constant(v) for k, v in features.items()}, tf.constant(labels),
                     mode, est.config)
      return {v.op.name: v.device for v in tf.compat.v1.global_variables()}

  devices = variable_devices(tfe.ModeKeys.TRAIN, tf.compat.v1.train.replica_device_setter(
      ps_tasks=2, worker_device='/job:chief'))
  for table in (lib.CITY_EMBEDDING, lib.CITY_LINEAR):
    assert devices[table + '/part_0'] == '/job:ps/task:0'
    assert devices[table + '/part_1'] == '/job:ps/task:1'
  # Slots live with their part.
  assert devices[lib.CITY_EMBEDDING + '/part_1/Adagrad'] == '/job:ps/task:1'
  assert devices[lib.CITY_LINEAR + '/part_1/Ftrl'] == '/job:ps/task:1'
  # Unsplit variables are spread round-robin over both ps tasks.
  unsplit = {d for n, d in devices.items() if n.endswith('/part_0') and
             n[:-len('/part_0')] + '/part_1' not in devices}
  assert unsplit == {'/job:ps/task:0', '/job:ps/task:1'}
  # Evaluation builds the same split variables, placed nowhere by the model.
  eval_devices = variable_devices(tfe.ModeKeys.EVAL, None)
  assert eval_devices[lib.CITY_EMBEDDING + '/part_1'] == ''
  assert set(eval_devices) == {n for n in devices if not n.endswith(('Adagrad', 'Ftrl', 'Ftrl_1'))}


def test_warm_start_from_another_model_dir(tmp_path):
  (features, labels), _ = _data('binary', train_size=256)
  source = tfe.DNNClassifier(hidden_units=[8], feature_columns=lib.dnn_columns(),
                             model_dir=str(tmp_path / 'source'), config=_config())
  source.train(lib.train_input_fn(features, labels), max_steps=20)
  warm = tfe.DNNClassifier(hidden_units=[8], feature_columns=lib.dnn_columns(),
                           model_dir=str(tmp_path / 'warm'), warm_start_from=source.model_dir,
                           optimizer=tf.compat.v1.train.GradientDescentOptimizer(0.0),
                           config=_config(tf_random_seed=2))
  warm.train(lib.train_input_fn(features, labels), max_steps=1)
  for name in ('dnn/hiddenlayer_0/kernel', 'dnn/logits/bias',
               'dnn/input_from_feature_columns/input_layer/city_embedding/embedding_weights'):
    np.testing.assert_allclose(warm.get_variable_value(name), source.get_variable_value(name),
                               err_msg=name)


def test_constructor_arguments_are_tf_estimators():
  def arguments(cls):
    return [(p.name, p.default) for p in inspect.signature(cls.__init__).parameters.values()
            if p.name != 'self']
  empty, mean = inspect.Parameter.empty, tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE
  relu = tf.nn.relu
  assert arguments(tfe.DNNClassifier) == [
      ('hidden_units', empty), ('feature_columns', empty), ('model_dir', None),
      ('n_classes', 2), ('weight_column', None), ('label_vocabulary', None),
      ('optimizer', 'Adagrad'), ('activation_fn', relu), ('dropout', None), ('config', None),
      ('warm_start_from', None), ('loss_reduction', mean), ('batch_norm', False),
      ('input_layer_partitioner', None)]
  assert arguments(tfe.DNNRegressor) == [
      ('hidden_units', empty), ('feature_columns', empty), ('model_dir', None),
      ('label_dimension', 1), ('weight_column', None), ('optimizer', 'Adagrad'),
      ('activation_fn', relu), ('dropout', None), ('config', None), ('warm_start_from', None),
      ('loss_reduction', mean), ('batch_norm', False), ('input_layer_partitioner', None)]
  wide_deep = [('model_dir', None), ('linear_feature_columns', None),
               ('linear_optimizer', 'Ftrl'), ('dnn_feature_columns', None),
               ('dnn_optimizer', 'Adagrad'), ('dnn_hidden_units', None),
               ('dnn_activation_fn', relu), ('dnn_dropout', None)]
  tail = [('config', None), ('warm_start_from', None), ('loss_reduction', mean),
          ('batch_norm', False), ('linear_sparse_combiner', 'sum'),
          ('input_layer_partitioner', None)]
  assert arguments(tfe.DNNLinearCombinedClassifier) == wide_deep + [
      ('n_classes', 2), ('weight_column', None), ('label_vocabulary', None)] + tail
  assert arguments(tfe.DNNLinearCombinedRegressor) == wide_deep + [
      ('label_dimension', 1), ('weight_column', None)] + tail


def test_argument_errors_name_the_argument(tmp_path):
  columns = lib.dnn_columns()
  with pytest.raises(ValueError, match='hidden_units must be a non-empty list'):
    tfe.DNNClassifier(hidden_units=[], feature_columns=columns)
  with pytest.raises(ValueError, match='feature_columns must not be empty'):
    tfe.DNNRegressor(hidden_units=[4], feature_columns=[])
  with pytest.raises(ValueError, match=r'dropout must be None or in \[0, 1\)'):
    tfe.DNNClassifier(hidden_units=[4], feature_columns=columns, dropout=1.5)
  with pytest.raises(ValueError, match='Either linear_feature_columns or dnn_feature_columns '
                     'must be defined.'):
    tfe.DNNLinearCombinedClassifier()
  with pytest.raises(ValueError, match='dnn_hidden_units must be defined when '
                     'dnn_feature_columns is specified.'):
    tfe.DNNLinearCombinedRegressor(dnn_feature_columns=columns)
  with pytest.raises(ValueError, match='Unsupported optimizer name for dnn_optimizer: Sgd'):
    tfe.DNNLinearCombinedRegressor(dnn_feature_columns=columns, dnn_hidden_units=[4],
                                   dnn_optimizer='Sgd')
  with pytest.raises(ValueError, match='linear_feature_columns: every item must be a feature '
                     'column'):
    tfe.DNNLinearCombinedClassifier(linear_feature_columns=['city'])
  with pytest.raises(ValueError, match="linear_sparse_combiner must be one of"):
    tfe.DNNLinearCombinedClassifier(linear_feature_columns=lib.linear_columns(),
                                    linear_sparse_combiner='max')
  sync = tf.compat.v1.train.SyncReplicasOptimizer(
      tf.compat.v1.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=1)
  est = tfe.DNNLinearCombinedClassifier(
      model_dir=str(tmp_path), dnn_feature_columns=columns, dnn_hidden_units=[4],
      dnn_optimizer=sync, config=_config())
  (features, labels), _ = _data('binary', train_size=64)
  with pytest.raises(ValueError, match='dnn_optimizer: SyncReplicasOptimizer does not support'):
    est.train(lib.train_input_fn(features, labels), max_steps=1)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
