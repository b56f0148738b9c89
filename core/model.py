"""The model interfaces the trainer, evaluator and exporter drive.

A model is a plain Python object that builds graph pieces on request; it owns
no session and reads no protos (builders/model_builder.py turns a config into
constructor arguments). The trainer calls, per clone:

    model = create_model_fn()
    images, true_image_shapes = model.preprocess(raw_images)
    model.provide_groundtruth(boxes_list, classes_list)
    prediction_dict = model.predict(images, true_image_shapes)
    losses = model.loss(prediction_dict, true_image_shapes)  # {name: scalar}

and the evaluator/exporter call `postprocess` instead of `loss`. The names and
arguments are those of the Object Detection API's `DetectionModel`, so models
written for it port by changing imports only.
"""

import abc

import tensorflow as tf

from core import standard_fields as fields


def check_image_batch(inputs):
  """Raises ValueError unless `inputs` is a rank-4 float image batch (what `preprocess` takes).

  The detectors' `preprocess(inputs)` share this check, so a wrong input is
  named the same way whichever meta-architecture receives it.
  """
  if inputs.dtype not in (tf.float32, tf.float16, tf.float64):
    raise ValueError('preprocess expects a float image batch, got %s' % inputs.dtype)
  if inputs.shape.ndims != 4:
    raise ValueError('preprocess expects [batch, height, width, channels], got %s'
                     % inputs.shape)


class DetectionModel(abc.ABC):
  """What a detector offers the trainer, evaluator and exporter.

  Subclasses implement preprocess, predict, postprocess, loss, restore_map,
  regularization_losses and updates. Groundtruth for the current batch is
  given with `provide_groundtruth` before `loss` is called.
  """

  def __init__(self, num_classes):
    """Starts a model without groundtruth.

    Args:
      num_classes: number of classes, not counting the background class.
    """
    self._num_classes = num_classes
    self._groundtruth_lists = {}

  @property
  def num_classes(self):
    return self._num_classes

  def groundtruth_lists(self, field):
    """Returns the list of per-image groundtruth tensors for `field`.

    Raises:
      RuntimeError: if `provide_groundtruth` did not provide `field`.
    """
    if field not in self._groundtruth_lists:
      raise RuntimeError('Groundtruth tensor {} has not been provided'.format(field))
    return self._groundtruth_lists[field]

  def groundtruth_has_field(self, field):
    """Whether `provide_groundtruth` was given `field`."""
    return field in self._groundtruth_lists

  @abc.abstractmethod
  def preprocess(self, inputs):
    """Resizes/normalizes a float32 [batch, height, width, channels] batch.

    Returns:
      (preprocessed_inputs, true_image_shapes): the model's input batch and an
      int32 [batch, 3] tensor of each image's shape before padding.
    """

  @abc.abstractmethod
  def predict(self, preprocessed_inputs, true_image_shapes):
    """Returns a dict of raw prediction tensors for the batch."""

  @abc.abstractmethod
  def postprocess(self, prediction_dict, true_image_shapes, **params):
    """Turns predictions into detections.

    Returns:
      A dict with `detection_boxes` [batch, max_detections, 4] (normalized),
      `detection_scores`, `detection_classes` (0-based, background excluded)
      and `num_detections` [batch].
    """

  @abc.abstractmethod
  def loss(self, prediction_dict, true_image_shapes):
    """Returns a dict of scalar loss tensors computed against groundtruth."""

  def provide_groundtruth(self,
                          groundtruth_boxes_list,
                          groundtruth_classes_list,
                          groundtruth_masks_list=None,
                          groundtruth_keypoints_list=None,
                          groundtruth_weights_list=None,
                          groundtruth_confidences_list=None,
                          groundtruth_is_crowd_list=None,
                          groundtruth_keypoint_visibilities_list=None,
                          groundtruth_labeled_classes=None):
    """Stores groundtruth for the next `loss` call.

    Args:
      groundtruth_boxes_list: per image, a float32 [num_boxes, 4] tensor of
        normalized [ymin, xmin, ymax, xmax] boxes.
      groundtruth_classes_list: per image, a float32 [num_boxes, num_classes]
        one-hot (or k-hot) tensor, background excluded.
      groundtruth_masks_list: optional per-image [num_boxes, h, w] masks.
      groundtruth_keypoints_list: optional per-image [num_boxes, k, 2].
      groundtruth_weights_list: optional per-image [num_boxes] weights.
      groundtruth_confidences_list: optional per-image class confidences.
      groundtruth_is_crowd_list: optional per-image [num_boxes] booleans.
      groundtruth_keypoint_visibilities_list: optional per-image [num_boxes, k].
      groundtruth_labeled_classes: optional per-image labeled-class vectors.
    """
    self._groundtruth_lists[fields.BoxListFields.boxes] = groundtruth_boxes_list
    self._groundtruth_lists[fields.BoxListFields.classes] = groundtruth_classes_list
    optional = {
        fields.BoxListFields.masks: groundtruth_masks_list,
        fields.BoxListFields.keypoints: groundtruth_keypoints_list,
        fields.BoxListFields.weights: groundtruth_weights_list,
        fields.InputDataFields.groundtruth_confidences: groundtruth_confidences_list,
        fields.InputDataFields.groundtruth_is_crowd: groundtruth_is_crowd_list,
        fields.InputDataFields.groundtruth_keypoint_visibilities:
            groundtruth_keypoint_visibilities_list,
        'groundtruth_labeled_classes': groundtruth_labeled_classes,
    }
    for key, value in optional.items():
      if value is not None:
        self._groundtruth_lists[key] = value

  @abc.abstractmethod
  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """Returns {checkpoint variable name: variable} to restore for fine-tuning.

    Args:
      fine_tune_checkpoint_type: 'detection' restores the whole detector
        (minus what does not fit), 'classification' only the backbone, with
        names as a classification checkpoint has them.
      load_all_detection_checkpoint_vars: with 'detection', also restore
        variables that are not model variables (e.g. optimizer slots).
    """

  def regularization_losses(self):
    """Returns the model's regularization loss tensors (default: collection)."""
    return tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)

  def updates(self):
    """Returns the model's update ops, e.g. batch-norm moving averages."""
    return tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)


