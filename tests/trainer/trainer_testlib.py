"""The small detector, configs and helpers that the trainer.train tests share.

    from tests.trainer import trainer_testlib as lib

    lib.train(str(tmp_path), lib.train_config(num_steps=2))
    assert lib.read(str(tmp_path), 'global_step') == 2
"""

import contextlib
import logging

import tensorflow as tf
import tf_slim as slim

from core import logs
from core import model as model_lib
from core import standard_fields as fields
from google.protobuf import text_format
from protos import train_pb2
from tests import test_util
from trainer import trainer

NUM_CLASSES = 2


def create_tensor_dict_fn(image=None):
  """One synthetic example: the image's mean colour encodes the box."""
  if image is None:
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


def train_config(**overrides):
  """A small TrainConfig (6 steps of batch 4, SGD 0.1); `overrides` set or extend fields."""
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


def create_same_example_fn():
  """Always the same example: a batch does not depend on how often the input ran.

  (The random image above advances with every evaluation, and threads of the
  trainer may evaluate it in a different order from run to run.)
  """
  return create_tensor_dict_fn(
      tf.random.stateless_uniform([8, 8, 3], seed=[1, 2], minval=0, maxval=255))


def train(train_dir, train_config, num_clones=1, num_cpus=1,
           tensor_dict_fn=create_tensor_dict_fn):
  """trainer.train of TinyDetectionModel in this process, the chief of no cluster."""
  return trainer.train(
      tensor_dict_fn, lambda: TinyDetectionModel(NUM_CLASSES), train_config,
      master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir,
      session_config_override=test_util.session_config(num_cpus=num_cpus))


def read(checkpoint_dir, name):
  """The value of variable `name` in the latest checkpoint of `checkpoint_dir`."""
  return tf.train.load_variable(tf.train.latest_checkpoint(checkpoint_dir), name)


@contextlib.contextmanager
def capture_progress():
  """Collects the messages slimtrain logs (INFO and up) while the block runs."""
  lines = []

  class Collect(logging.Handler):
    def emit(self, record):
      lines.append(record.getMessage())
  handler = Collect()
  logger = logs.logger()
  level = logger.level
  logger.setLevel(logging.INFO)
  logger.addHandler(handler)
  try:
    yield lines
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)
