r"""The main job of `make demo`: a small detector trained end to end.

On a fresh machine, with nothing but the package installed:

    python -m trainer.demo --output_dir=out/demo --num_train_steps=1000

1. writes the synthetic shapes dataset (tools/create_shapes_tf_record.py)
   into `output_dir/data`;
2. trains the SSD of `configs/ssd_shapes.config` with two clones on two
   virtual CPU devices through `trainer.trainer.train` into
   `output_dir/train`;
3. runs the trained detector on a few validation images and writes them,
   with predicted boxes drawn, to `output_dir/detections.png`;
4. prints one summary line: steps, final loss, examples/sec.
"""

import functools
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from builders import input_reader_builder
from builders import model_builder
from core import config_util
from core import standard_fields as fields
from tools import create_shapes_tf_record
from trainer import trainer

_DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               'configs', 'ssd_shapes.config')

flags.DEFINE_string('output_dir', 'out/demo', 'Where data, checkpoints and images go.')
flags.DEFINE_string('pipeline_config_path', _DEFAULT_CONFIG, 'The detector config.')
flags.DEFINE_integer('num_train_steps', 1000, 'Training steps.')
flags.DEFINE_integer('num_clones', 2, 'Clones, one per virtual CPU device.')
flags.DEFINE_integer('num_train_images', 512, 'Synthetic training images.')
flags.DEFINE_integer('num_val_images', 32, 'Synthetic validation images.')
flags.DEFINE_integer('num_images_to_draw', 4, 'Validation images in the PNG.')

FLAGS = flags.FLAGS


def _image_size(model_config):
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  return resizer.height, resizer.width


def prepare_configs(pipeline_config_path, data, num_train_steps):
  """Loads the config and points its readers at the generated data."""
  configs = config_util.get_configs_from_pipeline_file(
      pipeline_config_path, overrides={'train_config.num_steps': num_train_steps},
      required_sections=config_util.TRAIN_SECTIONS)
  learning_rate = getattr(
      configs['train_config'].optimizer,
      configs['train_config'].optimizer.WhichOneof('optimizer')).learning_rate
  if learning_rate.WhichOneof('learning_rate') == 'cosine_decay_learning_rate':
    # The schedule ends with training, whatever the step count.
    learning_rate.cosine_decay_learning_rate.total_steps = num_train_steps
  train_input = configs['train_input_config']
  del train_input.tf_record_input_reader.input_path[:]
  train_input.tf_record_input_reader.input_path.append(data['train_pattern'])
  train_input.label_map_path = data['label_map_path']
  for eval_input in configs['eval_input_configs']:
    del eval_input.tf_record_input_reader.input_path[:]
    eval_input.tf_record_input_reader.input_path.append(data['val_pattern'])
    eval_input.label_map_path = data['label_map_path']
  return configs


def train_detector(configs, train_dir, num_clones):
  """Trains with `num_clones` clones on as many virtual CPU devices."""
  session_config = tf.compat.v1.ConfigProto(
      device_count={'CPU': num_clones}, allow_soft_placement=True)
  create_tensor_dict_fn = functools.partial(
      input_reader_builder.build, configs['train_input_config'])
  create_model_fn = functools.partial(
      model_builder.build, model_config=configs['model'], is_training=True)
  start = time.time()
  loss = trainer.train(
      create_tensor_dict_fn, create_model_fn, configs['train_config'],
      master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir, session_config_override=session_config,
      deployment_options={'clone_devices': [
          '/device:CPU:%d' % i for i in range(num_clones)]})
  return loss, time.time() - start


def draw_detections(configs, checkpoint_path, output_path, num_images):
  """Runs the trained detector on validation images; writes one PNG."""
  eval_input = configs['eval_input_config']
  with tf.Graph().as_default():
    eval_input.shuffle = False
    eval_input.num_epochs = 1
    tensor_dict = input_reader_builder.build(eval_input)
    image = tf.cast(tensor_dict[fields.InputDataFields.image], tf.float32)
    model = model_builder.build(configs['model'], is_training=False)
    preprocessed, true_shapes = model.preprocess(tf.expand_dims(image, 0))
    detections = model.postprocess(model.predict(preprocessed, true_shapes), true_shapes)
    boxes = detections[fields.DetectionResultFields.detection_boxes]
    scores = detections[fields.DetectionResultFields.detection_scores]
    keep = tf.cast(scores[0] >= 0.5, tf.float32)
    # Boxes below the score threshold collapse to a point and are not drawn.
    shown = boxes * tf.reshape(keep, [1, -1, 1])
    drawn = tf.image.draw_bounding_boxes(
        tf.expand_dims(image, 0) / 255.0, shown,
        colors=np.array([[1.0, 0.0, 0.0, 1.0]], np.float32))
    saver = tf.compat.v1.train.Saver()
    panels = []
    with tf.compat.v1.Session() as sess:
      sess.run([tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      saver.restore(sess, checkpoint_path)
      for _ in range(num_images):
        try:
          panels.append(sess.run(drawn)[0])
        except tf.errors.OutOfRangeError:
          break
  if not panels:
    raise RuntimeError('no validation images to draw')
  strip = np.concatenate(panels, axis=1)
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    png = sess.run(tf.io.encode_png((np.clip(strip, 0, 1) * 255).astype(np.uint8)))
  with tf.io.gfile.GFile(output_path, 'wb') as png_file:
    png_file.write(png)
  return len(panels)


def main(argv):
  del argv
  output_dir = os.path.abspath(FLAGS.output_dir)
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(output_dir, 'data'), num_train=FLAGS.num_train_images,
      num_val=FLAGS.num_val_images, seed=0,
      **dict(zip(('height', 'width'), _image_size(
          config_util.load_pipeline_config(FLAGS.pipeline_config_path).model))))
  configs = prepare_configs(FLAGS.pipeline_config_path, data, FLAGS.num_train_steps)
  train_dir = os.path.join(output_dir, 'train')
  loss, seconds = train_detector(configs, train_dir, FLAGS.num_clones)
  checkpoint = tf.train.latest_checkpoint(train_dir)
  png_path = os.path.join(output_dir, 'detections.png')
  drawn = draw_detections(configs, checkpoint, png_path, FLAGS.num_images_to_draw)
  steps = FLAGS.num_train_steps
  examples_per_sec = steps * configs['train_config'].batch_size / max(seconds, 1e-9)
  logging.info('wrote %s (%d images)', png_path, drawn)
  print('demo: %d steps, final loss %.4f, %.1f examples/sec over %.0f s; '
        'checkpoint %s; detections %s' % (steps, loss, examples_per_sec, seconds,
                                          checkpoint, png_path))
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
