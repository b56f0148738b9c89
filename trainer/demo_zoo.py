r"""`make demo-zoo`: fine-tune a zoo architecture from a checkpoint in the zoo's layout.

What a user does after downloading ssd_mobilenet_v1_coco from the TF1
detection model zoo, on the embedded shapes data (3 classes) at 300x300:

    python -m trainer.demo_zoo --output_dir=out/demo-zoo --num_train_steps=300 \
        [--fine_tune_checkpoint=path/to/ssd_mobilenet_v1_coco_2018_01_28/model.ckpt]

1. writes the synthetic shapes dataset at the config's image size;
2. takes the zoo checkpoint given by --fine_tune_checkpoint; without one (no
   downloads here) it makes a stand-in in the zoo's layout: the same
   architecture with the zoo's 90-class head, trained for
   --num_pretrain_steps on the shapes data, and saved under
   `output_dir/zoo_checkpoint/` (what COCO training is to the real one);
3. fine-tunes `configs/zoo/ssd_mobilenet_v1_coco.config` (num_classes 3)
   from it for --num_train_steps with `fine_tune_checkpoint_type: detection`
   through the legacy trainer: every variable but the 90-class predictor is
   restored, as in the OD API;
4. evaluates the result on the validation split (COCO metrics) and prints
   one line with mAP@0.5, the steps and examples/sec.

Both trainings use batch 8 and a schedule for their length (Adam, cosine
decay from 0.002 to 0 at the last step) instead of the zoo's, which is made
for 25k+ steps at batch 24+, and build the base network with the config's
conv_hyperparams (batch-norm decay 0.97) instead of MobileNet's own 0.9997,
so that the moving statistics of a few hundred steps are usable at
evaluation. Neither changes a variable.

Recorded runs are in benchmarks/RESULTS.md ("Zoo fine-tuning demo").
"""

import os
import sys
import time

from absl import app
from absl import flags
import tensorflow as tf

from core import config_util
from core import logs as logging
from core import paths
from tools import create_shapes_tf_record
from trainer import demo
from trainer import evaluator

_DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               'configs', 'zoo', 'ssd_mobilenet_v1_coco.config')
ZOO_NUM_CLASSES = 90

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module runs as the program."""
  flags.DEFINE_string('output_dir', 'out/demo-zoo', 'Where data, checkpoints and results go.')
  flags.DEFINE_string('pipeline_config_path', _DEFAULT_CONFIG, 'A configs/zoo/ config.')
  flags.DEFINE_string('fine_tune_checkpoint', '',
                      'A downloaded zoo checkpoint of the config\'s architecture; empty: '
                      'make a stand-in in the zoo\'s layout first.')
  flags.DEFINE_integer('num_pretrain_steps', 300,
                       'Steps of the stand-in zoo checkpoint (no --fine_tune_checkpoint).')
  flags.DEFINE_integer('num_train_steps', 300, 'Fine-tuning steps.')
  flags.DEFINE_integer('batch_size', 8, 'Examples per step.')
  flags.DEFINE_integer('num_clones', 1, 'Clones, one per virtual CPU device.')
  flags.DEFINE_integer('num_train_images', 256, 'Synthetic training images.')
  flags.DEFINE_integer('num_val_images', 32, 'Synthetic validation images.')


def _training_configs(pipeline_config_path, data, num_steps, batch_size, num_classes,
                      fine_tune_checkpoint):
  """The config on the generated data, with a cosine schedule over num_steps."""
  configs = demo.prepare_configs(pipeline_config_path, data, num_steps)
  configs['model'].ssd.num_classes = num_classes
  train_config = configs['train_config']
  train_config.batch_size = batch_size
  train_config.fine_tune_checkpoint = fine_tune_checkpoint
  # MobileNet's own batch-norm decay (0.9997) leaves the moving statistics of a
  # few hundred steps far from the batch statistics, so evaluation would see
  # another network; the config's conv_hyperparams (decay 0.97) settle in time.
  # Variables are the same either way.
  configs['model'].ssd.feature_extractor.override_base_feature_extractor_hyperparams = True
  # The zoo's schedules run for 25k+ steps at batch 24+; a short run at batch 8
  # wants its own (the small demo's: Adam, cosine decay to 0 at the last step).
  optimizer = train_config.optimizer
  optimizer.ClearField('optimizer')
  cosine = optimizer.adam_optimizer.learning_rate.cosine_decay_learning_rate
  cosine.learning_rate_base = 0.002
  cosine.total_steps = num_steps
  cosine.warmup_learning_rate = 0.0002
  cosine.warmup_steps = max(1, num_steps // 20)
  return configs


def make_stand_in_zoo_checkpoint(pipeline_config_path, data, output_dir, num_steps,
                                 batch_size, num_clones):
  """Trains the architecture with the zoo's 90-class head; returns its checkpoint."""
  configs = _training_configs(pipeline_config_path, data, num_steps, batch_size,
                              ZOO_NUM_CLASSES, fine_tune_checkpoint='')
  train_dir = paths.join(output_dir, 'zoo_checkpoint')
  demo.train_detector(configs, train_dir, num_clones)
  return tf.train.latest_checkpoint(train_dir)


