"""The zoo's two-stage detectors have the OD API's variables, config for config.

For each of the OD API's 27 TF1 two-stage sample configs (faster_rcnn_*,
mask_rcnn_*, rfcn_*), a model config of that sample's shape
(tests/models/zoo_two_stage_testlib.py), built by model_builder and run
through preprocess and predict in training mode (where every layer, the mask
head included, is built), has exactly the global variables (names and
shapes) the OD API creates for the sample (tests/models/data/), so the zoo
checkpoint restores completely. Graph construction only: no session runs.
"""

from google.protobuf import text_format
import pytest
import tensorflow as tf

from builders import model_builder
from protos import model_pb2
from tests.models import zoo_testlib
from tests.models import zoo_two_stage_testlib

tf.compat.v1.disable_eager_execution()

pytestmark = pytest.mark.slow
ARCHITECTURES = zoo_two_stage_testlib.TWO_STAGE_ARCHITECTURES
# Small, yet enough for every backbone's stem.
_SIZE = 96


def _predict_in_training_mode(model_config, size, num_classes, with_masks):
  model = model_builder.build(model_config, is_training=True, add_summaries=False)
  images, shapes = model.preprocess(tf.zeros([1, size, size, 3]))
  masks = [tf.ones([1, size, size])] if with_masks else None
  model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])],
                            [tf.one_hot([0], num_classes)], groundtruth_masks_list=masks)
  return model, model.predict(images, shapes), shapes


def test_every_two_stage_sample_config_is_listed():
  assert sorted(name + '.config' for name in ARCHITECTURES) == (
      zoo_testlib.sample_config_names('faster_rcnn'))
  assert len(ARCHITECTURES) == 27


@pytest.mark.parametrize('name', sorted(ARCHITECTURES))
def test_sample_config_layout_equals_the_od_apis(name):
  facts = ARCHITECTURES[name]
  model_config = text_format.Parse(
      zoo_two_stage_testlib.faster_rcnn_model_config(facts, image_size=_SIZE),
      model_pb2.DetectionModel())
  with tf.Graph().as_default():
    _predict_in_training_mode(model_config, _SIZE, facts.num_classes,
                              with_masks=bool(facts.masks))
    difference = zoo_testlib.layout_difference(
        zoo_testlib.reference_variables(name + '.config'),
        zoo_testlib.graph_variables())
  assert difference == ''


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__]))
