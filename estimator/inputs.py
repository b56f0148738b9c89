"""Input functions over in-memory data: `tfe.inputs.numpy_input_fn`, `pandas_input_fn`.

Both return an `input_fn` for `Estimator.train/evaluate/predict` that yields batches of
the given arrays (or DataFrame columns) as `(features, labels)` tensors, or features alone
when there are no labels:

    import estimator as tfe

    train_input_fn = tfe.inputs.numpy_input_fn(
        x={'age': ages, 'height': heights}, y=weights,
        batch_size=32, num_epochs=None, shuffle=True)
    eval_input_fn = tfe.inputs.numpy_input_fn(
        x={'age': ages, 'height': heights}, y=weights, num_epochs=1, shuffle=False)
    estimator.train(train_input_fn, max_steps=1000)
    estimator.evaluate(eval_input_fn)          # every example exactly once

    # pandas (optional: pip install pandas):
    tfe.inputs.pandas_input_fn(x=frame, y=frame.pop('label'), shuffle=False)

Semantics as tf.estimator's: `shuffle` has no default and must be a bool; `num_epochs=None`
repeats forever and yields only full batches, a finite `num_epochs` keeps the last
partial batch; with `shuffle=True`, examples are mixed through a buffer of
`queue_capacity` examples. A dict `y` gives a dict of labels (its keys must not repeat
feature names); a single array `x` gives a single feature tensor. For pandas, the target
joins the frame under `target_column` (an error if the frame already has that column), and
`x` and `y` must share one index.

How the data reach the graph: as in tf.estimator, they are fed from Python, never
written into the graph. A generator hands the arrays to a `tf.data` pipeline a chunk of rows
at a time (`Dataset.from_generator`), so `graph.pbtxt`, the events file and every
`model.ckpt-N.meta` stay a few hundred KB whatever the size of the data (with constants, a
31 MB array made a 146 MB graph.pbtxt and a 63 MB .meta per checkpoint). The arrays stay in
this process's memory; the pipeline runs where the input_fn's ops run, which is the
process that called it (each worker of a cluster feeds its own copy, as the original's
queue runners did).

Differs on purpose:
* Built on `tf.data` instead of queue runners: no threads to start, and `num_threads` only
  has to be a positive integer (the order of a non-shuffled input is always the data's).
* The graph refers to the arrays through this process, so a graph (or .meta) saved
  from a training run cannot replay the input in another process; for data beyond
  memory, write TFRecords or pass a `tf.data.Dataset` from the input_fn.
"""

import collections
import numbers

import numpy as np
import tensorflow as tf

from core import dataset_teardown

_SHUFFLE_ERROR = ('shuffle must be provided and explicitly set as boolean (it is recommended '
                  'to set it as True for training); got {}')


def _check_common(shuffle, batch_size, num_epochs, queue_capacity, num_threads):
  if not isinstance(shuffle, bool):
    raise ValueError(_SHUFFLE_ERROR.format(shuffle))
  for name, value in (('batch_size', batch_size), ('queue_capacity', queue_capacity),
                      ('num_threads', num_threads)):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
      raise ValueError('%s must be a positive integer; got %r' % (name, value))
  if num_epochs is not None and (
      isinstance(num_epochs, bool) or not isinstance(num_epochs, numbers.Integral)
      or num_epochs <= 0):
    raise ValueError('num_epochs must be None (forever) or a positive integer; got %r'
                     % (num_epochs,))


def _unique_target_key(features, name='__target_key__'):
  while name in features:
    name += '_n'
  return name


def _as_ordered_columns(x):
  """x (a dict of arrays or one array) as an OrderedDict sorted by key."""
  if isinstance(x, dict):
    if not x:
      raise ValueError('x cannot be an empty dict')
    return collections.OrderedDict(
        (key, np.asarray(value)) for key, value in sorted(x.items()))
  if isinstance(x, np.ndarray):
    return collections.OrderedDict([('__direct_np_input__', x)])
  raise TypeError('x must be a dict or array; got {}'.format(type(x).__name__))


