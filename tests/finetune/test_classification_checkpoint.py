"""Fine-tuning an SSD's backbone from a classification checkpoint.

A `slim_classifier` with the SSD's backbone (`small_mobilenet_v1`, same depth
multiplier) trains for a few steps; the shapes SSD then fine-tunes from that
checkpoint (`fine_tune_checkpoint_type: 'classification'`): every backbone
variable starts from the classifier's `SmallMobilenetV1/...` value, the
classifier's logits layer is not used, the SSD's extra layers and box
predictor keep their fresh initialization, and the SSD trains.
"""

import logging
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import config_util
from tests.export import train_util
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

SIZE = 96
BACKBONE = 'FeatureExtractor/SmallMobilenetV1/'
FINE_TUNE_STEPS = 3


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory):
  """A classification checkpoint of the SSD's backbone and detection data."""
  root = tmp_path_factory.mktemp('classification')
  pattern, label_map = train_util.write_classification_dataset(
      str(root / 'classes'), num_examples=16, size=32)
  extractor = config_util.load_pipeline_config(
      train_util.SSD_CONFIG).model.ssd.feature_extractor
  configs = train_util.classifier_configs(
      pattern, label_map, net='small_mobilenet_v1', num_steps=4,
      depth_multiplier=extractor.depth_multiplier, min_depth=extractor.min_depth)
  loss, checkpoint = train_util.train(configs, str(root / 'classifier'))
  assert np.isfinite(loss)
  data = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'shapes'), num_train=8, num_val=0, height=SIZE, width=SIZE, num_classes=5,
      num_shards=1, seed=4)
  return {'root': root, 'checkpoint': checkpoint, 'data': data}


def _fine_tune_configs(pretrained):
  configs = train_util.ssd_configs(pretrained['data'], num_steps=FINE_TUNE_STEPS)
  train_util.set_fine_tune_checkpoint(configs, pretrained['checkpoint'], 'classification')
  return configs


def test_backbone_restored_heads_fresh(pretrained, caplog):
  checkpoint = pretrained['checkpoint']
  in_checkpoint = dict(tf.train.list_variables(checkpoint))
  assert any(n.startswith('SmallMobilenetV1/Logits/') for n in in_checkpoint)
  with caplog.at_level(logging.INFO):
    values = train_util.values_after_fine_tune_init(_fine_tune_configs(pretrained), SIZE)
  backbone = sorted(n for n in values if n.startswith(BACKBONE))
  assert len(backbone) > 20
  assert any(n.endswith('BatchNorm/moving_variance') for n in backbone)
  for name in backbone:
    np.testing.assert_array_equal(values[name],
                                  tf.train.load_variable(checkpoint, name[len(
                                      'FeatureExtractor/'):]), err_msg=name)
  heads = [n for n in values if not n.startswith(BACKBONE)]
  assert any(n.startswith('FeatureExtractor/ExtraLayers/') for n in heads)
  assert any('/ClassPredictor/' in n for n in heads)
  assert not any(n.replace('FeatureExtractor/', '', 1) in in_checkpoint for n in heads)
  messages = [r.getMessage() for r in caplog.records]
  assert not any('skips' in m for m in messages), 'the whole backbone should restore'


def test_ssd_trains_from_the_classification_checkpoint(pretrained, caplog):
  with caplog.at_level(logging.INFO):
    loss, checkpoint = train_util.train(_fine_tune_configs(pretrained),
                                        str(pretrained['root'] / 'ssd'))
  assert np.isfinite(loss)
  assert tf.train.load_variable(checkpoint, 'global_step') == FINE_TUNE_STEPS
  assert any(r.getMessage().startswith('Restoring ') and pretrained['checkpoint']
             in r.getMessage() for r in caplog.records)


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
