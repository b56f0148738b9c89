"""Fine-tuning an SSD from a detection checkpoint trained on other classes.

The shapes SSD trains on 3 classes; a 5-class SSD then fine-tunes from that
checkpoint (`fine_tune_checkpoint_type: 'detection'`) through
`trainer.trainer.train`: the feature extractor and the box-encoding head
start from the checkpoint's values exactly, the class head (another shape)
is skipped with a warning naming it and keeps its fresh initialization, and
the 5-class model trains.
"""

import logging
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.export import train_util
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

SIZE = 96
PRETRAIN_STEPS = 30
FINE_TUNE_STEPS = 4


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory):
  """A 3-class detection checkpoint and a 5-class dataset to fine-tune on."""
  root = tmp_path_factory.mktemp('detection')
  data3 = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'shapes3'), num_train=16, num_val=0, height=SIZE, width=SIZE,
      num_classes=3, num_shards=1, seed=1)
  data5 = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'shapes5'), num_train=16, num_val=0, height=SIZE, width=SIZE,
      num_classes=5, num_shards=1, seed=2)
  configs = train_util.ssd_configs(data3, num_steps=PRETRAIN_STEPS)
  loss, checkpoint = train_util.train(configs, str(root / 'pretrain'))
  assert np.isfinite(loss)
  assert checkpoint.endswith('model.ckpt-%d' % PRETRAIN_STEPS)
  return {'root': root, 'checkpoint': checkpoint, 'data5': data5}


def _fine_tune_configs(pretrained, num_steps=FINE_TUNE_STEPS):
  configs = train_util.ssd_configs(pretrained['data5'], num_steps=num_steps)
  assert configs['model'].ssd.num_classes == 5
  train_util.set_fine_tune_checkpoint(configs, pretrained['checkpoint'], 'detection')
  return configs


def _is_class_head(name):
  return '/ClassPredictor/' in name


def test_backbone_and_box_head_restored_class_head_skipped(pretrained, caplog):
  configs = _fine_tune_configs(pretrained)
  with caplog.at_level(logging.INFO):
    values = train_util.values_after_fine_tune_init(configs, SIZE)
  checkpoint = pretrained['checkpoint']
  in_checkpoint = dict(tf.train.list_variables(checkpoint))
  restored = [n for n in values if not _is_class_head(n)]
  assert any(n.startswith('FeatureExtractor/SmallMobilenetV1/') for n in restored)
  assert any(n.startswith('FeatureExtractor/ExtraLayers/') for n in restored)
  assert any('/BoxEncodingPredictor/' in n for n in restored)
  for name in restored:  # weights and batch-norm statistics alike
    np.testing.assert_array_equal(values[name], tf.train.load_variable(checkpoint, name),
                                  err_msg=name)
  class_head = sorted(n for n in values if _is_class_head(n))
  assert class_head
  for name in class_head:
    assert list(values[name].shape) != in_checkpoint[name], name
    if name.endswith('/biases'):
      np.testing.assert_array_equal(values[name], 0.0)  # the fresh initializer's value
    else:
      assert np.std(values[name]) > 0, name
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
              and 'skips' in r.getMessage()]
  assert len(warnings) == 1, warnings
  skipped = warnings[0].rsplit(': ', 1)[1].split(', ')
  assert sorted(skipped) == class_head
  assert 'skips %d of %d variables' % (len(class_head), len(values)) in warnings[0]


def test_fine_tuned_model_trains(pretrained, caplog):
  configs = _fine_tune_configs(pretrained)
  train_dir = str(pretrained['root'] / 'fine_tune')
  with caplog.at_level(logging.INFO):
    loss, checkpoint = train_util.train(configs, train_dir)
  assert np.isfinite(loss)
  assert checkpoint == os.path.join(train_dir, 'model.ckpt-%d' % FINE_TUNE_STEPS)
  assert tf.train.load_variable(checkpoint, 'global_step') == FINE_TUNE_STEPS
  messages = [r.getMessage() for r in caplog.records]
  assert any(m.startswith('Restoring ') and pretrained['checkpoint'] in m for m in messages)
  assert any('skips' in m and 'ClassPredictor' in m for m in messages)
  # Training moved the weights away from the pretrained ones.
  name = 'FeatureExtractor/SmallMobilenetV1/Conv2d_0/weights'
  assert not np.array_equal(tf.train.load_variable(checkpoint, name),
                            tf.train.load_variable(pretrained['checkpoint'], name))
  class_weights = 'BoxPredictor_0/ClassPredictor/weights'
  assert tf.train.load_variable(checkpoint, class_weights).shape[-1] == (
      tf.train.load_variable(pretrained['checkpoint'], class_weights).shape[-1] // 4 * 6)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
