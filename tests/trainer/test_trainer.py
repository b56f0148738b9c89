"""Tests for trainer.trainer.train() with small real models on CPU devices."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from core import model as model_lib
from core import standard_fields as fields
from protos import train_pb2
from google.protobuf import text_format
from tests import test_util
from trainer import trainer
from trainer import training_loop

tf.compat.v1.disable_eager_execution()

NUM_CLASSES = 2


def create_tensor_dict_fn():
  """One synthetic example: the image's mean colour encodes the box."""
  image = tf.random.uniform([8, 8, 3], 0, 255, dtype=tf.float32, seed=1)
  center = tf.reduce_mean(image) / 255.0
  box = tf.stack([center * 0.5, center * 0.5, 0.5 + center * 0.5, 0.5 + center * 0.5])
  return {
      fields.InputDataFields.image: image,
      fields.InputDataFields.groundtruth_boxes: tf.reshape(box, [1, 4]),
      fields.InputDataFields.groundtruth_classes: tf.constant([1], tf.int64),
  }


class TinyDetectionModel(model_lib.DetectionModel):
  """A regression 'detector': enough to exercise every trainer path."""

  def preprocess(self, inputs):
    shapes = tf.tile(tf.constant([[8, 8, 3]], tf.int32), [tf.shape(inputs)[0], 1])
    return inputs / 255.0, shapes

  def predict(self, preprocessed_inputs, true_image_shapes):
    features = slim.conv2d(preprocessed_inputs, 4, [3, 3], scope='FeatureExtractor/conv')
    pooled = tf.reduce_mean(features, [1, 2])
    return {
        'boxes': slim.fully_connected(pooled, 4, activation_fn=None, scope='BoxPredictor'),
        'logits': slim.fully_connected(pooled, NUM_CLASSES, activation_fn=None,
                                       scope='ClassPredictor'),
    }

  def postprocess(self, prediction_dict, true_image_shapes, **params):
    return {'detection_boxes': tf.expand_dims(prediction_dict['boxes'], 1)}

  def loss(self, prediction_dict, true_image_shapes):
    boxes = tf.stack([b[0] for b in self.groundtruth_lists('boxes')])
    classes = tf.stack([c[0] for c in self.groundtruth_lists('classes')])
    return {
        'Loss/localization_loss': tf.reduce_mean(
            tf.square(prediction_dict['boxes'] - boxes)),
        'Loss/classification_loss': tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits(
                labels=classes, logits=prediction_dict['logits'])),
    }

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return {v.op.name: v for v in slim.get_model_variables()}


def _train_config(**overrides):
  config = text_format.Parse("""
      batch_size: 4
      num_steps: 6
      startup_delay_steps: 0
      batch_queue_capacity: 8
      num_batch_queue_threads: 1
      prefetch_queue_capacity: 2
      save_interval_secs: 0
      log_every_n_steps: 2
      optimizer { sgd_optimizer { learning_rate {
          constant_learning_rate { learning_rate: 0.1 } } } }
  """, train_pb2.TrainConfig())
  for key, value in overrides.items():
    if isinstance(value, list):
      getattr(config, key).extend(value)
    else:
      setattr(config, key, value)
  return config


def _train(train_dir, train_config, num_clones=1, num_cpus=1):
  return trainer.train(
      create_tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES), train_config,
      master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir,
      session_config_override=test_util.session_config(num_cpus=num_cpus))


def _read(checkpoint_dir, name):
  return tf.train.load_variable(tf.train.latest_checkpoint(checkpoint_dir), name)


def test_trains_one_clone_and_checkpoints_the_last_step(tmp_path):
  loss = _train(str(tmp_path), _train_config())
  assert np.isfinite(loss)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-6')
  assert os.path.exists(os.path.join(str(tmp_path), 'checkpoint'))


def test_trains_two_clones(tmp_path):
  _train(str(tmp_path), _train_config(), num_clones=2, num_cpus=2)
  assert _read(str(tmp_path), 'global_step') == 6


def test_batch_not_divisible_by_clones_is_an_error(tmp_path):
  with pytest.raises(ValueError, match='batch_size=4 is not divisible by num_clones=3'):
    _train(str(tmp_path), _train_config(), num_clones=3)


def test_freeze_keeps_frozen_variables_unchanged(tmp_path):
  first = tmp_path / 'first'
  _train(str(first), _train_config(num_steps=1))
  before = _read(str(first), 'BoxPredictor/weights')
  _train(str(first), _train_config(num_steps=5, freeze_variables=['BoxPredictor']))
  np.testing.assert_array_equal(before, _read(str(first), 'BoxPredictor/weights'))
  assert _read(str(first), 'global_step') == 5


def test_fine_tune_restores_model_variables_but_not_the_global_step(tmp_path):
  source, target = str(tmp_path / 'source'), str(tmp_path / 'target')
  _train(source, _train_config(num_steps=3))
  config = _train_config(num_steps=1, fine_tune_checkpoint=tf.train.latest_checkpoint(source),
                         fine_tune_checkpoint_type='detection')
  config.optimizer.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.0
  _train(target, config)
  assert _read(target, 'global_step') == 1
  for name in ('BoxPredictor/weights', 'FeatureExtractor/conv/weights'):
    np.testing.assert_array_equal(_read(source, name), _read(target, name))


def test_nan_loss_names_the_step_and_keeps_the_checkpoint(tmp_path):
  _train(str(tmp_path), _train_config(num_steps=2))
  weights = _read(str(tmp_path), 'ClassPredictor/weights')
  config = _train_config(num_steps=10)
  config.optimizer.sgd_optimizer.learning_rate.constant_learning_rate.learning_rate = 1e30
  with pytest.raises(training_loop.NanLossError, match='inf or nan.*global step'):
    _train(str(tmp_path), config)
  # The last good checkpoint is still the latest one, untouched.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-2')
  np.testing.assert_array_equal(weights, _read(str(tmp_path), 'ClassPredictor/weights'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
