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
  """Keeps up to `capacity` values of `tensor_dict` ready in a background queue.

  Args:
    tensor_dict: a dict of tensors to prefetch (static ranks must be known).
    capacity: how many values the queue holds at most.

  Returns:
    a PaddingFIFOQueue whose dequeue() returns a dict with tensor_dict's keys.

  Raises:
    ValueError: an empty tensor_dict or a capacity below 1.
  """
  if not tensor_dict:
    raise ValueError('prefetch needs a non-empty tensor_dict.')
  if capacity < 1:
    raise ValueError('prefetch capacity must be >= 1, got %r' % capacity)
  keys = sorted(tensor_dict)
  queue = tf.queue.PaddingFIFOQueue(
      capacity,
      dtypes=[tensor_dict[k].dtype for k in keys],
      shapes=[tensor_dict[k].get_shape() for k in keys],
      names=keys, name='prefetch_queue')
  runner = tf.compat.v1.train.queue_runner.QueueRunner(queue, [queue.enqueue(tensor_dict)])
  tf.compat.v1.train.queue_runner.add_queue_runner(runner)
  # TensorBoard shows how full the queue stays: near 0 means input-bound.
  fullness = tf.cast(queue.size(), tf.float32) / float(capacity)
  tf.compat.v1.summary.scalar('queue/%s/fraction_of_%d_full' % (queue.name, capacity),
                              fullness)
  return queue
