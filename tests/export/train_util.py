"""Small real training runs shared by the export and fine-tuning tests.

The detector is `configs/ssd_shapes.config` shrunk to a few steps of batch 4
on a handful of synthetic shapes images; the classifier is
`configs/classifier_small.config` on 32x32 shapes images (one shape each) labelled
by their (single) shape. Both train through `trainer.trainer.train` with one
clone on the CPU:

    data = create_shapes_dataset(out_dir, num_train=16, num_val=4, height=96, width=96)
    configs = train_util.ssd_configs(data, num_steps=5)
    train_util.train(configs, train_dir)
"""

import functools
import os

import numpy as np
import tensorflow as tf

from builders import input_reader_builder
from builders import model_builder
from core import config_util
from core import label_map_util
from tools import create_shapes_tf_record
from tools import dataset_util
from trainer import trainer

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'configs')
SSD_CONFIG = os.path.join(CONFIG_DIR, 'ssd_shapes.config')
CLASSIFIER_CONFIG = os.path.join(CONFIG_DIR, 'classifier_small.config')


def session_config():
  """Two threads each way: the test machines have few cores."""
  return tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                  intra_op_parallelism_threads=2,
                                  inter_op_parallelism_threads=2)


def _point_readers_at(configs, train_pattern, label_map_path, eval_pattern=None):
  train_input = configs['train_input_config']
  del train_input.tf_record_input_reader.input_path[:]
  train_input.tf_record_input_reader.input_path.append(train_pattern)
  train_input.label_map_path = label_map_path
  train_input.num_readers = 1
  for eval_input in configs['eval_input_configs']:
    del eval_input.tf_record_input_reader.input_path[:]
    eval_input.tf_record_input_reader.input_path.append(eval_pattern or train_pattern)
    eval_input.label_map_path = label_map_path


def _shrink_train_config(train_config, num_steps, batch_size, learning_rate):
  train_config.num_steps = num_steps
  train_config.batch_size = batch_size
  train_config.batch_queue_capacity = 2 * batch_size
  train_config.num_batch_queue_threads = 1
  train_config.prefetch_queue_capacity = 2
  train_config.log_every_n_steps = max(1, num_steps // 2)
  train_config.save_interval_secs = 0
  train_config.save_summaries_secs = 0
  if learning_rate is not None:
    optimizer = getattr(train_config.optimizer, train_config.optimizer.WhichOneof('optimizer'))
    optimizer.learning_rate.constant_learning_rate.learning_rate = learning_rate


def ssd_configs(data, num_steps=5, batch_size=4, num_classes=None, learning_rate=0.01,
                use_moving_average=False):
  """The shapes SSD config pointed at `data` (a create_shapes_dataset dict), shrunk."""
  configs = config_util.get_configs_from_pipeline_file(SSD_CONFIG)
  configs['model'].ssd.num_classes = num_classes or data['num_classes']
  _shrink_train_config(configs['train_config'], num_steps, batch_size, learning_rate)
  optimizer = configs['train_config'].optimizer
  optimizer.use_moving_average = use_moving_average
  optimizer.moving_average_decay = 0.5
  _point_readers_at(configs, data['train_pattern'], data['label_map_path'],
                    data.get('val_pattern'))
  return configs


def write_classification_dataset(out_dir, num_examples=32, size=32, num_classes=3, seed=0):
  """Writes shapes images with one shape each, labelled by its kind.

  Returns:
    (train file pattern, label map path).
  """
  os.makedirs(out_dir, exist_ok=True)
  label_map_path = os.path.join(out_dir, 'label_map.pbtxt')
  label_map_util.write_label_map(
      label_map_path, list(create_shapes_tf_record.SHAPE_NAMES[:num_classes]))
  codec = dataset_util.ImageCodec()
  examples = []
  try:
    for index in range(num_examples):
      rng = np.random.default_rng([seed, index])
      image, _, classes = create_shapes_tf_record.generate_example(
          rng, size, size, max_shapes=1, num_classes=num_classes)
      examples.append(dataset_util.classification_example(
          codec.encode(image, 'png'), 'png', size, size, label=int(classes[0])))
  finally:
    codec.close()
  prefix = os.path.join(out_dir, 'classes.tfrecord')
  dataset_util.write_sharded(examples, prefix, 1)
  return prefix + '-*', label_map_path


def classifier_configs(pattern, label_map_path, net='small_cnn', num_steps=4, batch_size=8,
                       num_classes=3, learning_rate=0.01, **model_fields):
  """The small classifier config pointed at `pattern`, shrunk."""
  configs = config_util.get_configs_from_pipeline_file(CLASSIFIER_CONFIG)
  classifier = configs['model'].slim_classifier
  classifier.net = net
  classifier.num_classes = num_classes
  del classifier.checkpoint_exclude_scopes[:]
  for key, value in model_fields.items():
    setattr(classifier, key, value)
  _shrink_train_config(configs['train_config'], num_steps, batch_size, learning_rate)
  _point_readers_at(configs, pattern, label_map_path)
  return configs


def train(configs, train_dir):
  """Trains with one CPU clone; returns (last loss, latest checkpoint prefix)."""
  create_tensor_dict_fn = functools.partial(input_reader_builder.build,
                                            configs['train_input_config'])
  create_model_fn = functools.partial(model_builder.build, model_config=configs['model'],
                                      is_training=True)
  loss = trainer.train(
      create_tensor_dict_fn, create_model_fn, configs['train_config'], master='', task=0,
      num_clones=1, worker_replicas=1, clone_on_cpu=True, ps_tasks=0,
      worker_job_name='worker', is_chief=True, train_dir=train_dir,
      session_config_override=session_config())
  return loss, tf.train.latest_checkpoint(train_dir)


def pipeline_config(configs):
  """The TrainEvalPipelineConfig of a configs dict."""
  return config_util.create_pipeline_proto_from_configs(configs)


def set_fine_tune_checkpoint(configs, checkpoint, checkpoint_type):
  """Points train_config at `checkpoint` of `checkpoint_type` ('detection', ...)."""
  configs['train_config'].fine_tune_checkpoint = checkpoint
  configs['train_config'].fine_tune_checkpoint_type = checkpoint_type


def values_after_fine_tune_init(configs, image_size):
  """Initializes a training graph of `configs` as the trainer does, without a step.

  Builds the model for training, runs the variable initializers and then the
  `init_fn` that `trainer.train` hands to `slim.learning.train`
  (`trainer.build_init_fn`), and returns {variable name: value} of every
  model variable at that point: the values the first training step starts from.
  """
  with tf.Graph().as_default():
    model = model_builder.build(configs['model'], is_training=True, add_summaries=False)
    images = tf.zeros([1, image_size, image_size, 3])
    model.predict(*model.preprocess(images))
    init_fn = trainer.build_init_fn(model, configs['train_config'])
    variables = tf.compat.v1.model_variables()
    with tf.compat.v1.Session(config=session_config()) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      init_fn(sess)
      return dict(zip([v.op.name for v in variables], sess.run(variables)))
