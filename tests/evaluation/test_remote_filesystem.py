"""The whole workflow on a non-local TF filesystem: TensorFlow's in-memory `ram://`.

Data writing, training, evaluation, export and the demo's picture all take
`ram://` paths; nothing may land on the local disk (a path mangled by
`os.path` would show up as a local `ram:` folder in the working directory).
`ram://` lives in one process, so everything runs in this one.
"""

import os
import sys

from google.protobuf import text_format
import pytest
import tensorflow as tf

from core import config_util
from core import paths
from tests.estimator import mnist_testlib as mnist
from tests.evaluation import eval_testlib
from trainer import demo
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

_STEPS = 6


def _local_files(directory):
  return sorted(os.path.relpath(os.path.join(root, name), directory)
                for root, _, names in os.walk(directory) for name in names)


def _copy_config_to(pipeline_config_path, remote_dir):
  """Copies a local pipeline config to `remote_dir`, with a visualization export dir."""
  config = config_util.load_pipeline_config(pipeline_config_path)
  config.eval_config.visualization_export_dir = paths.join(remote_dir, 'eval_images')
  config.eval_config.num_visualizations = 1
  paths.makedirs(remote_dir)
  return paths.write_file_atomically(paths.join(remote_dir, 'ssd_shapes.config'),
                                     text_format.MessageToString(config))


@pytest.mark.slow
def test_data_train_eval_export_and_picture_on_ram_filesystem(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  root = 'ram://slimtrain_e2e_%d' % os.getpid()
  config_path = _copy_config_to(eval_testlib.SSD_CONFIG, root + '/config')
  result = demo.run_demo(root + '/demo', config_path, num_train_steps=_STEPS, num_clones=1,
                         num_train_images=8, num_val_images=2, num_images_to_draw=1)
  gfile = tf.io.gfile

  # Data: shards and the label map written by tools/create_shapes_tf_record.
  data = root + '/demo/data'
  assert gfile.exists(data + '/label_map.pbtxt')
  assert gfile.glob(data + '/train.tfrecord-*') and gfile.glob(data + '/val.tfrecord-*')
  # Training: checkpoints and their state file.
  assert result['checkpoint'] == root + '/demo/train/model.ckpt-%d' % _STEPS
  assert tf.train.latest_checkpoint(root + '/demo/train') == result['checkpoint']
  # Evaluation: summaries in eval_dir, PNGs in the visualization export dir.
  events = eval_testlib.read_events(root + '/demo/eval')
  assert [step for step, _ in events[demo.MAP_50]] == [_STEPS]
  assert gfile.glob(root + '/config/eval_images/export-%d-0.png' % _STEPS)
  # Export: TF Serving layout, copied (ram:// cannot rename directories), no staging left.
  export_base = root + '/demo/export'
  assert paths.parent(result['saved_model']) == export_base
  assert gfile.listdir(export_base) == [paths.basename(result['saved_model'])]
  assert gfile.exists(result['saved_model'] + '/saved_model.pb')
  assert gfile.exists(result['saved_model'] + '/variables/variables.index')
  # The demo's picture, drawn with the export loaded back from ram://.
  assert result['png'] == root + '/demo/detections.png'
  with gfile.GFile(result['png'], 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'

  # A pipeline.config copy (as the trainer keeps in train_dir) and its
  # replacement by a different config, kept with a timestamp.
  configs = config_util.load_pipeline_config(config_path)
  config_util.save_pipeline_config(configs, root + '/demo/train')
  configs.train_config.batch_size += 1
  config_util.save_pipeline_config(configs, root + '/demo/train')
  kept = gfile.glob(root + '/demo/train/pipeline.config.*')
  assert len(kept) == 1, kept
  assert config_util.load_pipeline_config(
      root + '/demo/train/pipeline.config').train_config.batch_size == (
          configs.train_config.batch_size)

  # Nothing of it reached the local disk.
  assert _local_files(tmp_path) == []
  gfile.rmtree(root)


def test_estimator_model_dir_and_export_on_ram_filesystem(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  model_dir = 'ram://slimtrain_estimator_%d_%s' % (os.getpid(), tmp_path.name)
  config = tfe.RunConfig(model_dir=model_dir, save_checkpoints_steps=10, tf_random_seed=7)
  estimator = tfe.Estimator(mnist.model_fn, config=config, params={})
  estimator.train(mnist.train_input_fn(num_examples=64), max_steps=10)
  assert tf.train.latest_checkpoint(model_dir) == model_dir + '/model.ckpt-10'
  metrics = estimator.evaluate(mnist.eval_input_fn(num_examples=64))
  assert metrics['global_step'] == 10
  assert tf.io.gfile.glob(model_dir + '/eval/events.out.tfevents.*')
  base = model_dir + '/export/Servo'
  export = tf.compat.as_str(estimator.export_saved_model(base, mnist.serving_input_receiver_fn))
  assert paths.parent(export) == base
  assert tf.io.gfile.listdir(base) == [paths.basename(export)]   # no temp-* left
  assert tf.io.gfile.exists(export + '/saved_model.pb')
  assert tf.io.gfile.exists(export + '/variables/variables.index')
  assert _local_files(tmp_path) == []
  tf.io.gfile.rmtree(model_dir)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
