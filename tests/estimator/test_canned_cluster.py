"""A wide-and-deep canned estimator trained by a real ps cluster on loopback.

chief + 1 worker + 2 ps, each its own process with its own TF_CONFIG
(tests/estimator/canned_cluster_task_main.py running `tfe.train_and_evaluate`).
The city embedding table and the city linear weights are split in two:
part_0 lives on ps:0 and part_1 on ps:1, the checkpoint holds each table
whole under tf.estimator's name with both halves trained, and the model's
accuracy is within 0.04 of the same model trained in this process.
"""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import cluster_util
from tests.estimator import canned_testlib as lib
from trainer import estimator as tfe

tf.compat.v1.disable_eager_execution()

_MODULE = 'tests.estimator.canned_cluster_task_main'
_MAX_STEPS = 400


def _result(group, task):
  match = group.wait_for_output(task, r'^RESULT (.*)$', timeout=5)
  return json.loads(match.group(1))


def _accuracy_in_one_process(model_dir):
  estimator = lib.wide_deep_for_cluster(model_dir, tfe.RunConfig(
      tf_random_seed=1, save_summary_steps=1000, log_step_count_steps=1000))
  features, labels = lib.make_data(1024, seed=0, task='binary')
  estimator.train(lib.train_input_fn(features, labels), max_steps=_MAX_STEPS)
  eval_features, eval_labels = lib.make_data(512, seed=1, task='binary')
  return estimator.evaluate(lib.eval_input_fn(eval_features, eval_labels))['accuracy']


@pytest.mark.cluster
@pytest.mark.slow
def test_wide_deep_tables_split_over_two_ps_tasks(tmp_path):
  model_dir = str(tmp_path / 'model')
  cluster = cluster_util.local_cluster(num_workers=1, num_ps=2, chief=True)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = group.start_cluster(cluster, _MODULE, args=['--model_dir=%s' % model_dir,
                                                        '--max_steps=%d' % _MAX_STEPS])
    # The reference model trains here while the cluster starts.
    local_accuracy = _accuracy_in_one_process(str(tmp_path / 'local'))
    for name in ('chief0', 'worker0', 'ps0', 'ps1'):
      assert group.wait(tasks[name], timeout=120) == 0, group.logs()
    chief = _result(group, tasks['chief0'])
    worker = _result(group, tasks['worker0'])

  assert chief['num_ps_replicas'] == 2 and worker['task_type'] == 'worker'
  print('steps run: chief %d, worker %d; accuracy: cluster %.4f, one process %.4f' % (
      chief['steps'], worker['steps'], chief['accuracy'], local_accuracy))
  devices = chief['devices']
  for table in (lib.CITY_EMBEDDING, lib.CITY_LINEAR):
    assert devices[table + '/part_0'] == '/job:ps/task:0', devices
    assert devices[table + '/part_1'] == '/job:ps/task:1', devices
    assert table + '/part_2' not in devices
  # Small variables are not split; they still live on the ps tasks.
  assert 'dnn/hiddenlayer_0/kernel/part_1' not in devices
  assert devices['dnn/hiddenlayer_0/kernel/part_0'].startswith('/job:ps/task:')
  assert all(d.startswith('/job:ps/task:') for d in devices.values()), devices

  # The checkpoint has each table whole, under the unpartitioned name, both halves trained.
  checkpoint = tf.train.latest_checkpoint(model_dir)
  assert int(checkpoint.rsplit('-', 1)[1]) >= _MAX_STEPS
  shapes = dict(tf.train.list_variables(checkpoint))
  assert shapes[lib.CITY_EMBEDDING] == [lib.HASH_BUCKETS, 4]
  assert shapes[lib.CITY_LINEAR] == [lib.HASH_BUCKETS, 1]
  half = lib.HASH_BUCKETS // 2
  linear = tf.train.load_variable(checkpoint, lib.CITY_LINEAR)
  assert np.abs(linear[:half]).max() > 0.05 and np.abs(linear[half:]).max() > 0.05
  embedding_slot = tf.train.load_variable(checkpoint, lib.CITY_EMBEDDING + '/Adagrad')
  assert embedding_slot[:half].max() > 0.2 and embedding_slot[half:].max() > 0.2
  size = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir)
             if f.startswith(os.path.basename(checkpoint) + '.'))
  assert size < 4 << 20

  assert chief['global_step'] >= _MAX_STEPS
  # Both trained the shared variables (asynchronously, one global step).
  assert worker['steps'] > 0 and chief['steps'] + worker['steps'] >= _MAX_STEPS
  assert local_accuracy >= 0.9
  assert abs(chief['accuracy'] - local_accuracy) <= 0.04, (chief['accuracy'], local_accuracy)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