def _columns_and_target_keys(x, y):
  """All columns (features then targets) and how to split them back."""
  columns = _as_ordered_columns(x)
  feature_keys = list(columns)
  if y is None:
    target_keys = None
  elif isinstance(y, dict):
    if not y:
      raise ValueError('y cannot be empty dict, use None instead.')
    target_keys = sorted(y)
    duplicates = set(feature_keys) & set(target_keys)
    if duplicates:
      raise ValueError('{} duplicate keys are found in both x and y: {}'.format(
          len(duplicates), duplicates))
    columns.update((key, np.asarray(y[key])) for key in target_keys)
  else:
    target_keys = _unique_target_key(columns)
    columns[target_keys] = np.asarray(y)
  if len({len(value) for value in columns.values()}) != 1:
    x_shapes = {key: columns[key].shape for key in feature_keys}
    if target_keys is None:
      y_shapes = None
    elif isinstance(target_keys, str):
      y_shapes = columns[target_keys].shape
    else:
      y_shapes = {key: columns[key].shape for key in target_keys}
    raise ValueError('Length of tensors in x and y is mismatched. All elements in x and y '
                     'must have the same length.\nShapes in x: {}\nShapes in y: {}\n'.format(
                         x_shapes, y_shapes))
  return columns, feature_keys, target_keys


# Rows per call into Python: large enough that the per-call cost (~50 us) is small next
# to the copy, small enough that a chunk of wide rows stays a few MB.
_CHUNK_BYTES = 4 << 20
_MAX_CHUNK_ROWS = 4096


def _tf_dtype(array):
  """The tensor dtype a column feeds as (text of any kind as tf.string)."""
  if array.dtype.kind in 'OSU':
    return tf.string
  return tf.as_dtype(array.dtype)


def _feedable(chunk):
  """A slice of a column in a form the generator can hand to TensorFlow."""
  if chunk.dtype.kind == 'U':
    return np.char.encode(chunk, 'utf-8')
  if chunk.dtype.kind == 'O':
    return np.array([v.encode('utf-8') if isinstance(v, str) else v for v in chunk.ravel()],
                    dtype=object).reshape(chunk.shape)
  return chunk


