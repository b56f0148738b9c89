"""Writing evaluation results as TensorBoard events in `eval[_name]/`.

`Estimator.evaluate` writes each metric at the evaluated checkpoint's global
step, the way tf.estimator did, so TensorBoard, `BestExporter` and the early
stopping hooks can read them back:

* Python / numpy scalars -> `simple_value` summaries tagged with the metric name;
* serialized `Summary` protos (bytes, e.g. image summaries) -> their values,
  re-tagged `<metric>/<i>`;
* numpy arrays -> tensor summaries;
* the evaluated checkpoint's path -> a string tensor summary `checkpoint_path`.

`global_step` itself is not written (it is the event's step).
"""

import numpy as np
import tensorflow as tf
from core import logs as logging

CHECKPOINT_PATH_TAG = 'checkpoint_path'


def _writer(output_dir):
  # FileWriter needs graph mode; a private graph keeps the caller's untouched.
  with tf.Graph().as_default():
    return tf.compat.v1.summary.FileWriterCache.get(output_dir)


def results_text(dictionary):
  """One line for the eval results: `name = value` pairs sorted by name (bytes left out).

  This is tf.estimator's layout of the line "Saving dict for global step N:
  ...", which users grep logs for.

  Args:
    dictionary: {metric name: value}.

  Returns:
    e.g. 'accuracy = 0.75, global_step = 200, loss = 0.31'.
  """
  return ', '.join('%s = %s' % (key, dictionary[key]) for key in sorted(dictionary)
                   if not isinstance(dictionary[key], bytes))


def write_dict_to_summary(output_dir, dictionary, current_global_step):
  """Writes `dictionary` {metric: value} as one event at `current_global_step`.

  Also logs the results, once per evaluation, as the INFO line "Saving dict
  for global step N: name = value, ...".
  """
  logging.info('Saving dict for global step %d: %s', current_global_step,
               results_text(dictionary))
  summary = tf.compat.v1.Summary()
  for key in sorted(dictionary):
    value = dictionary[key]
    if value is None or key == tf.compat.v1.GraphKeys.GLOBAL_STEP:
      continue
    if isinstance(value, (np.floating, float)) or (
        isinstance(value, (np.integer, int)) and not isinstance(value, bool)):
      summary.value.add(tag=key, simple_value=float(value))
    elif isinstance(value, bytes):
      try:
        parsed = tf.compat.v1.Summary.FromString(value)
      except Exception:  # pylint: disable=broad-except  (not a Summary proto)
        logging.warning('Skipping summary for %s, cannot parse string to Summary.', key)
        continue
      for i, parsed_value in enumerate(parsed.value):
        parsed_value.tag = '%s/%d' % (key, i)
        summary.value.add().CopyFrom(parsed_value)
    elif isinstance(value, np.ndarray):
      summary.value.add(tag=key, tensor=tf.compat.v1.make_tensor_proto(value))
    else:
      logging.warning('Skipping summary for %s, must be a float, np.float32, np.int64, '
                      'np.int32 or int or np.ndarray or a serialized string of Summary.', key)
  writer = _writer(output_dir)
  writer.add_summary(summary, current_global_step)
  writer.flush()


def write_checkpoint_path_to_summary(output_dir, checkpoint_path, current_global_step):
  """Records which checkpoint an evaluation used (a string tensor summary)."""
  logging.info("Saving '%s' summary for global step %d: %s", CHECKPOINT_PATH_TAG,
               current_global_step, checkpoint_path)
  summary = tf.compat.v1.Summary()
  summary.value.add(tag=CHECKPOINT_PATH_TAG,
                    tensor=tf.compat.v1.make_tensor_proto(checkpoint_path, dtype=tf.string))
  writer = _writer(output_dir)
  writer.add_summary(summary, current_global_step)
  writer.flush()
