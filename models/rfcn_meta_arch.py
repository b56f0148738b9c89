"""R-FCN (Dai et al., 2016): Faster R-CNN without per-proposal computation.

R-FCN keeps Faster R-CNN's region proposal network but moves all of the
second stage's layers before the cropping: the box classifier features are
computed once on the whole feature map, and a position-sensitive predictor
(models/rfcn_box_predictor.RfcnBoxPredictor) turns them into class and box
score maps that each proposal only pools from (a k x k grid of bins, each bin
reading its own group of channels).

    rpn_features_to_crop --SecondStageFeatureExtractor--> [B, h, w, D']
      --SecondStageBoxPredictor (reduce_depth, class_predictions,
        refined_locations; position-sensitive pooling at the proposals)-->
          refined_box_encodings [B*P, K, 4], class_predictions [B*P, K+1]

Everything else (preprocessing, RPN, losses, postprocessing, restore_map) is
FasterRCNNMetaArch's. The constructor takes the OD API's arguments (no crop
size, max-pool or masks). Usage:

    model = rfcn_meta_arch.RFCNMetaArch(..., second_stage_rfcn_box_predictor=
                                        rfcn_box_predictor.RfcnBoxPredictor(...), ...)
    predictions = model.predict(images, true_image_shapes)

Differs on purpose from the OD API: `final_anchors` holds the normalized
proposals (as in FasterRCNNMetaArch) rather than pixel ones.
"""

from models import faster_rcnn_detections
from models import faster_rcnn_meta_arch


class RFCNMetaArch(faster_rcnn_meta_arch.FasterRCNNMetaArch):
  """R-FCN; arguments as FasterRCNNMetaArch's, plus:

  Args:
    second_stage_rfcn_box_predictor: RfcnBoxPredictor; `predict` gets the
      whole box classifier feature map, scope='SecondStageBoxPredictor' and
      proposal_boxes [B, P, 4] (normalized).
    crop_and_resize_fn: accepted for the OD API's signature (the predictor
      does its own position-sensitive cropping).
    number_of_stages: 1 (RPN only) or 2.

  Raises:
    ValueError: on number_of_stages outside {1, 2}, or output_final_box_features.
  """

  def __init__(self, is_training, num_classes, image_resizer_fn, feature_extractor,
               number_of_stages, first_stage_anchor_generator, first_stage_target_assigner,
               first_stage_atrous_rate, first_stage_box_predictor_arg_scope_fn,
               first_stage_box_predictor_kernel_size, first_stage_box_predictor_depth,
               first_stage_minibatch_size, first_stage_sampler,
               first_stage_non_max_suppression_fn, first_stage_max_proposals,
               first_stage_localization_loss_weight, first_stage_objectness_loss_weight,
               crop_and_resize_fn, second_stage_target_assigner,
               second_stage_rfcn_box_predictor, second_stage_batch_size, second_stage_sampler,
               second_stage_non_max_suppression_fn, second_stage_score_conversion_fn,
               second_stage_localization_loss_weight, second_stage_classification_loss_weight,
               second_stage_classification_loss, hard_example_miner, parallel_iterations=16,
               add_summaries=True, clip_anchors_to_image=False, use_static_shapes=False,
               resize_masks=False, freeze_batchnorm=False,
               return_raw_detections_during_predict=False, output_final_box_features=False):
    if number_of_stages not in (1, 2):
      raise ValueError('R-FCN number_of_stages must be 1 or 2, got %r' % (number_of_stages,))
    if output_final_box_features:
      raise ValueError('R-FCN does not support output_final_box_features (it has no '
                       'per-detection box classifier features)')
    super().__init__(
        is_training, num_classes, image_resizer_fn, feature_extractor, number_of_stages,
        first_stage_anchor_generator, first_stage_target_assigner, first_stage_atrous_rate,
        first_stage_box_predictor_arg_scope_fn, first_stage_box_predictor_kernel_size,
        first_stage_box_predictor_depth, first_stage_minibatch_size, first_stage_sampler,
        first_stage_non_max_suppression_fn, first_stage_max_proposals,
        first_stage_localization_loss_weight, first_stage_objectness_loss_weight,
        crop_and_resize_fn, initial_crop_size=None, maxpool_kernel_size=None,
        maxpool_stride=None, second_stage_target_assigner=second_stage_target_assigner,
        second_stage_mask_rcnn_box_predictor=None,
        second_stage_batch_size=second_stage_batch_size,
        second_stage_sampler=second_stage_sampler,
        second_stage_non_max_suppression_fn=second_stage_non_max_suppression_fn,
        second_stage_score_conversion_fn=second_stage_score_conversion_fn,
        second_stage_localization_loss_weight=second_stage_localization_loss_weight,
        second_stage_classification_loss_weight=second_stage_classification_loss_weight,
        second_stage_classification_loss=second_stage_classification_loss,
        hard_example_miner=hard_example_miner, parallel_iterations=parallel_iterations,
        add_summaries=add_summaries, clip_anchors_to_image=clip_anchors_to_image,
        use_static_shapes=use_static_shapes, resize_masks=resize_masks,
        freeze_batchnorm=freeze_batchnorm,
        return_raw_detections_during_predict=return_raw_detections_during_predict,
        output_final_box_features=output_final_box_features)
    self._rfcn_box_predictor = second_stage_rfcn_box_predictor

  def _predict_second_stage(self, rpn_box_encodings, rpn_objectness, rpn_features_to_crop,
                            anchors, image_shape, true_image_shapes):
    """Box classifier features on the whole map, pooled per proposal by the predictor."""
    proposals = self._rpn_proposals(rpn_box_encodings, rpn_objectness, anchors,
                                    image_shape, true_image_shapes, sample=self._is_training)
    boxes = proposals['proposal_boxes']
    box_classifier_features = self._feature_extractor.extract_box_classifier_features(
        rpn_features_to_crop,
        scope=faster_rcnn_meta_arch.SECOND_STAGE_FEATURE_EXTRACTOR_SCOPE)
    predictions = self._rfcn_box_predictor.predict(
        [box_classifier_features], num_predictions_per_location=[1],
        scope=faster_rcnn_meta_arch.SECOND_STAGE_BOX_PREDICTOR_SCOPE, proposal_boxes=boxes)
    refined = faster_rcnn_detections.single_prediction(
        predictions[faster_rcnn_meta_arch.BOX_ENCODINGS])
    logits = faster_rcnn_detections.single_prediction(
        predictions[faster_rcnn_meta_arch.CLASS_PREDICTIONS_WITH_BACKGROUND])
    return {
        'refined_box_encodings': refined,
        'class_predictions_with_background': logits,
        'num_proposals': proposals['num_proposals'],
        'proposal_boxes': faster_rcnn_detections.to_pixels(boxes, image_shape),
        'proposal_boxes_normalized': boxes,
        'box_classifier_features': box_classifier_features,
        'final_anchors': boxes,
    }
