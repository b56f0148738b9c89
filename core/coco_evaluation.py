r"""COCO detection metrics over numpy boxes, computed by pycocotools.

The evaluator hands this module one image at a time: the groundtruth boxes and
classes, then the model's detections. `evaluate()` turns what was collected
into pycocotools' data structures and runs `COCOeval`, so every number is the
official COCO computation (101-point interpolated precision averaged over the
IoU thresholds 0.50:0.05:0.95), never a hand-written approximation:

    from core import coco_evaluation
    evaluator = coco_evaluation.CocoDetectionEvaluator(
        [{'id': 1, 'name': 'rectangle'}, {'id': 2, 'name': 'ellipse'}],
        include_metrics_per_category=True)
    evaluator.add_single_ground_truth_image_info('img0', {
        'groundtruth_boxes': np.array([[10., 10., 50., 60.]]),   # absolute yxyx
        'groundtruth_classes': np.array([1])})
    evaluator.add_single_detected_image_info('img0', {
        'detection_boxes': np.array([[11., 10., 50., 58.]]),
        'detection_scores': np.array([0.9]),
        'detection_classes': np.array([1])})
    metrics = evaluator.evaluate()
    metrics['DetectionBoxes_Precision/mAP@.50IOU']              # -> 1.0
    metrics['DetectionBoxes_PerformanceByCategory/mAP/rectangle']

Boxes are `[ymin, xmin, ymax, xmax]` like everywhere in slimtrain; class ids
are the label map's (1-based). The metric names are the Object Detection
API's, so dashboards and `BestExporter` comparisons keep working. A category
without any groundtruth box has no defined AP: COCO reports -1 for it.

`ClassificationAccuracy` is the classifier counterpart: top-k hit rates of
class scores against labels (`Accuracy/top_1`, `Accuracy/top_5`).
"""

import contextlib
import io

from core import logs as logging
import numpy as np
from pycocotools import coco
from pycocotools import cocoeval

from core import standard_fields as fields

_PREFIX = 'DetectionBoxes_'

# (metric name, index into COCOeval.stats) in the order COCOeval.summarize prints.
SUMMARY_METRICS = (
    ('Precision/mAP', 0),
    ('Precision/mAP@.50IOU', 1),
    ('Precision/mAP@.75IOU', 2),
    ('Precision/mAP (small)', 3),
    ('Precision/mAP (medium)', 4),
    ('Precision/mAP (large)', 5),
    ('Recall/AR@1', 6),
    ('Recall/AR@10', 7),
    ('Recall/AR@100', 8),
    ('Recall/AR@100 (small)', 9),
    ('Recall/AR@100 (medium)', 10),
    ('Recall/AR@100 (large)', 11),
)

MAP = _PREFIX + 'Precision/mAP'
MAP_50 = _PREFIX + 'Precision/mAP@.50IOU'
MAP_75 = _PREFIX + 'Precision/mAP@.75IOU'
PER_CATEGORY_PREFIX = _PREFIX + 'PerformanceByCategory/mAP/'


def to_absolute(boxes, image_shape):
  """[N, 4] normalized yxyx boxes -> pixels of an image of `image_shape` (float64).

  COCO's area ranges (small/medium/large) are in pixels, so both evaluators
  scale their normalized boxes with this before adding them.
  """
  height, width = image_shape[:2]
  return np.asarray(boxes, np.float64).reshape([-1, 4]) * [height, width, height, width]


def _to_xywh(boxes):
  """[N, 4] yxyx -> [N, 4] COCO xywh (float64)."""
  boxes = np.asarray(boxes, np.float64).reshape([-1, 4])
  return np.stack([boxes[:, 1], boxes[:, 0], boxes[:, 3] - boxes[:, 1],
                   boxes[:, 2] - boxes[:, 0]], axis=1)


