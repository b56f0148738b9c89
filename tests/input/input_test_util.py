"""Helpers for the input tests: tiny datasets, bad records, queue runners."""

import contextlib
import os

import numpy as np
import tensorflow as tf

from protos import input_reader_pb2
from tools import create_shapes_tf_record
from tools import dataset_util


@contextlib.contextmanager
def queue_runners(sess):
  """Starts the graph's queue runners for the duration of the block."""
  coord = tf.train.Coordinator()
  threads = tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)
  try:
    yield coord
  finally:
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=5, ignore_live_threads=True)


def reader_config(pattern, label_map_path=None, shuffle=False, num_epochs=1, **kwargs):
  """An InputReader for `pattern` (no shuffle, one epoch unless asked)."""
  config = input_reader_pb2.InputReader(shuffle=shuffle, num_epochs=num_epochs, **kwargs)
  patterns = pattern if isinstance(pattern, (list, tuple)) else [pattern]
  config.tf_record_input_reader.input_path.extend(patterns)
  if label_map_path:
    config.label_map_path = label_map_path
  return config


def read_all(tensor_dict, max_steps=10000):
  """Runs a per-example tensor_dict in a fresh session until OutOfRange."""
  results = []
  with tf.compat.v1.Session() as sess:
    sess.run([tf.compat.v1.tables_initializer(), tf.compat.v1.local_variables_initializer()])
    try:
      for _ in range(max_steps):
        results.append(sess.run(tensor_dict))
    except tf.errors.OutOfRangeError:
      pass
  return results


def shapes_dataset(directory, **kwargs):
  """Writes a small shapes dataset (32x32 images unless told)."""
  args = dict(num_train=12, num_val=0, height=32, width=32, num_shards=3, seed=7)
  args.update(kwargs)
  return create_shapes_tf_record.create_shapes_dataset(directory, **args)


class RecordWriter:
  """Writes hand-made detection records into one TFRecord file."""

  def __init__(self):
    self.codec = dataset_util.ImageCodec()

  def image(self, height=16, width=20, seed=0, image_format='jpeg'):
    image = np.random.RandomState(seed).randint(0, 255, (height, width, 3)).astype(np.uint8)
    return image, self.codec.encode(image, image_format)

  def example(self, boxes=((0.1, 0.2, 0.5, 0.6),), classes=(1,), height=16, width=20,
              image_format='jpeg', encoded=None, **kwargs):
    if encoded is None:
      _, encoded = self.image(height, width, image_format=image_format)
    return dataset_util.detection_example(encoded, image_format, height, width, boxes, classes,
                                          **kwargs)

  def write(self, path, examples):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
      for example in examples:
        writer.write(example if isinstance(example, bytes) else example.SerializeToString())
    return path
