"""Faster R-CNN (Ren et al., 2015) and Mask R-CNN as a DetectionModel.

Two stages share one backbone. The first stage, a region proposal network
(RPN), slides a small conv net over the backbone's feature map and scores
every anchor of a grid as object or background, regressing an offset for it;
decoded and non-max suppressed, these become class-agnostic proposals. The
second stage crops the feature map to each proposal (crop_and_resize, then
max-pool), runs the rest of the backbone on the crops and predicts, per
proposal, class logits and one refined box per class; Mask R-CNN adds a mask
per class.

    images --preprocess--> [B, H, W, 3]
      --FirstStageFeatureExtractor--> rpn_features_to_crop [B, h, w, D]
      --Conv 3x3 (relu6)--> FirstStageBoxPredictor 1x1 convs
          rpn_box_encodings [B, M, 4], objectness [B, M, 2], anchors [M, 4]
      --decode, NMS (training: sample against groundtruth)--> proposals [B, P, 4]
      --crop, max-pool, SecondStageFeatureExtractor, SecondStageBoxPredictor-->
          refined_box_encodings [B*P, K, 4], class_predictions [B*P, K+1]
          (number_of_stages 3: mask_predictions [B*P, K, mh, mw])
      --postprocess--> detection_boxes/scores/classes/num_detections (+ masks)

number_of_stages 1 stops after the RPN (its proposals are the detections),
2 adds the box classifier, 3 the masks; at inference stage 3 predicts the
masks on the final detections, not on the proposals.

The constructor takes the OD API's (TF1, slim) arguments, and the variables
are named as its zoo checkpoints name them: `Conv`, `FirstStageBoxPredictor/
{BoxEncodingPredictor,ClassPredictor}`, `SecondStageBoxPredictor/...` and
the extractor's variables under `FirstStageFeatureExtractor/` and
`SecondStageFeatureExtractor/`. Usage:

    model = model_builder.build(pipeline_config.model, is_training=True)
    images, true_shapes = model.preprocess(tf.cast(raw_images, tf.float32))
    model.provide_groundtruth(boxes_list, one_hot_classes_list)
    predictions = model.predict(images, true_shapes)
    losses = model.loss(predictions, true_shapes)
    detections = model.postprocess(predictions, true_shapes)

Differs on purpose from the OD API:
  * anchors, proposals and targets are normalized to the preprocessed image
    (`anchors` is normalized; `proposal_boxes` stays in pixels);
  * with number_of_stages 1 the detections are relative to the true
    (unpadded) image like those of the other stages, and stage 3 crops the
    mask features at the detections mapped back to the padded image;
  * the NMS functions are our core.post_processing ones (see the
    constructor); with masks at stage 2 the proposal behind each detection
    is recovered by its score and box;
  * restore_map also accepts 'full' (every global variable).

The pieces live in faster_rcnn_proposals (anchors, proposals, sampling),
faster_rcnn_losses and faster_rcnn_detections (second-stage postprocessing).
"""

import tensorflow as tf
import tf_slim as slim

from core import box_coder as box_coder_lib
from core import matcher as matcher_lib
from core import model
from core import standard_fields as fields
from core import target_assigner as target_assigner_lib
from models import box_predictor as box_predictor_lib
from models import faster_rcnn_detections as detections_lib
from models import faster_rcnn_feature_extractor
from models import faster_rcnn_losses as losses_lib
from models import faster_rcnn_proposals as proposals_lib

# Where the OD API defines it, for extractors written against it.
FasterRCNNFeatureExtractor = faster_rcnn_feature_extractor.FasterRCNNFeatureExtractor

FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE = 'FirstStageFeatureExtractor'
SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE = 'SecondStageFeatureExtractor'
FIRST_STAGE_BOX_PREDICTOR_SCOPE = 'FirstStageBoxPredictor'
SECOND_STAGE_BOX_PREDICTOR_SCOPE = 'SecondStageBoxPredictor'

