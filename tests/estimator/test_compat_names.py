"""tf.estimator 2.15 names users import, as `tfe.<name>` (issue 26, item 7, without the heads).

Each test is the user's tf.estimator code with `tf.estimator.` replaced by
`tfe.`: parse specs for an input_fn over TFRecords, `add_metrics` on a canned
classifier, `VocabInfo` in `WarmStartSettings`, the in-memory evaluator hook
and the checkpoint-step stop hook.
"""

import inspect
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import test_util
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

fc = tf.compat.v1.feature_column


def _config(**kwargs):
  return tfe.RunConfig(tf_random_seed=1, session_config=test_util.session_config(num_cpus=1),
                       **kwargs)


def _write_examples(path, n=32):
  rng = np.random.RandomState(0)
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(n):
      x = float(rng.uniform(-1, 1))
      example = tf.train.Example(features=tf.train.Features(feature={
          'x': tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
          'w': tf.train.Feature(float_list=tf.train.FloatList(value=[1.0])),
          'kind': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x > 0)])),
      }))
      writer.write(example.SerializeToString())


def test_classifier_parse_example_spec_feeds_a_linear_classifier(tmp_path):
  path = str(tmp_path / 'train.tfrecord')
  _write_examples(path)
  feature_columns = [fc.numeric_column('x')]
  parsing_spec = tfe.classifier_parse_example_spec(
      feature_columns, label_key='kind', weight_column='w')
  assert parsing_spec['kind'] == tf.io.FixedLenFeature((1,), tf.int64)
  assert parsing_spec['w'] == tf.io.FixedLenFeature((1,), tf.float32)

  def input_fn():
    ds = tf.data.TFRecordDataset(path).repeat().batch(8)
    ds = ds.map(lambda s: tf.io.parse_example(s, parsing_spec))
    return ds.map(lambda f: (f, f.pop('kind')))

  classifier = tfe.LinearClassifier(feature_columns, weight_column='w',
                                    model_dir=str(tmp_path / 'm'), config=_config())
  classifier.train(input_fn, steps=20)
  assert classifier.evaluate(input_fn, steps=4)['accuracy'] > 0.8


def test_regressor_parse_example_spec():
  spec = tfe.regressor_parse_example_spec([fc.numeric_column('x', shape=[2])], label_key='y',
                                          label_dimension=3)
  assert spec == {'x': tf.io.FixedLenFeature((2,), tf.float32),
                  'y': tf.io.FixedLenFeature((3,), tf.float32)}
  with pytest.raises(ValueError, match='label should not be already in the feature columns'):
    tfe.regressor_parse_example_spec([fc.numeric_column('y')], label_key='y')


def _xy_input_fn():
  x = np.linspace(-1, 1, 32, dtype=np.float32).reshape([-1, 1])
  return tf.data.Dataset.from_tensor_slices(({'x': x}, (x > 0).astype(np.int64))).batch(8)


def test_add_metrics_to_a_canned_classifier(tmp_path):
  def my_auc(labels, predictions):
    return {'my_auc': tf.compat.v1.metrics.auc(labels, predictions['logistic'])}

  estimator = tfe.LinearClassifier([fc.numeric_column('x')], model_dir=str(tmp_path),
                                   config=_config())
  estimator = tfe.add_metrics(estimator, my_auc)
  estimator.train(lambda: _xy_input_fn().repeat(), steps=10)
  metrics = estimator.evaluate(_xy_input_fn)
  assert metrics['my_auc'] == pytest.approx(metrics['auc'], abs=1e-3)
  assert metrics['my_auc'] > 0.9
  with pytest.raises(ValueError, match='not expected args'):
    tfe.add_metrics(estimator, lambda labels, logits: {})


def test_vocab_info_in_warm_start_settings_is_tfs_class():
  vocab_info = tfe.VocabInfo(new_vocab='new.txt', new_vocab_size=3, num_oov_buckets=0,
                             old_vocab='old.txt')
  assert isinstance(vocab_info, tf.compat.v1.train.VocabInfo)
  settings = tfe.WarmStartSettings('/tmp/ckpt', var_name_to_vocab_info={'emb': vocab_info})
  assert settings.var_name_to_vocab_info['emb'] is vocab_info


def test_in_memory_evaluator_hook_writes_eval_events(tmp_path):
  estimator = tfe.LinearClassifier([fc.numeric_column('x')], model_dir=str(tmp_path),
                                   config=_config(save_checkpoints_steps=100))
  evaluator = tfe.experimental.InMemoryEvaluatorHook(estimator, _xy_input_fn, every_n_iter=5)
  estimator.train(lambda: _xy_input_fn().repeat(), max_steps=10, hooks=[evaluator])
  metrics = tfe.experimental.read_eval_metrics(estimator.eval_dir())
  assert sorted(metrics) == [5, 10]
  # The step-10 evaluation saw the final weights: evaluate() from the checkpoint agrees.
  from_checkpoint = estimator.evaluate(_xy_input_fn, name='check')
  assert metrics[10]['loss'] == pytest.approx(from_checkpoint['loss'], rel=1e-5)
  with pytest.raises(ValueError, match='every_n_iter'):
    tfe.experimental.InMemoryEvaluatorHook(estimator, _xy_input_fn, every_n_iter=0)