class ClassificationModel(abc.ABC):
  """What an image classifier offers the trainer, evaluator and exporter.

  The trainer drives it like a DetectionModel: preprocess, predict, then loss
  against labels given with `provide_groundtruth`; `accuracy` serves
  evaluation, `postprocess` serving.
  """

  def __init__(self, num_classes):
    self._num_classes = num_classes
    self._groundtruth_labels = None

  @property
  def num_classes(self):
    return self._num_classes

  def provide_groundtruth(self, groundtruth_labels):
    """Stores an int [batch] (or one-hot [batch, num_classes]) label tensor."""
    self._groundtruth_labels = groundtruth_labels

  def groundtruth_labels(self):
    """Returns what `provide_groundtruth` stored.

    Raises:
      RuntimeError: if no groundtruth was provided.
    """
    if self._groundtruth_labels is None:
      raise RuntimeError('Groundtruth labels have not been provided')
    return self._groundtruth_labels

  @abc.abstractmethod
  def preprocess(self, inputs):
    """Returns (preprocessed_inputs, true_image_shapes) for a float batch."""

  @abc.abstractmethod
  def predict(self, preprocessed_inputs, true_image_shapes=None):
    """Returns a dict with at least `logits` [batch, num_classes]."""

  @abc.abstractmethod
  def postprocess(self, prediction_dict, true_image_shapes=None):
    """Returns a dict with `classes` [batch] and `probabilities`."""

  @abc.abstractmethod
  def loss(self, prediction_dict, true_image_shapes=None):
    """Returns a dict of scalar loss tensors."""

  @abc.abstractmethod
  def accuracy(self, prediction_dict, top_k=1):
    """Returns a scalar tensor: fraction of the batch right within top_k."""

  @abc.abstractmethod
  def restore_map(self, fine_tune_checkpoint_type='classification',
                  load_all_detection_checkpoint_vars=False):
    """Returns {checkpoint variable name: variable} to restore."""

  def regularization_losses(self):
    return tf.compat.v1.get_collection(
        tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)

  def updates(self):
    return tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
