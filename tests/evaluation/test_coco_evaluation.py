"""COCO box metrics (pycocotools) and top-k accuracy on hand-made inputs."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from core import coco_evaluation

tf.compat.v1.disable_eager_execution()

CATEGORIES = [{'id': 1, 'name': 'cat'}, {'id': 2, 'name': 'dog'}]
MAP = 'DetectionBoxes_Precision/mAP'
MAP50 = 'DetectionBoxes_Precision/mAP@.50IOU'
MAP75 = 'DetectionBoxes_Precision/mAP@.75IOU'


def _gt(boxes, classes):
  return {'groundtruth_boxes': np.array(boxes, np.float32).reshape([-1, 4]),
          'groundtruth_classes': np.array(classes)}


def _det(boxes, scores, classes):
  return {'detection_boxes': np.array(boxes, np.float32).reshape([-1, 4]),
          'detection_scores': np.array(scores, np.float32),
          'detection_classes': np.array(classes)}


def _evaluate(images, per_category=True):
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES, per_category)
  for image_id, (gt, det) in enumerate(images):
    evaluator.add_single_ground_truth_image_info(image_id, gt)
    evaluator.add_single_detected_image_info(image_id, det)
  return evaluator.evaluate()


BOX_A = [10., 10., 50., 60.]   # 40 x 50 pixels
BOX_B = [60., 20., 90., 80.]


def test_perfect_detections_give_map_one():
  metrics = _evaluate([
      (_gt([BOX_A, BOX_B], [1, 2]), _det([BOX_A, BOX_B], [0.9, 0.8], [1, 2])),
      (_gt([BOX_B], [1]), _det([BOX_B], [0.7], [1])),
  ])
  for name in (MAP, MAP50, MAP75, 'DetectionBoxes_Recall/AR@100'):
    assert metrics[name] == pytest.approx(1.0), name
  assert metrics['DetectionBoxes_PerformanceByCategory/mAP/cat'] == pytest.approx(1.0)
  assert metrics['DetectionBoxes_PerformanceByCategory/mAP/dog'] == pytest.approx(1.0)


def test_all_od_api_metric_names_are_reported():
  metrics = _evaluate([(_gt([BOX_A], [1]), _det([BOX_A], [0.9], [1]))])
  expected = {'DetectionBoxes_' + name for name, _ in coco_evaluation.SUMMARY_METRICS}
  expected |= {'DetectionBoxes_PerformanceByCategory/mAP/cat',
               'DetectionBoxes_PerformanceByCategory/mAP/dog'}
  assert set(metrics) == expected
  # No groundtruth of class 'dog': COCO's "undefined" marker.
  assert metrics['DetectionBoxes_PerformanceByCategory/mAP/dog'] == -1.0


def test_one_of_two_objects_found_gives_half():
  # Category 'cat' found perfectly, category 'dog' missed: mAP is the mean.
  metrics = _evaluate([(_gt([BOX_A, BOX_B], [1, 2]), _det([BOX_A], [0.9], [1]))])
  assert metrics[MAP50] == pytest.approx(0.5)
  assert metrics['DetectionBoxes_PerformanceByCategory/mAP/cat'] == pytest.approx(1.0)
  assert metrics['DetectionBoxes_PerformanceByCategory/mAP/dog'] == pytest.approx(0.0)


def test_wrong_class_scores_zero():
  metrics = _evaluate([(_gt([BOX_A], [1]), _det([BOX_A], [0.9], [2]))])
  assert metrics[MAP] == 0.0
  assert metrics[MAP50] == 0.0


def test_iou_between_thresholds_counts_at_50_but_not_75():
  # Shifted by 10 of 50 pixels horizontally: IoU = 40*40 / (40*60) = 0.667.
  shifted = [10., 20., 50., 70.]
  metrics = _evaluate([(_gt([BOX_A], [1]), _det([shifted], [0.9], [1]))], per_category=False)
  assert metrics[MAP50] == pytest.approx(1.0)
  assert metrics[MAP75] == 0.0
  # IoU thresholds .50, .55, .60, .65 of the ten (.50:.05:.95) are met.
  assert metrics[MAP] == pytest.approx(0.4)
  assert not any(name.startswith('DetectionBoxes_PerformanceByCategory') for name in metrics)


def test_false_positive_ranked_first_halves_precision():
  # Two images, one object each; the highest-scoring detection is a false
  # positive, so the precision at recall 1/2 and 1 is 1/2 and 2/3.
  metrics = _evaluate([
      (_gt([BOX_A], [1]), _det([BOX_A, BOX_B], [0.5, 0.9], [1, 1])),
      (_gt([BOX_B], [1]), _det([BOX_B], [0.8], [1])),
  ], per_category=False)
  # 101-point interpolation: precision 2/3 at every recall point up to 1.
  assert metrics[MAP50] == pytest.approx(2.0 / 3.0, abs=1e-6)


def test_no_detections_give_zero():
  metrics = _evaluate([(_gt([BOX_A], [1]), _det(np.zeros([0, 4]), [], []))])
  assert metrics[MAP] == 0.0
  assert metrics['DetectionBoxes_Recall/AR@100'] == 0.0


def test_crowd_groundtruth_is_not_counted_as_missed():
  gt = _gt([BOX_A, BOX_B], [1, 1])
  gt['groundtruth_is_crowd'] = np.array([False, True])
  metrics = _evaluate([(gt, _det([BOX_A], [0.9], [1]))])
  assert metrics[MAP] == pytest.approx(1.0)


def test_bad_input_errors():
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  with pytest.raises(ValueError, match='no images'):
    evaluator.evaluate()
  with pytest.raises(ValueError, match='before its detections'):
    evaluator.add_single_detected_image_info('x', _det([BOX_A], [0.9], [1]))
  evaluator.add_single_ground_truth_image_info('x', _gt([BOX_A], [1]))
  with pytest.raises(ValueError, match='already added'):
    evaluator.add_single_ground_truth_image_info('x', _gt([BOX_A], [1]))
  with pytest.raises(ValueError, match=r'class ids \[7\]'):
    evaluator.add_single_detected_image_info('x', _det([BOX_A], [0.9], [7]))
  with pytest.raises(ValueError, match='1 detection boxes, 2 scores'):
    evaluator.add_single_detected_image_info('x',
                                             _det([BOX_A], [0.9, 0.1], [1]))
  with pytest.raises(ValueError, match='at least one category'):
    coco_evaluation.CocoDetectionEvaluator([])
  with pytest.raises(ValueError, match='not unique'):
    coco_evaluation.CocoDetectionEvaluator(CATEGORIES + [{'id': 1, 'name': 'x'}])


def test_clear_forgets_images():
  evaluator = coco_evaluation.CocoDetectionEvaluator(CATEGORIES)
  evaluator.add_single_ground_truth_image_info(0, _gt([BOX_A], [1]))
  evaluator.add_single_detected_image_info(0, _det([BOX_A], [0.9], [2]))
  assert evaluator.evaluate()[MAP] == 0.0
  evaluator.clear()
  evaluator.add_single_ground_truth_image_info(0, _gt([BOX_A], [1]))
  evaluator.add_single_detected_image_info(0, _det([BOX_A], [0.9], [1]))
  assert evaluator.evaluate()[MAP] == pytest.approx(1.0)


def test_top_k_accuracy():
  accuracy = coco_evaluation.ClassificationAccuracy(top_k=(1, 2))
  scores = np.array([[0.1, 0.7, 0.2],    # label 1: top-1 hit
                     [0.5, 0.3, 0.2],    # label 1: second -> top-2 hit
                     [0.6, 0.3, 0.1],    # label 2: third -> miss
                     [0.2, 0.2, 0.6]])   # label 2: top-1 hit
  accuracy.add_batch(scores[:2], [1, 1])
  accuracy.add_batch(scores[2:], [2, 2])
  assert accuracy.evaluate() == {'Accuracy/top_1': 0.5, 'Accuracy/top_2': 0.75}


def test_top_k_accuracy_errors():
  accuracy = coco_evaluation.ClassificationAccuracy()
  with pytest.raises(ValueError, match='no examples'):
    accuracy.evaluate()
  with pytest.raises(ValueError, match=r'labels must be in \[0, 3\)'):
    accuracy.add_batch(np.zeros([1, 3]), [3])
  with pytest.raises(ValueError, match='do not fit'):
    accuracy.add_batch(np.zeros([2, 3]), [0])


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
