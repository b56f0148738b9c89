"""The OD API's 2017 code with imports changed: `utils.ops`, `utils.variables_helper`,
`optimizer_builder.build(config, global_summaries)`, a 2017 DetectionModel trained by
`trainer.train` (and by legacy_trainer_2017.py, a trainer script of the 2017 shape),
next to a model of the later interface (`true_image_shapes`) trained by the same
`trainer.train`."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from google.protobuf import text_format

# The user's imports, as changed from `object_detection.X`.
from builders import optimizer_builder
from core import model
from core import model_generations
from core import standard_fields as fields
from protos import train_pb2
from tests import test_util
from tests.trainer import legacy_trainer_2017
from trainer import trainer
from utils import ops as util_ops
from utils import variables_helper

tf.compat.v1.disable_eager_execution()

NUM_CLASSES = 3


def _run(*tensors):
  with tf.compat.v1.Session() as session:
    return session.run(list(tensors))


# ---------------------------------------------------------------------------
# utils.ops and utils.variables_helper.


def test_padded_one_hot_encoding_as_the_2017_trainer_calls_it():
  with tf.Graph().as_default():
    classes = util_ops.padded_one_hot_encoding(
        indices=tf.constant([2, 0], tf.int32), depth=NUM_CLASSES, left_pad=0)
    with_background = util_ops.padded_one_hot_encoding(tf.constant([1]), 2, 1)
    empty = util_ops.padded_one_hot_encoding(tf.zeros([0], tf.int32), NUM_CLASSES, 0)
    classes, with_background, empty = _run(classes, with_background, empty)
  np.testing.assert_array_equal(classes, [[0, 0, 1], [1, 0, 0]])
  assert classes.dtype == np.float32
  np.testing.assert_array_equal(with_background, [[0, 0, 1]])
  assert empty.shape == (0, NUM_CLASSES)
  assert util_ops.padded_one_hot_encoding(tf.constant([1]), depth=0, left_pad=0) is None
  with pytest.raises(ValueError, match='`depth` must be a non-negative integer'):
    util_ops.padded_one_hot_encoding(tf.constant([1]), depth=-1, left_pad=0)
  with pytest.raises(ValueError, match='`left_pad` must be a non-negative integer'):
    util_ops.padded_one_hot_encoding(tf.constant([1]), depth=2, left_pad=0.5)
  with pytest.raises(ValueError, match='`indices` must have rank 1, but has rank=2'):
    util_ops.padded_one_hot_encoding(tf.constant([[1]]), depth=2, left_pad=0)


def test_merge_boxes_with_multiple_labels_in_both_signatures():
  boxes = [[0.1, 0.1, 0.5, 0.5], [0.2, 0.2, 0.6, 0.6], [0.1, 0.1, 0.5, 0.5]]
  with tf.Graph().as_default():
    # 2017: (boxes, classes, num_classes) -> three values.
    merged_2017 = util_ops.merge_boxes_with_multiple_labels(
        tf.constant(boxes), tf.constant([0, 2, 1]), NUM_CLASSES)
    assert len(merged_2017) == 3
    # Later: (boxes, classes, confidences, num_classes, quantization_bins) -> four.
    merged = util_ops.merge_boxes_with_multiple_labels(
        tf.constant(boxes), tf.constant([0, 2, 1]), tf.constant([0.9, 0.8, 0.7]),
        NUM_CLASSES, quantization_bins=10000)
    assert len(merged) == 4
    # The 2017 form with num_classes by keyword.
    keyword_2017 = util_ops.merge_boxes_with_multiple_labels(
        boxes=tf.constant(boxes), classes=tf.constant([0, 2, 1]), num_classes=NUM_CLASSES)
    assert len(keyword_2017) == 3
    (boxes_2017, k_hot_2017, indices_2017), (m_boxes, m_k_hot, m_conf, m_indices) = (
        _run(*merged_2017), _run(*merged))
  np.testing.assert_allclose(boxes_2017, [boxes[0], boxes[1]])
  np.testing.assert_array_equal(k_hot_2017, [[1, 1, 0], [0, 0, 1]])
  assert k_hot_2017.dtype == np.int32
  np.testing.assert_array_equal(indices_2017, [0, 1])
  np.testing.assert_allclose(m_boxes, boxes_2017)
  np.testing.assert_array_equal(m_k_hot, k_hot_2017)
  np.testing.assert_allclose(m_conf, [[0.9, 0.7, 0], [0, 0, 0.8]])
  np.testing.assert_array_equal(m_indices, [0, 1])


def test_utils_variables_helper_is_core_variables_helper():
  from core import variables_helper as core_helper  # noqa: PLC0415
  for name in ('filter_variables', 'multiply_gradients_matching_regex',
               'freeze_gradients_matching_regex', 'get_variables_available_in_checkpoint'):
    assert getattr(variables_helper, name) is getattr(core_helper, name)


# ---------------------------------------------------------------------------
# optimizer_builder.build, 2017 and later call shapes.

_TRAIN_CONFIG = """
    batch_size: 4
    num_steps: 5
    startup_delay_steps: 0
    batch_queue_capacity: 8
    num_batch_queue_threads: 1
    prefetch_queue_capacity: 2
    save_interval_secs: 0
    optimizer { momentum_optimizer {
      learning_rate { constant_learning_rate { learning_rate: 0.05 } }
      momentum_optimizer_value: 0.9 } }
