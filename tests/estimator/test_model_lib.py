"""Tests for trainer.model_lib and `python -m trainer.model_main` on the shapes SSD.

The reference detector (configs/ssd_shapes.config) is shrunk to batch 2 on a
few generated 64x64 shapes images, and trained for a few steps.
"""

import glob
import json
import logging as py_logging
import os
import sys

import numpy as np
import pytest
from absl import app
from absl.testing import flagsaver
import tensorflow as tf

from builders import model_builder
from core import config_util
from tests import fork_server
from tests.estimator import model_lib_testlib
from tools import create_shapes_tf_record
from trainer import estimator as tfe
from trainer import model_lib
from trainer import model_main

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSD_CONFIG = os.path.join(REPO_ROOT, 'configs', 'ssd_shapes.config')


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('model_lib'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=8, num_val=3, height=64, width=64)
  return model_lib_testlib.write_small_config(directory, data)


def _model_main(*flags, tf_config=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  if tf_config:
    env['TF_CONFIG'] = json.dumps(tf_config)
  return fork_server.run([sys.executable, '-m', 'trainer.model_main'] + list(flags),
                        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=500)


def test_model_main_trains_evaluates_and_exports_servo(config_path, tmp_path):
  model_dir = str(tmp_path / 'model')
  proc = _model_main('--model_dir=' + model_dir, '--pipeline_config_path=' + config_path,
                     '--num_train_steps=3')
  assert proc.returncode == 0, proc.stderr[-5000:]
  assert tf.train.latest_checkpoint(model_dir).endswith('model.ckpt-3')
  assert os.path.exists(os.path.join(model_dir, 'pipeline.config'))
  assert glob.glob(os.path.join(model_dir, 'eval_0', 'events.out.tfevents.*'))
  exports = glob.glob(os.path.join(model_dir, 'export', 'Servo', '*', 'saved_model.pb'))
  assert len(exports) == 1, os.listdir(model_dir)
  assert os.path.basename(os.path.dirname(exports[0])).isdigit()
  assert 'DetectionBoxes_Precision/mAP@.50IOU' in proc.stderr

  # The export serves uint8 images under `inputs` and returns 1-based detections.
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta_graph = tf.compat.v1.saved_model.loader.load(sess, ['serve'],
                                                      os.path.dirname(exports[0]))
    signature = meta_graph.signature_def['serving_default']
    fetches = {k: v.name for k, v in signature.outputs.items()}
    images = np.random.RandomState(0).randint(0, 255, [2, 64, 64, 3]).astype(np.uint8)
    out = sess.run(fetches, {signature.inputs['inputs'].name: images})
  assert out['detection_boxes'].shape[:2] == out['detection_scores'].shape == (2, 20)
  num = out['num_detections'].astype(int)
  assert all(set(out['detection_classes'][i, :n]) <= {1.0, 2.0, 3.0} for i, n in enumerate(num))

  # Eval-only mode: the latest checkpoint of --checkpoint_dir, once.
  eval_dir = str(tmp_path / 'eval_only')
  proc = _model_main('--model_dir=' + eval_dir, '--pipeline_config_path=' + config_path,
                     '--checkpoint_dir=' + model_dir, '--run_once')
  assert proc.returncode == 0, proc.stderr[-5000:]
  assert glob.glob(os.path.join(eval_dir, 'eval_validation_data', 'events.out.tfevents.*'))


def test_model_main_evaluator_task_waits_for_the_first_checkpoint_within_eval_timeout(
    config_path, tmp_path):
  # The operator's TF_CONFIG for the evaluator pod of a job whose chief never trains.
  model_dir = str(tmp_path / 'model')
  cluster = {'chief': ['shapes-chief-0.ml.svc:2222'], 'ps': ['shapes-ps-0.ml.svc:2222'],
             'evaluator': ['shapes-evaluator-0.ml.svc:2222']}
  proc = _model_main('--model_dir=' + model_dir, '--pipeline_config_path=' + config_path,
                     '--eval_timeout=2', tf_config={
                         'cluster': cluster, 'task': {'type': 'evaluator', 'index': 0},
                         'environment': 'cloud'})
  assert proc.returncode == 0, proc.stderr[-5000:]
  assert ('evaluator: waiting up to 2 s for training to write its first checkpoint in %s'
          % model_dir) in proc.stderr
  assert 'evaluator: no checkpoint in %s within --eval_timeout=2 s' % model_dir in proc.stderr


def test_model_main_flag_errors(config_path, tmp_path):
  model_main.define_flags()
  model_main.define_flags()  # idempotent
  with flagsaver.flagsaver(model_dir=None, pipeline_config_path=config_path):
    with pytest.raises(app.UsageError, match='--model_dir is required'):
      model_main._check_flags()  # pylint: disable=protected-access
  with flagsaver.flagsaver(model_dir=str(tmp_path), pipeline_config_path=config_path,
                           run_once=True, checkpoint_dir=None):
    with pytest.raises(app.UsageError, match='--run_once needs --checkpoint_dir'):
      model_main._check_flags()  # pylint: disable=protected-access


def test_create_estimator_and_inputs_and_specs(config_path, tmp_path):
  run_config = tfe.RunConfig(model_dir=str(tmp_path / 'm'))
  d = model_lib.create_estimator_and_inputs(run_config, pipeline_config_path=config_path,
                                            sample_1_of_n_eval_examples=2)
  assert set(d) == {'estimator', 'train_input_fn', 'eval_input_fns', 'eval_input_names',
                    'eval_on_train_input_fn', 'predict_input_fn', 'train_steps'}
  assert isinstance(d['estimator'], tfe.Estimator)
  assert d['train_steps'] == 3 and len(d['eval_input_fns']) == 1
  assert model_lib.create_estimator_and_inputs(
      run_config, pipeline_config_path=config_path, train_steps=7)['train_steps'] == 7

  train_spec, eval_specs = model_lib.create_train_and_eval_specs(
      d['train_input_fn'], d['eval_input_fns'] * 2, d['eval_on_train_input_fn'],
      d['predict_input_fn'], d['train_steps'], eval_on_train_data=True)
  assert train_spec.max_steps == 3
  assert [s.name for s in eval_specs] == ['0', '1', 'eval_on_train']
  assert [e.name for e in eval_specs[0].exporters] == ['Servo']
  assert [e.name for e in eval_specs[1].exporters] == ['Servo_1']
  assert eval_specs[0].steps is None
  with pytest.raises(ValueError, match='no eval input'):
    model_lib.create_train_and_eval_specs(d['train_input_fn'], [], None, None, 3)
  # TPU arguments are logged once and change nothing (tests/estimator/test_model_lib_od.py).
  assert isinstance(model_lib.create_estimator_and_inputs(
      run_config, pipeline_config_path=config_path, use_tpu=True)['estimator'], tfe.Estimator)
  with pytest.raises(ValueError, match='pipeline config file not found'):
    model_lib.create_estimator_and_inputs(run_config, pipeline_config_path='/nonexistent')


def test_mixed_precision_is_refused_by_name_on_the_estimator_path(config_path):
  # Before, the field was ignored there: the job trained in float32, and without
  # the gradient norm check, which mixed precision turns off.
  configs = config_util.get_configs_from_pipeline_file(config_path)
  configs['train_config'].use_mixed_precision = True
  with pytest.raises(ValueError, match=r'train_config\.use_mixed_precision.*trainer\.train'):
    model_lib.create_model_fn(lambda **_: None, configs)


def test_sync_replicas_is_named_as_having_no_effect_on_the_estimator_path(config_path, caplog):
  # OD sample configs set it for the legacy trainer; model_lib trains its
  # workers asynchronously whatever it says, which the user must be told.
  configs = config_util.get_configs_from_pipeline_file(config_path)
  with caplog.at_level(py_logging.WARNING):
    model_lib.create_model_fn(lambda **_: None, configs)
  assert not [r for r in caplog.records if 'sync_replicas' in r.getMessage()]
  configs['train_config'].sync_replicas = True
  configs['train_config'].replicas_to_aggregate = 4
  with caplog.at_level(py_logging.WARNING):
    model_lib.create_model_fn(lambda **_: None, configs)
  warnings = [r.getMessage() for r in caplog.records if 'sync_replicas' in r.getMessage()]
  assert warnings == [
      'train_config.sync_replicas: true (replicas_to_aggregate 4) has no effect on the '
      'Estimator path (model_main, model_lib): its workers apply their gradients '
      'asynchronously. For synchronous replicas train with python -m trainer.train']


def _features_labels(input_fn):
  features, labels = tf.compat.v1.data.make_one_shot_iterator(input_fn()).get_next()
  return features, labels


def test_model_fn_modes(config_path, tmp_path):
  configs = config_util.get_configs_from_pipeline_file(config_path)
  d = model_lib.create_estimator_and_inputs(tfe.RunConfig(model_dir=str(tmp_path)),
                                            pipeline_config_path=config_path)

  def detection_model_fn(is_training, add_summaries=True):
    return model_builder.build(configs['model'], is_training=is_training,
                               add_summaries=add_summaries)

  model_fn = model_lib.create_model_fn(detection_model_fn, configs, model_lib.create_hparams())

  with tf.Graph().as_default():
    features, labels = _features_labels(d['train_input_fn'])
    assert features['image'].shape.as_list() == [2, 96, 96, 3]
    assert labels['groundtruth_classes'].shape.as_list() == [2, 100, 3]
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, tfe.ModeKeys.TRAIN)
    assert spec.loss.shape.ndims == 0 and spec.train_op is not None
    assert spec.scaffold.init_fn is None  # no fine_tune_checkpoint
    probe = tf.compat.v1.trainable_variables()[0]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      losses = [sess.run([spec.train_op, spec.loss])[1] for _ in range(2)]
      assert np.all(np.isfinite(losses))
      assert sess.run(tf.compat.v1.train.get_global_step()) == 2
      trained = sess.run(probe)
      checkpoint = tf.compat.v1.train.Saver().save(sess, str(tmp_path / 'ft' / 'model.ckpt'),
                                                   global_step=2)

  # Fine-tuning: the Scaffold's init_fn restores the detection checkpoint.
  configs['train_config'].fine_tune_checkpoint = checkpoint
  configs['train_config'].fine_tune_checkpoint_type = 'detection'
  with tf.Graph().as_default():
    features, labels = _features_labels(d['train_input_fn'])
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, tfe.ModeKeys.TRAIN)
    probe = tf.compat.v1.trainable_variables()[0]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      spec.scaffold.init_fn(sess)  # Scaffold binds itself as the first argument
      np.testing.assert_array_equal(sess.run(probe), trained)
      assert sess.run(tf.compat.v1.train.get_global_step()) == 0

  with tf.Graph().as_default():
    features, labels = _features_labels(d['eval_input_fns'][0])
    tf.compat.v1.train.get_or_create_global_step()
    spec = model_fn(features, labels, tfe.ModeKeys.EVAL)
    assert {'Loss/total_loss', 'Loss/localization_loss', 'DetectionBoxes_Precision/mAP',
            'DetectionBoxes_Precision/mAP@.50IOU'} <= set(spec.eval_metric_ops)
    value, update = spec.eval_metric_ops['DetectionBoxes_Precision/mAP@.50IOU']
    with tf.compat.v1.Session() as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer()])
      for _ in range(3):
        sess.run(update)
      m_ap = sess.run(value)
    assert 0.0 <= m_ap <= 1.0

  with tf.Graph().as_default():
    receiver = d['predict_input_fn']()
    spec = model_fn(receiver.features, None, tfe.ModeKeys.PREDICT)
    outputs = spec.export_outputs['serving_default'].outputs
    assert {'detection_boxes', 'detection_scores', 'detection_classes',
            'num_detections'} <= set(outputs)
    assert spec.predictions['detection_boxes'].shape.as_list()[-1] == 4


def test_coco_metrics_perfect_detections_score_one():
  metrics = model_lib.CocoDetectionMetrics([{'id': 1, 'name': 'a'}, {'id': 2, 'name': 'b'}],
                                           include_metrics_per_category=True)
  assert metrics.metric_names[1] == 'DetectionBoxes_Precision/mAP@.50IOU'
  assert metrics.metric_names[-1] == 'DetectionBoxes_PerformanceByCategory/mAP/b'
  boxes = np.array([[[0.1, 0.1, 0.5, 0.5], [0.5, 0.5, 0.9, 0.9]]], np.float32)
  classes = np.array([[1, 2]], np.int32)
  metrics.add_batch(boxes, classes, np.array([2]), boxes, np.array([[0.9, 0.8]]), classes,
                    np.array([2]), np.array([[100, 100]]))
  stats = metrics.evaluate()
  assert stats[1] == pytest.approx(1.0) and stats[-1] == pytest.approx(1.0)
  assert metrics.evaluate()[1] == 0.0  # cleared after each evaluation


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
