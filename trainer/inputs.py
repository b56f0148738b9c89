"""The input_fns of the OD Estimator workflow (the OD API's `inputs` module).

Each factory reads one part of a pipeline config and returns what
`tfe.Estimator` takes: a training or evaluation input_fn over the configured
TFRecords, or the serving input receiver of an export. `trainer.model_lib`
builds its Estimator's inputs with them (and keeps them under its own names).

    from trainer import inputs
    configs = config_util.get_configs_from_pipeline_file('configs/ssd_shapes.config')
    train_input_fn = inputs.create_train_input_fn(
        configs['train_config'], configs['train_input_config'], configs['model'])
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        train_input_fn()).get_next()

What one element holds:

    features {image: preprocessed float [B, h, w, 3], true_image_shape [B, 3],
              original_image_spatial_shape [B, 2], key [B]}
    labels   {groundtruth_boxes [B, max_boxes, 4],
              groundtruth_classes one-hot [B, max_boxes, num_classes],
              groundtruth_weights [B, max_boxes], num_groundtruth_boxes [B],
              groundtruth_instance_masks [B, max_boxes, mh, mw] (with
              load_instance_masks)}

The boxes are normalized to each image's content (`true_image_shape`), the
same frame as the model's detections; instance masks are resized to that
content's size. Images of different sizes (keep_aspect_ratio_resizer,
pad_to_max_dimension) are padded at the bottom and right into one batch, so
a model_fn moves the boxes into the batch's frame and cuts each image's masks
back to its content (`trainer.model_lib` does both).

Augmentation (train_config.data_augmentation_options) and the model's own
`preprocess` run per example inside the tf.data pipeline, so a model_fn only
predicts. A training input_fn given the Estimator's `config` reads only its
task's share of the files in a TF_CONFIG cluster.

Differs on purpose from the OD API: the export's input type is a parameter of
`create_predict_input_fn` (default `image_tensor`) rather than a serialized
tf.Example.
"""

import tensorflow as tf

from builders import input_reader_builder
from builders import model_builder
from builders import preprocessor_builder
from core import label_map_util
from core import preprocessor
from core import standard_fields as fields
from deployment import cluster as cluster_lib
import estimator as tfe
from trainer import exporter as od_exporter

_INPUT = fields.InputDataFields
_FEATURE_KEYS = (_INPUT.image, _INPUT.true_image_shape, _INPUT.original_image_spatial_shape,
                 _INPUT.key)
_LABEL_KEYS = (_INPUT.groundtruth_boxes, _INPUT.groundtruth_classes,
               _INPUT.groundtruth_weights, _INPUT.num_groundtruth_boxes,
               _INPUT.groundtruth_instance_masks)


def _transform_fn(model_config, num_classes, augmentation=()):
  """Per-example transform: augment, model.preprocess, one-hot classes."""
  model = model_builder.build(model_config, is_training=False, add_summaries=False)

  def transform(tensor_dict):
    tensor_dict = dict(tensor_dict)
    tensor_dict[_INPUT.image] = tf.expand_dims(tf.cast(tensor_dict[_INPUT.image], tf.float32), 0)
    masks = _INPUT.groundtruth_instance_masks
    if augmentation:
      arg_map = preprocessor.get_default_func_arg_map(
          include_label_weights=_INPUT.groundtruth_weights in tensor_dict,
          include_instance_masks=masks in tensor_dict)
      tensor_dict = preprocessor.preprocess(tensor_dict, augmentation, func_arg_map=arg_map)
    image, true_shape = model.preprocess(tensor_dict[_INPUT.image])
    tensor_dict[_INPUT.image] = image[0]
    tensor_dict[_INPUT.true_image_shape] = true_shape[0]
    if masks in tensor_dict:
      tensor_dict[masks] = _resize_masks(tensor_dict[masks], true_shape[0])
    classes = tf.cast(label_map_util.checked_class_ids(
        tensor_dict[_INPUT.groundtruth_classes], num_classes, _INPUT.groundtruth_classes),
        tf.int32) - fields.LABEL_ID_OFFSET
    tensor_dict[_INPUT.groundtruth_classes] = tf.one_hot(classes, num_classes, dtype=tf.float32)
    if _INPUT.groundtruth_weights not in tensor_dict:
      tensor_dict[_INPUT.groundtruth_weights] = tf.ones_like(classes, tf.float32)
    return tensor_dict

  return transform