"""


def _train_config(**fields_to_set):
  config = text_format.Parse(_TRAIN_CONFIG, train_pb2.TrainConfig())
  for key, value in fields_to_set.items():
    setattr(config, key, value)
  return config


def test_optimizer_builder_build_with_a_set_of_global_summaries_returns_the_optimizer():
  train_config = _train_config()
  with tf.Graph().as_default():
    global_summaries = set([])
    training_optimizer = optimizer_builder.build(train_config.optimizer, global_summaries)
    assert isinstance(training_optimizer, tf.compat.v1.train.MomentumOptimizer)
    assert len(global_summaries) == 1
    summary = next(iter(global_summaries))
    assert summary.op.type == 'ScalarSummary'
    assert summary.op.name == 'LearningRate/learning_rate'
    by_keyword = set()
    optimizer_builder.build(train_config.optimizer, global_summaries=by_keyword)
    assert len(by_keyword) == 1
    with pytest.raises(ValueError, match='global_summaries must be a set'):
      optimizer_builder.build(train_config.optimizer, global_summaries='Learning_Rate')
    # The later call shape is unchanged.
    optimizer, summary_vars = optimizer_builder.build(train_config.optimizer)
    assert isinstance(optimizer, tf.compat.v1.train.MomentumOptimizer)
    assert len(summary_vars) == 1


# ---------------------------------------------------------------------------
# DetectionModels of both generations.


def create_tensor_dict_fn():
  """One synthetic example with two labels on the same box (for the k-hot merge)."""
  image = tf.random.uniform([8, 8, 3], 0, 255, dtype=tf.float32, seed=1)
  center = tf.reduce_mean(image) / 255.0
  box = tf.stack([center * 0.5, center * 0.5, 0.5 + center * 0.5, 0.5 + center * 0.5])
  return {
      fields.InputDataFields.image: image,
      fields.InputDataFields.groundtruth_boxes: tf.stack([box, box]),
      fields.InputDataFields.groundtruth_classes: tf.constant([1, 3], tf.int64),
  }


class Detector2017(model.DetectionModel):
  """A detection model written against the 2017 DetectionModel interface."""

  def preprocess(self, inputs):
    return inputs / 255.0

  def predict(self, preprocessed_inputs):
    features = slim.conv2d(preprocessed_inputs, 4, [3, 3], scope='FeatureExtractor/conv')
    pooled = tf.reduce_mean(features, [1, 2])
    return {'box_encodings': slim.fully_connected(pooled, 4, activation_fn=None,
                                                  scope='BoxPredictor'),
            'class_predictions': slim.fully_connected(
                pooled, self.num_classes, activation_fn=None, scope='ClassPredictor')}

  def postprocess(self, prediction_dict, **params):
    return {'detection_boxes': tf.expand_dims(prediction_dict['box_encodings'], 1)}

  def loss(self, prediction_dict):
    boxes = tf.stack([b[0] for b in self.groundtruth_lists(fields.BoxListFields.boxes)])
    classes = tf.stack([tf.reduce_max(c, 0) for c in
                        self.groundtruth_lists(fields.BoxListFields.classes)])
    return {
        'localization_loss': tf.reduce_mean(
            tf.square(prediction_dict['box_encodings'] - boxes)),
        'classification_loss': tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(classes, tf.float32),
            logits=prediction_dict['class_predictions'])),
    }

  def restore_map(self, from_detection_checkpoint=True):
    self.asked_from_detection_checkpoint = from_detection_checkpoint
    return {v.op.name: v for v in slim.get_model_variables()}


class DetectorLater(Detector2017):
  """The same detector on the later interface (true_image_shapes everywhere)."""

  def preprocess(self, inputs):
    shapes = tf.tile(tf.constant([[8, 8, 3]], tf.int32), [tf.shape(inputs)[0], 1])
    return inputs / 255.0, shapes

  def predict(self, preprocessed_inputs, true_image_shapes):
    return super().predict(preprocessed_inputs)

  def postprocess(self, prediction_dict, true_image_shapes, **params):
    return super().postprocess(prediction_dict)

  def loss(self, prediction_dict, true_image_shapes):
    return super().loss(prediction_dict)

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return super().restore_map()


def test_the_generation_is_read_from_the_model():
  assert not model_generations.takes_true_image_shapes(Detector2017(NUM_CLASSES))
  assert model_generations.takes_true_image_shapes(DetectorLater(NUM_CLASSES))


def _trainer_train(train_dir, create_model_fn, train_config):
  # The seed trainer's call, as train.py makes it.
  return trainer.train(create_tensor_dict_fn, create_model_fn, train_config, '', 0, 1, 1,
                       True, 0, 'worker', True, train_dir,
                       session_config_override=test_util.session_config())


def _read(train_dir, name):
  return tf.train.load_variable(tf.train.latest_checkpoint(train_dir), name)


@pytest.mark.parametrize('detector', [Detector2017, DetectorLater])
def test_trainer_train_drives_either_generation(tmp_path, detector):
  train_dir = str(tmp_path / 'train')
  loss = _trainer_train(train_dir, lambda: detector(NUM_CLASSES),
                        _train_config(merge_multiple_label_boxes=True))
  assert np.isfinite(loss)
  assert _read(train_dir, 'global_step') == 5
  assert _read(train_dir, 'BoxPredictor/weights').shape == (4, 4)


def test_trainer_train_fine_tunes_a_2017_model_through_from_detection_checkpoint(tmp_path):
  source, target = str(tmp_path / 'source'), str(tmp_path / 'target')
  _trainer_train(source, lambda: Detector2017(NUM_CLASSES), _train_config())
  asked = []

  def create_model_fn():
    detector = Detector2017(NUM_CLASSES)
    original = detector.restore_map

    def restore_map(from_detection_checkpoint=True):
      asked.append(from_detection_checkpoint)
      return original(from_detection_checkpoint)
    detector.restore_map = restore_map
    return detector

  config = _train_config(num_steps=1, fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         from_detection_checkpoint=True)
  config.optimizer.momentum_optimizer.learning_rate.constant_learning_rate.learning_rate = 0
  _trainer_train(target, create_model_fn, config)
  assert asked == [True]
  np.testing.assert_array_equal(_read(source, 'BoxPredictor/weights'),
                                _read(target, 'BoxPredictor/weights'))


def test_the_users_2017_trainer_py_trains_a_2017_model(tmp_path):
  train_dir = str(tmp_path / 'train')
  config = _train_config(merge_multiple_label_boxes=True, bias_grad_multiplier=2.0)
  legacy_trainer_2017.train(create_tensor_dict_fn, lambda: Detector2017(NUM_CLASSES),
                            config, master='', task=0, num_clones=1, worker_replicas=1,
                            clone_on_cpu=True, ps_tasks=0, worker_job_name='worker',
                            is_chief=True, train_dir=train_dir)
  assert _read(train_dir, 'global_step') == 5
  events = tf.io.gfile.glob(os.path.join(train_dir, 'events.out.tfevents.*'))
  tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(path)
          for value in event.summary.value}
  assert 'LearningRate/LearningRate/learning_rate' in tags and 'TotalLoss' in tags


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