def test_make_stop_at_checkpoint_step_hook(tmp_path, monkeypatch):
  chief = tfe.LinearClassifier([fc.numeric_column('x')], model_dir=str(tmp_path),
                               config=_config())
  hook = tfe.experimental.make_stop_at_checkpoint_step_hook(chief, last_step=6)
  assert isinstance(hook, tfe.StopAtStepHook)
  chief.train(lambda: _xy_input_fn().repeat(), hooks=[hook])
  assert chief.get_variable_value('global_step') == 6

  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['localhost:1'], 'worker': ['localhost:2']},
      'task': {'type': 'worker', 'index': 0}}))
  worker_estimator = tfe.LinearClassifier([fc.numeric_column('x')], model_dir=str(tmp_path),
                                          config=_config())
  worker_hook = tfe.experimental.make_stop_at_checkpoint_step_hook(
      worker_estimator, last_step=6, wait_after_file_check_secs=0)
  assert not isinstance(worker_hook, tfe.StopAtStepHook)
  # The worker's own step reaches 6 while the chief's checkpoint is at 6: it stops at once.
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    increment = tf.compat.v1.assign_add(step, 1)
    with tf.compat.v1.train.MonitoredSession(hooks=[worker_hook]) as session:
      runs = 0
      while not session.should_stop():
        session.run(increment)
        runs += 1
  assert runs == 6
  assert os.path.exists(os.path.join(str(tmp_path), 'checkpoint'))


# The call shapes docs/migrating.md promises for the names of issue 26 items 6-9: the
# leading parameters (names and order) of tf.estimator 2.15; slimtrain may add more after.
_CALL_SHAPES = {
    'classifier_parse_example_spec': ['feature_columns', 'label_key', 'label_dtype',
                                      'label_default', 'weight_column'],
    'regressor_parse_example_spec': ['feature_columns', 'label_key', 'label_dtype',
                                     'label_default', 'label_dimension', 'weight_column'],
    'add_metrics': ['estimator', 'metric_fn'],
    'experimental.InMemoryEvaluatorHook': ['estimator', 'input_fn', 'steps', 'hooks', 'name',
                                           'every_n_iter'],
    'experimental.make_stop_at_checkpoint_step_hook': ['estimator', 'last_step',
                                                       'wait_after_file_check_secs'],
    'experimental.build_raw_supervised_input_receiver_fn': ['features', 'labels',
                                                            'default_batch_size'],
    'export.build_raw_supervised_input_receiver_fn': ['features', 'labels',
                                                      'default_batch_size'],
    'export.EvalOutput': ['loss', 'predictions', 'metrics'],
    'export.TrainOutput': ['loss', 'predictions', 'metrics'],
    'Estimator.export_saved_model': ['self', 'export_dir_base', 'serving_input_receiver_fn',
                                     'assets_extra', 'as_text', 'checkpoint_path',
                                     'experimental_mode'],
    'Estimator.experimental_export_all_saved_models': [
        'self', 'export_dir_base', 'input_receiver_fn_map', 'assets_extra', 'as_text',
        'checkpoint_path'],
    'Estimator.export_savedmodel': ['self', 'export_dir_base', 'serving_input_receiver_fn',
                                    'assets_extra', 'as_text', 'checkpoint_path',
                                    'strip_default_attrs'],
    'DNNEstimator': ['head', 'hidden_units', 'feature_columns', 'model_dir', 'optimizer',
                     'activation_fn', 'dropout', 'config', 'warm_start_from', 'batch_norm'],
    'LinearEstimator': ['head', 'feature_columns', 'model_dir', 'optimizer', 'config',
                        'sparse_combiner', 'warm_start_from'],
    'DNNLinearCombinedEstimator': [
        'head', 'model_dir', 'linear_feature_columns', 'linear_optimizer',
        'dnn_feature_columns', 'dnn_optimizer', 'dnn_hidden_units', 'dnn_activation_fn',
        'dnn_dropout', 'config', 'batch_norm', 'linear_sparse_combiner'],
    'BinaryClassHead': ['weight_column', 'thresholds', 'label_vocabulary', 'loss_reduction',
                        'loss_fn', 'name'],
    'MultiClassHead': ['n_classes', 'weight_column', 'label_vocabulary', 'loss_reduction',
                       'loss_fn', 'name'],
    'MultiLabelHead': ['n_classes', 'weight_column', 'thresholds', 'label_vocabulary',
                       'loss_reduction', 'loss_fn', 'classes_for_class_based_metrics', 'name'],
    'RegressionHead': ['label_dimension', 'weight_column', 'loss_reduction', 'loss_fn',
                       'inverse_link_fn', 'name'],
    'PoissonRegressionHead': ['label_dimension', 'weight_column', 'loss_reduction',
                              'compute_full_loss', 'name'],
    'LogisticRegressionHead': ['label_dimension', 'weight_column', 'loss_reduction', 'name'],
    'MultiHead': ['heads', 'head_weights'],
}


@pytest.mark.parametrize('name', sorted(_CALL_SHAPES))
def test_call_shape_of_each_new_migrating_row(name):
  target = tfe
  for part in name.split('.'):
    target = getattr(target, part)
  if isinstance(target, type):
    target = target.__init__
  parameters = [p for p in inspect.signature(target).parameters if p != 'self']
  expected = [p for p in _CALL_SHAPES[name] if p != 'self']
  assert parameters[:len(expected)] == expected
  # Every such name is in the migration guide.
  assert name.split('.')[-1] in _MIGRATING


_MIGRATING = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'docs', 'migrating.md')).read()


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