def run_demo_zoo(output_dir, pipeline_config_path, fine_tune_checkpoint, num_pretrain_steps,
                 num_train_steps, batch_size, num_clones, num_train_images, num_val_images):
  """Every stage of the zoo demo; returns a dict of results and paths."""
  output_dir = paths.absolute(output_dir)
  started = time.time()
  height, width = demo.image_size(
      config_util.load_pipeline_config(pipeline_config_path).model)
  data = create_shapes_tf_record.create_shapes_dataset(
      paths.join(output_dir, 'data'), num_train=num_train_images, num_val=num_val_images,
      seed=0, height=height, width=width)
  if not fine_tune_checkpoint:
    fine_tune_checkpoint = make_stand_in_zoo_checkpoint(
        pipeline_config_path, data, output_dir, num_pretrain_steps, batch_size, num_clones)
    logging.info('stand-in zoo checkpoint: %s', fine_tune_checkpoint)
  configs = _training_configs(pipeline_config_path, data, num_train_steps, batch_size,
                              num_classes=3, fine_tune_checkpoint=fine_tune_checkpoint)
  train_dir = paths.join(output_dir, 'train')
  loss, train_seconds, steps_run = demo.train_detector(configs, train_dir, num_clones)
  checkpoint = tf.train.latest_checkpoint(train_dir)
  metrics = evaluator.evaluate_from_configs(configs, checkpoint, paths.join(output_dir, 'eval'),
                                            run_once=True)
  return {
      'map50': metrics[demo.MAP_50], 'map': metrics[evaluator.coco_evaluation.MAP],
      'loss': loss, 'step': evaluator.checkpoint_step(checkpoint), 'steps_run': steps_run,
      'examples_per_sec': steps_run * batch_size / max(train_seconds, 1e-9),
      'train_seconds': train_seconds, 'total_seconds': time.time() - started,
      'fine_tune_checkpoint': fine_tune_checkpoint, 'checkpoint': checkpoint,
  }


def summary_line(result):
  """The one line the zoo demo prints."""
  return ('demo-zoo: mAP@0.5 %.3f (mAP %.3f) after %d fine-tuning steps from %s, '
          '%.1f examples/sec, train %.0f s, total %.0f s; checkpoint %s' %
          (result['map50'], result['map'], result['step'], result['fine_tune_checkpoint'],
           result['examples_per_sec'], result['train_seconds'], result['total_seconds'],
           result['checkpoint']))


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  result = run_demo_zoo(FLAGS.output_dir, FLAGS.pipeline_config_path,
                        FLAGS.fine_tune_checkpoint, FLAGS.num_pretrain_steps,
                        FLAGS.num_train_steps, FLAGS.batch_size, FLAGS.num_clones,
                        FLAGS.num_train_images, FLAGS.num_val_images)
  print(summary_line(result), flush=True)
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))
