r"""The main job of `make demo`: a small detector trained, evaluated and exported.

On a fresh machine, with nothing but the package installed:

    python -m trainer.demo --output_dir=out/demo --num_train_steps=1000

1. writes the synthetic shapes dataset (tools/create_shapes_tf_record.py)
   into `output_dir/data`;
2. trains the SSD of `configs/ssd_shapes.config` with two clones on two
   virtual CPU devices through `trainer.trainer.train` into
   `output_dir/train`;
3. evaluates the final checkpoint on the validation split with
   `trainer.evaluator` (COCO metrics by pycocotools; TensorBoard summaries
   and images in `output_dir/eval`);
4. exports it with `trainer.exporter.export_inference_graph` (input
   `image_tensor`) into `output_dir/export/<timestamp>/` (TF Serving layout);
5. loads the exported SavedModel, runs it on a few validation images and
   writes them to `output_dir/detections.png`: one row per image, the
   "Detections" panel left (class colour, `name: score` labels), the
   "Groundtruth" panel right (black boxes labelled with their class names);
6. prints one summary line: mAP@0.5, steps, examples/sec and the paths.

With the defaults one run took 364 s on 2 CPU cores; recorded runs reached
mAP@0.5 0.895-0.958 (benchmarks/RESULTS.md; a slow test checks >= 0.80, under
the lowest of them). Train longer with
--num_train_steps; the cosine learning rate follows the step count.
"""

import functools
import os
import sys
import time

from absl import app
from absl import flags
from core import logs as logging
import numpy as np
import tensorflow as tf

from builders import input_reader_builder
from builders import model_builder
from core import config_util
from core import paths
from core import standard_fields as fields
from tools import create_shapes_tf_record
from trainer import eval_images
from trainer import evaluator
from trainer import exporter
from trainer import trainer

_DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               'configs', 'ssd_shapes.config')
MAP_50 = 'DetectionBoxes_Precision/mAP@.50IOU'

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module runs as the program.

  Several command modules share flag names (`--pipeline_config_path`), so
  defining them at import would clash when one process imports two of them.
  """
  flags.DEFINE_string('output_dir', 'out/demo', 'Where data, checkpoints and images go.')
  flags.DEFINE_string('pipeline_config_path', _DEFAULT_CONFIG, 'The detector config.')
  flags.DEFINE_integer('num_train_steps', 1000, 'Training steps.')
  flags.DEFINE_integer('num_clones', 2, 'Clones, one per virtual CPU device.')
  flags.DEFINE_integer('num_train_images', 512, 'Synthetic training images.')
  flags.DEFINE_integer('num_val_images', 32, 'Synthetic validation images.')
  flags.DEFINE_integer('num_images_to_draw', 4, 'Validation images in the PNG.')


def image_size(model_config):
  resizer = model_config.ssd.image_resizer.fixed_shape_resizer
  return resizer.height, resizer.width


def prepare_configs(pipeline_config_path, data, num_train_steps):
  """Loads the config and points its readers at the generated data."""
  configs = config_util.get_configs_from_pipeline_file(
      pipeline_config_path, overrides={'train_config.num_steps': num_train_steps},
      required_sections=config_util.TRAIN_SECTIONS + ('eval_config', 'eval_input_reader'))
  learning_rate = getattr(
      configs['train_config'].optimizer,
      configs['train_config'].optimizer.WhichOneof('optimizer')).learning_rate
  if learning_rate.WhichOneof('learning_rate') == 'cosine_decay_learning_rate':
    # The schedule ends with training, whatever the step count (and a very
    # short run has a shorter warmup).
    cosine = learning_rate.cosine_decay_learning_rate
    cosine.total_steps = num_train_steps
    cosine.warmup_steps = min(cosine.warmup_steps, num_train_steps)
  train_input = configs['train_input_config']
  del train_input.tf_record_input_reader.input_path[:]
  train_input.tf_record_input_reader.input_path.append(data['train_pattern'])
  train_input.label_map_path = data['label_map_path']
  for eval_input in configs['eval_input_configs']:
    del eval_input.tf_record_input_reader.input_path[:]
    eval_input.tf_record_input_reader.input_path.append(data['val_pattern'])
    eval_input.label_map_path = data['label_map_path']
  return configs


def _latest_step(train_dir):
  latest = tf.train.latest_checkpoint(train_dir)
  return evaluator.checkpoint_step(latest) if latest else 0


def train_detector(configs, train_dir, num_clones):
  """Trains with `num_clones` clones on as many virtual CPU devices.

  Returns:
    (final loss, seconds of training proper, steps run by this call). The
    seconds run from the built graph to the last step, so the rate they give
    leaves out the one-off graph construction.
  """
  session_config = tf.compat.v1.ConfigProto(
      device_count={'CPU': num_clones}, allow_soft_placement=True)
  create_tensor_dict_fn = functools.partial(
      input_reader_builder.build, configs['train_input_config'])
  create_model_fn = functools.partial(
      model_builder.build, model_config=configs['model'], is_training=True)
  first_step = _latest_step(train_dir)
  times = {'start': time.time()}
  loss = trainer.train(
      create_tensor_dict_fn, create_model_fn, configs['train_config'],
      master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir, session_config_override=session_config,
      graph_hook_fn=lambda: times.update(start=time.time()),
      on_finish=lambda sess, step: times.update(end=time.time()),
      deployment_options={'clone_devices': [
          '/device:CPU:%d' % i for i in range(num_clones)]})
  seconds = times.get('end', time.time()) - times['start']
  return loss, seconds, _latest_step(train_dir) - first_step


def read_validation_images(eval_input_config, num_images):
  """Returns up to num_images (image uint8, groundtruth boxes, classes) tuples."""
  input_config = type(eval_input_config)()
  input_config.CopyFrom(eval_input_config)
  input_config.shuffle = False
  input_config.num_epochs = 1
  examples = []
  with tf.Graph().as_default():
    tensor_dict = input_reader_builder.build(input_config)
    fetches = [tensor_dict[fields.InputDataFields.image],
               tensor_dict[fields.InputDataFields.groundtruth_boxes],
               tensor_dict[fields.InputDataFields.groundtruth_classes]]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.tables_initializer())
      while len(examples) < num_images:
        try:
          examples.append(sess.run(fetches))
        except tf.errors.OutOfRangeError:
          break
  if not examples:
    raise RuntimeError('no validation images to draw')
  return examples


def draw_exported_detections(saved_model_dir, examples, output_path, eval_config,
                             category_names):
  """Runs the exported SavedModel on the examples; writes one PNG.

  Each row shows an image with the exported model's detections (left) and its
  groundtruth (right), labelled with the class names of `category_names`
  ({label map id: name}) as the evaluator's pictures are.

  Returns:
    the number of images drawn.
  """
  rows = []
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta_graph = tf.compat.v1.saved_model.loader.load(
        sess, [tf.saved_model.SERVING], saved_model_dir)
    signature = meta_graph.signature_def[exporter.SIGNATURE_NAME]
    inputs = signature.inputs[exporter.INPUTS_KEY].name
    names = [fields.DetectionResultFields.detection_boxes,
             fields.DetectionResultFields.detection_scores,
             fields.DetectionResultFields.detection_classes,
             fields.DetectionResultFields.num_detections]
    outputs = [signature.outputs[name].name for name in names]
    for image, gt_boxes, gt_classes in examples:
      boxes, scores, classes, num = sess.run(outputs, {inputs: image[np.newaxis]})
      num = int(num[0])
      # The export's classes are label-map ids (1-based), like the groundtruth.
      # Small images are enlarged (after detection) so boxes and labels stay readable.
      rows.append(eval_images.detections_and_groundtruth(
          image, (boxes[0][:num], classes[0][:num].astype(np.int64), scores[0][:num]),
          (gt_boxes, gt_classes), category_names,
          min_score_thresh=eval_config.min_score_threshold,
          max_boxes_to_draw=eval_config.max_num_boxes_to_visualize))
  gap = np.full([2, rows[0].shape[1], 3], 255, np.uint8)
  stacked = np.concatenate([part for row in rows for part in (row, gap)][:-1], axis=0)
  eval_images.write_png(output_path, stacked)
  return len(rows)


def run_demo(output_dir, pipeline_config_path, num_train_steps, num_clones, num_train_images,
             num_val_images, num_images_to_draw):
  """Runs every stage of the demo; returns a dict of results and paths."""
  output_dir = paths.absolute(output_dir)
  started = time.time()
  height, width = image_size(config_util.load_pipeline_config(pipeline_config_path).model)
  data = create_shapes_tf_record.create_shapes_dataset(
      paths.join(output_dir, 'data'), num_train=num_train_images, num_val=num_val_images,
      seed=0, height=height, width=width)
  configs = prepare_configs(pipeline_config_path, data, num_train_steps)

  train_dir = paths.join(output_dir, 'train')
  loss, train_seconds, steps_run = train_detector(configs, train_dir, num_clones)
  checkpoint = tf.train.latest_checkpoint(train_dir)
  step = evaluator.checkpoint_step(checkpoint)

  eval_dir = paths.join(output_dir, 'eval')
  metrics = evaluator.evaluate_from_configs(configs, checkpoint, eval_dir, run_once=True)

  saved_model_dir = exporter.export_inference_graph(
      'image_tensor', config_util.create_pipeline_proto_from_configs(configs), checkpoint,
      paths.join(output_dir, 'export'), serving_version=int(time.time()))

  png_path = paths.join(output_dir, 'detections.png')
  examples = read_validation_images(configs['eval_input_config'], num_images_to_draw)
  category_names = {category['id']: category['name']
                    for category in evaluator.categories_from_configs(configs)}
  drawn = draw_exported_detections(saved_model_dir, examples, png_path, configs['eval_config'],
                                   category_names)
  logging.info('wrote %s (%d images)', png_path, drawn)
  batch_size = configs['train_config'].batch_size
  return {
      'map50': metrics[MAP_50], 'map': metrics[evaluator.coco_evaluation.MAP],
      'metrics': metrics, 'loss': loss, 'step': step, 'steps_run': steps_run,
      'examples_per_sec': steps_run * batch_size / max(train_seconds, 1e-9),
      'train_seconds': train_seconds, 'total_seconds': time.time() - started,
      'checkpoint': checkpoint, 'eval_dir': eval_dir, 'saved_model': saved_model_dir,
      'png': png_path,
  }


def summary_line(result):
  """The one line the demo prints."""
  return ('demo: mAP@0.5 %.3f (mAP %.3f) after %d steps, %.1f examples/sec, '
          'train %.0f s, total %.0f s; checkpoint %s; eval %s; export %s; detections %s' %
          (result['map50'], result['map'], result['step'], result['examples_per_sec'],
           result['train_seconds'], result['total_seconds'], result['checkpoint'],
           result['eval_dir'], result['saved_model'], result['png']))


def main(argv):
  del argv
  tf.compat.v1.disable_eager_execution()
  result = run_demo(FLAGS.output_dir, FLAGS.pipeline_config_path, FLAGS.num_train_steps,
                    FLAGS.num_clones, FLAGS.num_train_images, FLAGS.num_val_images,
                    FLAGS.num_images_to_draw)
  print(summary_line(result), flush=True)
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(lambda argv: sys.exit(main(argv)))
