"""Batches per-example tensor_dicts for the clones: `BatchQueue`.

The legacy trainer reads one example at a time (a tensor_dict whose tensors
may differ in size between examples, like the boxes of an image), augments it,
and then needs `batch_size` of them per clone. `BatchQueue` keeps the Object
Detection API interface and results:

    from core import batcher
    batch_queue = batcher.BatchQueue(
        tensor_dict, batch_size=8, batch_queue_capacity=150,
        num_batch_queue_threads=8, prefetch_queue_capacity=5)
    examples = batch_queue.dequeue()   # a list of 8 tensor_dicts
    boxes_of_first = examples[0]['groundtruth_boxes']   # [N_0, 4], unpadded

Each example's runtime shape is stored next to it (`<key>_runtime_shapes`)
before `tf.compat.v1.train.batch(..., dynamic_pad=True)` pads the batch;
`dequeue()` unstacks the padded batch and slices each tensor back to its own
shape, with the static shape of the input tensor set on the result. A
`prefetcher.prefetch` queue after the batch keeps whole batches ready. Queue
runners fill both queues (Supervisor / MonitoredSession start them); the
fullness of each is a summary (`batch/fraction_of_<capacity>_full` and
`queue/prefetch_queue/fraction_of_<capacity>_full`). A last partial batch is
never produced.

Note: like the original, the constructor adds the `_runtime_shapes` entries to
the `tensor_dict` passed in.
"""

import collections

import tensorflow as tf

from core import prefetcher

rt_shape_str = '_runtime_shapes'


class BatchQueue:
  """Batches variable-size per-example tensor_dicts and unpads them again."""

  def __init__(self, tensor_dict, batch_size, batch_queue_capacity, num_batch_queue_threads,
               prefetch_queue_capacity):
    """Builds the batching and prefetch queues for `tensor_dict`.

    Args:
      tensor_dict: a dict of per-example tensors with known ranks. Entries
        `<key>_runtime_shapes` are added to it.
      batch_size: examples per dequeued batch.
      batch_queue_capacity: capacity (in examples) of the batching queue.
      num_batch_queue_threads: queue-runner threads enqueuing examples.
      prefetch_queue_capacity: capacity (in batches) of the prefetch queue.

    Raises:
      ValueError: batch_size below 1, an empty dict, or a tensor of unknown rank.
    """
    if batch_size < 1:
      raise ValueError('batch_size must be >= 1, got %r' % batch_size)
    if not tensor_dict:
      raise ValueError('BatchQueue needs a non-empty tensor_dict.')
    for key, tensor in tensor_dict.items():
      if tensor.get_shape().ndims is None:
        raise ValueError('BatchQueue needs known ranks; tensor %r has an unknown rank.' % key)
    self._batch_size = batch_size
    self._static_shapes = collections.OrderedDict(
        (key, tensor.get_shape()) for key, tensor in tensor_dict.items())
    runtime_shapes = {key + rt_shape_str: tf.shape(tensor) for key, tensor in tensor_dict.items()}
    tensor_dict.update(runtime_shapes)
    padded_batch = tf.compat.v1.train.batch(
        tensor_dict, batch_size=batch_size, num_threads=num_batch_queue_threads,
        capacity=batch_queue_capacity, dynamic_pad=True)
    self._queue = prefetcher.prefetch(padded_batch, prefetch_queue_capacity)

  def dequeue(self):
    """Takes one batch from the prefetch queue and removes its padding.

    Returns:
      a list of `batch_size` tensor_dicts; each tensor is sliced back to the
      shape it had when enqueued and carries the input's static shape.
    """
    batch = self._queue.dequeue()
    values = {key: tf.unstack(batch[key], num=self._batch_size) for key in self._static_shapes}
    shapes = {key: tf.unstack(batch[key + rt_shape_str], num=self._batch_size)
              for key in self._static_shapes}
    examples = []
    for index in range(self._batch_size):
      example = {}
      for key, static_shape in self._static_shapes.items():
        shape = shapes[key][index]
        example[key] = tf.slice(values[key][index], tf.zeros_like(shape), shape)
        example[key].set_shape(static_shape)
      examples.append(example)
    return examples
