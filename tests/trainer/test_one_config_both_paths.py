"""One pipeline config trains alike on the legacy trainer and on the Estimator path.

`python -m trainer.train` (trainer.trainer) and `trainer.model_lib` (behind
`python -m trainer.model_main`) must read `deploy_config.num_clones` and the
LINEAR learning-rate scaling the same way: the same clone count and the same
learning rate from one config file.
"""

import glob
import json
import os
import sys

import pytest
import tensorflow as tf

from builders import optimizer_builder
from core import config_util
from tests import fork_server
from tests import test_util
from tests.estimator import model_lib_testlib
from tools import create_shapes_tf_record
from trainer import estimator as tfe
from trainer import model_lib

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE_LEARNING_RATE = 0.002
BATCH_SIZE = 4
REFERENCE_BATCH_SIZE = 2
REPLICAS_TO_AGGREGATE = 2


@pytest.fixture(scope='module')
def config_path(tmp_path_factory):
  """The shapes SSD with 2 clones, LINEAR scaling, sync replicas and a constant rate."""
  directory = str(tmp_path_factory.mktemp('both_paths'))
  data = create_shapes_tf_record.create_shapes_dataset(
      os.path.join(directory, 'data'), num_train=8, num_val=2, height=64, width=64)
  pipeline = model_lib_testlib.small_config(data, num_steps=1, batch_size=BATCH_SIZE)
  train_config = pipeline.train_config
  train_config.sync_replicas = True
  train_config.replicas_to_aggregate = REPLICAS_TO_AGGREGATE
  optimizer = train_config.optimizer
  optimizer.adam_optimizer.learning_rate.constant_learning_rate.learning_rate = (
      BASE_LEARNING_RATE)
  optimizer.learning_rate_scaling = optimizer.LINEAR
  optimizer.reference_batch_size = REFERENCE_BATCH_SIZE
  pipeline.deploy_config.num_clones = 2
  pipeline.deploy_config.clone_on_cpu = True
  return config_util.save_pipeline_config(pipeline, directory)


def _legacy_run(config_path, train_dir):
  """`python -m trainer.train` for one step; returns (learning rate, clone scopes)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
  env.pop('TF_CONFIG', None)
  proc = fork_server.run(
      [sys.executable, '-m', 'trainer.train', '--pipeline_config_path=' + config_path,
       '--train_dir=' + train_dir], capture_output=True, text=True, cwd=REPO_ROOT, env=env,
      timeout=500)
  assert proc.returncode == 0, proc.stderr[-5000:]
  rates, scopes = [], set()
  for path in glob.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      rates += [v.simple_value for v in event.summary.value if 'LearningRate' in v.tag]
      if event.graph_def:
        graph_def = tf.compat.v1.GraphDef.FromString(event.graph_def)
        scopes |= {n.name.split('/')[0] for n in graph_def.node
                   if n.name.startswith('clone_')}
  assert rates, 'the legacy trainer wrote no learning-rate summary'
  return rates[0], scopes


def _estimator_learning_rate(config_path, run_config):
  """(learning rate of model_lib's TRAIN graph, the Estimator's clone count)."""
  d = model_lib.create_estimator_and_inputs(run_config, pipeline_config_path=config_path)
  estimator = d['estimator']
  with tf.Graph().as_default():
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        d['train_input_fn']()).get_next()
    tf.compat.v1.train.get_or_create_global_step()
    estimator.model_fn(features, labels, tfe.ModeKeys.TRAIN, config=estimator.config)
    summaries = [s for s in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
                 if 'LearningRate' in s.op.name]
    assert len(summaries) == 1, summaries
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      rate = sess.run(summaries[0].op.inputs[1])
  return float(rate), estimator.config.num_clones


def test_both_paths_build_the_same_learning_rate_and_clone_count(config_path, tmp_path,
                                                                 monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  legacy_rate, clone_scopes = _legacy_run(config_path, str(tmp_path / 'legacy'))
  estimator_rate, estimator_clones = _estimator_learning_rate(
      config_path, tfe.RunConfig(model_dir=str(tmp_path / 'estimator')))

  expected = BASE_LEARNING_RATE * BATCH_SIZE * REPLICAS_TO_AGGREGATE / REFERENCE_BATCH_SIZE
  assert legacy_rate == pytest.approx(expected, rel=1e-6)
  assert estimator_rate == pytest.approx(expected, rel=1e-6)
  assert clone_scopes == {'clone_0', 'clone_1'}
  assert estimator_clones == 2


def test_estimator_path_scales_with_the_worker_replicas_of_tf_config(config_path, tmp_path,
                                                                     monkeypatch):
  pipeline = config_util.load_pipeline_config(config_path)
  pipeline.train_config.sync_replicas = False
  async_config = config_util.save_pipeline_config(pipeline, str(tmp_path))
  chief, worker, ps = test_util.pick_unused_ports(3)
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['127.0.0.1:%d' % chief], 'worker': ['127.0.0.1:%d' % worker],
                  'ps': ['127.0.0.1:%d' % ps]},
      'task': {'type': 'chief', 'index': 0}}))
  run_config = tfe.RunConfig(model_dir=str(tmp_path / 'estimator'))
  assert run_config.num_worker_replicas == 2

  rate, _ = _estimator_learning_rate(async_config, run_config)
  with tf.Graph().as_default():
    _, (shared_rate,) = optimizer_builder.build_for_training(pipeline.train_config, 2)
    with tf.compat.v1.Session() as sess:
      shared_rate = sess.run(shared_rate)
  assert rate == pytest.approx(BASE_LEARNING_RATE * BATCH_SIZE * 2 / REFERENCE_BATCH_SIZE,
                               rel=1e-6)
  assert rate == pytest.approx(float(shared_rate), rel=1e-6)


def test_estimator_trains_the_clones_of_deploy_config(config_path, tmp_path, monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  pipeline = config_util.load_pipeline_config(config_path)
  pipeline.train_config.sync_replicas = False
  path = config_util.save_pipeline_config(pipeline, str(tmp_path))
  run_config = tfe.RunConfig(model_dir=str(tmp_path / 'estimator'),
                             session_config=test_util.session_config(num_cpus=2))
  d = model_lib.create_estimator_and_inputs(run_config, pipeline_config_path=path)
  estimator = d['estimator']
  estimator.train(d['train_input_fn'], max_steps=1)
  assert estimator.get_variable_value('global_step') == 1
  with tf.Graph().as_default() as graph:
    tf.compat.v1.train.import_meta_graph(
        tf.train.latest_checkpoint(estimator.model_dir) + '.meta', clear_devices=True)
  scopes = {op.name.split('/')[0] for op in graph.get_operations()}
  assert {'clone_0', 'clone_1'} <= scopes


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
