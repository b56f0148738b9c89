"""Tests of models/faster_rcnn_meta_arch.py (Faster R-CNN and Mask R-CNN).

A two-conv feature extractor (stride 8) on 64..96 px images keeps every
session small; the real anchor generator, samplers, target assigners, box
predictors and NMS are used.
"""


import numpy as np
import tensorflow as tf

from core import hard_example_miner as miner_lib
from models import faster_rcnn_detections
from models import faster_rcnn_losses
from models import faster_rcnn_meta_arch as meta_arch
from tests.models import faster_rcnn_testlib
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

# The tiny model and its inputs, shared with the R-FCN tests.
NUM_CLASSES = faster_rcnn_testlib.NUM_CLASSES
MAX_PROPOSALS = faster_rcnn_testlib.MAX_PROPOSALS
MAX_DETECTIONS = faster_rcnn_testlib.MAX_DETECTIONS
MASK_SIZE = faster_rcnn_testlib.MASK_SIZE
TinyExtractor = faster_rcnn_testlib.TinyExtractor
conv_arg_scope = faster_rcnn_testlib.conv_arg_scope
fc_arg_scope = faster_rcnn_testlib.fc_arg_scope
build_model = faster_rcnn_testlib.build_model
image_batch = faster_rcnn_testlib.image_batch
provide_one_box_each = faster_rcnn_testlib.provide_one_box_each
run = faster_rcnn_testlib.run
_train_graph = faster_rcnn_testlib.train_graph


class FasterRCNNMetaArchTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    tf.compat.v1.reset_default_graph()
    tf.compat.v1.set_random_seed(1)

  def test_variables_of_rpn_and_predictor_scopes(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    _train_graph(model, image_batch(), masks=True)
    expected = {
        'Conv/weights': [3, 3, 16, 12], 'Conv/biases': [12],
        'FirstStageBoxPredictor/BoxEncodingPredictor/weights': [1, 1, 12, 36],
        'FirstStageBoxPredictor/BoxEncodingPredictor/biases': [36],
        'FirstStageBoxPredictor/ClassPredictor/weights': [1, 1, 12, 18],
        'FirstStageBoxPredictor/ClassPredictor/biases': [18],
        'SecondStageBoxPredictor/BoxEncodingPredictor/weights': [24, 12],
        'SecondStageBoxPredictor/BoxEncodingPredictor/biases': [12],
        'SecondStageBoxPredictor/ClassPredictor/weights': [24, 4],
        'SecondStageBoxPredictor/ClassPredictor/biases': [4],
        'SecondStageBoxPredictor/Conv/weights': [3, 3, 24, 8],
        'SecondStageBoxPredictor/Conv/biases': [8],
        'SecondStageBoxPredictor/Conv_1/weights': [3, 3, 8, 3],
        'SecondStageBoxPredictor/Conv_1/biases': [3],
    }
    actual = {name: shape for name, shape in zoo_testlib.graph_variables().items()
              if not name.startswith(('FirstStageFeatureExtractor',
                                      'SecondStageFeatureExtractor'))}
    self.assertEqual(zoo_testlib.layout_difference(expected, actual), '')

  def _assert_zoo_layout(self, config_name, **kwargs):
    extractor = TinyExtractor(True, depth=1024, box_depth=2048, zoo_like=True)
    model = build_model(is_training=True, num_classes=90, extractor=extractor,
                        anchor_scales=(0.25, 0.5, 1.0, 2.0), stride=16,
                        first_stage_box_predictor_depth=512, **kwargs)
    _train_graph(model, image_batch(), masks=kwargs.get('masks', False))
    scopes = ('Conv/', 'FirstStageBoxPredictor/', 'SecondStageBoxPredictor/')
    expected = {n: s for n, s in zoo_testlib.reference_variables(config_name).items()
                if n.startswith(scopes)}
    actual = {n: s for n, s in zoo_testlib.graph_variables().items() if n.startswith(scopes)}
    self.assertEqual(zoo_testlib.layout_difference(expected, actual), '')

  def test_zoo_layout_faster_rcnn_resnet50_coco(self):
    self._assert_zoo_layout('faster_rcnn_resnet50_coco.config', first_stage_atrous_rate=1)

  def test_zoo_layout_mask_rcnn_resnet50_atrous_coco(self):
    self._assert_zoo_layout(
        'mask_rcnn_resnet50_atrous_coco.config', number_of_stages=3, masks=True,
        first_stage_atrous_rate=2,
        mask_kwargs=dict(mask_height=33, mask_width=33, mask_prediction_conv_depth=0,
                         mask_prediction_num_conv_layers=4))

  def test_predict_with_dynamic_image_size(self):
    model = build_model(is_training=False)
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    preprocessed, shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, shapes)
    detections = model.postprocess(predictions, shapes)
    out = run({'p': predictions, 'd': detections}, {images: image_batch(1, 64, 96)})
    p, d = out['p'], out['d']
    num_anchors = 8 * 12 * 9
    self.assertEqual(p['rpn_box_encodings'].shape, (1, num_anchors, 4))
    self.assertEqual(p['rpn_objectness_predictions_with_background'].shape,
                     (1, num_anchors, 2))
    self.assertEqual(p['anchors'].shape, (num_anchors, 4))
    self.assertTrue(np.all(p['anchors'] >= 0.0) and np.all(p['anchors'] <= 1.0))
    self.assertEqual(p['refined_box_encodings'].shape, (MAX_PROPOSALS, NUM_CLASSES, 4))
    self.assertEqual(p['class_predictions_with_background'].shape,
                     (MAX_PROPOSALS, NUM_CLASSES + 1))
    self.assertEqual(p['proposal_boxes'].shape, (1, MAX_PROPOSALS, 4))
    self.assertLessEqual(p['proposal_boxes'][..., 2].max(), 64.0)
    self.assertEqual(d['detection_boxes'].shape, (1, MAX_DETECTIONS, 4))
    self.assertEqual(d['detection_scores'].shape, (1, MAX_DETECTIONS))
    self.assertEqual(d['detection_classes'].shape, (1, MAX_DETECTIONS))
    self.assertTrue(np.all(d['detection_classes'] < NUM_CLASSES))
    self.assertGreater(d['num_detections'][0], 0)
    n = int(d['num_detections'][0])
    # detection_multiclass_scores row = the source proposal's scores.
    self.assertAllClose(d['detection_multiclass_scores'][0, np.arange(n),
                                                          d['detection_classes'][0, :n]
                                                          .astype(int) + 1],
                        d['detection_scores'][0, :n])

  def test_training_prunes_anchors_crossing_the_border(self):
    model = build_model(is_training=True, number_of_stages=1)
    predictions, _, _ = _train_graph(model, image_batch())
    anchors = run(predictions['anchors'])
    self.assertLess(anchors.shape[0], 8 * 8 * 9)
    self.assertTrue(np.all(anchors >= 0.0) and np.all(anchors <= 1.0))

  def test_loss_keys_and_finite_values(self):
    model = build_model(is_training=True)
    predictions, loss_dict, _ = _train_graph(model, image_batch())
    self.assertEqual(sorted(loss_dict), sorted([
        'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss',
        'Loss/BoxClassifierLoss/localization_loss',
        'Loss/BoxClassifierLoss/classification_loss']))
    values, num_proposals = run([loss_dict, predictions['num_proposals']])
    for name, value in values.items():
      self.assertTrue(np.isfinite(value), name)
    self.assertGreater(values['Loss/BoxClassifierLoss/classification_loss'], 0.0)
    self.assertLessEqual(num_proposals[0], 8)  # second_stage_batch_size

  def test_perfect_rpn_predictions_give_zero_localization_loss(self):
    model = build_model(is_training=True, number_of_stages=1)
    predictions, _, _ = _train_graph(model, image_batch())
    gt = tf.constant([[0.25, 0.25, 0.75, 0.7]])
    assigner = meta_arch.create_faster_rcnn_target_assigner('proposal')
    cls_targets, _, reg_targets, _, _ = assigner.assign(predictions['anchors'], gt)
    perfect = dict(predictions)
    perfect['rpn_box_encodings'] = reg_targets[None]
    # Uninformative logits cost exactly log(2) per sampled anchor.
    perfect['rpn_objectness_predictions_with_background'] = tf.zeros_like(
        predictions['rpn_objectness_predictions_with_background'])
    loss_dict = model.loss(perfect, None)
    values, positives = run([loss_dict, tf.reduce_sum(cls_targets)])
    self.assertGreater(positives, 0)
    self.assertAllClose(values['Loss/RPNLoss/localization_loss'], 0.0, atol=1e-5)
    self.assertAllClose(values['Loss/RPNLoss/objectness_loss'], np.log(2.0), atol=1e-5)

  def test_box_classifier_loss_by_hand(self):
    model = build_model(is_training=True)
    gt = [0.25, 0.25, 0.75, 0.7]
    model.provide_groundtruth([tf.constant([gt])], [tf.one_hot([1], NUM_CLASSES)])
    refined = np.zeros((3, NUM_CLASSES, 4), np.float32)
    refined[0, 1] = [1.0, 0.0, 0.0, 0.0]  # target class 1: smooth L1 0.5
    refined[0, 2] = [9.0, 9.0, 9.0, 9.0]  # other classes do not count
    refined[2] = 7.0                      # neither does the padded proposal
    predictions = {
        'image_shape': tf.constant([1, 64, 64, 3]),
        'anchors': tf.constant([[0.0, 0.0, 0.5, 0.5]]),
        'rpn_box_encodings': tf.zeros([1, 1, 4]),
        'rpn_objectness_predictions_with_background': tf.zeros([1, 1, 2]),
        'refined_box_encodings': tf.constant(refined),
        'class_predictions_with_background': tf.zeros([3, NUM_CLASSES + 1]),
        'proposal_boxes_normalized': tf.constant([[gt, [0.0, 0.0, 0.2, 0.2],
                                                   [0.0, 0.0, 0.0, 0.0]]]),
        'num_proposals': tf.constant([2]),
    }
    values = run(model.loss(predictions, None))
    # Two real proposals: 0.5 / 2 (x weight 2); each costs log(4) (x weight 1).
    self.assertAllClose(values['Loss/BoxClassifierLoss/localization_loss'], 0.5)
    self.assertAllClose(values['Loss/BoxClassifierLoss/classification_loss'], np.log(4.0))

  def test_mask_targets_follow_the_true_image_frame(self):
    # The image is 64 x 64 of which the top 32 rows are content; the mask
    # covers that content only (32 x 64), object rows 12..31 of it.
    mask = np.zeros((1, 32, 64), np.float32)
    mask[0, 12:] = 1.0
    box = [0.25, 0.0, 0.5, 1.0]  # padded-image frame: mask rows 16..31
    proposals = tf.constant([[box]])
    _, _, _, targets = faster_rcnn_losses.assign_box_classifier_targets(
        meta_arch.create_faster_rcnn_target_assigner('detection'), NUM_CLASSES, proposals,
        tf.constant([1]), [tf.constant([box])], [tf.one_hot([1], NUM_CLASSES + 1)],
        [tf.ones([1])])
    window = tf.constant([[0.0, 0.0, 0.5, 1.0]])
    confident = tf.fill([1, 1, 4, 4], 10.0)
    in_true_frame = faster_rcnn_losses.mask_loss(confident, proposals, targets,
                                                 [tf.constant(mask)], window)
    in_padded_frame = faster_rcnn_losses.mask_loss(confident, proposals, targets,
                                                   [tf.constant(mask)], None)
    uncertain = faster_rcnn_losses.mask_loss(tf.zeros([1, 1, 4, 4]), proposals, targets,
                                             [tf.constant(mask)], window)
    true_frame, padded_frame, log2 = run([in_true_frame, in_padded_frame, uncertain])
    self.assertLess(true_frame, 1e-3)
    self.assertGreater(padded_frame, 1.0)
    self.assertAllClose(log2, np.log(2.0))

  def test_detection_source_indices(self):
    candidate_boxes = tf.constant([[[[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.4, 0.4]],
                                    [[0.5, 0.5, 1.0, 1.0], [0.6, 0.6, 0.9, 0.9]],
                                    [[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.4, 0.4]]]])
    candidate_scores = tf.constant([[[0.9, 0.1], [0.2, 0.7], [0.3, 0.6]]])
    indices = faster_rcnn_detections.detection_source_indices(
        tf.constant([[[0.1, 0.1, 0.4, 0.4], [0.0, 0.0, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]]]),
        tf.constant([[0.6, 0.9, 0.7]]), tf.constant([[1.0, 0.0, 1.0]]),
        candidate_boxes, candidate_scores)
    self.assertAllEqual(run(indices), [[2, 0, 1]])

  def test_training_with_dynamic_image_size_and_masks(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    masks = tf.compat.v1.placeholder(tf.float32, [1, None, None])
    preprocessed, shapes = model.preprocess(images)
    model.provide_groundtruth([tf.constant([[0.25, 0.25, 0.75, 0.7]])],
                              [tf.one_hot([1], NUM_CLASSES)], groundtruth_masks_list=[masks])
    loss_dict = model.loss(model.predict(preprocessed, shapes), shapes)
    mask = np.zeros((1, 72, 88), np.float32)
    mask[0, 18:54, 22:61] = 1.0
    values = run(loss_dict, {images: image_batch(1, 72, 88), masks: mask})
    self.assertEqual(len(values), 5)
    self.assertTrue(all(np.isfinite(v) for v in values.values()))

  def test_evaluation_losses_with_masks_of_detections(self):
    model = build_model(is_training=False, number_of_stages=3, masks=True)
    images = image_batch(2)
    preprocessed, shapes = model.preprocess(tf.constant(images))
    provide_one_box_each(model, batch=2, masks=True)
    predictions = model.predict(preprocessed, shapes)
    values, masks = run([model.loss(predictions, shapes),
                         predictions['detection_masks']])
    self.assertIn('Loss/BoxClassifierLoss/mask_loss', values)
    self.assertTrue(all(np.isfinite(v) for v in values.values()))
    self.assertEqual(masks.shape, (2, MAX_DETECTIONS, MASK_SIZE, MASK_SIZE))

  def test_training_steps_reduce_the_loss(self):
    model = build_model(is_training=True)
    _, loss_dict, _ = _train_graph(model, image_batch(seed=3))
    total = tf.add_n(list(loss_dict.values()))
    train = tf.compat.v1.train.GradientDescentOptimizer(0.2).minimize(total)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      history = [sess.run([total, train])[0] for _ in range(50)]
    self.assertTrue(np.all(np.isfinite(history)))
    # Sampling makes single steps noisy; compare the first and last ten.
    self.assertLess(np.mean(history[-10:]), 0.6 * np.mean(history[:10]))

  def test_gradients_reach_every_trainable_variable(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    _, loss_dict, _ = _train_graph(model, image_batch(), masks=True)
    total = tf.add_n(list(loss_dict.values()))
    variables = tf.compat.v1.trainable_variables()
    gradients = tf.gradients(total, variables)
    missing = [v.op.name for v, g in zip(variables, gradients) if g is None]
    self.assertEqual(missing, [])

  def test_raw_detections_and_final_box_features(self):
    model = build_model(is_training=False, return_raw_detections_during_predict=True,
                        output_final_box_features=True)
    preprocessed, shapes = model.preprocess(tf.constant(image_batch(2)))
    predictions = model.predict(preprocessed, shapes)
    detections = model.postprocess(predictions, shapes)
    raw, features = run([predictions['raw_detection_boxes'],
                         detections['detection_features']])
    self.assertEqual(raw.shape, (2, MAX_PROPOSALS, NUM_CLASSES, 4))
    self.assertTrue(np.all((raw >= 0) & (raw <= 1)))
    self.assertEqual(features.shape, (2, MAX_DETECTIONS, 3, 3, 24))
    pooled = tf.compat.v1.get_default_graph().get_tensor_by_name(
        'SecondStageDetectionFeaturesExtract/pooled_detection_features:0')
    self.assertEqual(pooled.shape.ndims, 3)

  def test_number_of_stages_one_returns_proposals(self):
    model = build_model(is_training=False, number_of_stages=1)
    preprocessed, shapes = model.preprocess(tf.constant(image_batch()))
    detections = run(model.postprocess(model.predict(preprocessed, shapes), shapes))
    self.assertEqual(detections['detection_boxes'].shape, (1, MAX_PROPOSALS, 4))
    self.assertAllEqual(detections['detection_classes'], np.zeros((1, MAX_PROPOSALS)))
    self.assertEqual(detections['raw_detection_scores'].shape, (1, 8 * 8 * 9, 2))
    self.assertGreater(detections['num_detections'][0], 0)

  def test_number_of_stages_three_predicts_masks_of_detections(self):
    model = build_model(is_training=False, number_of_stages=3, masks=True)
    preprocessed, shapes = model.preprocess(tf.constant(image_batch(1, 64, 80)))
    predictions = model.predict(preprocessed, shapes)
    detections = run(model.postprocess(predictions, shapes))
    self.assertEqual(detections['detection_masks'].shape,
                     (1, MAX_DETECTIONS, MASK_SIZE, MASK_SIZE))
    self.assertTrue(np.all((detections['detection_masks'] >= 0) &
                           (detections['detection_masks'] <= 1)))
    self.assertEqual(detections['detection_boxes'].shape, (1, MAX_DETECTIONS, 4))

  def test_mask_loss_in_training(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    predictions, loss_dict, shapes = _train_graph(model, image_batch(), masks=True)
    self.assertIn('Loss/BoxClassifierLoss/mask_loss', loss_dict)
    detections = model.postprocess(predictions, shapes)
    values, masks, mask_predictions = run([
        loss_dict, detections['detection_masks'], predictions['mask_predictions']])
    self.assertEqual(mask_predictions.shape, (8, NUM_CLASSES, MASK_SIZE, MASK_SIZE))
    self.assertTrue(np.isfinite(values['Loss/BoxClassifierLoss/mask_loss']))
    self.assertGreater(values['Loss/BoxClassifierLoss/mask_loss'], 0.0)
    self.assertEqual(masks.shape, (1, MAX_DETECTIONS, MASK_SIZE, MASK_SIZE))

  def test_mask_loss_needs_groundtruth_masks(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    with self.assertRaisesRegex(ValueError, 'groundtruth_masks_list'):
      _train_graph(model, image_batch(), masks=False)

  def test_batch_of_two_images(self):
    model = build_model(is_training=True, number_of_stages=3, masks=True)
    predictions, loss_dict, shapes = _train_graph(model, image_batch(2), masks=True)
    detections = model.postprocess(predictions, shapes)
    values, boxes, refined = run([loss_dict, detections['detection_boxes'],
                                  predictions['refined_box_encodings']])
    self.assertTrue(all(np.isfinite(v) for v in values.values()))
    self.assertEqual(boxes.shape, (2, MAX_DETECTIONS, 4))
    self.assertEqual(refined.shape, (2 * 8, NUM_CLASSES, 4))

  def test_hard_example_miner_sees_all_proposals(self):
    miner = miner_lib.HardExampleMiner(num_hard_examples=4, iou_threshold=0.99,
                                       loss_type='cls')
    model = build_model(is_training=True, hard_example_miner=miner)
    predictions, loss_dict, _ = _train_graph(model, image_batch())
    values, refined = run([loss_dict, predictions['refined_box_encodings']])
    self.assertEqual(refined.shape[0], MAX_PROPOSALS)
    self.assertTrue(all(np.isfinite(v) for v in values.values()))

  def test_restore_map(self):
    model = build_model(is_training=True)
    _train_graph(model, image_batch())
    classification = model.restore_map('classification')
    self.assertIn('conv1/weights', classification)
    self.assertIn('conv3/weights', classification)
    detection = model.restore_map('detection')
    self.assertIn('FirstStageFeatureExtractor/conv1/weights', detection)
    self.assertNotIn('Conv/weights', detection)
    everything = model.restore_map('detection', load_all_detection_checkpoint_vars=True)
    self.assertIn('SecondStageBoxPredictor/ClassPredictor/weights', everything)
    with self.assertRaisesRegex(ValueError, 'fine_tune_checkpoint_type'):
      model.restore_map('segmentation')

  def test_target_assigner_settings(self):
    with self.assertRaisesRegex(ValueError, 'stage'):
      meta_arch.create_faster_rcnn_target_assigner('final')
    assigner = meta_arch.create_faster_rcnn_target_assigner('proposal')
    anchors = tf.constant([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.6], [0.0, 0.0, 1.0, 0.4],
                           [0.0, 0.8, 1.0, 1.0]])
    _, cls_weights, _, _, match = assigner.assign(anchors, tf.constant([[0.0, 0.0, 1.0, 0.5]]))
    # IoUs 0.5 (ignored), 0.83 (positive), 0.8 (positive), 0 (negative).
    results, weights = run([match.match_results, cls_weights])
    self.assertAllEqual(results, [-2, 0, 0, -1])
    self.assertAllEqual(weights, [0, 1, 1, 1])


if __name__ == '__main__':
  tf.test.main()
