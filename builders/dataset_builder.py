"""The OD API's 2018 `dataset_builder`: an `InputReader` config as a tf.data.Dataset.

The 2018 `legacy/train.py` and `legacy/eval.py` read their input like this
(imports changed):

    from builders import dataset_builder

    def get_next(config):
      return dataset_builder.make_initializable_iterator(
          dataset_builder.build(config)).get_next()

    tensor_dict = get_next(configs['train_input_config'])   # one decoded example

and the 2018 `inputs.py` batches inside the dataset:

    dataset = dataset_builder.build(input_config, batch_size=8,
                                    transform_input_data_fn=transform)

This module is that surface over `builders/input_reader_builder.py`, so both read
records the same way: the globs of `tf_record_input_reader.input_path`,
`num_readers` files at once, `shuffle` (file names and records), `num_epochs`
(0 = forever), `sample_1_of_n_examples`, the decoder of `decoder_builder`
(label map, masks, keypoints), and an error naming the file and record for a bad
record. `make_initializable_iterator` puts the iterator's initializer in
`GraphKeys.TABLE_INITIALIZERS`, so the default init ops of `Supervisor`,
`slim.learning.train` and `MonitoredSession` start it; in a plain `Session` run
`tf.compat.v1.tables_initializer()` first.

Differs from 2018 on purpose: with `batch_size`, batches are padded (box fields
to `max_number_of_boxes`, images to the largest of the batch, with
`num_groundtruth_boxes` and `true_image_shape` to undo it) where 2018 batched
without padding and so needed a transform that padded every tensor to a static
shape first; the last partial batch is dropped, as 2018 did.
"""

from builders import input_reader_builder
from protos import input_reader_pb2

make_initializable_iterator = input_reader_builder.make_initializable_iterator


def build(input_reader_config, batch_size=None, transform_input_data_fn=None):
  """Builds the tf.data.Dataset an InputReader config describes.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.
    batch_size: examples per batch; None (or 0) gives one element per example.
    transform_input_data_fn: optional function tensor_dict -> tensor_dict
      applied to each decoded example (before batching).

  Returns:
    A tf.data.Dataset of tensor_dicts (dicts of batched tensors with
    `batch_size`).

  Raises:
    ValueError: if `input_reader_config` is not an InputReader, has no
      tf_record_input_reader or input path, or a path matches no file.
  """
  if not isinstance(input_reader_config, input_reader_pb2.InputReader):
    raise ValueError('input_reader_config not of type input_reader_pb2.InputReader.')
  if batch_size:
    return input_reader_builder.build_dataset(
        input_reader_config, batch_size, transform_input_data_fn=transform_input_data_fn,
        drop_remainder=True)
  return input_reader_builder.build_example_dataset(
      input_reader_config, transform_input_data_fn=transform_input_data_fn)