RPN_LOCALIZATION_LOSS = 'Loss/RPNLoss/localization_loss'
RPN_OBJECTNESS_LOSS = 'Loss/RPNLoss/objectness_loss'
BOX_CLASSIFIER_LOCALIZATION_LOSS = 'Loss/BoxClassifierLoss/localization_loss'
BOX_CLASSIFIER_CLASSIFICATION_LOSS = 'Loss/BoxClassifierLoss/classification_loss'
BOX_CLASSIFIER_MASK_LOSS = 'Loss/BoxClassifierLoss/mask_loss'

BOX_ENCODINGS = box_predictor_lib.BOX_ENCODINGS
CLASS_PREDICTIONS_WITH_BACKGROUND = box_predictor_lib.CLASS_PREDICTIONS_WITH_BACKGROUND
MASK_PREDICTIONS = 'mask_predictions'
DETECTION_ANCHOR_INDICES = detections_lib.DETECTION_ANCHOR_INDICES


def create_faster_rcnn_target_assigner(stage, use_matmul_gather=False):
  """The OD API's 'FasterRCNN' target assigners.

  'proposal' (RPN): IoU >= 0.7 positive, < 0.3 negative, every groundtruth
  box also claims its best anchor. 'detection' (box classifier): IoU >= 0.5
  positive, below negative. Both encode with FasterRcnnBoxCoder(10, 10, 5, 5).

  Args:
    stage: 'proposal' or 'detection'.
    use_matmul_gather: accepted for the OD API's signature; our matcher has
      one gather implementation.

  Raises:
    ValueError: on another stage.
  """
  del use_matmul_gather
  if stage == 'proposal':
    matcher = matcher_lib.ArgMaxMatcher(matched_threshold=0.7, unmatched_threshold=0.3,
                                        force_match_for_each_row=True)
  elif stage == 'detection':
    matcher = matcher_lib.ArgMaxMatcher(matched_threshold=0.5,
                                        negatives_lower_than_unmatched=True)
  else:
    raise ValueError("target assigner stage must be 'proposal' or 'detection', got %r"
                     % (stage,))
  return target_assigner_lib.TargetAssigner(
      matcher, box_coder_lib.FasterRcnnBoxCoder(scale_factors=[10.0, 10.0, 5.0, 5.0]))


