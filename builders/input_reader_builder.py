"""Builds the input pipeline an `InputReader` config describes.

Two entry points over the same tf.data pipeline:

* `build(config, ...)` returns a per-example tensor_dict (the tensors of one
  decoded record) for the legacy trainer: augment it, then hand it to
  `core.batcher.BatchQueue`. The iterator is initializable and its initializer
  is in `GraphKeys.TABLE_INITIALIZERS`, so `Supervisor`, `slim.learning.train`
  and `MonitoredSession` start it with their default local init op; in a plain
  `Session` run `tf.compat.v1.tables_initializer()` first.
* `build_dataset(config, batch_size, ...)` returns a batched `tf.data.Dataset`
  of dicts for `input_fn`s: box-indexed fields padded to
  `max_number_of_boxes`, images padded to the largest in the batch, with
  `num_groundtruth_boxes` and `true_image_shape` to undo the padding.

    from builders import input_reader_builder
    from protos import input_reader_pb2
    config = input_reader_pb2.InputReader()
    config.tf_record_input_reader.input_path.append('/data/train.tfrecord-*')
    config.label_map_path = '/data/label_map.pbtxt'
    tensor_dict = input_reader_builder.build(config, num_worker_replicas=2, task_index=0)
    dataset = input_reader_builder.build_dataset(config, batch_size=8)

The pipeline: expand the globs (a pattern matching nothing is an error naming
it) -> give each worker its own files (`files[task_index::num_workers]`), or,
with fewer files than workers, every worker reads all files and keeps its own
records (`record_index % num_workers == task_index`) -> shuffle file names ->
repeat `num_epochs` times (0 = forever) -> read `num_readers` files at once,
`read_block_length` records from each in turn -> keep 1 of every
`sample_1_of_n_examples` records -> shuffle records -> decode and check in
parallel -> prefetch.

Bad input never makes a silent wrong batch. Every record carries its file and
index within the file. A corrupt TFRecord (bad length or CRC, truncated file),
a record that is not a tf.Example of the expected feature types, an image
that does not decode, a missing `image/encoded`, a box outside [0, 1] or with
min > max, a class id that is not in the label map and features whose lengths
disagree all raise `InvalidArgumentError` whose message reads

    slimtrain input: bad record in /data/train.tfrecord-00003-of-00004, record 17: box 2 ...

With `skip_corrupt_records=True` (TrainConfig.skip_corrupt_records) the same
records are logged as a warning with the same text, dropped, and counted in
the local variable / scalar summary `input/num_skipped_records`. A corrupt
TFRecord ends its file: the records after the damage cannot be located, so
the rest of that file is skipped and counted as one.
"""

import collections

import tensorflow as tf
from core import logs as logging

from builders import decoder_builder
from core import dataset_teardown
from core import standard_fields as fields
from protos import input_reader_pb2

_FIELDS = fields.InputDataFields

# Record status codes, carried next to each record through the pipeline.
_OK = 0
_END_OF_FILE = 1
_CORRUPT_FILE = 2
_NOT_AN_EXAMPLE = 3
_UNDECODABLE = 4

# Private keys of pipeline elements; removed before the tensor_dict is returned.
_META_FILENAME = '_source_file'
_META_INDEX = '_record_index'
_META_OFFSET = '_byte_offset'
_META_SIZE = '_file_size'
_META_STATUS = '_status'
_META_VALID = '_valid'
_META_MESSAGE = '_message'
_SKIPPED = '_num_skipped'
_META_KEYS = (_META_FILENAME, _META_INDEX, _META_OFFSET, _META_SIZE, _META_STATUS, _META_VALID,
              _META_MESSAGE)

ERROR_PREFIX = 'slimtrain input: bad record in '
SKIPPED_SUMMARY = 'input/num_skipped_records'

# Fields whose first dimension is the box index (padded to max_number_of_boxes).
BOX_FIELDS = (
    _FIELDS.groundtruth_boxes, _FIELDS.groundtruth_classes, _FIELDS.groundtruth_weights,
    _FIELDS.groundtruth_difficult, _FIELDS.groundtruth_is_crowd, _FIELDS.groundtruth_group_of,
    _FIELDS.groundtruth_area, _FIELDS.groundtruth_instance_masks,
    _FIELDS.groundtruth_keypoints, _FIELDS.groundtruth_confidences,
    _FIELDS.groundtruth_label_weights, _FIELDS.groundtruth_keypoint_visibilities,
    _FIELDS.multiclass_scores)

