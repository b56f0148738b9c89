"""The legacy trainer stops cleanly when a finite input reader ends.

An input reader with `num_epochs: 1` ends; the batch queue closes and its
dequeue raises OutOfRange, which ends `trainer.train` as the end of the data
(as slim.learning.train did), with a checkpoint at the last step run and no
error, even though `num_steps` asks for more.
The same holds for each worker of a ps cluster (`python -m trainer.train`).
"""

import sys

import pytest
import tensorflow as tf

from tests import cluster_util
from tests.export import train_util
from tests.trainer import cluster_testlib
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

NUM_EXAMPLES = 12
BATCH_SIZE = 4


def test_one_epoch_of_the_input_reader_ends_training_at_its_last_batch(tmp_path):
  data = create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path / 'data'), num_train=NUM_EXAMPLES, num_val=2, height=64, width=64)
  configs = train_util.ssd_configs(data, num_steps=1000, batch_size=BATCH_SIZE)
  configs['train_input_config'].num_epochs = 1
  configs['train_input_config'].shuffle = False
  train_dir = str(tmp_path / 'train')

  loss, checkpoint = train_util.train(configs, train_dir)

  assert loss is not None and loss > 0
  # 12 examples in batches of 4: three steps, then the queue is empty.
  assert checkpoint is not None and checkpoint.endswith('model.ckpt-3')
  assert tf.train.load_variable(checkpoint, 'global_step') == NUM_EXAMPLES // BATCH_SIZE


@pytest.mark.cluster
def test_each_worker_of_a_ps_cluster_stops_when_its_reader_ends(tmp_path):
  data = cluster_testlib.write_colour_records(str(tmp_path / 'data'), num_examples=24)
  config = cluster_testlib.write_pipeline_config(str(tmp_path), data, num_steps=1000)
  with open(config) as f:
    text = f.read()
  with open(config, 'w') as f:
    f.write(text.replace('num_readers: 1', 'num_readers: 1 num_epochs: 1 shuffle: false'))
  train_dir = str(tmp_path / 'train')
  cluster = cluster_util.local_cluster(num_workers=2, num_ps=1)
  with cluster_util.ProcessGroup(str(tmp_path / 'logs')) as group:
    tasks = cluster_testlib.start_tasks(group, cluster, config, train_dir)
    codes = {name: group.wait(task, timeout=180) for name, task in sorted(tasks.items())}
    logs = {name: task.output() for name, task in tasks.items()}
  assert codes == {'ps0': 0, 'worker0': 0, 'worker1': 0}, group.logs()
  for name in ('worker0', 'worker1'):
    assert 'Caught OutOfRangeError. Stopping Training.' in logs[name], logs[name]
  # Each worker reads its share of the 24 examples once, in batches of 4: at
  # most 6 steps between them, far from num_steps.
  assert 1 <= cluster_testlib.latest_checkpoint_step(train_dir) <= 6
  assert 'every worker finished' in logs['ps0'], logs['ps0']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
