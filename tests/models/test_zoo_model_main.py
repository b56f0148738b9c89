"""A zoo config runs `python -m trainer.model_main` and `python -m trainer.eval`.

configs/zoo/ssdlite_mobilenet_v3_small_320x320.config (the cheapest zoo
family), at 128x128 on the shapes data, fine-tuning from a checkpoint in the
zoo's layout: model_main trains, evaluates (COCO metrics) and exports; the
legacy evaluator then evaluates the same checkpoint once.
"""

import glob
import os
import sys

import pytest
import tensorflow as tf

from core import config_util
from tests import fork_server
from tests.models import zoo_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO_CONFIG = os.path.join(REPO_ROOT, 'configs', 'zoo', 'ssdlite_mobilenet_v3_small_320x320.config')
MAP_50 = 'DetectionBoxes_Precision/mAP@.50IOU'


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('zoo_model_main'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=4, num_val=2, height=96, width=96,
      num_shards=1)
  checkpoint = os.path.join(directory, 'zoo', 'model.ckpt')
  zoo_testlib.write_zoo_layout_checkpoint('ssdlite_mobilenet_v3_small_320x320_coco.config',
                                          checkpoint)
  pipeline = config_util.load_pipeline_config(ZOO_CONFIG)
  config_util.apply_overrides(pipeline, overrides={
      'model.ssd.image_resizer.fixed_shape_resizer.height': 128,
      'model.ssd.image_resizer.fixed_shape_resizer.width': 128,
      'train_config.batch_size': 2,
      'train_config.fine_tune_checkpoint': checkpoint,
      'train_input_reader.tf_record_input_reader.input_path': [data['train_pattern']],
      'train_input_reader.label_map_path': data['label_map_path'],
      'eval_config.num_examples': 2,
  })
  eval_input = pipeline.eval_input_reader[0]
  del eval_input.tf_record_input_reader.input_path[:]
  eval_input.tf_record_input_reader.input_path.append(data['val_pattern'])
  eval_input.label_map_path = data['label_map_path']
  return config_util.save_pipeline_config(pipeline, directory)


def _run(module, *flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  return fork_server.run([sys.executable, '-m', module] + list(flags), capture_output=True,
                         text=True, cwd=REPO_ROOT, env=env, timeout=600)


def test_model_main_then_the_evaluator(config_path, tmp_path):
  model_dir = str(tmp_path / 'model')
  proc = _run('trainer.model_main', '--model_dir=' + model_dir,
              '--pipeline_config_path=' + config_path, '--num_train_steps=2')
  assert proc.returncode == 0, proc.stderr[-5000:]
  checkpoint = tf.train.latest_checkpoint(model_dir)
  assert checkpoint.endswith('model.ckpt-2')
  assert 'Restoring' in proc.stderr and 'zoo/model.ckpt' in proc.stderr
  assert MAP_50 in proc.stderr
  assert glob.glob(os.path.join(model_dir, 'export', 'Servo', '*', 'saved_model.pb'))
  # The fine-tuned backbone kept the zoo checkpoint's names.
  names = {name for name, _ in tf.train.list_variables(checkpoint)}
  assert 'FeatureExtractor/MobilenetV3/Conv/weights' in names

  eval_dir = str(tmp_path / 'eval')
  proc = _run('trainer.eval', '--checkpoint_dir=' + model_dir, '--eval_dir=' + eval_dir,
              '--pipeline_config_path=' + config_path, '--run_once')
  assert proc.returncode == 0, proc.stderr[-5000:]
  assert MAP_50 in proc.stderr
  assert glob.glob(os.path.join(eval_dir, 'events.out.tfevents.*'))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__]))
