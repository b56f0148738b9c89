"""Class ids above the model's num_classes: rejected at startup (label map) and in the graph."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from core import config_util
from core import label_map_util
from protos import pipeline_pb2

tf.compat.v1.disable_eager_execution()


def _pipeline_configs(tmp_path, names, num_classes):
  label_map = os.path.join(str(tmp_path), 'label_map.pbtxt')
  label_map_util.write_label_map(label_map, names)
  pipeline = pipeline_pb2.TrainEvalPipelineConfig()
  pipeline.model.ssd.num_classes = num_classes
  pipeline.train_input_reader.label_map_path = label_map
  pipeline.eval_input_reader.add().label_map_path = label_map
  return config_util.create_configs_from_pipeline_proto(pipeline), label_map


def test_label_map_id_above_num_classes_names_file_and_id(tmp_path):
  configs, label_map = _pipeline_configs(tmp_path, ['cat', 'dog', 'bird'], num_classes=2)
  message = (r"Label map %s: item 2 \(name 'bird'\) has id 3, above the model's "
             r'num_classes=2' % label_map)
  with pytest.raises(ValueError, match=message):
    config_util.check_label_maps(configs)


def test_label_map_within_num_classes_passes(tmp_path):
  configs, _ = _pipeline_configs(tmp_path, ['cat', 'dog'], num_classes=2)
  config_util.check_label_maps(configs)


def test_record_class_id_out_of_range_fails_in_the_graph_naming_the_field():
  with tf.Graph().as_default():
    ids = tf.compat.v1.placeholder(tf.int64, [None])
    checked = label_map_util.checked_class_ids(ids, 3, 'groundtruth_classes')
    with tf.compat.v1.Session() as sess:
      np.testing.assert_array_equal(sess.run(checked, {ids: [1, 3, 2]}), [1, 3, 2])
      for bad, offender in (([1, 4], 4), ([0, 2], 0)):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r'groundtruth_classes has a class id outside '
                                 r'1..num_classes=3.*\b%d\b' % offender):
          sess.run(checked, {ids: bad})


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
