"""Two-stage zoo configs run `python -m trainer.model_main`, `trainer.eval` and the export.

configs/zoo/faster_rcnn_resnet50_coco.config and mask_rcnn_inception_v2_coco.config
at a small size (keep_aspect_ratio_resizer 64..96, 16 proposals, 8 detections)
on the shapes data (with instance masks for Mask R-CNN), fine-tuning from a
checkpoint in the zoo's layout, one image per batch at its own size:
model_main trains two steps, evaluates (COCO box metrics, the RPN and box
classifier losses, Mask R-CNN's mask loss) and exports; the exported
SavedModel then detects on an image of a size no training image had (masks
[1, N, mask_h, mask_w] for Mask R-CNN); the legacy evaluator evaluates the
same checkpoint once. Faster R-CNN fine-tunes without
load_all_detection_checkpoint_vars, so only the two feature extractors are
restored; Mask R-CNN with it (the zoo configs' setting), so every variable
but the class-dependent second-stage layers is.
"""

import glob
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import config_util
from tests import fork_server
from tests.models import zoo_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

pytestmark = pytest.mark.slow

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAP_50 = 'DetectionBoxes_Precision/mAP@.50IOU'
# (config, load_all_detection_checkpoint_vars).
CONFIGS = (('faster_rcnn_resnet50_coco', False), ('mask_rcnn_inception_v2_coco', True))
EXTRACTOR_SCOPES = ('FirstStageFeatureExtractor/', 'SecondStageFeatureExtractor/')


@pytest.fixture(scope='module')
def shapes_data(tmp_path_factory):
  return create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path_factory.mktemp('shapes')), num_train=4, num_val=2, height=80, width=96,
      num_shards=1, instance_masks=True)


def _small_config(name, data, directory, load_all):
  """Writes the zoo config `name`, made small and pointed at the data.

  Returns:
    (its path, {name: shape} of the zoo checkpoint it fine-tunes from).
  """
  checkpoint = os.path.join(directory, 'zoo', 'model.ckpt')
  zoo_testlib.write_zoo_layout_checkpoint(name + '.config', checkpoint)
  pipeline = config_util.load_pipeline_config(
      os.path.join(REPO_ROOT, 'configs', 'zoo', name + '.config'))
  frcnn = pipeline.model.faster_rcnn
  frcnn.image_resizer.keep_aspect_ratio_resizer.min_dimension = 64
  frcnn.image_resizer.keep_aspect_ratio_resizer.max_dimension = 96
  frcnn.first_stage_max_proposals = 16
  frcnn.second_stage_batch_size = 8
  nms = frcnn.second_stage_post_processing.batch_non_max_suppression
  nms.max_detections_per_class = nms.max_total_detections = 8
  pipeline.train_config.fine_tune_checkpoint = checkpoint
  pipeline.train_config.load_all_detection_checkpoint_vars = load_all
  pipeline.eval_config.num_examples = data['num_val']
  train_input = pipeline.train_input_reader
  del train_input.tf_record_input_reader.input_path[:]
  train_input.tf_record_input_reader.input_path.append(data['train_pattern'])
  train_input.label_map_path = data['label_map_path']
  eval_input = pipeline.eval_input_reader[0]
  del eval_input.tf_record_input_reader.input_path[:]
  eval_input.tf_record_input_reader.input_path.append(data['val_pattern'])
  eval_input.label_map_path = data['label_map_path']
  return (config_util.save_pipeline_config(pipeline, directory),
          zoo_testlib.reference_variables(name + '.config'))