class CocoDetectionEvaluator:
  """Collects per-image groundtruth and detections; computes COCO box metrics."""

  def __init__(self, categories, include_metrics_per_category=False):
    """Creates the evaluator.

    Args:
      categories: list of {'id': int, 'name': str}, ids as in the label map.
      include_metrics_per_category: also report
        `DetectionBoxes_PerformanceByCategory/mAP/<name>` for each category.

    Raises:
      ValueError: if categories is empty or has repeated ids.
    """
    if not categories:
      raise ValueError('CocoDetectionEvaluator needs at least one category')
    ids = [c['id'] for c in categories]
    if len(set(ids)) != len(ids):
      raise ValueError('category ids are not unique: %s' % ids)
    self._categories = [dict(c) for c in categories]
    self._category_ids = set(ids)
    self._include_metrics_per_category = include_metrics_per_category
    self.clear()

  def clear(self):
    """Forgets every image added so far."""
    self._image_ids = {}
    self._groundtruth = []
    self._detections = []
    self._images_with_detections = set()

  @property
  def num_images(self):
    return len(self._image_ids)

  def _checked_classes(self, classes, image_id, what):
    classes = np.asarray(classes).reshape([-1]).astype(np.int64)
    unknown = sorted(set(classes.tolist()) - self._category_ids)
    if unknown:
      raise ValueError('image %r: %s class ids %s are not among the categories %s' %
                       (image_id, what, unknown, sorted(self._category_ids)))
    return classes

  def add_single_ground_truth_image_info(self, image_id, groundtruth_dict):
    """Adds one image's groundtruth.

    Args:
      image_id: any hashable, unique per image.
      groundtruth_dict: `groundtruth_boxes` float [N, 4] absolute yxyx,
        `groundtruth_classes` int [N] (1-based), optional
        `groundtruth_is_crowd` bool [N] and `groundtruth_area` float [N].

    Raises:
      ValueError: if the image was added before or a class id is unknown.
    """
    if image_id in self._image_ids:
      raise ValueError('groundtruth for image %r was already added' % (image_id,))
    keys = fields.InputDataFields
    boxes = _to_xywh(groundtruth_dict[keys.groundtruth_boxes])
    classes = self._checked_classes(groundtruth_dict[keys.groundtruth_classes], image_id,
                                    'groundtruth')
    if len(classes) != len(boxes):
      raise ValueError('image %r: %d groundtruth boxes but %d classes' %
                       (image_id, len(boxes), len(classes)))
    is_crowd = groundtruth_dict.get(keys.groundtruth_is_crowd)
    is_crowd = (np.zeros(len(boxes), bool) if is_crowd is None or len(is_crowd) != len(boxes)
                else np.asarray(is_crowd, bool))
    area = groundtruth_dict.get(keys.groundtruth_area)
    if area is None or len(area) != len(boxes) or not np.all(np.asarray(area) > 0):
      area = boxes[:, 2] * boxes[:, 3]
    self._image_ids[image_id] = len(self._image_ids) + 1
    for box, cls, crowd, box_area in zip(boxes, classes, is_crowd, area):
      self._groundtruth.append({
          'id': len(self._groundtruth) + 1, 'image_id': self._image_ids[image_id],
          'category_id': int(cls), 'bbox': [float(v) for v in box],
          'area': float(box_area), 'iscrowd': int(crowd)})

  def add_single_detected_image_info(self, image_id, detections_dict):
    """Adds one image's detections (after its groundtruth).

    Args:
      image_id: an id given to `add_single_ground_truth_image_info`.
      detections_dict: `detection_boxes` float [M, 4] absolute yxyx,
        `detection_scores` float [M], `detection_classes` int [M] (1-based).

    Raises:
      ValueError: for an image without groundtruth, detections added twice,
        mismatched lengths or an unknown class id.
    """
    if image_id not in self._image_ids:
      raise ValueError('add groundtruth for image %r before its detections' % (image_id,))
    if image_id in self._images_with_detections:
      raise ValueError('detections for image %r were already added' % (image_id,))
    keys = fields.DetectionResultFields
    boxes = _to_xywh(detections_dict[keys.detection_boxes])
    scores = np.asarray(detections_dict[keys.detection_scores], np.float64).reshape([-1])
    classes = self._checked_classes(detections_dict[keys.detection_classes], image_id,
                                    'detection')
    if not len(boxes) == len(scores) == len(classes):
      raise ValueError('image %r: %d detection boxes, %d scores, %d classes' %
                       (image_id, len(boxes), len(scores), len(classes)))
    self._images_with_detections.add(image_id)
    for box, score, cls in zip(boxes, scores, classes):
      self._detections.append({
          'id': len(self._detections) + 1, 'image_id': self._image_ids[image_id],
          'category_id': int(cls), 'bbox': [float(v) for v in box],
          'score': float(score), 'area': float(box[2] * box[3]), 'iscrowd': 0})

  def _coco(self, annotations):
    """A pycocotools COCO object over this evaluator's images and categories."""
    dataset = coco.COCO()
    dataset.dataset = {
        'images': [{'id': i} for i in self._image_ids.values()],
        'categories': self._categories,
        'annotations': annotations,
    }
    with contextlib.redirect_stdout(io.StringIO()):
      dataset.createIndex()
    return dataset

  def evaluate(self):
    """Runs COCOeval over everything added.

    Returns:
      {metric name: float}: the 12 COCO summary metrics named
      `DetectionBoxes_Precision/mAP`, `.../mAP@.50IOU`, `.../mAP@.75IOU`,
      `DetectionBoxes_Recall/AR@100`, ... and, when asked for,
      `DetectionBoxes_PerformanceByCategory/mAP/<category name>`.

    Raises:
      ValueError: if no image was added.
    """
    if not self._image_ids:
      raise ValueError('no images to evaluate: add groundtruth and detections first')
    groundtruth = self._coco(self._groundtruth)
    detections = self._coco(self._detections)
    evaluation = cocoeval.COCOeval(groundtruth, detections, iouType='bbox')
    evaluation.params.imgIds = sorted(self._image_ids.values())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      evaluation.evaluate()
      evaluation.accumulate()
      evaluation.summarize()
    logging.info('COCO box metrics over %d images:\n%s', len(self._image_ids),
                 printed.getvalue().rstrip())
    metrics = {_PREFIX + name: float(evaluation.stats[index])
               for name, index in SUMMARY_METRICS}
    if self._include_metrics_per_category:
      metrics.update(self._per_category_map(evaluation))
    return metrics

  def _per_category_map(self, evaluation):
    """AP over IoU .50:.95, all areas, 100 detections, for each category."""
    # precision: [iou thresholds, recall points, categories, area ranges, max dets];
    # -1 marks entries without groundtruth, as in COCOeval.summarize.
    precision = evaluation.eval['precision']
    all_areas = evaluation.params.areaRngLbl.index('all')
    max_dets = len(evaluation.params.maxDets) - 1
    result = {}
    for k, category_id in enumerate(evaluation.params.catIds):
      values = precision[:, :, k, all_areas, max_dets]
      values = values[values > -1]
      name = next(c['name'] for c in self._categories if c['id'] == category_id)
      result[PER_CATEGORY_PREFIX + name] = float(np.mean(values)) if values.size else -1.0
    return result


