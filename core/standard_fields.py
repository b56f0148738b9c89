"""Names of the tensors that flow between readers, augmentation and models.

The same names as the Object Detection API, so a tensor_dict produced by a
decoder here can be fed to code written against that API and vice versa:

    from core import standard_fields as fields
    image = tensor_dict[fields.InputDataFields.image]
    boxes = tensor_dict[fields.InputDataFields.groundtruth_boxes]

Boxes are always normalized `[ymin, xmin, ymax, xmax]` in [0, 1]; class ids in
records start at 1 (0 is the background class).
"""

# Class ids in records and label maps start at 1, a model's class indices at
# 0: subtract this from groundtruth going in, add it to predictions coming out.
LABEL_ID_OFFSET = 1


class InputDataFields:
  """Keys of a decoded example's tensor_dict (input to augmentation)."""
  image = 'image'
  image_additional_channels = 'image_additional_channels'
  original_image = 'original_image'
  original_image_spatial_shape = 'original_image_spatial_shape'
  key = 'key'
  source_id = 'source_id'
  filename = 'filename'
  true_image_shape = 'true_image_shape'
  groundtruth_image_classes = 'groundtruth_image_classes'
  groundtruth_image_confidences = 'groundtruth_image_confidences'
  groundtruth_boxes = 'groundtruth_boxes'
  groundtruth_classes = 'groundtruth_classes'
  groundtruth_confidences = 'groundtruth_confidences'
  groundtruth_label_types = 'groundtruth_label_types'
  groundtruth_is_crowd = 'groundtruth_is_crowd'
  groundtruth_area = 'groundtruth_area'
  groundtruth_difficult = 'groundtruth_difficult'
  groundtruth_group_of = 'groundtruth_group_of'
  groundtruth_instance_masks = 'groundtruth_instance_masks'
  groundtruth_keypoints = 'groundtruth_keypoints'
  groundtruth_keypoint_visibilities = 'groundtruth_keypoint_visibilities'
  groundtruth_label_weights = 'groundtruth_label_weights'
  groundtruth_weights = 'groundtruth_weights'
  num_groundtruth_boxes = 'num_groundtruth_boxes'
  multiclass_scores = 'multiclass_scores'
  # Classification examples: one integer label per image.
  label = 'label'


class DetectionResultFields:
  """Keys of a detection model's postprocessed outputs."""
  source_id = 'source_id'
  key = 'key'
  detection_boxes = 'detection_boxes'
  detection_scores = 'detection_scores'
  detection_multiclass_scores = 'detection_multiclass_scores'
  detection_classes = 'detection_classes'
  detection_masks = 'detection_masks'
  detection_keypoints = 'detection_keypoints'
  num_detections = 'num_detections'
  raw_detection_boxes = 'raw_detection_boxes'
  raw_detection_scores = 'raw_detection_scores'


class ClassificationResultFields:
  """Keys of a classification model's postprocessed outputs."""
  classes = 'classes'
  probabilities = 'probabilities'
  logits = 'logits'


class BoxListFields:
  """Extra fields carried alongside boxes by box-list code."""
  boxes = 'boxes'
  classes = 'classes'
  scores = 'scores'
  weights = 'weights'
  masks = 'masks'
  keypoints = 'keypoints'


class TfExampleFields:
  """Feature keys inside serialized tf.Example records."""
  image_encoded = 'image/encoded'
  image_format = 'image/format'
  filename = 'image/filename'
  channels = 'image/channels'
  colorspace = 'image/colorspace'
  height = 'image/height'
  width = 'image/width'
  source_id = 'image/source_id'
  image_class_text = 'image/class/text'
  image_class_label = 'image/class/label'
  object_class_text = 'image/object/class/text'
  object_class_label = 'image/object/class/label'
  object_bbox_ymin = 'image/object/bbox/ymin'
  object_bbox_xmin = 'image/object/bbox/xmin'
  object_bbox_ymax = 'image/object/bbox/ymax'
  object_bbox_xmax = 'image/object/bbox/xmax'
  object_view = 'image/object/view'
  object_truncated = 'image/object/truncated'
  object_occluded = 'image/object/occluded'
  object_difficult = 'image/object/difficult'
  object_group_of = 'image/object/group_of'
  object_is_crowd = 'image/object/is_crowd'
  object_segment_area = 'image/object/segment/area'
  object_weight = 'image/object/weight'
  instance_masks = 'image/segmentation/object'
  instance_boundaries = 'image/boundaries/object'
  instance_classes = 'image/segmentation/object/class'
  keypoint_y = 'image/object/keypoint/y'
  keypoint_x = 'image/object/keypoint/x'
  detection_class_label = 'image/detection/label'
  detection_bbox_ymin = 'image/detection/bbox/ymin'
  detection_bbox_xmin = 'image/detection/bbox/xmin'
  detection_bbox_ymax = 'image/detection/bbox/ymax'
  detection_bbox_xmax = 'image/detection/bbox/xmax'
  detection_score = 'image/detection/score'