def _resize_masks(masks, true_image_shape):
  """[N, h, w] masks -> [N, height, width] of the image content (nearest neighbour).

  At the content's size, the masks of a padded batch are cut back to each
  image's content with its true_image_shape.
  """
  resized = tf.image.resize(masks[..., tf.newaxis], true_image_shape[:2],
                            method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
  return tf.cast(resized[..., 0], masks.dtype)


def _split_features_labels(batch):
  """Batch dict -> (features, labels) with the keys of the module docstring."""
  features = {k: batch[k] for k in _FEATURE_KEYS if k in batch}
  labels = {k: batch[k] for k in _LABEL_KEYS if k in batch}
  return features, labels


def _num_classes(model_config):
  kind = model_config.WhichOneof('model')
  if kind is None:
    raise ValueError("model config names no model (set e.g. 'ssd')")
  return getattr(model_config, kind).num_classes


def _input_shard(config):
  """(num_workers, index) of this task among the training tasks of TF_CONFIG."""
  if config is None:
    return 1, 0
  cluster = config.cluster_spec.as_dict() if config.cluster_spec else {}
  return cluster_lib.input_shard(cluster, config.task_type, config.task_id)


def _create_input_fn(input_config, model_config, batch_size, augmentation_configs=(),
                     skip_corrupt_records=False, shard=False):
  """Returns input_fn(params=None, config=None) -> a (features, labels) Dataset.

  With `shard`, each training task of a TF_CONFIG cluster reads its own part.
  """

  def input_fn(params=None, config=None):
    del params
    num_workers, task_index = _input_shard(config) if shard else (1, 0)
    augmentation = [preprocessor_builder.build(step) for step in augmentation_configs]
    dataset = input_reader_builder.build_dataset(
        input_config, batch_size=batch_size, num_worker_replicas=num_workers,
        task_index=task_index,
        transform_input_data_fn=_transform_fn(model_config, _num_classes(model_config),
                                              augmentation),
        skip_corrupt_records=skip_corrupt_records)
    return dataset.map(_split_features_labels)

  return input_fn


def create_train_input_fn(train_config, train_input_config, model_config):
  """input_fn over the train reader: augmented, batches of train_config.batch_size."""
  return _create_input_fn(train_input_config, model_config, train_config.batch_size,
                          train_config.data_augmentation_options,
                          train_config.skip_corrupt_records, shard=True)


def create_eval_input_fn(eval_config, eval_input_config, model_config):
  """input_fn over an eval reader: no augmentation, eval_config.batch_size."""
  return _create_input_fn(eval_input_config, model_config, max(eval_config.batch_size, 1))


def create_predict_input_fn(model_config, predict_input_config=None, input_type='image_tensor'):
  """Returns a serving_input_receiver_fn for exports.

  Args:
    model_config: the model config (its preprocess runs in the receiver).
    predict_input_config: unused; kept for the OD API's signature.
    input_type: 'image_tensor', 'encoded_image_string_tensor' or 'tf_example'
      (see trainer/exporter.py); the receiver key is `inputs`.
  """
  del predict_input_config

  def serving_input_receiver_fn():
    placeholder, images = od_exporter.build_input(input_type)
    model = model_builder.build(model_config, is_training=False, add_summaries=False)
    preprocessed, true_image_shapes = model.preprocess(tf.cast(images, tf.float32))
    features = {_INPUT.image: preprocessed, _INPUT.true_image_shape: true_image_shapes}
    return tfe.export.ServingInputReceiver(features, {od_exporter.INPUTS_KEY: placeholder})

  return serving_input_receiver_fn
