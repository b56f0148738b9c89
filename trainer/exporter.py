r"""Exports a trained model as a SavedModel for serving (OD API `exporter.py`).

A SavedModel holds the inference graph (input decoding, the model's
preprocess / predict / postprocess) and the trained weights, behind one
signature `serving_default` whose input is `inputs`. The graph is built here
in graph mode (`tf.compat.v1`); the export loads anywhere, including eagerly
in TF2 with `tf.saved_model.load(path).signatures['serving_default']`.

    from core import config_util
    from trainer import exporter
    pipeline_config = config_util.load_pipeline_config('configs/ssd_shapes.config')
    exporter.export_inference_graph(
        'image_tensor', pipeline_config, '/tmp/train/model.ckpt-1000', '/tmp/exported')
    # -> /tmp/exported/saved_model/{saved_model.pb, variables/}, /tmp/exported/pipeline.config,
    #    /tmp/exported/frozen_inference_graph.pb, /tmp/exported/model.ckpt.{index,data-*,meta}

Input types (the `inputs` tensor):

    image_tensor                  uint8 [None, H, W, 3] (`input_shape` may fix H, W)
    encoded_image_string_tensor   string [None]: JPEG or PNG bytes
    tf_example                    string [None]: serialized tf.Example with image/encoded

A batch of encoded images must decode to one size (as in the OD API).

Outputs: a detector gives `detection_boxes` [B, N, 4] (normalized ymin, xmin,
ymax, xmax), `detection_scores` [B, N], `detection_classes` [B, N] (float
label-map ids, 1-based as in the OD API), `num_detections` [B], plus
`raw_detection_boxes` / `raw_detection_scores` before NMS, and from a model
that predicts masks (Mask R-CNN) `detection_masks` [B, N, mask_height,
mask_width] (probabilities, each over its detection box); a classifier gives
`classes` [B] (int64 label-map ids, 1-based like the training labels) and
`probabilities` [B, num_classes] (column j is class id j + 1).

Weights: with `train_config.optimizer.use_moving_average` (or
`eval_config.use_moving_averages`) the moving averages of the trainable
variables are exported in their place.

Layouts (both staged beside the target and renamed into place by
`core.saved_model_writer`, so a failed export leaves nothing at the target and
the export gets the umask's permissions like any other output):

* default (the OD API's): `output_directory/saved_model/`,
  `output_directory/pipeline.config`, the frozen graph
  `output_directory/frozen_inference_graph.pb` (the inference graph with the
  exported weights folded into constants; its input is the placeholder named
  after the input type, e.g. `image_tensor:0`, its outputs the nodes named
  after the outputs, e.g. `detection_boxes:0`), and the checkpoint the export
  was made from, `output_directory/model.ckpt.{index,data-*,meta}` with its
  `checkpoint` state file (the exported weights under their model names: with
  moving averages, the averages; the `.meta` holds the inference graph). Also
  `inference_graph.pbtxt` with `write_inference_graph`. `output_directory`
  must not exist or be empty.
* TF Serving (`serving_version=N`): `output_directory/N/saved_model.pb`,
  `output_directory/N/variables/`, `output_directory/N/pipeline.config`;
  `output_directory` is the model's base path and keeps other versions. No
  frozen graph or checkpoint there: a serving version holds a SavedModel only.

Using the frozen graph (TF1 style, as with the OD API's):

    graph_def = tf.compat.v1.GraphDef()
    with tf.io.gfile.GFile('/tmp/exported/frozen_inference_graph.pb', 'rb') as f:
      graph_def.ParseFromString(f.read())
    with tf.Graph().as_default() as graph:
      tf.compat.v1.import_graph_def(graph_def, name='')
      with tf.compat.v1.Session() as sess:
        boxes, scores = sess.run(['detection_boxes:0', 'detection_scores:0'],
                                 {'image_tensor:0': images})

Differs on purpose from the OD API: the frozen graph and the checkpoint are
written from the one session that restored the weights for the SavedModel
(no temporary checkpoint, no second restore), and they are staged with the
rest of the export, so they appear together with it or not at all.
"""

import os

from core import logs as logging
import tensorflow as tf

from builders import graph_rewriter_builder
from builders import model_builder
from core import config_util
from core import data_decoders
from core import model as model_lib
from core import moving_averages
from core import paths
from core import saved_model_writer
from core import standard_fields as fields
from core import variables_helper
from protos import pipeline_pb2

