"""SSD: a single-shot detector (Liu et al., 2016) as a DetectionModel.

One network pass predicts, for every anchor of a multi-scale grid, box offsets
and class logits (background included); training matches anchors to
groundtruth by IoU and penalizes offsets (smooth L1) and classes (sigmoid or
softmax cross-entropy, optionally over mined hard examples only); inference
decodes the offsets and runs batch non-max suppression.

    images [B, H, W, 3] in [0, 255]
      --preprocess--> fixed-size [B, h, w, 3] in [-1, 1]
      --predict-->    box_encodings [B, M, 4], class_predictions_with_background
                      [B, M, K+1], anchors [M, 4], feature_maps
      --loss-->       {'Loss/localization_loss', 'Loss/classification_loss'}
      --postprocess-> detection_boxes [B, N, 4], detection_scores [B, N],
                      detection_classes [B, N] (0-based), num_detections [B]

The model owns no session and reads no protos: builders/model_builder.py
assembles it. Usage:

    model = model_builder.build(pipeline_config.model, is_training=True)
    images, true_shapes = model.preprocess(tf.cast(raw_images, tf.float32))
    model.provide_groundtruth(boxes_list, one_hot_classes_list)
    predictions = model.predict(images, true_shapes)
    losses = model.loss(predictions, true_shapes)
    detections = model.postprocess(predictions, true_shapes)
"""

import tensorflow as tf
import tf_slim as slim

from core import box_coder as box_coder_lib
from core import model
from core import standard_fields as fields
from core import target_assigner as target_assigner_lib
from models import box_predictor as box_predictor_lib

FEATURE_EXTRACTOR_SCOPE = 'FeatureExtractor'
LOCALIZATION_LOSS = 'Loss/localization_loss'
CLASSIFICATION_LOSS = 'Loss/classification_loss'


def fixed_shape_resizer(height, width, method=tf.image.ResizeMethod.BILINEAR):
  """Returns fn(images [B, H, W, C]) -> (resized [B, height, width, C], shapes [B, 3]).

  Raises:
    ValueError: if height or width is not positive.
  """
  if height <= 0 or width <= 0:
    raise ValueError('fixed_shape_resizer height and width must be positive, got %sx%s'
                     % (height, width))

  def resize(images):
    resized = tf.image.resize(images, [height, width], method=method)
    channels = images.shape[3] if images.shape[3] is not None else tf.shape(images)[3]
    shapes = tf.tile(tf.stack([[height, width, channels]]), [tf.shape(images)[0], 1])
    return resized, tf.cast(shapes, tf.int32)

  return resize


