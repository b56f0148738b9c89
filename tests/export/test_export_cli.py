"""Tests of the `python -m trainer.export` command line (trainer/export.py)."""

import os
import sys

import pytest
import tensorflow as tf

from builders import model_builder
from core import config_util
from tests import fork_server
from tests.export import train_util
from trainer import export

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='module')
def model(tmp_path_factory):
  """The shapes SSD config file and an (initialized, untrained) checkpoint of it."""
  root = tmp_path_factory.mktemp('cli')
  pipeline_config = config_util.load_pipeline_config(train_util.SSD_CONFIG)
  config_path = config_util.save_pipeline_config(pipeline_config, str(root))
  with tf.Graph().as_default():
    ssd = model_builder.build(pipeline_config.model, is_training=True, add_summaries=False)
    ssd.predict(*ssd.preprocess(tf.zeros([1, 96, 96, 3])))
    tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      checkpoint = saver.save(sess, str(root / 'model.ckpt'), global_step=0)
  return config_path, checkpoint


def _run_cli(*flags):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  return fork_server.run([sys.executable, '-m', 'trainer.export'] + list(flags),
                        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)


def test_cli_exports_a_saved_model(model, tmp_path):
  config_path, checkpoint = model
  out = tmp_path / 'exported'
  proc = _run_cli('--pipeline_config_path=' + config_path,
                  '--trained_checkpoint_prefix=' + checkpoint,
                  '--output_directory=' + str(out), '--input_type=encoded_image_string_tensor')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'exported %s' % (out / 'saved_model') in proc.stdout
  assert os.path.exists(str(out / 'saved_model' / 'saved_model.pb'))
  assert os.path.exists(str(out / 'pipeline.config'))
  # As the OD API's: the frozen graph and the checkpoint it was made from.
  assert os.path.exists(str(out / 'frozen_inference_graph.pb'))
  assert tf.train.latest_checkpoint(str(out)) == str(out / 'model.ckpt')
  assert os.path.exists(str(out / 'model.ckpt.meta'))


def test_cli_serving_layout_with_fixed_shape(model, tmp_path):
  config_path, checkpoint = model
  proc = _run_cli('--pipeline_config_path=' + config_path,
                  '--trained_checkpoint_prefix=' + checkpoint,
                  '--output_directory=' + str(tmp_path), '--serving_version=3',
                  '--input_shape=-1,96,96,3')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert os.path.exists(str(tmp_path / '3' / 'saved_model.pb'))


def test_cli_unknown_input_type_names_the_flag(model, tmp_path):
  config_path, checkpoint = model
  proc = _run_cli('--pipeline_config_path=' + config_path,
                  '--trained_checkpoint_prefix=' + checkpoint,
                  '--output_directory=' + str(tmp_path / 'o'), '--input_type=jpeg')
  assert proc.returncode != 0
  assert '--input_type' in proc.stderr
  assert not os.path.exists(str(tmp_path / 'o'))


def test_cli_missing_checkpoint_names_the_flag(model, tmp_path):
  config_path, _ = model
  proc = _run_cli('--pipeline_config_path=' + config_path,
                  '--trained_checkpoint_prefix=' + str(tmp_path / 'model.ckpt-9'),
                  '--output_directory=' + str(tmp_path / 'o'))
  assert proc.returncode == 2
  assert '--trained_checkpoint_prefix' in proc.stderr
  assert 'No checkpoint found at' in proc.stderr
  assert not os.path.exists(str(tmp_path / 'o'))


def _run(model, out, **kwargs):
  config_path, checkpoint = model
  args = dict(input_type='image_tensor', pipeline_config_path=config_path,
              trained_checkpoint_prefix=checkpoint, output_directory=out)
  args.update(kwargs)
  return export.run(**args)


def test_flag_errors_name_the_flag(model, tmp_path):
  full = tmp_path / 'full'
  full.mkdir()
  (full / 'x').write_text('x')
  cases = [
      (dict(output_directory=str(full)), '--output_directory: output_directory .* not empty'),
      (dict(input_shape='-1,a,96,3'), '--input_shape must be comma-separated'),
      (dict(input_shape='96,96'), '--input_shape: input_shape must be'),
      (dict(input_type='tf_example', input_shape='-1,96,96,3'),
       '--input_shape applies to --input_type=image_tensor'),
      (dict(pipeline_config_path=str(tmp_path / 'none.config')), '--pipeline_config_path='),
      (dict(pipeline_config_path=None), '--pipeline_config_path is required'),
      (dict(trained_checkpoint_prefix=''), '--trained_checkpoint_prefix is required'),
      (dict(output_directory=''), '--output_directory is required'),
      (dict(config_override='model { nonsense: 1 }'), '--config_override'),
      (dict(serving_version=-1), '--serving_version must be >= 0'),
  ]
  for kwargs, message in cases:
    with pytest.raises(export.FlagError, match=message):
      _run(model, str(tmp_path / 'o'), **kwargs)
  assert sorted(os.listdir(str(tmp_path))) == ['full']


def test_existing_serving_version_names_the_flag(model, tmp_path):
  _run(model, str(tmp_path), serving_version=1)
  with pytest.raises(export.FlagError, match='--serving_version: version 1 already exists'):
    _run(model, str(tmp_path), serving_version=1)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
