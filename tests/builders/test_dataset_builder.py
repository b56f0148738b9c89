"""The 2018 OD API's `builders.dataset_builder` on real shapes TFRecords: the per-example
dataset of legacy/train.py and legacy/eval.py (`make_initializable_iterator(build(config))`,
its initializer in TABLE_INITIALIZERS), `batch_size` and `transform_input_data_fn` as the
2018 inputs.py passes them, and num_epochs / shuffle / num_readers as the InputReader says."""

import sys

import numpy as np
import pytest
import tensorflow as tf

# The user's imports, as changed from `object_detection.X`.
from builders import dataset_builder
from core import standard_fields as fields
from protos import input_reader_pb2
from tools import create_shapes_tf_record

tf.compat.v1.disable_eager_execution()

_INPUT = fields.InputDataFields


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  return create_shapes_tf_record.create_shapes_dataset(
      str(tmp_path_factory.mktemp('dataset_builder')), num_train=6, num_val=5, height=32,
      width=32, num_shards=2)


def _config(pattern, label_map_path, **fields_):
  config = input_reader_pb2.InputReader()
  config.tf_record_input_reader.input_path.append(pattern)
  config.label_map_path = label_map_path
  for name, value in fields_.items():
    setattr(config, name, value)
  return config


def _drain(tensors, limit=100):
  """Runs the graph's TABLE_INITIALIZERS (only), then `tensors` until the end (or limit)."""
  values = []
  with tf.compat.v1.Session() as session:
    session.run(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS))
    try:
      while len(values) < limit:
        values.append(session.run(tensors))
    except tf.errors.OutOfRangeError:
      pass
  return values


def test_legacy_train_get_next_reads_every_example_once_in_order(data):
  # 2018 legacy/eval.py: get_next(config) = make_initializable_iterator(build(config)).get_next()
  config = _config(data['val_pattern'], data['label_map_path'], shuffle=False, num_epochs=1,
                   num_readers=1)
  with tf.Graph().as_default():
    iterator = dataset_builder.make_initializable_iterator(dataset_builder.build(config))
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS) == [
        iterator.initializer]
    tensor_dict = iterator.get_next()
    assert tensor_dict[_INPUT.image].shape.as_list() == [None, None, 3]
    examples = _drain(tensor_dict)
  assert [e[_INPUT.source_id] for e in examples] == [b'val_%d' % i for i in range(5)]
  for example in examples:
    assert example[_INPUT.image].shape == (32, 32, 3)
    assert example[_INPUT.image].dtype == np.uint8
    assert set(example[_INPUT.groundtruth_classes]) <= {1, 2, 3}
    assert len(example[_INPUT.groundtruth_boxes]) == len(example[_INPUT.groundtruth_classes])


def test_a_monitored_session_starts_the_iterator_by_itself(data):
  config = _config(data['val_pattern'], data['label_map_path'], shuffle=False, num_epochs=1)
  with tf.Graph().as_default():
    tensor_dict = dataset_builder.make_initializable_iterator(
        dataset_builder.build(config)).get_next()
    with tf.compat.v1.train.MonitoredSession() as session:
      assert session.run(tensor_dict[_INPUT.source_id]) == b'val_0'


def _ids(config, limit=100):
  dataset = dataset_builder.build(config)
  return _drain(dataset_builder.make_initializable_iterator(dataset).get_next()
                [_INPUT.source_id], limit=limit)


def test_num_epochs_and_shuffle_and_num_readers(data):
  ids = sorted(b'train_%d' % i for i in range(6))
  config = lambda **f: _config(data['train_pattern'], data['label_map_path'], **f)
  with tf.Graph().as_default():
    one_reader = _ids(config(shuffle=False, num_epochs=1, num_readers=1))
    two_readers = _ids(config(shuffle=False, num_epochs=1, num_readers=2, read_block_length=1))
    twice = _ids(config(shuffle=False, num_epochs=2, num_readers=1))
    shuffled = _ids(config(shuffle=True, num_epochs=1, num_readers=1))
    # Unshuffled, so the check is exact; a shuffled endless stream need not show every
    # record within 20 draws (the shuffle buffer spans epoch boundaries).
    forever = _ids(config(shuffle=False, num_epochs=0, num_readers=1), limit=20)
  # One reader: one shard (3 records each) after the other; two: the shards alternate.
  assert sorted(one_reader) == ids
  first, second = one_reader[:3], one_reader[3:]
  assert two_readers == [first[0], second[0], first[1], second[1], first[2], second[2]]
  assert twice == one_reader * 2
  assert sorted(shuffled) == ids
  assert forever == (one_reader * 4)[:20]


def test_batch_size_and_transform_input_data_fn_as_2018_inputs_py_pass_them(data):
  config = _config(data['val_pattern'], data['label_map_path'], shuffle=False, num_epochs=1,
                   max_number_of_boxes=4)

  def transform(tensor_dict):
    tensor_dict = dict(tensor_dict)
    tensor_dict[_INPUT.image] = tf.image.resize(
        tf.cast(tensor_dict[_INPUT.image], tf.float32) / 255.0, [16, 16])
    return tensor_dict

  with tf.Graph().as_default():
    dataset = dataset_builder.build(config, batch_size=2, transform_input_data_fn=transform)
    batch = dataset_builder.make_initializable_iterator(dataset).get_next()
    # The last partial batch is dropped: a static batch dimension.
    assert batch[_INPUT.image].shape.as_list() == [2, 16, 16, 3]
    assert batch[_INPUT.groundtruth_boxes].shape.as_list() == [2, 4, 4]
    batches = _drain(batch)
  assert len(batches) == 2
  assert [list(b[_INPUT.source_id]) for b in batches] == [[b'val_0', b'val_1'],
                                                          [b'val_2', b'val_3']]
  for b in batches:
    assert b[_INPUT.image].dtype == np.float32 and b[_INPUT.image].max() <= 1.0
    for i in range(2):
      n = b[_INPUT.num_groundtruth_boxes][i]
      assert (b[_INPUT.groundtruth_classes][i, :n] > 0).all()
      assert (b[_INPUT.groundtruth_classes][i, n:] == 0).all()


def test_bad_configs_raise_as_the_2018_builder_did(data, tmp_path):
  with pytest.raises(ValueError, match='not of type input_reader_pb2.InputReader'):
    dataset_builder.build('not a config')
  with pytest.raises(ValueError, match='input_path is empty'):
    dataset_builder.build(input_reader_pb2.InputReader(tf_record_input_reader={}))
  with pytest.raises(ValueError, match='matches no files'):
    dataset_builder.build(_config(str(tmp_path / 'none-*'), data['label_map_path']))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