class SSDMetaArch(model.DetectionModel):
  """Single-shot detector.

  Args:
    is_training: whether the model is built for training.
    anchor_generator: core.anchor_generator.MultipleGridAnchorGenerator.
    box_predictor: models.box_predictor.ConvolutionalBoxPredictor.
    box_coder: core.box_coder.FasterRcnnBoxCoder.
    feature_extractor: models.ssd_feature_extractors.SSDFeatureExtractor.
    matcher: core.matcher.ArgMaxMatcher.
    image_resizer_fn: fn(images) -> (resized, true_image_shapes).
    non_max_suppression_fn: fn(boxes, scores, clip_window=...,
      change_coordinate_frame=...) -> (boxes, scores, classes, num), e.g.
      core.post_processing.non_max_suppression_fn(...).
    score_conversion_fn: fn(logits) -> scores.
    classification_loss: a core.losses classification loss.
    localization_loss: core.losses.WeightedSmoothL1LocalizationLoss.
    classification_loss_weight: weight of the classification loss.
    localization_loss_weight: weight of the localization loss.
    normalize_loss_by_num_matches: divide both losses by the matched anchors.
    hard_example_miner: optional core.hard_example_miner.HardExampleMiner.
    similarity_fn: fn(gt_boxes, anchors) -> [N, M] (default IoU).
    add_summaries: add scalar summaries of the target assignment.
  """

  def __init__(self, is_training, anchor_generator, box_predictor, box_coder,
               feature_extractor, matcher, image_resizer_fn, non_max_suppression_fn,
               score_conversion_fn, classification_loss, localization_loss,
               classification_loss_weight=1.0, localization_loss_weight=1.0,
               normalize_loss_by_num_matches=True, hard_example_miner=None,
               similarity_fn=None, add_summaries=True):
    super().__init__(num_classes=box_predictor.num_classes)
    self._is_training = is_training
    self._anchor_generator = anchor_generator
    self._box_predictor = box_predictor
    self._box_coder = box_coder
    self._feature_extractor = feature_extractor
    self._image_resizer_fn = image_resizer_fn
    self._non_max_suppression_fn = non_max_suppression_fn
    self._score_conversion_fn = score_conversion_fn
    self._classification_loss = classification_loss
    self._localization_loss = localization_loss
    self._classification_loss_weight = classification_loss_weight
    self._localization_loss_weight = localization_loss_weight
    self._normalize_loss_by_num_matches = normalize_loss_by_num_matches
    self._hard_example_miner = hard_example_miner
    self._add_summaries = add_summaries
    self._target_assigner = target_assigner_lib.TargetAssigner(
        matcher, box_coder, similarity_fn=similarity_fn)
    self._anchors = None
    if len(anchor_generator.num_anchors_per_location()) != feature_extractor.num_layers:
      raise ValueError(
          'anchor_generator has %d layers but the feature extractor makes %d feature maps'
          % (len(anchor_generator.num_anchors_per_location()), feature_extractor.num_layers))

  @property
  def anchors(self):
    """[M, 4] anchors of the last `predict` call."""
    if self._anchors is None:
      raise RuntimeError('anchors are only known after predict() has run')
    return self._anchors

  @property
  def feature_extractor_scope(self):
    return FEATURE_EXTRACTOR_SCOPE

  def preprocess(self, inputs):
    """Resizes a float [B, H, W, 3] batch in [0, 255] and maps it to [-1, 1].

    Returns:
      (preprocessed_inputs [B, h, w, 3], true_image_shapes int32 [B, 3]).

    Raises:
      ValueError: if inputs is not a rank-4 float tensor.
    """
    if inputs.dtype not in (tf.float32, tf.float16, tf.float64):
      raise ValueError('preprocess expects a float image batch, got %s' % inputs.dtype)
    if inputs.shape.ndims != 4:
      raise ValueError('preprocess expects [batch, height, width, channels], got %s'
                       % inputs.shape)
    with tf.compat.v1.name_scope('Preprocessor'):
      resized, true_image_shapes = self._image_resizer_fn(tf.cast(inputs, tf.float32))
      return self._feature_extractor.preprocess(resized), true_image_shapes

  def predict(self, preprocessed_inputs, true_image_shapes=None):
    """Runs the feature extractor and box predictor.

    Args:
      preprocessed_inputs: float [B, h, w, 3] from `preprocess` (static h, w).
      true_image_shapes: int32 [B, 3] (unused; kept for the interface).

    Returns:
      dict with preprocessed_inputs, box_encodings [B, M, 4],
      class_predictions_with_background [B, M, K+1], feature_maps (list) and
      anchors [M, 4].
    """
    del true_image_shapes
    with tf.compat.v1.variable_scope(FEATURE_EXTRACTOR_SCOPE, values=[preprocessed_inputs]):
      feature_maps = self._feature_extractor.extract_features(preprocessed_inputs)
    shapes = [(int(f.shape[1]), int(f.shape[2])) for f in feature_maps]
    height, width = int(preprocessed_inputs.shape[1]), int(preprocessed_inputs.shape[2])
    self._anchors = self._anchor_generator.generate(shapes, im_height=height, im_width=width)
    predictions = self._box_predictor.predict(
        feature_maps, self._anchor_generator.num_anchors_per_location())
    if self._add_summaries:
      for index, feature_map in enumerate(feature_maps):
        tf.compat.v1.summary.histogram('feature_map_%d' % index, feature_map)
    return {
        'preprocessed_inputs': preprocessed_inputs,
        box_predictor_lib.BOX_ENCODINGS: predictions[box_predictor_lib.BOX_ENCODINGS],
        box_predictor_lib.CLASS_PREDICTIONS_WITH_BACKGROUND:
            predictions[box_predictor_lib.CLASS_PREDICTIONS_WITH_BACKGROUND],
        'feature_maps': feature_maps,
        'anchors': self._anchors,
    }

  def _compute_clip_window(self, preprocessed_inputs, true_image_shapes):
    """[B, 4] normalized windows of the real (unpadded) image content."""
    batch = tf.shape(preprocessed_inputs)[0]
    if true_image_shapes is None:
      return tf.tile(tf.constant([[0.0, 0.0, 1.0, 1.0]]), [batch, 1])
    shape = tf.cast(tf.shape(preprocessed_inputs), tf.float32)
    true = tf.cast(true_image_shapes, tf.float32)
    zeros = tf.zeros_like(true[:, 0])
    return tf.stack([zeros, zeros, true[:, 0] / shape[1], true[:, 1] / shape[2]], axis=1)

  def postprocess(self, prediction_dict, true_image_shapes=None, **params):
    """Decodes boxes, converts scores and runs batch NMS.

    Args:
      prediction_dict: output of `predict`.
      true_image_shapes: int32 [B, 3] from `preprocess` (or None).
      **params: unused.

    Returns:
      dict with detection_boxes [B, N, 4] (normalized to the true image),
      detection_scores [B, N], detection_classes [B, N] (float, 0-based,
      background excluded), num_detections [B] float32, raw_detection_boxes
      [B, M, 4] and raw_detection_scores [B, M, K].
    """
    del params
    with tf.compat.v1.name_scope('Postprocessor'):
      box_encodings = prediction_dict[box_predictor_lib.BOX_ENCODINGS]
      logits = prediction_dict[box_predictor_lib.CLASS_PREDICTIONS_WITH_BACKGROUND]
      boxes = box_coder_lib.batch_decode(self._box_coder, box_encodings,
                                         prediction_dict['anchors'])
      scores = self._score_conversion_fn(logits)[:, :, 1:]
      window = self._compute_clip_window(prediction_dict['preprocessed_inputs'],
                                         true_image_shapes)
      nms_boxes, nms_scores, nms_classes, num = self._non_max_suppression_fn(
          boxes, scores, clip_window=window, change_coordinate_frame=True)
      return {
          fields.DetectionResultFields.detection_boxes: tf.identity(nms_boxes,
                                                                    'detection_boxes'),
          fields.DetectionResultFields.detection_scores: tf.identity(nms_scores,
                                                                     'detection_scores'),
          fields.DetectionResultFields.detection_classes: tf.identity(nms_classes,
                                                                      'detection_classes'),
          fields.DetectionResultFields.num_detections: tf.cast(num, tf.float32,
                                                               name='num_detections'),
          fields.DetectionResultFields.raw_detection_boxes: tf.identity(
              tf.clip_by_value(boxes, 0.0, 1.0), 'raw_detection_boxes'),
          fields.DetectionResultFields.raw_detection_scores: tf.identity(
              scores, 'raw_detection_scores'),
      }

  def loss(self, prediction_dict, true_image_shapes=None, scope=None):
    """Computes the localization and classification losses.

    Uses the groundtruth given to `provide_groundtruth` (boxes normalized,
    classes one-hot without background). The losses are not added to any
    collection; the trainer adds them (tf.compat.v1.losses.add_loss).

    Returns:
      {'Loss/localization_loss': scalar, 'Loss/classification_loss': scalar}.
    """
    del true_image_shapes
    with tf.compat.v1.name_scope(scope, 'Loss'):
      boxes_list = self.groundtruth_lists(fields.BoxListFields.boxes)
      classes_list = self.groundtruth_lists(fields.BoxListFields.classes)
      weights_list = None
      if self.groundtruth_has_field(fields.BoxListFields.weights):
        weights_list = self.groundtruth_lists(fields.BoxListFields.weights)
      labels_list = [tf.pad(tf.cast(classes, tf.float32), [[0, 0], [1, 0]])
                     for classes in classes_list]
      background = tf.one_hot(0, self.num_classes + 1, dtype=tf.float32)
      targets = target_assigner_lib.batch_assign_targets(
          self._target_assigner, prediction_dict['anchors'], boxes_list, labels_list,
          unmatched_class_label=background, groundtruth_weights_list=weights_list)
      box_encodings = prediction_dict[box_predictor_lib.BOX_ENCODINGS]
      logits = prediction_dict[box_predictor_lib.CLASS_PREDICTIONS_WITH_BACKGROUND]
      location_losses = self._localization_loss(
          box_encodings, targets.reg_targets, ignore_nan_targets=True,
          weights=targets.reg_weights)
      cls_losses = self._classification_loss(logits, targets.cls_targets,
                                             weights=targets.cls_weights)
      if cls_losses.shape.ndims == 3:
        cls_losses = tf.reduce_sum(cls_losses, axis=2)
      if self._hard_example_miner is not None:
        decoded = box_coder_lib.batch_decode(self._box_coder, box_encodings,
                                             prediction_dict['anchors'])
        loc_sum, cls_sum = self._hard_example_miner(
            location_losses, cls_losses, tf.unstack(decoded, num=len(boxes_list)),
            targets.matches)
        if self._add_summaries:
          self._hard_example_miner.summarize()
      else:
        loc_sum = tf.reduce_sum(location_losses)
        cls_sum = tf.reduce_sum(cls_losses)
      num_matches = tf.reduce_sum(tf.cast(targets.reg_weights > 0, tf.float32))
      normalizer = 1.0
      if self._normalize_loss_by_num_matches:
        normalizer = tf.maximum(num_matches, 1.0)
      localization_loss = tf.multiply(self._localization_loss_weight / normalizer, loc_sum,
                                      name='localization_loss')
      classification_loss = tf.multiply(self._classification_loss_weight / normalizer,
                                        cls_sum, name='classification_loss')
      if self._add_summaries:
        tf.compat.v1.summary.scalar('AvgNumPositiveAnchorsPerImage',
                                    num_matches / float(len(boxes_list)))
      return {LOCALIZATION_LOSS: localization_loss, CLASSIFICATION_LOSS: classification_loss}

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """Returns {checkpoint variable name: variable} for fine-tuning.

    Reads the variables of the default graph, so it may be called on a model
    object other than the one that built them (the trainer does).

    Args:
      fine_tune_checkpoint_type: 'detection' maps every model variable by its
        own name (the trainer then skips those whose shape differs, e.g. the
        class head after a num_classes change); 'classification' maps only
        the backbone's variables, under the names a classification
        checkpoint of that backbone has (`FeatureExtractor/` stripped);
        'full' maps every global variable.
      load_all_detection_checkpoint_vars: with 'detection', map every global
        variable (optimizer slots, moving averages) instead.

    Raises:
      ValueError: on an unknown fine_tune_checkpoint_type.
    """
    if fine_tune_checkpoint_type == 'classification':
      prefix = '%s/%s/' % (FEATURE_EXTRACTOR_SCOPE, self._feature_extractor.backbone_scope)
      return {var.op.name[len(FEATURE_EXTRACTOR_SCOPE) + 1:]: var
              for var in slim.get_model_variables() if var.op.name.startswith(prefix)}
    if fine_tune_checkpoint_type == 'detection':
      if load_all_detection_checkpoint_vars:
        variables = tf.compat.v1.global_variables()
      else:
        variables = slim.get_model_variables()
      return {var.op.name: var for var in variables}
    if fine_tune_checkpoint_type == 'full':
      return {var.op.name: var for var in tf.compat.v1.global_variables()}
    raise ValueError("fine_tune_checkpoint_type must be 'classification', 'detection' or "
                     "'full', got %r" % (fine_tune_checkpoint_type,))
