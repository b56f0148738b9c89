r"""Command line of the exporter (the OD API's `export_inference_graph.py`).

    python -m trainer.export \
        --pipeline_config_path=configs/ssd_shapes.config \
        --trained_checkpoint_prefix=/tmp/train/model.ckpt-1000 \
        --output_directory=/tmp/exported --input_type=image_tensor

writes `/tmp/exported/saved_model/`, `/tmp/exported/pipeline.config`,
`/tmp/exported/frozen_inference_graph.pb` and the checkpoint it was made from,
`/tmp/exported/model.ckpt.*` (as the OD API's exporter). With
`--serving_version=N` it writes the TF Serving layout
`/tmp/exported/N/saved_model.pb` instead. `--input_shape=-1,96,96,3` fixes the
image size of an `image_tensor` input; `--config_override` takes a text-format
TrainEvalPipelineConfig merged over the file. See trainer/exporter.py.

Bad flags exit with status 2 and a message naming the flag; other failures
exit 1, or 129 when they are known to pass (a storage hiccup such as EIO,
see deployment/exit_codes.py).
"""

import sys

from absl import app
from absl import flags
from core import logs as logging
from google.protobuf import text_format

from core import config_util
from core import variables_helper
from deployment import exit_codes
from protos import pipeline_pb2
from trainer import exporter

FLAGS = flags.FLAGS


def define_flags():
  """Defines the flags; called only when this module runs as the program.

  Several command modules share flag names (`--pipeline_config_path`), so
  defining them at import would clash when one process imports two of them.
  """
  flags.DEFINE_enum('input_type', 'image_tensor', list(exporter.INPUT_TYPES),
                    'Type of the serving input.')
  flags.DEFINE_string('input_shape', None,
                      'For image_tensor: comma-separated [batch, height, width, 3], -1 for '
                      'unknown sizes, e.g. "-1,96,96,3". Default: [None, None, None, 3].')
  flags.DEFINE_string('pipeline_config_path', None, 'Path of the TrainEvalPipelineConfig.')
  flags.DEFINE_string('trained_checkpoint_prefix', None,
                      'Checkpoint prefix, e.g. train_dir/model.ckpt-1000.')
  flags.DEFINE_string('output_directory', None, 'Where the export is written.')
  flags.DEFINE_string('config_override', '',
                      'Text-format TrainEvalPipelineConfig merged over the file.')
  flags.DEFINE_boolean('write_inference_graph', False, 'Also write inference_graph.pbtxt.')
  flags.DEFINE_integer('serving_version', None,
                       'Write the TF Serving layout output_directory/<version>/ instead of '
                       'output_directory/saved_model/.')


class FlagError(ValueError):
  """A bad flag value; the message names the flag."""


def parse_input_shape(text):
  """'-1,96,96,3' -> [-1, 96, 96, 3]; None or '' -> None.

  Raises:
    FlagError: if the text is not comma-separated integers.
  """
  if not text:
    return None
  try:
    return [int(part) for part in text.split(',')]
  except ValueError:
    raise FlagError('--input_shape must be comma-separated integers such as -1,96,96,3, '
                    'got %r' % text) from None


def load_config(pipeline_config_path, config_override=''):
  """Loads the pipeline config and merges the text-format override.

  Raises:
    FlagError: on a missing or unparsable file or override.
  """
  if not pipeline_config_path:
    raise FlagError('--pipeline_config_path is required')
  try:
    pipeline_config = config_util.load_pipeline_config(pipeline_config_path)
  except (OSError, ValueError, text_format.ParseError) as error:
    raise FlagError('--pipeline_config_path=%s: %s' % (pipeline_config_path, error)) from None
  if config_override:
    override = pipeline_pb2.TrainEvalPipelineConfig()
    try:
      text_format.Merge(config_override, override)
    except text_format.ParseError as error:
      raise FlagError('--config_override: %s' % error) from None
    pipeline_config.MergeFrom(override)
  return pipeline_config


def run(input_type, pipeline_config_path, trained_checkpoint_prefix, output_directory,
        input_shape=None, config_override='', write_inference_graph=False,
        serving_version=None):
  """Validates the flag values, then exports; returns the SavedModel directory.

  Raises:
    FlagError: naming the flag whose value is bad.
  """
  if input_type not in exporter.INPUT_TYPES:
    raise FlagError('--input_type must be one of %s, got %r'
                    % (', '.join(exporter.INPUT_TYPES), input_type))
  shape = parse_input_shape(input_shape)
  if shape is not None and input_type != 'image_tensor':
    raise FlagError('--input_shape applies to --input_type=image_tensor only')
  if shape is not None:
    try:
      exporter._check_input_shape(shape)  # pylint: disable=protected-access
    except ValueError as error:
      raise FlagError('--input_shape: %s' % error) from None
  if not output_directory:
    raise FlagError('--output_directory is required')
  if serving_version is not None and serving_version < 0:
    raise FlagError('--serving_version must be >= 0, got %d' % serving_version)
  pipeline_config = load_config(pipeline_config_path, config_override)
  if not trained_checkpoint_prefix:
    raise FlagError('--trained_checkpoint_prefix is required')
  try:
    checkpoint = variables_helper.resolve_checkpoint_path(trained_checkpoint_prefix)
  except ValueError as error:
    raise FlagError('--trained_checkpoint_prefix: %s' % error) from None
  try:
    return exporter.export_inference_graph(
        input_type, pipeline_config, checkpoint, output_directory, input_shape=shape,
        write_inference_graph=write_inference_graph, serving_version=serving_version)
  except ValueError as error:
    if 'output_directory' in str(error) or 'already exists' in str(error):
      flag = '--serving_version' if 'serving_version' in str(error) else '--output_directory'
      raise FlagError('%s: %s' % (flag, error)) from None
    raise


def main(argv):
  if len(argv) > 1:
    raise app.UsageError('unexpected arguments: %s' % ' '.join(argv[1:]))
  try:
    path = run(FLAGS.input_type, FLAGS.pipeline_config_path, FLAGS.trained_checkpoint_prefix,
               FLAGS.output_directory, input_shape=FLAGS.input_shape,
               config_override=FLAGS.config_override,
               write_inference_graph=FLAGS.write_inference_graph,
               serving_version=FLAGS.serving_version)
  except FlagError as error:
    logging.error('%s', error)
    print('error: %s' % error, file=sys.stderr)
    return 2
  print('exported %s' % path)
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(exit_codes.main_with_exit_codes(lambda argv: sys.exit(main(argv)), 'trainer.export'))
