"""A model built from our config of each TF1 zoo sample config's shape has the
OD API's variables for it, names and shapes, so that the zoo checkpoint
restores completely.

The expected variables (tests/models/data/od_zoo_variables_451906e4.json.gz)
are what the OD API itself creates for each of its 61 sample configs; this
test covers every SSD-family entry (quantization variables are not in it).
Each architecture is built once; sample configs of the same architecture that
differ only in num_classes are compared with the class head rescaled.
"""

import pytest
import tensorflow as tf
from google.protobuf import text_format

from builders import model_builder
from protos import model_pb2
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()


def _built_layout(architecture, num_classes):
  """{name: shape} of the global variables of the SSD built in training mode."""
  config = text_format.Parse(zoo_testlib.ssd_model_config(architecture, num_classes),
                             model_pb2.DetectionModel())
  size = architecture.get('size', 300)
  with tf.Graph().as_default() as graph:
    model = model_builder.build(config, is_training=True, add_summaries=False)
    images, true_shapes = model.preprocess(tf.zeros([1, size, size, 3]))
    model.predict(images, true_shapes)
    return zoo_testlib.graph_variables(graph=graph)


@pytest.mark.parametrize('architecture, sample_configs', zoo_testlib.SSD_ARCHITECTURES,
                         ids=[sorted(configs)[0][:-len('.config')]
                              for _, configs in zoo_testlib.SSD_ARCHITECTURES])
def test_variables_equal_the_od_apis(architecture, sample_configs):
  first_name = sorted(sample_configs)[0]
  built = _built_layout(architecture, sample_configs[first_name])
  for name, num_classes in sorted(sample_configs.items()):
    actual = zoo_testlib.with_num_classes(built, sample_configs[first_name], num_classes)
    expected = zoo_testlib.reference_variables(name)
    assert zoo_testlib.layout_difference(expected, actual) == '', name


def test_every_ssd_sample_config_is_covered():
  covered = {name for _, configs in zoo_testlib.SSD_ARCHITECTURES for name in configs}
  assert covered == set(zoo_testlib.sample_config_names('ssd'))
  assert len(covered) == 33


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__]))