def _chunk_rows(columns):
  """Rows per generator call for these columns (at least 1)."""
  row_bytes = sum(max(value[:1].nbytes, 1) for value in columns.values())
  return int(max(1, min(_MAX_CHUNK_ROWS, _CHUNK_BYTES // row_bytes)))


def _example_dataset(columns):
  """A dataset of single examples (dicts of tensors) fed from the arrays by Python.

  Nothing of the data enters the graph: `from_generator` keeps a reference to the
  generator in this process and the graph holds only a token for it.
  """
  names = list(columns)
  length = len(columns[names[0]])
  rows = _chunk_rows(columns)
  signature = {name: tf.TensorSpec((None,) + value.shape[1:], _tf_dtype(value))
               for name, value in columns.items()}

  def chunks():
    for start in range(0, length, rows):
      yield {name: _feedable(columns[name][start:start + rows]) for name in names}

  dataset = tf.data.Dataset.from_generator(chunks, output_signature=signature)
  return dataset.unbatch()


def _batches(columns, batch_size, num_epochs, shuffle, queue_capacity):
  """The next batch of every column, as a dict of tensors (graph mode)."""
  dataset = _example_dataset(columns)
  dataset = dataset.repeat(num_epochs)
  if shuffle:
    dataset = dataset.shuffle(queue_capacity)
  # Forever: only full batches (a fixed batch dimension); finite: keep the last one.
  dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)
  dataset = dataset_teardown.prompt_teardown(dataset.prefetch(1))
  return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()


def _split(batch, feature_keys, target_keys, single_feature):
  features = (batch[feature_keys[0]] if single_feature
              else {key: batch[key] for key in feature_keys})
  if target_keys is None:
    return features
  if isinstance(target_keys, str):
    return features, batch[target_keys]
  return features, {key: batch[key] for key in target_keys}


def numpy_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                   queue_capacity=1000, num_threads=1):
  """An input_fn that feeds numpy arrays to an Estimator.

  Args:
    x: a dict of arrays (one feature each, all of one length) or one array (then the
      features are that tensor).
    y: labels: an array, a dict of arrays (no key shared with `x`), or None.
    batch_size: examples per batch.
    num_epochs: passes over the data; None repeats forever (full batches only).
    shuffle: bool, required: mix the examples (True for training).
    queue_capacity: examples in the shuffle buffer.
    num_threads: a positive integer; kept for compatibility (see the module docstring).

  Returns:
    A function returning `(features, labels)` tensors, or features alone when `y` is
    None; evaluating them past the last batch raises `tf.errors.OutOfRangeError`.

  Raises:
    ValueError: `shuffle` not a bool, an empty dict, a key in both `x` and `y`, lengths
      that differ, or a non-positive size.
    TypeError: `x` neither a dict nor an array.
  """
  _check_common(shuffle, batch_size, num_epochs, queue_capacity, num_threads)

  def input_fn():
    columns, feature_keys, target_keys = _columns_and_target_keys(x, y)
    batch = _batches(columns, batch_size, num_epochs, shuffle, queue_capacity)
    return _split(batch, feature_keys, target_keys, isinstance(x, np.ndarray))

  return input_fn


def _pandas():
  try:
    import pandas  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ImportError(
        'pandas_input_fn needs pandas, which is not installed; install it with '
        '`pip install pandas` (or `pip install -e ".[pandas]"` in a slimtrain checkout)'
    ) from None
  return pandas


def _frame_columns(x, y, target_column):
  """The DataFrame's columns plus the target(s): (OrderedDict, feature keys, target keys)."""
  pandas = _pandas()
  if not isinstance(x, pandas.DataFrame):
    raise TypeError('x must be a pandas DataFrame; got {}'.format(type(x).__name__))
  frame = x.copy()
  target_keys = None
  if y is not None:
    if target_column in frame:
      raise ValueError('Cannot use name {} for target column: DataFrame already has a '
                       'column with that name: {}'.format(target_column, list(frame.columns)))
    if not np.array_equal(frame.index, y.index):
      raise ValueError('Index for x and y are mismatched.\nIndex for x: {}\nIndex for y: {}\n'
                       .format(frame.index, y.index))
    if isinstance(y, pandas.DataFrame):
      target_keys = {column: _unique_target_key(frame, column) for column in y.columns}
      for column, key in target_keys.items():
        frame[key] = y[column]
    else:
      target_keys = target_column
      frame[target_column] = y
  columns = collections.OrderedDict((key, frame[key].values) for key in frame.columns)
  if isinstance(target_keys, dict):
    feature_keys = [k for k in columns if k not in target_keys.values()]
  else:
    feature_keys = [k for k in columns if k != target_keys]
  return columns, feature_keys, target_keys


def pandas_input_fn(x, y=None, batch_size=128, num_epochs=1, shuffle=None,
                    queue_capacity=1000, num_threads=1, target_column='target'):
  """An input_fn that feeds a pandas DataFrame to an Estimator.

  Args:
    x: a `pandas.DataFrame`; each column is a feature.
    y: a `pandas.Series` (labels as one tensor) or `DataFrame` (a dict of labels keyed by
      its column names), with the index of `x`; or None.
    batch_size, num_epochs, shuffle, queue_capacity, num_threads: as `numpy_input_fn`.
    target_column: the name under which a Series `y` joins the frame; must not be a
      column of `x`.

  Returns:
    A function returning `(features, labels)` or features alone, as `numpy_input_fn`.

  Raises:
    ImportError: pandas is not installed (saying how to install it).
    ValueError: `shuffle` not a bool, `target_column` already in `x`, or the indexes of
      `x` and `y` differ.
  """
  _pandas()
  _check_common(shuffle, batch_size, num_epochs, queue_capacity, num_threads)

  def input_fn():
    columns, feature_keys, target_keys = _frame_columns(x, y, target_column)
    batch = _batches(columns, batch_size, num_epochs, shuffle, queue_capacity)
    if isinstance(target_keys, dict):
      features = {key: batch[key] for key in feature_keys}
      return features, {column: batch[key] for column, key in target_keys.items()}
    return _split(batch, feature_keys, target_keys, single_feature=False)

  return input_fn
