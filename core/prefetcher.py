"""A prefetch queue that keeps batches ready ahead of the model.

`prefetch(tensor_dict, capacity)` creates a `PaddingFIFOQueue` named
`prefetch_queue` holding up to `capacity` copies of `tensor_dict`, registers a
`QueueRunner` that keeps it filled (started by `Supervisor`,
`MonitoredSession` or `tf.compat.v1.train.start_queue_runners`), and adds the
summary `queue/prefetch_queue/fraction_of_<capacity>_full`. Same interface as
the Object Detection API's prefetcher:

    from core import prefetcher
    queue = prefetcher.prefetch(tensor_dict, capacity=5)
    batch = queue.dequeue()   # a dict with tensor_dict's keys

Tensors may have partially unknown static shapes (that is why the queue is a
padding queue); every dequeued value keeps the shape it was enqueued with.
"""

import tensorflow as tf


def prefetch(tensor_dict, capacity):
  """Creates a prefetch queue for tensors.

  Args:
    tensor_dict: a dict of tensors to prefetch (static ranks must be known).
    capacity: the size of the prefetch queue.

  Returns:
    a PaddingFIFOQueue whose dequeue() returns a dict with tensor_dict's keys.

  Raises:
    ValueError: an empty tensor_dict or a capacity below 1.
  """
  if not tensor_dict:
    raise ValueError('prefetch needs a non-empty tensor_dict.')
  if capacity < 1:
    raise ValueError('prefetch capacity must be >= 1, got %r' % capacity)
  names = list(tensor_dict.keys())
  dtypes = [t.dtype for t in tensor_dict.values()]
  shapes = [t.get_shape() for t in tensor_dict.values()]
  prefetch_queue = tf.queue.PaddingFIFOQueue(
      capacity, dtypes=dtypes, shapes=shapes, names=names, name='prefetch_queue')
  enqueue_op = prefetch_queue.enqueue(tensor_dict)
  tf.compat.v1.train.queue_runner.add_queue_runner(
      tf.compat.v1.train.queue_runner.QueueRunner(prefetch_queue, [enqueue_op]))
  tf.compat.v1.summary.scalar(
      'queue/%s/fraction_of_%d_full' % (prefetch_queue.name, capacity),
      tf.cast(prefetch_queue.size(), dtype=tf.float32) * (1. / capacity))
  return prefetch_queue