# Pipeline functions are plain TF code: skip autograph (much faster to trace).
_no_autograph = tf.autograph.experimental.do_not_convert

# TFRecord framing: 8-byte length, 4-byte length CRC, data, 4-byte data CRC.
_RECORD_OVERHEAD = 16


def expand_input_paths(input_reader_config):
  """Expands the config's input_path globs into a list of files.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.

  Returns:
    the matching files: each pattern's matches sorted, in pattern order,
    without duplicates.

  Raises:
    ValueError: no tf_record_input_reader, no input_path, or a pattern that
      matches no file (the message names the pattern).
  """
  if input_reader_config.WhichOneof('input_reader') != 'tf_record_input_reader':
    raise ValueError('InputReader %r has no tf_record_input_reader; set '
                     'tf_record_input_reader.input_path.' % input_reader_config.name)
  patterns = list(input_reader_config.tf_record_input_reader.input_path)
  if not patterns:
    raise ValueError('tf_record_input_reader.input_path is empty in InputReader %r.' %
                     input_reader_config.name)
  files = []
  for pattern in patterns:
    matches = sorted(tf.io.gfile.glob(pattern))
    if not matches:
      raise ValueError('tf_record_input_reader.input_path %r matches no files.' % pattern)
    files.extend(m for m in matches if m not in files)
  return files


def shard_files(files, num_worker_replicas, task_index):
  """Chooses this worker's files.

  Args:
    files: all input files.
    num_worker_replicas: number of workers reading the data.
    task_index: this worker's index.

  Returns:
    (files, record_shard): with at least as many files as workers, this
    worker's files `files[task_index::num_workers]` and None; otherwise all
    files and (num_workers, task_index) to shard by record index.

  Raises:
    ValueError: an invalid task_index or num_worker_replicas.
  """
  if num_worker_replicas < 1:
    raise ValueError('num_worker_replicas must be >= 1, got %d' % num_worker_replicas)
  if not 0 <= task_index < num_worker_replicas:
    raise ValueError('task_index must be in [0, %d), got %d' % (num_worker_replicas, task_index))
  if num_worker_replicas == 1:
    return list(files), None
  if len(files) >= num_worker_replicas:
    return list(files[task_index::num_worker_replicas]), None
  logging.warning('%d input files for %d workers: every worker reads all files and keeps '
                  'every %d-th record; use at least as many shards as workers to read less.',
                  len(files), num_worker_replicas, num_worker_replicas)
  return list(files), (num_worker_replicas, task_index)


