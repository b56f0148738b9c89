"""Shared pieces of the evaluation tests: small configs, data and checkpoints."""

import os

import numpy as np
import tensorflow as tf

from builders import model_builder
from core import config_util
from core import label_map_util
from core import model as model_lib
from core import standard_fields as fields
from tools import create_shapes_tf_record
from tools import dataset_util
from trainer import demo

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSD_CONFIG = os.path.join(_ROOT, 'configs', 'ssd_shapes.config')
CLASSIFIER_CONFIG = os.path.join(_ROOT, 'configs', 'classifier_small.config')
IMAGE_SIZE = 96


def shapes_configs(directory, num_train=16, num_val=6, num_steps=3, batch_size=4):
  """Writes a small shapes dataset; returns (configs, data) of the SSD config.

  The configs are the demo's (readers pointed at the data) with a small batch,
  continuous evaluation unlimited (max_evals 0) and 4 visualizations.
  """
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=num_train, num_val=num_val,
      height=IMAGE_SIZE, width=IMAGE_SIZE, num_shards=1, seed=3)
  configs = demo.prepare_configs(SSD_CONFIG, data, num_steps)
  configs['train_config'].batch_size = batch_size
  configs['train_config'].batch_queue_capacity = 8
  configs['eval_config'].max_evals = 0
  configs['eval_config'].eval_interval_secs = 0
  configs['eval_config'].num_visualizations = 4
  return configs, data


def write_config(configs, directory):
  """Writes the configs dict as directory/pipeline.config; returns its path."""
  return config_util.save_pipeline_config(
      config_util.create_pipeline_proto_from_configs(configs), directory)


def train_detector(configs, train_dir):
  """Trains the SSD briefly (one clone); returns the final checkpoint prefix."""
  demo.train_detector(configs, train_dir, num_clones=1)
  return tf.train.latest_checkpoint(train_dir)


def save_initial_checkpoint(model_config, checkpoint_prefix, global_step=0, seed=0):
  """Saves freshly initialised weights of a model (no training) at global_step."""
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(seed)
    model = model_builder.build(model_config, is_training=False)
    height = width = IMAGE_SIZE
    images = tf.zeros([1, height, width, 3])
    model.predict(*model.preprocess(images))
    step = tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step.assign(global_step))
      return tf.compat.v1.train.Saver().save(sess, checkpoint_prefix, global_step=global_step)


def classification_data(directory, num_examples=12, num_classes=3, size=32, seed=0):
  """Writes a classification TFRecord of random images; returns (pattern, label map)."""
  os.makedirs(directory, exist_ok=True)
  label_map_path = os.path.join(directory, 'label_map.pbtxt')
  label_map_util.write_label_map(label_map_path, ['class_%d' % i for i in range(num_classes)])
  rng = np.random.default_rng(seed)
  codec = dataset_util.ImageCodec()
  examples = []
  for i in range(num_examples):
    image = rng.integers(0, 256, size=[size, size, 3], dtype=np.uint8)
    examples.append(dataset_util.classification_example(
        codec.encode(image, 'png'), b'png', size, size, label=int(i % num_classes) + 1,
        source_id=str(i).encode()))
  codec.close()
  dataset_util.write_sharded(examples, os.path.join(directory, 'val.tfrecord'), 1)
  return os.path.join(directory, 'val.tfrecord-*'), label_map_path


class OracleDetector(model_lib.DetectionModel):
  """Detects exactly the groundtruth of the example it is built over.

  `tensor_dict` is the eval input's tensor_dict; `postprocess` returns its
  boxes with score 1 and its classes shifted by `class_shift` (0: perfect).
  Holds one variable so that there is something to checkpoint.
  """

  def __init__(self, tensor_dict, num_classes=3, class_shift=0, box_shift=0.0):
    super().__init__(num_classes)
    self._tensor_dict = tensor_dict
    self._class_shift = class_shift
    self._box_shift = box_shift

  def preprocess(self, inputs):
    shapes = tf.tile(tf.shape(inputs)[1:][tf.newaxis], [tf.shape(inputs)[0], 1])
    return inputs, shapes

  def predict(self, preprocessed_inputs, true_image_shapes):
    weight = tf.compat.v1.get_variable('oracle/weight', [], initializer=tf.ones_initializer())
    return {'weight': weight}

  def postprocess(self, prediction_dict, true_image_shapes, **params):
    boxes = self._tensor_dict[fields.InputDataFields.groundtruth_boxes]
    classes = tf.cast(self._tensor_dict[fields.InputDataFields.groundtruth_classes], tf.float32)
    classes = tf.math.floormod(classes - 1 + self._class_shift, self.num_classes)
    boxes = tf.clip_by_value(boxes + self._box_shift, 0.0, 1.0)
    num = tf.shape(boxes)[0]
    return {
        fields.DetectionResultFields.detection_boxes: boxes[tf.newaxis],
        fields.DetectionResultFields.detection_scores:
            tf.ones([1, num]) * prediction_dict['weight'],
        fields.DetectionResultFields.detection_classes: classes[tf.newaxis],
        fields.DetectionResultFields.num_detections: tf.cast(num, tf.float32)[tf.newaxis],
    }

  def loss(self, prediction_dict, true_image_shapes):
    return {'Loss/oracle_loss': tf.constant(0.5) * prediction_dict['weight']}

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    return {}


def save_oracle_checkpoint(checkpoint_prefix, global_step=0):
  """Saves the oracle's single variable (value 1) at global_step."""
  with tf.Graph().as_default():
    tf.compat.v1.get_variable('oracle/weight', [], initializer=tf.ones_initializer())
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(tf.compat.v1.train.get_global_step().assign(global_step))
      return tf.compat.v1.train.Saver().save(sess, checkpoint_prefix, global_step=global_step)


def read_events(eval_dir):
  """Returns {tag: [(step, value or image Summary)]} from every event file in eval_dir."""
  result = {}
  for name in sorted(tf.io.gfile.listdir(eval_dir)):
    if not name.startswith('events.out.tfevents'):
      continue
    for event in tf.compat.v1.train.summary_iterator(os.path.join(eval_dir, name)):
      for value in event.summary.value:
        item = value.image if value.HasField('image') else value.simple_value
        result.setdefault(value.tag, []).append((event.step, item))
  return result
