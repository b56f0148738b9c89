"""SSD: a single-shot detector (Liu et al., 2016) as a DetectionModel.

One network pass predicts, for every anchor of a multi-scale grid, box offsets
and class logits (background included); training matches anchors to
groundtruth by IoU and penalizes offsets (smooth L1) and classes (sigmoid or
softmax cross-entropy, optionally over mined hard examples only); inference
decodes the offsets and runs batch non-max suppression.

    images [B, H, W, 3] in [0, 255]
      --preprocess--> [B, h, w, 3] in [-1, 1] (h, w static for a fixed-shape
                      resizer, else known when the graph runs)
      --predict-->    box_encodings [B, M, 4], class_predictions_with_background
                      [B, M, K+1], anchors [M, 4], feature_maps
      --loss-->       {'Loss/localization_loss', 'Loss/classification_loss'}
      --postprocess-> detection_boxes [B, N, 4], detection_scores [B, N],
                      detection_classes [B, N] (0-based), num_detections [B]

The image size need not be static: behind a keep_aspect_ratio_resizer
without padding (the OD API's ssd_mobilenet_v2_fullyconv sample) each batch
has its own size, the box counts M follow it, and the anchors are computed
when the graph runs (core/anchor_generator.py gives the same values either
way).

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


class SSDFeatureExtractor:
  """What the SSD needs from a feature extractor; subclass it for a new one.

  The constructor takes the OD API's arguments, so an extractor written for
  the OD API's SSD (TF1, slim) drops in: `conv_hyperparams_fn()` returns the
  slim arg_scope of the layers the extractor adds (and of its base network
  too when `override_base_feature_extractor_hyperparams` is set).
  `SSDMetaArch.predict` calls `extract_features` inside the variable scope
  'FeatureExtractor', so a MobileNet-v1 extractor that opens 'MobilenetV1'
  creates `FeatureExtractor/MobilenetV1/...`, the zoo checkpoints' names.

  Args:
    is_training: whether the network trains (batch norm, dropout).
    depth_multiplier: width multiplier of the base network and extra layers.
    min_depth: smallest number of channels of a layer.
    pad_to_multiple: zero-pad the input's height and width up to a multiple
      of this before extracting features.
    conv_hyperparams_fn: fn() -> slim arg_scope for the convolutions.
    reuse_weights: passed to the extractor's variable scope.
    use_explicit_padding: pad explicitly instead of SAME padding.
    use_depthwise: depthwise-separable convolutions in the extra layers.
    num_layers: number of feature maps the extractor returns.
    override_base_feature_extractor_hyperparams: build the base network with
      `conv_hyperparams_fn` too instead of its own defaults.
  """

  # Scope of the base network in its classification checkpoint ('MobilenetV1').
  backbone_scope = None

  def __init__(self, is_training, depth_multiplier, min_depth, pad_to_multiple,
               conv_hyperparams_fn, reuse_weights=None, use_explicit_padding=False,
               use_depthwise=False, num_layers=6,
               override_base_feature_extractor_hyperparams=False):
    self._is_training = is_training
    self._depth_multiplier = depth_multiplier
    self._min_depth = min_depth
    self._pad_to_multiple = pad_to_multiple
    self._conv_hyperparams_fn = conv_hyperparams_fn
    self._reuse_weights = reuse_weights
    self._use_explicit_padding = use_explicit_padding
    self._use_depthwise = use_depthwise
    self._num_layers = num_layers
    self._override_base_feature_extractor_hyperparams = (
        override_base_feature_extractor_hyperparams)

  @property
  def is_keras_model(self):
    return False

  @property
  def num_layers(self):
    return self._num_layers

  def preprocess(self, resized_inputs):
    """Maps resized [0, 255] images to the range the network was trained on."""
    raise NotImplementedError('%s.preprocess' % type(self).__name__)

  def extract_features(self, preprocessed_inputs):
    """Returns the list of feature maps [B, H_k, W_k, D_k], finest first."""
    raise NotImplementedError('%s.extract_features' % type(self).__name__)

  def restore_from_classification_checkpoint_fn(self, feature_extractor_scope):
    """{name in a classification checkpoint: variable} of the base network.

    A variable `<feature_extractor_scope>/<backbone_scope>/...` is named
    `<backbone_scope>/...` in the base network's classification checkpoint.

    Args:
      feature_extractor_scope: the scope extract_features ran in
        ('FeatureExtractor').
    """
    prefix = feature_extractor_scope + '/'
    variables = {}
    # Model variables: optimizer slots and moving-average shadows are not in
    # a classification checkpoint.
    for variable in slim.get_model_variables():
      name = variable.op.name
      if name.startswith(prefix):
        stripped = name[len(prefix):]
        if self.backbone_scope is None or stripped.startswith(self.backbone_scope + '/'):
          variables[stripped] = variable
    return variables


def pad_to_multiple(images, multiple):
  """Zero-pads [B, H, W, C] at the bottom and right to multiples of `multiple`."""
  if multiple <= 1:
    return images
  height, width = images.shape[1], images.shape[2]
  if height is not None and width is not None:
    padded_height = -(-int(height) // multiple) * multiple
    padded_width = -(-int(width) // multiple) * multiple
    if (padded_height, padded_width) == (height, width):
      return images
    return tf.pad(images, [[0, 0], [0, padded_height - height],
                           [0, padded_width - width], [0, 0]])
  shape = tf.shape(images)
  padded_height = (shape[1] + multiple - 1) // multiple * multiple
  padded_width = (shape[2] + multiple - 1) // multiple * multiple
  return tf.pad(images, [[0, 0], [0, padded_height - shape[1]],
                         [0, padded_width - shape[2]], [0, 0]])


def _height_and_width(tensor):
  """[height, width] of a [B, H, W, C] tensor: Python ints where static, else int32 scalars."""
  static = tensor.shape.as_list()[1:3]
  if None not in static:
    return static
  dynamic = tf.shape(tensor)
  return [size if size is not None else dynamic[index + 1]
          for index, size in enumerate(static)]


def check_min_image_dim(min_dim, images):
  """Returns `images`, checking that height and width are at least `min_dim`.

  Raises:
    ValueError: if the static height or width is smaller (a dynamic shape is
      checked when the graph runs).
  """
  height, width = images.shape[1], images.shape[2]
  if height is None or width is None:
    check = tf.debugging.assert_greater_equal(
        tf.reduce_min(tf.shape(images)[1:3]), min_dim,
        message='image height and width must be at least %d' % min_dim)
    with tf.control_dependencies([check]):
      return tf.identity(images)
  if height < min_dim or width < min_dim:
    raise ValueError('image size must be >= %d in both height and width; got %dx%d'
                     % (min_dim, height, width))
  return images


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
    feature_extractor: an SSDFeatureExtractor (see above).
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
    encode_background_as_zeros: unmatched anchors get an all-zero class
      target (background column included) instead of one-hot background; the
      OD API's choice for sigmoid and focal losses.
    negative_class_weight: classification weight of unmatched anchors.
    normalize_loc_loss_by_codesize: divide the localization loss by the box
      code size too.
    freeze_batchnorm: batch norm layers the conv_hyperparams leave open use
      their moving statistics even when training.
    inplace_batchnorm_update: batch norm updates its moving statistics in the
      forward pass instead of through UPDATE_OPS.
    add_summaries: add scalar summaries of the target assignment.
  """

  def __init__(self, is_training, anchor_generator, box_predictor, box_coder,
               feature_extractor, matcher, image_resizer_fn, non_max_suppression_fn,
               score_conversion_fn, classification_loss, localization_loss,
               classification_loss_weight=1.0, localization_loss_weight=1.0,
               normalize_loss_by_num_matches=True, hard_example_miner=None,
               similarity_fn=None, encode_background_as_zeros=False,
               negative_class_weight=1.0, normalize_loc_loss_by_codesize=False,
               freeze_batchnorm=False, inplace_batchnorm_update=False,
               add_summaries=True):
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
    self._encode_background_as_zeros = encode_background_as_zeros
    self._normalize_loc_loss_by_codesize = normalize_loc_loss_by_codesize
    self._freeze_batchnorm = freeze_batchnorm
    self._inplace_batchnorm_update = inplace_batchnorm_update
    self._target_assigner = target_assigner_lib.TargetAssigner(
        matcher, box_coder, similarity_fn=similarity_fn,
        negative_class_weight=negative_class_weight)
    self._anchors = None

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
    model.check_image_batch(inputs)
    with tf.compat.v1.name_scope('Preprocessor'):
      resized, true_image_shapes = self._image_resizer_fn(tf.cast(inputs, tf.float32))
      return self._feature_extractor.preprocess(resized), true_image_shapes

  def predict(self, preprocessed_inputs, true_image_shapes=None):
    """Runs the feature extractor and box predictor.

    Args:
      preprocessed_inputs: float [B, h, w, 3] from `preprocess`; h and w may
        be unknown until the graph runs (keep_aspect_ratio_resizer,
        identity_resizer), then so is M.
      true_image_shapes: int32 [B, 3] (unused; kept for the interface).

    Returns:
      dict with preprocessed_inputs, box_encodings [B, M, 4],
      class_predictions_with_background [B, M, K+1], feature_maps (list) and
      anchors [M, 4] (placed on the padded frame of the batch).
    """
    del true_image_shapes
    # The OD API's batch-norm defaults for layers no conv_hyperparams scope sets.
    updates_collections = (None if self._inplace_batchnorm_update
                           else tf.compat.v1.GraphKeys.UPDATE_OPS)
    with slim.arg_scope([slim.batch_norm],
                        is_training=self._is_training and not self._freeze_batchnorm,
                        updates_collections=updates_collections):
      with tf.compat.v1.variable_scope(FEATURE_EXTRACTOR_SCOPE,
                                       values=[preprocessed_inputs]):
        feature_maps = self._feature_extractor.extract_features(preprocessed_inputs)
      num_anchors_per_location = self._anchor_generator.num_anchors_per_location()
      if len(feature_maps) != len(num_anchors_per_location):
        raise ValueError(
            'the feature extractor made %d feature maps but the anchor generator has %d '
            'layers (anchor_generator ... num_layers, or min_level/max_level, must match)'
            % (len(feature_maps), len(num_anchors_per_location)))
      # Static sizes give constant anchors; unknown ones (images of their own
      # size) give anchors computed when the graph runs, with the same values.
      shapes = [tuple(_height_and_width(f)) for f in feature_maps]
      height, width = _height_and_width(preprocessed_inputs)
      self._anchors = self._anchor_generator.generate(shapes, im_height=height,
                                                      im_width=width)
      predictions = self._box_predictor.predict(feature_maps, num_anchors_per_location)
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
      if self._encode_background_as_zeros:
        background = tf.zeros([self.num_classes + 1], dtype=tf.float32)
      else:
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
      loc_normalizer = normalizer
      if self._normalize_loc_loss_by_codesize:
        loc_normalizer *= float(box_encodings.shape[-1])
      localization_loss = tf.multiply(self._localization_loss_weight / loc_normalizer,
                                      loc_sum, name='localization_loss')
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
      return self._feature_extractor.restore_from_classification_checkpoint_fn(
          FEATURE_EXTRACTOR_SCOPE)
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