INPUT_TYPES = ('image_tensor', 'encoded_image_string_tensor', 'tf_example')
SIGNATURE_NAME = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
INPUTS_KEY = 'inputs'
SAVED_MODEL_DIR = 'saved_model'
INFERENCE_GRAPH_NAME = 'inference_graph.pbtxt'
FROZEN_GRAPH_NAME = 'frozen_inference_graph.pb'
CHECKPOINT_NAME = 'model.ckpt'
_DETECTION_OUTPUTS = (
    fields.DetectionResultFields.detection_boxes,
    fields.DetectionResultFields.detection_scores,
    fields.DetectionResultFields.detection_classes,
    fields.DetectionResultFields.num_detections,
    fields.DetectionResultFields.raw_detection_boxes,
    fields.DetectionResultFields.raw_detection_scores,
    # Only where the model predicts masks (Mask R-CNN).
    fields.DetectionResultFields.detection_masks,
)


def _check_input_shape(input_shape):
  """Returns input_shape as a 4-list with None for unknown sizes.

  Raises:
    ValueError: if it is not 4 entries of -1/None or positive ints, with 3 channels.
  """
  if input_shape is None:
    return [None, None, None, 3]
  shape = [None if dim in (None, -1) else dim for dim in input_shape]
  if (len(shape) != 4 or any(d is not None and (not isinstance(d, int) or d < 1)
                             for d in shape) or shape[3] not in (None, 3)):
    raise ValueError('input_shape must be [batch, height, width, 3] with -1 for unknown '
                     'sizes, got %s' % (list(input_shape),))
  shape[3] = 3
  return shape


def _decode_images(encoded_images):
  """Decodes a string [B] batch of JPEG/PNG bytes to uint8 [B, H, W, 3]."""
  return tf.map_fn(data_decoders.decode_image, encoded_images,
                   fn_output_signature=tf.TensorSpec([None, None, 3], tf.uint8),
                   name='DecodeImages')


def build_input(input_type, input_shape=None):
  """Creates the `inputs` placeholder and the uint8 image batch it decodes to.

  Args:
    input_type: one of INPUT_TYPES.
    input_shape: optional [batch, height, width, 3] for `image_tensor`
      (-1 or None for an unknown size).

  Returns:
    (placeholder, images uint8 [B, H, W, 3]).

  Raises:
    ValueError: on an unknown input_type or a bad input_shape.
  """
  if input_type == 'image_tensor':
    placeholder = tf.compat.v1.placeholder(tf.uint8, _check_input_shape(input_shape),
                                           name='image_tensor')
    return placeholder, placeholder
  if input_shape is not None:
    raise ValueError('input_shape applies to input_type image_tensor only, not %r'
                     % input_type)
  if input_type == 'encoded_image_string_tensor':
    placeholder = tf.compat.v1.placeholder(tf.string, [None],
                                           name='encoded_image_string_tensor')
    return placeholder, _decode_images(placeholder)
  if input_type == 'tf_example':
    placeholder = tf.compat.v1.placeholder(tf.string, [None], name='tf_example')
    features = tf.io.parse_example(placeholder, {
        fields.TfExampleFields.image_encoded: tf.io.FixedLenFeature((), tf.string)})
    return placeholder, _decode_images(features[fields.TfExampleFields.image_encoded])
  raise ValueError('input_type must be one of %s, got %r' % (', '.join(INPUT_TYPES),
                                                              input_type))


def build_outputs(model, images):
  """Runs the model on a uint8 image batch; returns the named output tensors.

  Args:
    model: a DetectionModel or ClassificationModel built with is_training=False.
    images: uint8 [B, H, W, 3].

  Returns:
    dict {output name: tensor} (see the module docstring), each an identity
    op of that name in the graph.
  """
  preprocessed, true_image_shapes = model.preprocess(tf.cast(images, tf.float32))
  predictions = model.predict(preprocessed, true_image_shapes)
  results = model.postprocess(predictions, true_image_shapes)
  if isinstance(model, model_lib.ClassificationModel):
    classes = results[fields.ClassificationResultFields.classes] + fields.LABEL_ID_OFFSET
    outputs = {
        fields.ClassificationResultFields.classes: classes,
        fields.ClassificationResultFields.probabilities:
            results[fields.ClassificationResultFields.probabilities],
    }
    return _named(outputs)
  return named_detection_outputs(results)


