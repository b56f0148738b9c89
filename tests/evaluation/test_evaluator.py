"""trainer.evaluator on real checkpoints, TFRecords and event files."""

import os
import re
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from builders import input_reader_builder
from builders import model_builder
from core import config_util
from tests.evaluation import eval_testlib
from trainer import eval_images
from trainer import evaluator

tf.compat.v1.disable_eager_execution()

MAP50 = 'DetectionBoxes_Precision/mAP@.50IOU'
NUM_VAL = 6


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A detector trained 3 steps: (configs, train_dir, final checkpoint)."""
  directory = str(tmp_path_factory.mktemp('trained'))
  configs, _ = eval_testlib.shapes_configs(directory, num_val=NUM_VAL, num_steps=3)
  train_dir = os.path.join(directory, 'train')
  checkpoint = eval_testlib.train_detector(configs, train_dir)
  return configs, train_dir, checkpoint


def test_evaluates_a_trained_detector_and_writes_summaries(trained, tmp_path):
  configs, train_dir, checkpoint = trained
  eval_dir = str(tmp_path / 'eval')
  result = evaluator.evaluate_from_configs(configs, train_dir, eval_dir, run_once=True,
                                           return_result=True)
  assert result.checkpoint_path == checkpoint
  assert result.global_step == 3
  assert result.stop_reason == evaluator.STOP_RUN_ONCE
  metrics = result.metrics
  for name in ('DetectionBoxes_Precision/mAP', MAP50, 'DetectionBoxes_Precision/mAP@.75IOU',
               'DetectionBoxes_PerformanceByCategory/mAP/rectangle',
               'DetectionBoxes_PerformanceByCategory/mAP/ellipse',
               'DetectionBoxes_PerformanceByCategory/mAP/triangle'):
    assert -1.0 <= metrics[name] <= 1.0, name
  assert metrics['Loss/classification_loss'] > 0
  assert metrics['Loss/localization_loss'] >= 0

  events = eval_testlib.read_events(eval_dir)
  assert events[MAP50] == [(3, pytest.approx(metrics[MAP50]))]
  image_tags = sorted(tag for tag in events if tag.startswith(evaluator.VISUALIZATION_TAG))
  assert len(image_tags) == 4   # eval_config.num_visualizations
  step, image = events[image_tags[0]][0]
  assert step == 3
  # Detections left, groundtruth right, a 2-pixel gap between; each panel
  # enlarged 2x (96 -> 192) under its title.
  size = 2 * eval_testlib.IMAGE_SIZE
  assert (image.height, image.width) == (eval_images.title_height() + size, 2 * size + 2)
  assert image.encoded_image_string.startswith(b'\x89PNG')


class _Oracle:
  """Evaluates the OracleDetector (a cheap graph) on shapes val data."""

  def __init__(self, directory, **oracle_args):
    self.configs, _ = eval_testlib.shapes_configs(directory, num_train=1, num_val=NUM_VAL)
    self.checkpoint_dir = os.path.join(directory, 'oracle')
    self.eval_dir = os.path.join(directory, 'eval')
    self.eval_config = self.configs['eval_config']
    self.eval_config.include_metrics_per_category = True
    self._oracle_args = oracle_args
    self._tensor_dict = None

  def save(self, step):
    return eval_testlib.save_oracle_checkpoint(
        os.path.join(self.checkpoint_dir, 'model.ckpt'), global_step=step)

  def _create_input_dict(self):
    self._tensor_dict = input_reader_builder.build(self.configs['eval_input_config'])
    return self._tensor_dict

  def _create_model(self):
    return eval_testlib.OracleDetector(self._tensor_dict, **self._oracle_args)

  def evaluate(self, checkpoint_dir=None, **kwargs):
    return evaluator.evaluate_with_result(
        self._create_input_dict, self._create_model, self.eval_config,
        evaluator.categories_from_configs(self.configs), checkpoint_dir or self.checkpoint_dir,
        self.eval_dir, **kwargs)


def test_oracle_detections_give_map_one(tmp_path):
  oracle = _Oracle(str(tmp_path))
  oracle.eval_config.visualization_export_dir = str(tmp_path / 'pngs')
  checkpoint = oracle.save(step=0)
  result = oracle.evaluate(checkpoint)
  assert (result.checkpoint_path, result.global_step) == (checkpoint, 0)
  metrics = result.metrics
  assert metrics['DetectionBoxes_Precision/mAP'] == pytest.approx(1.0)
  assert metrics[MAP50] == pytest.approx(1.0)
  for name in ('rectangle', 'ellipse', 'triangle'):
    assert metrics['DetectionBoxes_PerformanceByCategory/mAP/' + name] == pytest.approx(1.0)
  assert metrics['Loss/oracle_loss'] == pytest.approx(0.5)
  # visualization_export_dir gets the same images as PNG files.
  assert sorted(os.listdir(tmp_path / 'pngs')) == ['export-0-%d.png' % i for i in range(4)]


def test_oracle_with_wrong_classes_gives_map_zero(tmp_path):
  oracle = _Oracle(str(tmp_path), class_shift=1)
  metrics = oracle.evaluate(oracle.save(step=0)).metrics
  assert metrics['DetectionBoxes_Precision/mAP'] == 0.0
  assert metrics[MAP50] == 0.0


def _wait_for_events(eval_dir, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if os.path.isdir(eval_dir) and any(name.startswith('events.out') and os.path.getsize(
        os.path.join(eval_dir, name)) > 100 for name in os.listdir(eval_dir)):
      return
    time.sleep(0.1)
  raise TimeoutError('no eval summaries in %s' % eval_dir)


def test_continuous_eval_stops_after_the_final_checkpoint(tmp_path):
  oracle = _Oracle(str(tmp_path))
  oracle.save(step=0)

  def publish_final_checkpoint():
    _wait_for_events(oracle.eval_dir)   # the first checkpoint has been evaluated
    oracle.save(step=5)

  thread = threading.Thread(target=publish_final_checkpoint)
  thread.start()
  try:
    result = oracle.evaluate(num_steps=5, eval_timeout=60)
  finally:
    thread.join()
  assert result.stop_reason == evaluator.STOP_FINAL_CHECKPOINT
  assert (result.num_evaluations, result.global_step) == (2, 5)
  steps = [step for step, _ in eval_testlib.read_events(oracle.eval_dir)[MAP50]]
  assert steps == [0, 5]


def test_continuous_eval_stops_after_the_timeout(tmp_path):
  oracle = _Oracle(str(tmp_path))
  oracle.save(step=3)
  result = oracle.evaluate(num_steps=100, eval_timeout=2)
  returned = time.time()
  assert result.stop_reason == evaluator.STOP_TIMEOUT
  assert (result.num_evaluations, result.global_step) == (1, 3)
  # TF's checkpoints_iterator (as slim's and tf.estimator's evaluation loops)
  # polls once a second and gives up when the next poll would pass the
  # timeout: it waits at least timeout - 1 s after the last evaluation, timed
  # from the evaluation's own summaries (building the graph and restoring
  # do not count).
  evaluated = max(event.wall_time for name in tf.io.gfile.listdir(oracle.eval_dir)
                  if name.startswith('events.out.tfevents')
                  for event in tf.compat.v1.train.summary_iterator(
                      os.path.join(oracle.eval_dir, name))
                  if event.summary.value)
  assert returned - evaluated >= 2 - 1, returned - evaluated
  assert result.metrics[MAP50] == pytest.approx(1.0)


def test_continuous_eval_stops_after_max_evals(tmp_path):
  oracle = _Oracle(str(tmp_path))
  oracle.save(step=3)
  oracle.eval_config.max_evals = 1
  result = oracle.evaluate(num_steps=100, eval_timeout=60)
  assert (result.stop_reason, result.num_evaluations) == (evaluator.STOP_MAX_EVALS, 1)


def test_run_once_evaluates_the_latest_checkpoint(tmp_path):
  oracle = _Oracle(str(tmp_path))
  oracle.save(step=1)
  latest = oracle.save(step=2)
  result = oracle.evaluate(run_once=True)
  assert (result.checkpoint_path, result.global_step, result.stop_reason) == (
      latest, 2, evaluator.STOP_RUN_ONCE)


def test_classifier_top1_top5_accuracy(tmp_path):
  pattern, label_map_path = eval_testlib.classification_data(str(tmp_path / 'data'))
  configs = config_util.get_configs_from_pipeline_file(eval_testlib.CLASSIFIER_CONFIG)
  eval_input = configs['eval_input_config']
  del eval_input.tf_record_input_reader.input_path[:]
  eval_input.tf_record_input_reader.input_path.append(pattern)
  eval_input.label_map_path = label_map_path
  checkpoint = eval_testlib.save_initial_checkpoint(
      configs['model'], str(tmp_path / 'train' / 'model.ckpt'), global_step=7)
  result = evaluator.evaluate_from_configs(configs, checkpoint, str(tmp_path / 'eval'),
                                           return_result=True)
  assert result.global_step == 7

  # The same model and weights, run directly: predicted class vs label - 1.
  expected_hits = []
  with tf.Graph().as_default():
    config = type(eval_input)()
    config.CopyFrom(eval_input)
    tensor_dict = input_reader_builder.build(config)
    model = model_builder.build(configs['model'], is_training=False)
    image = tf.cast(tensor_dict['image'], tf.float32)[tf.newaxis]
    logits = model.predict(*model.preprocess(image))['logits']
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      tf.compat.v1.train.Saver(tf.compat.v1.global_variables()).restore(sess, checkpoint)
      while True:
        try:
          values, label = sess.run([logits, tensor_dict['label']])
        except tf.errors.OutOfRangeError:
          break
        expected_hits.append(int(np.argmax(values[0])) == label - 1)
  assert len(expected_hits) == 12
  assert result.metrics['Accuracy/top_1'] == pytest.approx(np.mean(expected_hits))
  assert result.metrics['Accuracy/top_5'] == 1.0   # 3 classes
  assert result.metrics['Loss/classification_loss'] > 0


def test_continuous_eval_waits_for_a_train_dir_training_has_not_created(tmp_path, caplog):
  # On Kubernetes the evaluator's pod starts with the chief's, before train_dir exists.
  oracle = _Oracle(str(tmp_path))
  assert not os.path.exists(oracle.checkpoint_dir)

  def train_later():
    deadline = time.time() + 120
    while not os.path.isdir(oracle.eval_dir) and time.time() < deadline:
      time.sleep(0.05)   # the evaluator accepted the missing directory
    oracle.save(step=5)

  thread = threading.Thread(target=train_later)
  thread.start()
  try:
    with caplog.at_level('INFO'):
      result = oracle.evaluate(num_steps=5, eval_timeout=60)
  finally:
    thread.join()
  # Under load the training thread may create the directory before the evaluator looks:
  # then it waits as for any directory without a checkpoint yet.
  assert re.search(r'checkpoint_dir %s (does not exist|holds no checkpoint) yet: waiting up '
                   r'to 60 s' % re.escape(oracle.checkpoint_dir), caplog.text) or (
                       'Waiting for new checkpoint at %s' % oracle.checkpoint_dir
                       in caplog.text), caplog.text
  assert (result.stop_reason, result.num_evaluations, result.global_step) == (
      evaluator.STOP_FINAL_CHECKPOINT, 1, 5)
  assert result.metrics[MAP50] == pytest.approx(1.0)


def test_continuous_eval_of_a_train_dir_that_never_comes_times_out(tmp_path):
  oracle = _Oracle(str(tmp_path))
  result = oracle.evaluate(str(tmp_path / 'never'), num_steps=5, eval_timeout=2)
  assert (result.stop_reason, result.num_evaluations, result.metrics) == (
      evaluator.STOP_TIMEOUT, 0, {})


def test_missing_or_empty_checkpoint_dir_is_an_error(tmp_path):
  oracle = _Oracle(str(tmp_path))
  # Nothing to evaluate once: run_once does not wait.
  with pytest.raises(ValueError, match='checkpoint_dir not found: .*nowhere: no such directory'):
    oracle.evaluate(str(tmp_path / 'nowhere'), run_once=True)
  # A checkpoint prefix that is not there cannot appear by waiting.
  with pytest.raises(ValueError, match=r'no such checkpoint prefix \(there is no .*'
                     r'model\.ckpt-7\.index\)'):
    oracle.evaluate(str(tmp_path / 'nowhere' / 'model.ckpt-7'), eval_timeout=60)
  # Nor a name that is missing inside an existing training directory.
  oracle.save(step=1)
  with pytest.raises(ValueError, match='no such directory or checkpoint prefix in the '
                     'training directory .*oracle'):
    oracle.evaluate(os.path.join(oracle.checkpoint_dir, 'model.ckpt-1000-typo'),
                    eval_timeout=60)
  empty = tmp_path / 'empty'
  empty.mkdir()
  with pytest.raises(ValueError, match='No checkpoint found in directory .*empty'):
    oracle.evaluate(str(empty), run_once=True)


def test_checkpoint_of_another_model_is_an_error(trained, tmp_path):
  configs = trained[0]
  other = eval_testlib.save_oracle_checkpoint(str(tmp_path / 'oracle' / 'model.ckpt'))
  with pytest.raises(ValueError, match='lacks .* variables the eval model needs'):
    evaluator.evaluate_from_configs(configs, other, str(tmp_path / 'e'))


def test_eval_input_without_examples_is_an_error(tmp_path):
  oracle = _Oracle(str(tmp_path))
  empty_record = str(tmp_path / 'empty.tfrecord')
  with tf.io.TFRecordWriter(empty_record):
    pass
  paths = oracle.configs['eval_input_config'].tf_record_input_reader.input_path
  del paths[:]
  paths.append(empty_record)
  with pytest.raises(ValueError, match='produced no examples'):
    oracle.evaluate(oracle.save(step=0))


def test_draw_boxes_draws_edged_outlines_of_boxes_above_the_threshold():
  image = np.full([20, 30, 3], 100, np.uint8)
  drawn = eval_images.draw_boxes(image, [[0.25, 0.2, 0.75, 0.8], [0, 0, 1, 1]], [1, 2],
                                 scores=[0.9, 0.1], min_score_thresh=0.5, thickness=1)
  top, left = int(round(0.25 * 19)), int(round(0.2 * 29))
  np.testing.assert_array_equal(drawn[top, left + 3], eval_images.class_colour(1))
  np.testing.assert_array_equal(drawn[top - 1, left + 3], [0, 0, 0])   # black edge outside
  np.testing.assert_array_equal(drawn[top + 1, left + 3], [0, 0, 0])   # and inside
  np.testing.assert_array_equal(drawn[10, 15], [100, 100, 100])        # interior untouched
  np.testing.assert_array_equal(drawn[0, 0], [100, 100, 100])          # low score: not drawn
  np.testing.assert_array_equal(image, 100)                            # input not modified
  assert eval_images.upscale(drawn, 2).shape == (40, 60, 3)
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    decoded = sess.run(tf.io.decode_png(eval_images.encode_png(drawn)))
  np.testing.assert_array_equal(decoded, drawn)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