class ClassificationAccuracy:
  """Counts top-k hits of class scores against integer labels."""

  def __init__(self, top_k=(1, 5)):
    self._top_k = tuple(top_k)
    self.clear()

  def clear(self):
    self._hits = {k: 0 for k in self._top_k}
    self._count = 0

  def add_batch(self, scores, labels):
    """Adds a batch.

    Args:
      scores: float [B, num_classes] logits or probabilities.
      labels: int [B] 0-based class indices.

    Raises:
      ValueError: on shapes that do not fit or labels out of range.
    """
    scores = np.asarray(scores)
    labels = np.asarray(labels).reshape([-1]).astype(np.int64)
    if scores.ndim != 2 or scores.shape[0] != labels.shape[0]:
      raise ValueError('scores %s do not fit labels %s' % (scores.shape, labels.shape))
    if labels.size and (labels.min() < 0 or labels.max() >= scores.shape[1]):
      raise ValueError('labels must be in [0, %d), got %s' % (scores.shape[1], labels))
    # Rank of the true class: how many classes score strictly higher.
    true_scores = scores[np.arange(len(labels)), labels]
    rank = np.sum(scores > true_scores[:, None], axis=1)
    for k in self._top_k:
      self._hits[k] += int(np.sum(rank < k))
    self._count += len(labels)

  def evaluate(self):
    """Returns {'Accuracy/top_<k>': fraction} over everything added.

    Raises:
      ValueError: if nothing was added.
    """
    if not self._count:
      raise ValueError('no examples to evaluate')
    return {'Accuracy/top_%d' % k: self._hits[k] / self._count for k in self._top_k}