def _named(outputs):
  # Fixed node names, as the OD API's add_output_tensor_nodes gives them.
  return {name: tf.identity(tensor, name=name) for name, tensor in outputs.items()}


def named_detection_outputs(detections, names=_DETECTION_OUTPUTS):
  """A detector's serving outputs, as the export and model_lib's PREDICT mode give them.

  Args:
    detections: the dict of `DetectionModel.postprocess`.
    names: the outputs to keep (those missing from `detections` are skipped).

  Returns:
    dict {name: tensor}, each an identity op of that name; classes are
    float label-map ids (1-based).
  """
  outputs = {name: detections[name] for name in names if name in detections}
  classes = fields.DetectionResultFields.detection_classes
  outputs[classes] = tf.cast(outputs[classes], tf.float32) + fields.LABEL_ID_OFFSET
  return _named(outputs)


def uses_moving_averages(pipeline_config):
  """Whether the export should read the moving averages of the weights."""
  return moving_averages.uses_moving_averages(pipeline_config.train_config,
                                             pipeline_config.eval_config)


def build_restore_saver(pipeline_config, checkpoint_path):
  """A Saver that restores the model variables of the default graph.

  With moving averages configured, each trainable variable is restored from
  its `<name>/ExponentialMovingAverage` entry (see
  core.moving_averages.restore_saver, which checks the checkpoint first).

  Args:
    pipeline_config: a TrainEvalPipelineConfig.
    checkpoint_path: a resolved checkpoint prefix.

  Returns:
    A tf.compat.v1.train.Saver.

  Raises:
    ValueError: naming the variables the checkpoint lacks.
  """
  return moving_averages.restore_saver(uses_moving_averages(pipeline_config), checkpoint_path,
                                       model_description='exported model')


def _write_saved_model(sess, directory, placeholder, outputs):
  """Writes the default graph and the session's variables as a SavedModel."""
  signature = tf.compat.v1.saved_model.signature_def_utils.predict_signature_def(
      inputs={INPUTS_KEY: placeholder}, outputs=outputs)
  builder = tf.compat.v1.saved_model.Builder(directory)
  builder.add_meta_graph_and_variables(
      sess, [tf.saved_model.SERVING], signature_def_map={SIGNATURE_NAME: signature},
      strip_default_attrs=True)
  builder.save()


def write_checkpoint(sess, directory):
  """Saves the session's variables as `directory/model.ckpt` (+ `.meta`, `checkpoint`).

  The variables are saved under their own names, so with moving averages the
  averaged values (already restored into them) are what the checkpoint holds.
  The `checkpoint` state file names the prefix relatively, so it stays valid
  after the staging directory is renamed.

  Args:
    sess: a session whose graph is the inference graph, variables restored.
    directory: where to write.

  Returns:
    The checkpoint prefix written.
  """
  saver = tf.compat.v1.train.Saver(tf.compat.v1.global_variables(),
                                   save_relative_paths=True)
  return saver.save(sess, paths.join(directory, CHECKPOINT_NAME), write_meta_graph=True)


def write_frozen_graph(sess, directory, outputs):
  """Writes `directory/frozen_inference_graph.pb`: variables folded into constants.

  Only the ops the outputs need are kept (the graph is pruned to them).

  Args:
    sess: a session whose graph is the inference graph, variables restored.
    directory: where to write.
    outputs: dict {name: tensor} of the export's outputs, each a node of
      that name (see `build_outputs`).

  Returns:
    The GraphDef written.
  """
  output_nodes = sorted(tensor.op.name for tensor in outputs.values())
  frozen = tf.compat.v1.graph_util.convert_variables_to_constants(
      sess, sess.graph.as_graph_def(), output_nodes)
  with tf.io.gfile.GFile(paths.join(directory, FROZEN_GRAPH_NAME), 'wb') as f:
    f.write(frozen.SerializeToString())
  return frozen


def _export_into(directory, saved_model_dir, input_type, pipeline_config, checkpoint_path,
                 input_shape, write_inference_graph, write_frozen=True):
  """Builds the inference graph, restores the checkpoint, writes everything."""
  with tf.Graph().as_default() as graph:
    placeholder, images = build_input(input_type, input_shape)
    model = model_builder.build(pipeline_config.model, is_training=False,
                                add_summaries=False)
    outputs = build_outputs(model, images)
    saver = build_restore_saver(pipeline_config, checkpoint_path)
    with tf.compat.v1.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint_path)
      _write_saved_model(sess, saved_model_dir, placeholder, outputs)
      if write_frozen:
        write_frozen_graph(sess, directory, outputs)
        write_checkpoint(sess, directory)
    if write_inference_graph:
      tf.io.write_graph(graph.as_graph_def(), directory, INFERENCE_GRAPH_NAME)
  config_util.save_pipeline_config(pipeline_config, directory)