def _run(module, *flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  return fork_server.run([sys.executable, '-m', module] + list(flags), capture_output=True,
                         text=True, cwd=REPO_ROOT, env=env, timeout=600)


def _serve(export_dir, image):
  """Runs the SavedModel's serving_default on one uint8 image; returns its outputs."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ['serve'], export_dir)
    signature = meta.signature_def['serving_default']
    outputs = {key: info.name for key, info in signature.outputs.items()}
    inputs = {info.name: image[np.newaxis] for info in signature.inputs.values()}
    return sess.run(outputs, feed_dict=inputs)


def _train_summary_tags(model_dir):
  tags = set()
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  return tags


def _expected_restored(zoo_variables, trained_shapes, load_all):
  """How many variables fine-tuning restores: same name and shape, in the restore map."""
  return len([name for name, shape in zoo_variables.items()
              if list(trained_shapes.get(name, [])) == shape and
              (load_all or name.startswith(EXTRACTOR_SCOPES))])


@pytest.mark.parametrize('name,load_all', CONFIGS, ids=[name for name, _ in CONFIGS])
def test_model_main_export_and_the_evaluator(name, load_all, shapes_data, tmp_path):
  config_path, zoo_variables = _small_config(name, shapes_data, str(tmp_path), load_all)
  model_dir = str(tmp_path / 'model')
  proc = _run('trainer.model_main', '--model_dir=' + model_dir,
              '--pipeline_config_path=' + config_path, '--num_train_steps=2')
  assert proc.returncode == 0, proc.stderr[-5000:]
  checkpoint = tf.train.latest_checkpoint(model_dir)
  assert checkpoint.endswith('model.ckpt-2')
  trained_shapes = dict(tf.train.list_variables(checkpoint))
  restored = _expected_restored(zoo_variables, trained_shapes, load_all)
  assert 'Restoring %d variables from ' % restored in proc.stderr
  assert 'zoo/model.ckpt' in proc.stderr
  assert MAP_50 in proc.stderr
  losses = ['Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss',
            'Loss/BoxClassifierLoss/localization_loss',
            'Loss/BoxClassifierLoss/classification_loss', 'Loss/total_loss']
  if name.startswith('mask_rcnn'):
    losses.append('Loss/BoxClassifierLoss/mask_loss')
  for loss in losses:
    assert loss + ' = ' in proc.stderr, loss   # the evaluation's mean
  # Training writes each loss under the evaluation's tag (no '_1').
  assert set(losses) <= _train_summary_tags(model_dir)

  exports = glob.glob(os.path.join(model_dir, 'export', 'Servo', '*', 'saved_model.pb'))
  assert len(exports) == 1
  # An image of a size none of the training images had (80x96 -> 64..96).
  image = np.random.RandomState(0).randint(0, 255, size=[50, 120, 3]).astype(np.uint8)
  outputs = _serve(os.path.dirname(exports[0]), image)
  num = outputs['detection_boxes'].shape[1]
  assert 0 < num <= 8
  assert outputs['detection_boxes'].shape == (1, num, 4)
  assert outputs['detection_scores'].shape == (1, num)
  assert outputs['detection_classes'].shape == (1, num)
  assert outputs['num_detections'].shape == (1,)
  assert set(np.unique(outputs['detection_classes'])) <= {1.0, 2.0, 3.0}
  if name.startswith('mask_rcnn'):
    assert outputs['detection_masks'].shape == (1, num, 15, 15)
    assert 0.0 <= outputs['detection_masks'].min() <= outputs['detection_masks'].max() <= 1.0
  else:
    assert 'detection_masks' not in outputs

  eval_dir = str(tmp_path / 'eval')
  proc = _run('trainer.eval', '--checkpoint_dir=' + model_dir, '--eval_dir=' + eval_dir,
              '--pipeline_config_path=' + config_path, '--run_once')
  assert proc.returncode == 0, proc.stderr[-5000:]
  assert MAP_50 in proc.stderr
  for loss in losses:
    if loss == 'Loss/total_loss':
      continue   # the legacy evaluator reports the model's losses only
    assert ': %s = ' % loss in proc.stderr, loss
  assert glob.glob(os.path.join(eval_dir, 'events.out.tfevents.*'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