def _read_file_fn(record_shard, sample_1_of_n, buffer_size):
  """Returns a function (filename, size) -> dataset of one file's records."""

  @_no_autograph
  def read_file(filename, file_size):
    # A framing error ends the file (TFRecordDataset skips the rest of it);
    # the end marker then finds that not all bytes were read.
    records = tf.data.TFRecordDataset(filename, buffer_size=buffer_size).ignore_errors()
    records = records.map(lambda record: (record, tf.constant(False)))
    records = records.concatenate(tf.data.Dataset.from_tensors((tf.constant(''),
                                                                tf.constant(True))))

    @_no_autograph
    def step(state, element):
      index, offset = state
      record, is_end = element
      length = tf.cast(tf.strings.length(record), tf.int64) + _RECORD_OVERHEAD
      status = tf.where(is_end, tf.where(tf.equal(offset, file_size), _END_OF_FILE,
                                         _CORRUPT_FILE), _OK)
      output = {
          'serialized': record,
          _META_FILENAME: filename,
          _META_INDEX: index,
          _META_OFFSET: offset,
          _META_SIZE: file_size,
          _META_STATUS: status,
      }
      return (index + 1, offset + tf.where(is_end, tf.constant(0, tf.int64), length)), output

    records = records.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), step)

    @_no_autograph
    def keep(element):
      status = element[_META_STATUS]
      index = element[_META_INDEX]
      selected = tf.equal(index % sample_1_of_n, 0)
      if record_shard is not None:
        num_workers, task_index = record_shard
        selected = tf.logical_and(selected,
                                  tf.equal((index // sample_1_of_n) % num_workers, task_index))
      return tf.logical_or(tf.equal(status, _CORRUPT_FILE),
                           tf.logical_and(tf.equal(status, _OK), selected))
    return records.filter(keep)
  return read_file


def _decode_fn(decoder):
  """Returns a function element -> dataset of one decoded (or marker) element.

  The record is decoded inside a one-element dataset with ignore_errors, so a
  record that fails to parse or whose image does not decode turns into a
  marker element that still knows its file and index.
  """

  def meta(element, status):
    return {key: element[key] for key in (_META_FILENAME, _META_INDEX, _META_OFFSET,
                                          _META_SIZE)} | {_META_STATUS: status}

  @_no_autograph
  def full_decode(element):
    tensor_dict, checks = decoder.decode_and_check(element['serialized'])
    oks = tf.stack([ok for ok, _ in checks])
    valid = tf.reduce_all(oks)

    def explain():
      # Only the failing checks build their message (a message may index
      # tensors that are only well formed when its check fails).
      parts = [tf.cond(ok, lambda: tf.constant(''),
                       lambda fn=message_fn: tf.strings.join([fn(), '; ']))
               for ok, message_fn in checks]
      return tf.strings.regex_replace(tf.strings.join(parts), '; $', '')
    message = tf.cond(valid, lambda: tf.constant(''), explain)
    output = dict(tensor_dict)
    output.update(meta(element, tf.constant(_OK, tf.int32)))
    output[_META_VALID] = valid
    output[_META_MESSAGE] = message
    return output

  @_no_autograph
  def marker(element, status):
    output = decoder.empty_tensor_dict()
    output.update(meta(element, tf.cast(status, tf.int32)))
    output[_META_VALID] = tf.constant(False)
    output[_META_MESSAGE] = tf.constant('')
    return output

  @_no_autograph
  def parse_only(element):
    # Parses without decoding the image; fails only if the record is no tf.Example.
    # A data dependency (not a control one) keeps the parse from being pruned.
    parsed = decoder.parse_size(element['serialized'])
    return marker(element, _UNDECODABLE + 0 * parsed)

  @_no_autograph
  def decode(element):
    is_ok = lambda e: tf.equal(e[_META_STATUS], _OK)
    single = tf.data.Dataset.from_tensors(element)
    decoded = single.filter(is_ok).map(full_decode).ignore_errors()
    undecodable = single.filter(is_ok).map(parse_only).ignore_errors()
    other = single.map(lambda e: marker(e, tf.where(is_ok(e), _NOT_AN_EXAMPLE,
                                                    tf.cast(e[_META_STATUS], tf.int32))))
    return decoded.concatenate(undecodable).concatenate(other).take(1)
  return decode


def _describe(element):
  """Builds the full error text of an invalid element."""
  status = element[_META_STATUS]
  reasons = {
      _CORRUPT_FILE: tf.strings.join([
          'corrupt TFRecord data (bad length or CRC, or a truncated file) at byte offset ',
          tf.strings.as_string(element[_META_OFFSET]), ' of ',
          tf.strings.as_string(element[_META_SIZE]),
          '; the rest of the file cannot be read']),
      _NOT_AN_EXAMPLE: tf.constant(
          'the record is not a tf.Example with the expected feature types'),
      _UNDECODABLE: tf.constant(
          'image/encoded does not decode as a JPEG or PNG image (or its masks or keypoints '
          'do not fit the image)'),
  }
  reason = element[_META_MESSAGE]
  for code, text in reasons.items():
    reason = tf.where(tf.equal(status, code), text, reason)
  return tf.strings.join([
      ERROR_PREFIX, element[_META_FILENAME], ', record ',
      tf.strings.as_string(element[_META_INDEX]), ': ', reason])


@_no_autograph
def _strip_meta(element):
  return {k: v for k, v in element.items() if k not in _META_KEYS}


@_no_autograph
def _raise_on_invalid(element):
  """Identity on valid elements; an InvalidArgumentError naming the record otherwise."""
  valid = element[_META_VALID]
  check = tf.debugging.Assert(
      valid, [tf.cond(valid, lambda: tf.constant(''), lambda: _describe(element))])
  with tf.control_dependencies([check]):
    return {k: tf.identity(v) for k, v in _strip_meta(element).items()}


def _skip_invalid(dataset):
  """Drops invalid elements with a warning, counting them in `_num_skipped`."""

  @_no_autograph
  def warn(element):
    valid = element[_META_VALID]

    def log():
      text = tf.strings.join([_describe(element), ' (skipped: skip_corrupt_records is on)'])
      with tf.control_dependencies([tf.print(text, output_stream=logging.warning)]):
        return tf.constant(False)
    logged = tf.cond(valid, lambda: tf.constant(True), log)
    output = dict(element)
    output[_META_VALID] = logged
    return output

  @_no_autograph
  def count(skipped, element):
    skipped = skipped + tf.cast(tf.logical_not(element[_META_VALID]), tf.int64)
    output = _strip_meta(element)
    output[_SKIPPED] = skipped
    return skipped, (output, element[_META_VALID])

  dataset = dataset.map(warn)
  dataset = dataset.scan(tf.constant(0, tf.int64), count)
  dataset = dataset.filter(lambda output, valid: valid)
  return dataset.map(lambda output, valid: output)


def _example_dataset(input_reader_config, num_worker_replicas, task_index,
                     skip_corrupt_records, num_parallel_calls, seed):
  """The per-example dataset of decoded, checked tensor_dicts."""
  if not isinstance(input_reader_config, input_reader_pb2.InputReader):
    raise ValueError('input_reader_config not of type input_reader_pb2.InputReader.')
  config = input_reader_config
  files = expand_input_paths(config)
  if config.shard_by_worker:
    files, record_shard = shard_files(files, num_worker_replicas, task_index)
  else:
    record_shard = None
  sizes = [tf.io.gfile.stat(f).length for f in files]
  sample_1_of_n = max(1, config.sample_1_of_n_examples)
  decoder = decoder_builder.build(config)
  if num_parallel_calls is None:
    num_parallel_calls = config.num_parallel_calls or tf.data.AUTOTUNE
  cycle_length = max(1, min(config.num_readers or 1, len(files)))

  dataset = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(sizes, tf.int64)))
  if config.shuffle:
    dataset = dataset.shuffle(max(1, config.filenames_shuffle_buffer_size), seed=seed,
                              reshuffle_each_iteration=True)
  dataset = dataset.repeat(config.num_epochs if config.num_epochs else None)
  dataset = dataset.interleave(
      _read_file_fn(record_shard, sample_1_of_n, buffer_size=1 << 20),
      cycle_length=cycle_length, block_length=max(1, config.read_block_length),
      num_parallel_calls=cycle_length, deterministic=True)
  if config.shuffle:
    dataset = dataset.shuffle(max(1, config.shuffle_buffer_size), seed=seed,
                              reshuffle_each_iteration=True)
  # A one-element interleave per record: parallel, order preserving, and it
  # turns decode failures into markers (see _decode_fn).
  parallel = num_parallel_calls if num_parallel_calls != tf.data.AUTOTUNE else 8
  dataset = dataset.interleave(_decode_fn(decoder), cycle_length=max(2, parallel),
                               block_length=1, num_parallel_calls=num_parallel_calls,
                               deterministic=True)
  if skip_corrupt_records:
    dataset = _skip_invalid(dataset)
  else:
    dataset = dataset.map(_raise_on_invalid)
  return dataset


def _skip_counter(skipped):
  """Assigns the running skip count to a local variable with a summary."""
  counter = tf.compat.v1.Variable(
      tf.constant(0, tf.int64), trainable=False, name='num_skipped_records',
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
  update = tf.compat.v1.assign(counter, skipped)
  tf.compat.v1.summary.scalar(SKIPPED_SUMMARY, counter)
  return update


def make_initializable_iterator(dataset):
  """An initializable iterator whose initializer is in `GraphKeys.TABLE_INITIALIZERS`.

  The default local init op of `Supervisor`, `slim.learning.train` and
  `MonitoredSession` runs that collection, so they start the iterator.
  """
  iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS,
                                 iterator.initializer)
  return iterator


def build_example_dataset(input_reader_config, transform_input_data_fn=None,
                          num_worker_replicas=1, task_index=0, num_parallel_calls=None,
                          seed=None):
  """The unbatched tf.data.Dataset of decoded (and transformed) tensor_dicts.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.
    transform_input_data_fn: optional function tensor_dict -> tensor_dict,
      applied per example in parallel.
    num_worker_replicas, task_index, num_parallel_calls, seed: as `build`.

  Returns:
    a tf.data.Dataset of dicts, one per record (bad records raise, as `build`).
  """
  if num_parallel_calls is None:
    num_parallel_calls = input_reader_config.num_parallel_calls or tf.data.AUTOTUNE
  dataset = _example_dataset(input_reader_config, num_worker_replicas, task_index, False,
                             num_parallel_calls, seed)
  if transform_input_data_fn is not None:
    dataset = dataset.map(transform_input_data_fn, num_parallel_calls=num_parallel_calls)
  return dataset_teardown.prompt_teardown(dataset.prefetch(tf.data.AUTOTUNE))


def build(input_reader_config, num_worker_replicas=1, task_index=0, skip_corrupt_records=False,
          num_parallel_calls=None, seed=None):
  """Builds a per-example tensor_dict from an InputReader config.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.
    num_worker_replicas: number of worker replicas reading this input.
    task_index: this worker's index in [0, num_worker_replicas).
    skip_corrupt_records: drop bad records with a warning and count them in
      `input/num_skipped_records` instead of raising.
    num_parallel_calls: parallel decodes; None takes the config's
      num_parallel_calls (0 = autotune).
    seed: optional shuffle seed.

  Returns:
    a dict of tensors for one example (see core.data_decoders).

  Raises:
    ValueError: a bad config (no input paths, empty glob, bad label map, ...).
  """
  with tf.compat.v1.name_scope('input_reader'):
    dataset = _example_dataset(input_reader_config, num_worker_replicas, task_index,
                               skip_corrupt_records, num_parallel_calls, seed)
    dataset = dataset_teardown.prompt_teardown(dataset.prefetch(tf.data.AUTOTUNE))
    tensor_dict = make_initializable_iterator(dataset).get_next()
  if skip_corrupt_records:
    update = _skip_counter(tensor_dict.pop(_SKIPPED))
    with tf.control_dependencies([update]):
      tensor_dict = {k: tf.identity(v) for k, v in tensor_dict.items()}
  return tensor_dict


def _clip_to_max_boxes(max_number_of_boxes):
  """Returns a map function keeping at most `max_number_of_boxes` boxes."""

  @_no_autograph
  def clip(tensor_dict):
    output = dict(tensor_dict)
    for key in BOX_FIELDS:
      if key in output:
        output[key] = output[key][:max_number_of_boxes]
    if _FIELDS.num_groundtruth_boxes in output:
      output[_FIELDS.num_groundtruth_boxes] = tf.minimum(
          output[_FIELDS.num_groundtruth_boxes], max_number_of_boxes)
    if _FIELDS.image in output and _FIELDS.true_image_shape not in output:
      output[_FIELDS.true_image_shape] = tf.shape(output[_FIELDS.image])
    return output
  return clip


def build_dataset(input_reader_config, batch_size, num_worker_replicas=1, task_index=0,
                  transform_input_data_fn=None, skip_corrupt_records=False, drop_remainder=True,
                  max_number_of_boxes=None, num_parallel_calls=None, seed=None):
  """Builds a batched, padded tf.data.Dataset of tensor_dicts.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.
    batch_size: examples per batch.
    num_worker_replicas: number of worker replicas reading this input.
    task_index: this worker's index.
    transform_input_data_fn: optional function tensor_dict -> tensor_dict
      (augmentation, model preprocessing) applied per example in parallel.
    skip_corrupt_records: drop bad records with a logged warning.
    drop_remainder: drop the last partial batch (static batch dimension).
    max_number_of_boxes: pad (and clip) box fields to this many boxes;
      None takes the config's max_number_of_boxes.
    num_parallel_calls: parallel decodes/transforms; None takes the config's
      num_parallel_calls (0 = autotune).
    seed: optional shuffle seed.

  Returns:
    a tf.data.Dataset of dicts of batched tensors.
  """
  if max_number_of_boxes is None:
    max_number_of_boxes = input_reader_config.max_number_of_boxes
  if num_parallel_calls is None:
    num_parallel_calls = input_reader_config.num_parallel_calls or tf.data.AUTOTUNE
  dataset = _example_dataset(input_reader_config, num_worker_replicas, task_index,
                             skip_corrupt_records, num_parallel_calls, seed)
  if skip_corrupt_records:
    dataset = dataset.map(lambda d: {k: v for k, v in d.items() if k != _SKIPPED})
  if transform_input_data_fn is not None:
    dataset = dataset.map(transform_input_data_fn, num_parallel_calls=num_parallel_calls)
  if max_number_of_boxes > 0:
    dataset = dataset.map(_clip_to_max_boxes(max_number_of_boxes))
  padded_shapes = collections.OrderedDict()
  for key, spec in dataset.element_spec.items():
    dims = spec.shape.as_list()
    if key in BOX_FIELDS and dims and max_number_of_boxes > 0:
      dims[0] = max_number_of_boxes
    padded_shapes[key] = dims
  dataset = dataset.padded_batch(batch_size, padded_shapes=dict(padded_shapes),
                                 drop_remainder=drop_remainder)
  prefetch = input_reader_config.num_prefetch_batches
  return dataset_teardown.prompt_teardown(
      dataset.prefetch(prefetch if prefetch > 0 else tf.data.AUTOTUNE))