def _load_pipeline_config(pipeline_config):
  if isinstance(pipeline_config, pipeline_pb2.TrainEvalPipelineConfig):
    return pipeline_config
  if isinstance(pipeline_config, (str, os.PathLike)):
    return config_util.load_pipeline_config(os.fspath(pipeline_config))
  raise ValueError('pipeline_config must be a TrainEvalPipelineConfig or a path, got %s'
                   % type(pipeline_config).__name__)


def _export_target(output_directory, serving_version):
  """Checks where the export goes; returns that directory.

  Raises:
    ValueError: if the target already holds an export, or a bad version.
  """
  output_directory = paths.absolute(output_directory)
  if serving_version is None:
    target = output_directory
    if paths.exists(target) and not paths.isdir(target):
      raise ValueError('output_directory %s exists and is not a directory' % target)
    if paths.isdir(target) and tf.io.gfile.listdir(target):
      raise ValueError('output_directory %s exists and is not empty; choose a new '
                       'directory' % target)
    return target
  if isinstance(serving_version, bool) or not isinstance(serving_version, int) or (
      serving_version < 0):
    raise ValueError('serving_version must be a non-negative integer, got %r'
                     % (serving_version,))
  target = paths.join(output_directory, str(serving_version))
  if paths.exists(target):
    raise ValueError('version %d already exists at %s; choose another serving_version'
                     % (serving_version, target))
  return target


def export_inference_graph(input_type, pipeline_config, trained_checkpoint_prefix,
                           output_directory, input_shape=None, write_inference_graph=False,
                           serving_version=None):
  """Exports the model of `pipeline_config` with the weights of a checkpoint.

  Args:
    input_type: 'image_tensor', 'encoded_image_string_tensor' or 'tf_example'.
    pipeline_config: a pipeline_pb2.TrainEvalPipelineConfig (or its path).
    trained_checkpoint_prefix: checkpoint prefix (`.../model.ckpt-N`); a
      training directory (its latest checkpoint) is accepted too.
    output_directory: where the export goes (see the module docstring); the
      default layout also gets `frozen_inference_graph.pb` and `model.ckpt`.
    input_shape: optional [batch, height, width, 3] for `image_tensor`, -1 for
      an unknown size.
    write_inference_graph: also write `inference_graph.pbtxt`.
    serving_version: None for the OD API layout; an int N for the TF Serving
      layout `output_directory/N/saved_model.pb`.

  Returns:
    The SavedModel directory written.

  Raises:
    ValueError: on a bad input_type, input_shape, checkpoint, version or an
      output directory that already holds an export; nothing is written then.
  """
  if input_type not in INPUT_TYPES:
    raise ValueError('input_type must be one of %s, got %r' % (', '.join(INPUT_TYPES),
                                                                input_type))
  if input_type == 'image_tensor':
    _check_input_shape(input_shape)
  elif input_shape is not None:
    raise ValueError('input_shape applies to input_type image_tensor only, not %r'
                     % input_type)
  pipeline_config = _load_pipeline_config(pipeline_config)
  if not pipeline_config.HasField('model'):
    raise ValueError('pipeline_config has no model section')
  if pipeline_config.HasField('graph_rewriter'):
    graph_rewriter_builder.build(pipeline_config.graph_rewriter, is_training=False)
  checkpoint_path = variables_helper.resolve_checkpoint_path(trained_checkpoint_prefix)
  target = _export_target(output_directory, serving_version)

  def write(staging_dir):
    saved_model_dir = (staging_dir if serving_version is not None
                       else paths.join(staging_dir, SAVED_MODEL_DIR))
    _export_into(staging_dir, saved_model_dir, input_type, pipeline_config, checkpoint_path,
                 input_shape, write_inference_graph, write_frozen=serving_version is None)

  saved_model_writer.write_atomically(target, write)
  result = target if serving_version is not None else paths.join(target, SAVED_MODEL_DIR)
  logging.info('Exported %s (input %s) from %s', result, input_type, checkpoint_path)
  return result
