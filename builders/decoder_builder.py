"""Builds the tf.Example decoder an `InputReader` config asks for.

    from builders import decoder_builder
    decoder = decoder_builder.build(input_reader_config)
    tensor_dict = decoder.decode(serialized_example)

`decoder_type: CLASSIFICATION` gives a `TfClassificationExampleDecoder`
(`image/class/label`); anything else a `TfExampleDecoder` for detection
records, with masks, keypoints and the label map as configured.
"""

from core import data_decoders
from protos import input_reader_pb2


def build(input_reader_config):
  """Returns the decoder an InputReader config asks for.

  Args:
    input_reader_config: an input_reader_pb2.InputReader.

  Returns:
    A `data_decoders.TfExampleDecoder` or `TfClassificationExampleDecoder`.

  Raises:
    ValueError: if `input_reader_config` is not an InputReader, or one of
      its decoder fields is not supported.
  """
  if not isinstance(input_reader_config, input_reader_pb2.InputReader):
    raise ValueError('input_reader_config not of type input_reader_pb2.InputReader.')
  label_map = input_reader_config.label_map_path or None
  if input_reader_config.decoder_type == input_reader_pb2.InputReader.CLASSIFICATION:
    return data_decoders.TfClassificationExampleDecoder(
        label_map_proto_file=label_map, use_display_name=input_reader_config.use_display_name)
  return data_decoders.TfExampleDecoder(
      load_instance_masks=input_reader_config.load_instance_masks,
      instance_mask_type=input_reader_config.mask_type,
      label_map_proto_file=label_map,
      use_display_name=input_reader_config.use_display_name,
      num_keypoints=input_reader_config.num_keypoints,
      num_additional_channels=input_reader_config.num_additional_channels,
      load_multiclass_scores=input_reader_config.load_multiclass_scores)
