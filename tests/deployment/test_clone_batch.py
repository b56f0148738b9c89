"""`deployment.clone_batch`: one rule for splitting a batch over clones, on both paths."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from deployment import clone_batch
from protos import train_pb2
from trainer import trainer
from estimator import replicate

tf.compat.v1.disable_eager_execution()


def test_a_known_batch_splits_or_names_itself():
  assert clone_batch.per_clone_batch_size(8, 2, 'train_config.batch_size') == 4
  with pytest.raises(ValueError, match='train_config.batch_size=9 is not divisible by '
                     'num_clones=2; choose a batch size that splits evenly'):
    clone_batch.per_clone_batch_size(9, 2, 'train_config.batch_size')
  with pytest.raises(ValueError, match='num_clones must be a positive integer, got 0'):
    clone_batch.per_clone_batch_size(8, 0)


def test_the_legacy_trainer_uses_the_rule_then_checks_the_sync_replicas():
  config = train_pb2.TrainConfig(batch_size=12)
  assert trainer.batch_size_per_clone(config, 3) == 4
  with pytest.raises(ValueError, match='batch_size=12 is not divisible by num_clones=5'):
    trainer.batch_size_per_clone(config, 5)
  config.sync_replicas = True
  config.replicas_to_aggregate = 3
  assert trainer.batch_size_per_clone(config, 2) == 2  # 6 per clone, 2 per replica
  with pytest.raises(ValueError, match='per-clone batch 4 is not divisible by '
                     'train_config.replicas_to_aggregate=3'):
    trainer.batch_size_per_clone(config, 3)


def test_a_static_estimator_batch_fails_when_the_graph_is_built():
  with tf.Graph().as_default():
    features = {'x': tf.zeros([5, 3], name='x')}
    with pytest.raises(ValueError, match=r'the batch of x:0=5 is not divisible by num_clones=2'):
      replicate.split_batch(features, 2)


def test_a_dynamic_estimator_batch_fails_when_the_step_runs():
  with tf.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 3], name='x')
    halves = replicate.split_batch({'x': x}, 2)
    with tf.compat.v1.Session() as sess:
      first, second = sess.run([halves[0]['x'], halves[1]['x']], {x: np.ones([4, 3])})
      assert first.shape == second.shape == (2, 3)
      with pytest.raises(tf.errors.InvalidArgumentError,
                         match='the batch of x:0 is not divisible by num_clones=2'):
        sess.run(halves[0]['x'], {x: np.ones([5, 3])})


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