class FasterRCNNMetaArch(model.DetectionModel):
  """Faster R-CNN / Mask R-CNN.

  The arguments are the OD API's. Those that differ in kind:
    image_resizer_fn: fn(images [B, H, W, 3]) -> (resized, true_image_shapes
      int32 [B, 3]), batch in, batch out.
    first_stage_anchor_generator: a GridAnchorGenerator (one grid of pixel
      anchors).
    first_stage_box_predictor_arg_scope_fn: fn() -> slim arg_scope of the
      RPN convs.
    first_stage_non_max_suppression_fn: fn(boxes [B, M, 1, 4], scores
      [B, M, 1], clip_window=[B, 4]) -> (boxes, scores, classes, num), i.e.
      core.post_processing.batch_multiclass_non_max_suppression with the
      thresholds and max_size_per_class = max_total_size =
      first_stage_max_proposals bound.
    crop_and_resize_fn: fn(features [B, H, W, D], boxes [B, P, 4], [h, w]) ->
      [B, P, h, w, D] (two_stage_ops.native_crop_and_resize or
      matmul_crop_and_resize).
    second_stage_mask_rcnn_box_predictor: MaskRCNNBoxPredictor; `predict` is
      given scope='SecondStageBoxPredictor' and opens it itself.
    second_stage_non_max_suppression_fn: fn(boxes [B, P, q, 4], scores
      [B, P, K], clip_window=..., change_coordinate_frame=True) -> (boxes,
      scores, classes, num) (core.post_processing).
    second_stage_score_conversion_fn: fn(logits) -> scores.
    second_stage_classification_loss: a core.losses classification loss.
    hard_example_miner: optional core.hard_example_miner.HardExampleMiner;
      with one, training sends all first_stage_max_proposals proposals to the
      box classifier instead of sampling second_stage_batch_size.
    resize_masks: groundtruth masks cover the true (unpadded) image; without
      it they cover the padded, preprocessed image.
    use_static_shapes: at inference keep anchors clipped to nothing (a fixed
      anchor count).
    return_raw_detections_during_predict: predict() adds raw_detection_boxes
      [B, P, q, 4] and raw_detection_feature_map_indices.
    output_final_box_features: postprocess() adds detection_features
      [B, N, h, w, D] (box classifier features of the detections).
  parallel_iterations and freeze_batchnorm are accepted for the OD API's
  signature and change nothing here (batch norm follows the arg scopes).

  Raises:
    ValueError: on number_of_stages outside {1, 2, 3} or an anchor generator
      with more than one grid.
  """

  def __init__(self, is_training, num_classes, image_resizer_fn, feature_extractor,
               number_of_stages, first_stage_anchor_generator, first_stage_target_assigner,
               first_stage_atrous_rate, first_stage_box_predictor_arg_scope_fn,
               first_stage_box_predictor_kernel_size, first_stage_box_predictor_depth,
               first_stage_minibatch_size, first_stage_sampler,
               first_stage_non_max_suppression_fn, first_stage_max_proposals,
               first_stage_localization_loss_weight, first_stage_objectness_loss_weight,
               crop_and_resize_fn, initial_crop_size, maxpool_kernel_size, maxpool_stride,
               second_stage_target_assigner, second_stage_mask_rcnn_box_predictor,
               second_stage_batch_size, second_stage_sampler,
               second_stage_non_max_suppression_fn, second_stage_score_conversion_fn,
               second_stage_localization_loss_weight, second_stage_classification_loss_weight,
               second_stage_classification_loss, second_stage_mask_prediction_loss_weight=1.0,
               hard_example_miner=None, parallel_iterations=16, add_summaries=True,
               clip_anchors_to_image=False, use_static_shapes=False, resize_masks=True,
               freeze_batchnorm=False, return_raw_detections_during_predict=False,
               output_final_box_features=False):
    super().__init__(num_classes=num_classes)
    if number_of_stages not in (1, 2, 3):
      raise ValueError('number_of_stages must be 1, 2 or 3, got %r' % (number_of_stages,))
    if len(first_stage_anchor_generator.num_anchors_per_location()) != 1:
      raise ValueError('first_stage_anchor_generator must generate one grid of anchors, '
                       'got %d' % len(first_stage_anchor_generator.num_anchors_per_location()))
    self._is_training = is_training
    self._image_resizer_fn = image_resizer_fn
    self._feature_extractor = feature_extractor
    self._number_of_stages = number_of_stages
    self._proposal_target_assigner = first_stage_target_assigner
    self._detector_target_assigner = second_stage_target_assigner
    self._box_coder = first_stage_target_assigner.box_coder
    self._first_stage_anchor_generator = first_stage_anchor_generator
    self._first_stage_atrous_rate = first_stage_atrous_rate
    self._first_stage_box_predictor_arg_scope_fn = first_stage_box_predictor_arg_scope_fn
    self._first_stage_box_predictor_kernel_size = first_stage_box_predictor_kernel_size
    self._first_stage_box_predictor_depth = first_stage_box_predictor_depth
    self._first_stage_minibatch_size = first_stage_minibatch_size
    self._first_stage_sampler = first_stage_sampler
    self._first_stage_nms_fn = first_stage_non_max_suppression_fn
    self._first_stage_max_proposals = first_stage_max_proposals
    self._first_stage_loc_loss_weight = first_stage_localization_loss_weight
    self._first_stage_obj_loss_weight = first_stage_objectness_loss_weight
    self._first_stage_box_predictor = box_predictor_lib.ConvolutionalBoxPredictor(
        is_training=is_training, num_classes=1,
        conv_hyperparams_fn=first_stage_box_predictor_arg_scope_fn, min_depth=0,
        max_depth=0, num_layers_before_predictor=0, use_dropout=False,
        dropout_keep_prob=1.0, kernel_size=1, box_code_size=self._box_coder.code_size)
    self._crop_and_resize_fn = crop_and_resize_fn
    self._initial_crop_size = initial_crop_size
    self._maxpool_kernel_size = maxpool_kernel_size
    self._maxpool_stride = maxpool_stride
    self._mask_rcnn_box_predictor = second_stage_mask_rcnn_box_predictor
    self._second_stage_batch_size = second_stage_batch_size
    self._second_stage_sampler = second_stage_sampler
    self._second_stage_nms_fn = second_stage_non_max_suppression_fn
    self._second_stage_score_conversion_fn = second_stage_score_conversion_fn
    self._second_stage_loc_loss_weight = second_stage_localization_loss_weight
    self._second_stage_cls_loss_weight = second_stage_classification_loss_weight
    self._second_stage_classification_loss = second_stage_classification_loss
    self._second_stage_mask_loss_weight = second_stage_mask_prediction_loss_weight
    self._hard_example_miner = hard_example_miner
    self._parallel_iterations = parallel_iterations
    self._add_summaries = add_summaries
    self.clip_anchors_to_image = clip_anchors_to_image
    self._use_static_shapes = use_static_shapes
    self._resize_masks = resize_masks
    self._freeze_batchnorm = freeze_batchnorm
    self._return_raw_detections_during_predict = return_raw_detections_during_predict
    self._output_final_box_features = output_final_box_features
    self._anchors = None
    self.endpoints = {}

  @property
  def first_stage_feature_extractor_scope(self):
    return FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE

  @property
  def second_stage_feature_extractor_scope(self):
    return SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE

  @property
  def first_stage_box_predictor_scope(self):
    return FIRST_STAGE_BOX_PREDICTOR_SCOPE

  @property
  def second_stage_box_predictor_scope(self):
    return SECOND_STAGE_BOX_PREDICTOR_SCOPE

  @property
  def feature_extractor(self):
    return self._feature_extractor

  @property
  def max_num_proposals(self):
    """Proposals per image sent to the box classifier (padded to this)."""
    if self._is_training and not self._hard_example_miner:
      return self._second_stage_batch_size
    return self._first_stage_max_proposals

  @property
  def anchors(self):
    """[M, 4] normalized RPN anchors of the last `predict` call."""
    if self._anchors is None:
      raise RuntimeError('anchors are only known after predict() has run')
    return self._anchors

  def preprocess(self, inputs):
    """Resizes a float [B, H, W, 3] batch in [0, 255] and applies the
    extractor's preprocessing.

    Returns:
      (preprocessed_inputs [B, h, w, 3], true_image_shapes int32 [B, 3]).

    Raises:
      ValueError: if inputs is not a rank-4 float tensor.
    """
    model.check_image_batch(inputs)
    with tf.compat.v1.name_scope('Preprocessor'):
      resized, true_image_shapes = self._image_resizer_fn(tf.cast(inputs, tf.float32))
      return self._feature_extractor.preprocess(resized), true_image_shapes

  # ---------------------------------------------------------------- predict

  def predict(self, preprocessed_inputs, true_image_shapes, **side_inputs):
    """Runs the stages up to number_of_stages.

    Args:
      preprocessed_inputs: float [B, H, W, 3] (H, W may be dynamic).
      true_image_shapes: int32 [B, 3] from `preprocess` (or None).
      **side_inputs: unused.

    Returns:
      dict with the first stage's rpn_box_predictor_features,
      rpn_features_to_crop, image_shape, rpn_box_encodings [B, M, 4],
      rpn_objectness_predictions_with_background [B, M, 2], anchors [M, 4]
      (normalized) and feature_maps; from stage 2 refined_box_encodings
      [B*P, K or 1, 4], class_predictions_with_background [B*P, K+1],
      num_proposals [B], proposal_boxes [B, P, 4] (pixels),
      proposal_boxes_normalized, box_classifier_features; from stage 3
      mask_predictions (and at inference the detection fields).
    """
    del side_inputs
    predictions = self._predict_first_stage(preprocessed_inputs)
    if self._number_of_stages >= 2:
      predictions.update(self._predict_second_stage(
          predictions['rpn_box_encodings'],
          predictions['rpn_objectness_predictions_with_background'],
          predictions['rpn_features_to_crop'], predictions['anchors'],
          predictions['image_shape'], true_image_shapes))
    if self._number_of_stages >= 2 and self._return_raw_detections_during_predict:
      predictions.update(detections_lib.raw_detections(
          self._box_coder, predictions['refined_box_encodings'],
          predictions['proposal_boxes_normalized'],
          proposals_lib.true_image_window(predictions['image_shape'], true_image_shapes)))
    if self._number_of_stages == 3:
      predictions = self._predict_third_stage(predictions, true_image_shapes)
    return predictions

  def _predict_first_stage(self, preprocessed_inputs):
    rpn_features_to_crop, self.endpoints = self._feature_extractor.extract_proposal_features(
        preprocessed_inputs, scope=FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE)
    with slim.arg_scope(self._first_stage_box_predictor_arg_scope_fn()):
      kernel = self._first_stage_box_predictor_kernel_size
      rpn_box_predictor_features = slim.conv2d(
          rpn_features_to_crop, self._first_stage_box_predictor_depth, [kernel, kernel],
          rate=self._first_stage_atrous_rate, activation_fn=tf.nn.relu6, scope='Conv')
    with tf.compat.v1.variable_scope(FIRST_STAGE_BOX_PREDICTOR_SCOPE):
      rpn = self._first_stage_box_predictor.predict(
          [rpn_box_predictor_features],
          self._first_stage_anchor_generator.num_anchors_per_location())
    box_encodings = rpn[BOX_ENCODINGS]
    objectness = rpn[CLASS_PREDICTIONS_WITH_BACKGROUND]
    anchors, kept = proposals_lib.image_anchors(
        self._first_stage_anchor_generator, rpn_features_to_crop, preprocessed_inputs,
        training=self._is_training, clip_anchors_to_image=self.clip_anchors_to_image,
        drop_empty_anchors=not self._use_static_shapes)
    if kept is not None:
      box_encodings = tf.gather(box_encodings, kept, axis=1)
      objectness = tf.gather(objectness, kept, axis=1)
    self._anchors = anchors
    return {
        'rpn_box_predictor_features': rpn_box_predictor_features,
        'rpn_features_to_crop': rpn_features_to_crop,
        'image_shape': tf.shape(preprocessed_inputs),
        'rpn_box_encodings': box_encodings,
        'rpn_objectness_predictions_with_background': objectness,
        'anchors': anchors,
        'feature_maps': [rpn_features_to_crop],
    }

  def _groundtruth_for_targets(self):
    """(boxes, labels with background column, weights) lists for target assignment."""
    boxes_list = [tf.cast(b, tf.float32)
                  for b in self.groundtruth_lists(fields.BoxListFields.boxes)]
    labels_list = [tf.pad(tf.cast(c, tf.float32), [[0, 0], [1, 0]])
                   for c in self.groundtruth_lists(fields.BoxListFields.classes)]
    if self.groundtruth_has_field(fields.BoxListFields.weights):
      weights_list = self.groundtruth_lists(fields.BoxListFields.weights)
    else:
      weights_list = [tf.ones(tf.shape(b)[:1]) for b in boxes_list]
    return boxes_list, labels_list, weights_list

  def _rpn_proposals(self, rpn_box_encodings, rpn_objectness, anchors, image_shape,
                     true_image_shapes, sample):
    """RPN outputs -> normalized proposals (sampled for training when `sample`)."""
    window = proposals_lib.true_image_window(image_shape, true_image_shapes)
    proposals = proposals_lib.rpn_proposals(
        self._box_coder, self._first_stage_nms_fn, self._first_stage_max_proposals,
        rpn_box_encodings, rpn_objectness, anchors, window)
    if sample:
      boxes = tf.stop_gradient(proposals['proposal_boxes'])
      if not self._hard_example_miner:
        gt_boxes, gt_labels, gt_weights = self._groundtruth_for_targets()
        boxes, scores, num = proposals_lib.sample_proposals(
            self._detector_target_assigner, self._second_stage_sampler,
            self._second_stage_batch_size, self.num_classes, boxes,
            proposals['proposal_scores'], proposals['num_proposals'], gt_boxes,
            gt_labels, gt_weights)
        proposals.update(proposal_scores=scores, num_proposals=num)
      proposals['proposal_boxes'] = boxes
    return proposals

  def _predict_second_stage(self, rpn_box_encodings, rpn_objectness, rpn_features_to_crop,
                            anchors, image_shape, true_image_shapes):
    proposals = self._rpn_proposals(rpn_box_encodings, rpn_objectness, anchors,
                                    image_shape, true_image_shapes, sample=self._is_training)
    predictions = self._box_prediction(rpn_features_to_crop,
                                       proposals['proposal_boxes'], image_shape)
    predictions['num_proposals'] = proposals['num_proposals']
    return predictions

  def _crop_features(self, features, boxes):
    """[B, P, 4] normalized boxes -> [B*P, crop', crop', D] pooled crops."""
    size = [self._initial_crop_size, self._initial_crop_size]
    crops = self._crop_and_resize_fn(features, boxes, size)
    crops = tf.reshape(crops, tf.concat([[-1], tf.shape(crops)[2:]], axis=0))
    crops.set_shape([None] + size + [features.shape[3]])
    if self._maxpool_kernel_size:
      crops = slim.max_pool2d(crops, [self._maxpool_kernel_size] * 2,
                              stride=self._maxpool_stride, padding='VALID')
    return crops

  def _box_classifier_features(self, features, boxes):
    return self._feature_extractor.extract_box_classifier_features(
        self._crop_features(features, boxes), scope=SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)

  def _box_prediction(self, rpn_features_to_crop, proposal_boxes_normalized, image_shape):
    box_classifier_features = self._box_classifier_features(rpn_features_to_crop,
                                                            proposal_boxes_normalized)
    predictions = self._mask_rcnn_box_predictor.predict(
        [box_classifier_features], num_predictions_per_location=[1],
        scope=SECOND_STAGE_BOX_PREDICTOR_SCOPE, prediction_stage=2)
    refined = detections_lib.single_prediction(predictions[BOX_ENCODINGS])
    logits = detections_lib.single_prediction(predictions[CLASS_PREDICTIONS_WITH_BACKGROUND])
    return {
        'refined_box_encodings': refined,
        'class_predictions_with_background': logits,
        'proposal_boxes': detections_lib.to_pixels(proposal_boxes_normalized, image_shape),
        'proposal_boxes_normalized': proposal_boxes_normalized,
        'box_classifier_features': box_classifier_features,
        'final_anchors': proposal_boxes_normalized,
    }

  def _predict_masks(self, box_classifier_features):
    predictions = self._mask_rcnn_box_predictor.predict(
        [box_classifier_features], num_predictions_per_location=[1],
        scope=SECOND_STAGE_BOX_PREDICTOR_SCOPE, prediction_stage=3)
    return detections_lib.single_prediction(predictions[MASK_PREDICTIONS])

  def _predict_third_stage(self, predictions, true_image_shapes):
    """Masks: on the proposals in training, on the final detections at inference."""
    if self._is_training:
      predictions[MASK_PREDICTIONS] = self._predict_masks(
          predictions['box_classifier_features'])
      return predictions
    detections = self._postprocess_box_classifier(predictions, true_image_shapes)
    predictions.update(detections)
    window = proposals_lib.true_image_window(predictions['image_shape'], true_image_shapes)
    boxes = proposals_lib.from_window_frame(
        detections[fields.DetectionResultFields.detection_boxes], window)
    features = self._box_classifier_features(predictions['rpn_features_to_crop'], boxes)
    mask_logits = self._predict_masks(features)
    predictions[MASK_PREDICTIONS] = mask_logits
    predictions[fields.DetectionResultFields.detection_masks] = detections_lib.masks_of_classes(
        mask_logits, detections[fields.DetectionResultFields.detection_classes])
    return predictions

  # ------------------------------------------------------------ postprocess

  def postprocess(self, prediction_dict, true_image_shapes, **params):
    """Detections from the predictions.

    Returns:
      dict with detection_boxes [B, N, 4] (normalized to the true image),
      detection_scores [B, N], detection_classes [B, N] (float, 0-based;
      zeros for number_of_stages 1), num_detections [B] float32,
      raw_detection_boxes, raw_detection_scores, and detection_masks
      [B, N, mask_h, mask_w] (probabilities) when masks were predicted.
    """
    del params
    if self._number_of_stages == 1:
      with tf.compat.v1.name_scope('FirstStagePostprocessor'):
        return self._postprocess_rpn_only(prediction_dict, true_image_shapes)
    if self._number_of_stages == 2 or self._is_training:
      with tf.compat.v1.name_scope('SecondStagePostprocessor'):
        detections = self._postprocess_box_classifier(
            prediction_dict, true_image_shapes,
            mask_predictions=prediction_dict.get(MASK_PREDICTIONS))
      if self._output_final_box_features:
        detections['detection_features'] = self._detection_features(
            detections[fields.DetectionResultFields.detection_boxes],
            prediction_dict, true_image_shapes)
      return detections
    # Stage 3 at inference: predict() already ran the postprocessing.
    return {key: value for key, value in prediction_dict.items()
            if key.startswith(('detection_', 'raw_detection_')) or key == 'num_detections'}

  def _detection_features(self, detection_boxes, prediction_dict, true_image_shapes):
    """[B, N, h, w, D] box classifier features of the detections (their spatial
    mean also as the tensor 'pooled_detection_features')."""
    with tf.compat.v1.name_scope('SecondStageDetectionFeaturesExtract'):
      window = proposals_lib.true_image_window(prediction_dict['image_shape'],
                                               true_image_shapes)
      boxes = proposals_lib.from_window_frame(detection_boxes, window)
      features = self._box_classifier_features(prediction_dict['rpn_features_to_crop'], boxes)
      batch_shape = tf.shape(detection_boxes)[:2]
      tf.reshape(tf.reduce_mean(features, axis=[1, 2]),
                 tf.concat([batch_shape, tf.shape(features)[3:]], axis=0),
                 name='pooled_detection_features')
      return tf.reshape(features, tf.concat([batch_shape, tf.shape(features)[1:]], axis=0))

  def _postprocess_rpn_only(self, prediction_dict, true_image_shapes):
    image_shape = prediction_dict['image_shape']
    proposals = self._rpn_proposals(
        prediction_dict['rpn_box_encodings'],
        prediction_dict['rpn_objectness_predictions_with_background'],
        prediction_dict['anchors'], image_shape, true_image_shapes, sample=False)
    window = proposals_lib.true_image_window(image_shape, true_image_shapes)
    scores = proposals['proposal_scores']
    results = fields.DetectionResultFields
    return {
        results.detection_boxes: proposals_lib.to_window_frame(
            proposals['proposal_boxes'], window),
        results.detection_scores: scores,
        results.detection_classes: tf.zeros_like(scores),
        results.num_detections: tf.cast(proposals['num_proposals'], tf.float32),
        results.raw_detection_boxes: tf.clip_by_value(proposals['raw_boxes'], 0.0, 1.0),
        results.raw_detection_scores: proposals['objectness'],
    }

  def _postprocess_box_classifier(self, prediction_dict, true_image_shapes,
                                  mask_predictions=None):
    window = proposals_lib.true_image_window(prediction_dict['image_shape'],
                                             true_image_shapes)
    return detections_lib.box_classifier_detections(
        self._box_coder, self._second_stage_nms_fn, self._second_stage_score_conversion_fn,
        prediction_dict['refined_box_encodings'],
        prediction_dict['class_predictions_with_background'],
        prediction_dict['proposal_boxes_normalized'], prediction_dict['num_proposals'],
        window, mask_predictions=mask_predictions)

  # ------------------------------------------------------------------- loss

  def loss(self, prediction_dict, true_image_shapes, scope=None):
    """RPN losses, and from stage 2 the box classifier (and mask) losses.

    Returns:
      dict with 'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss'
      and, from stage 2, 'Loss/BoxClassifierLoss/localization_loss',
      'Loss/BoxClassifierLoss/classification_loss' (+ '.../mask_loss' when
      masks are predicted).

    Raises:
      ValueError: if masks are predicted but no groundtruth masks were given.
    """
    with tf.compat.v1.name_scope(scope, 'Loss'):
      gt_boxes, gt_labels, gt_weights = self._groundtruth_for_targets()
      with tf.compat.v1.name_scope('RPNLoss'):
        loc, obj = losses_lib.rpn_losses(
            self._proposal_target_assigner, self._first_stage_sampler,
            self._first_stage_minibatch_size, prediction_dict['anchors'],
            prediction_dict['rpn_box_encodings'],
            prediction_dict['rpn_objectness_predictions_with_background'],
            gt_boxes, gt_weights)
        loss_dict = {
            RPN_LOCALIZATION_LOSS: tf.multiply(self._first_stage_loc_loss_weight, loc,
                                               name='localization_loss'),
            RPN_OBJECTNESS_LOSS: tf.multiply(self._first_stage_obj_loss_weight, obj,
                                             name='objectness_loss'),
        }
      if self._number_of_stages > 1:
        with tf.compat.v1.name_scope('BoxClassifierLoss'):
          loss_dict.update(self._box_classifier_loss(prediction_dict, true_image_shapes,
                                                     gt_boxes, gt_labels, gt_weights))
    return loss_dict

  def _box_classifier_loss(self, prediction_dict, true_image_shapes, gt_boxes, gt_labels,
                           gt_weights):
    loc, cls, targets = losses_lib.box_classifier_losses(
        self._detector_target_assigner, self.num_classes,
        self._second_stage_classification_loss, self._hard_example_miner,
        prediction_dict['refined_box_encodings'],
        prediction_dict['class_predictions_with_background'],
        prediction_dict['proposal_boxes_normalized'], prediction_dict['num_proposals'],
        gt_boxes, gt_labels, gt_weights)
    loss_dict = {
        BOX_CLASSIFIER_LOCALIZATION_LOSS: tf.multiply(
            self._second_stage_loc_loss_weight, loc, name='localization_loss'),
        BOX_CLASSIFIER_CLASSIFICATION_LOSS: tf.multiply(
            self._second_stage_cls_loss_weight, cls, name='classification_loss'),
    }
    mask_logits = prediction_dict.get(MASK_PREDICTIONS)
    if mask_logits is None:
      return loss_dict
    if not self.groundtruth_has_field(fields.BoxListFields.masks):
      raise ValueError('the model predicts masks but provide_groundtruth got no '
                       'groundtruth_masks_list (configure the input reader to load '
                       'instance masks)')
    window = proposals_lib.true_image_window(prediction_dict['image_shape'],
                                             true_image_shapes)
    mask_boxes = prediction_dict['proposal_boxes_normalized']
    if not self._is_training:
      # At inference the masks belong to the detections, not the proposals.
      mask_boxes = proposals_lib.from_window_frame(
          prediction_dict[fields.DetectionResultFields.detection_boxes], window)
      num = tf.cast(prediction_dict[fields.DetectionResultFields.num_detections], tf.int32)
      _, _, _, targets = losses_lib.assign_box_classifier_targets(
          self._detector_target_assigner, self.num_classes, mask_boxes, num, gt_boxes,
          gt_labels, gt_weights)
    masks = losses_lib.mask_loss(
        mask_logits, mask_boxes, targets, self.groundtruth_lists(fields.BoxListFields.masks),
        masks_in_true_image_frame=window if self._resize_masks else None)
    loss_dict[BOX_CLASSIFIER_MASK_LOSS] = tf.multiply(
        self._second_stage_mask_loss_weight, masks, name='mask_loss')
    return loss_dict

  # ------------------------------------------------------------ restore map

  def restore_map(self, fine_tune_checkpoint_type='detection',
                  load_all_detection_checkpoint_vars=False):
    """{checkpoint variable name: variable} for fine-tuning.

    Args:
      fine_tune_checkpoint_type: 'classification' maps the backbone's
        variables under their classification-checkpoint names (stage scopes
        stripped); 'detection' maps the two feature extractors' variables by
        their own names (every global variable with
        load_all_detection_checkpoint_vars); 'full' maps every global variable.
      load_all_detection_checkpoint_vars: see above.

    Raises:
      ValueError: on an unknown fine_tune_checkpoint_type.
    """
    if fine_tune_checkpoint_type == 'classification':
      return self._feature_extractor.restore_from_classification_checkpoint_fn(
          FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE, SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)
    if fine_tune_checkpoint_type not in ('detection', 'full'):
      raise ValueError("fine_tune_checkpoint_type must be 'classification', 'detection' or "
                       "'full', got %r" % (fine_tune_checkpoint_type,))
    variables = tf.compat.v1.global_variables()
    if fine_tune_checkpoint_type == 'detection' and not load_all_detection_checkpoint_vars:
      prefixes = (FIRST_STAGE_FEATURE_EXTRACTOR_SCOPE + '/',
                  SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE + '/')
      variables = [v for v in variables if v.op.name.startswith(prefixes)]
    return {variable.op.name: variable for variable in variables}
