"""Tests of models/rfcn_meta_arch.py on the tiny stride-8 extractor."""

import functools

import numpy as np
import tensorflow as tf

from core import balanced_positive_negative_sampler as sampler_lib
from core import grid_anchor_generator
from core import losses
from core import post_processing
from models import faster_rcnn_meta_arch
from models import rfcn_box_predictor
from models import rfcn_meta_arch
from models import two_stage_ops
from tests.models import faster_rcnn_testlib as faster_rcnn_test
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

NUM_CLASSES = 3
MAX_PROPOSALS = 20
MAX_DETECTIONS = 10


def build_model(is_training, number_of_stages=2, num_classes=NUM_CLASSES, extractor=None,
                bins=(2, 2), depth=8, crop_size=(4, 4), rpn_depth=12, stride=8,
                anchor_scales=(0.5, 1.0, 2.0)):
  predictor = rfcn_box_predictor.RfcnBoxPredictor(
      is_training=is_training, num_classes=num_classes,
      conv_hyperparams_fn=faster_rcnn_test.conv_arg_scope, num_spatial_bins=list(bins),
      depth=depth, crop_size=list(crop_size), box_code_size=4)
  return rfcn_meta_arch.RFCNMetaArch(
      is_training=is_training, num_classes=num_classes,
      image_resizer_fn=lambda images: (images, tf.tile(
          tf.shape(images)[None, 1:], [tf.shape(images)[0], 1])),
      feature_extractor=extractor or faster_rcnn_test.TinyExtractor(is_training),
      number_of_stages=number_of_stages,
      first_stage_anchor_generator=grid_anchor_generator.GridAnchorGenerator(
          scales=anchor_scales, aspect_ratios=(0.5, 1.0, 2.0), base_anchor_size=[32, 32],
          anchor_stride=[stride, stride]),
      first_stage_target_assigner=(
          faster_rcnn_meta_arch.create_faster_rcnn_target_assigner('proposal')),
      first_stage_atrous_rate=1,
      first_stage_box_predictor_arg_scope_fn=faster_rcnn_test.conv_arg_scope,
      first_stage_box_predictor_kernel_size=3, first_stage_box_predictor_depth=rpn_depth,
      first_stage_minibatch_size=32,
      first_stage_sampler=sampler_lib.BalancedPositiveNegativeSampler(0.5),
      first_stage_non_max_suppression_fn=functools.partial(
          post_processing.batch_multiclass_non_max_suppression, score_thresh=0.0,
          iou_thresh=0.7, max_size_per_class=MAX_PROPOSALS, max_total_size=MAX_PROPOSALS),
      first_stage_max_proposals=MAX_PROPOSALS, first_stage_localization_loss_weight=2.0,
      first_stage_objectness_loss_weight=1.0,
      crop_and_resize_fn=two_stage_ops.native_crop_and_resize,
      second_stage_target_assigner=(
          faster_rcnn_meta_arch.create_faster_rcnn_target_assigner('detection')),
      second_stage_rfcn_box_predictor=predictor, second_stage_batch_size=8,
      second_stage_sampler=sampler_lib.BalancedPositiveNegativeSampler(0.25),
      second_stage_non_max_suppression_fn=functools.partial(
          post_processing.batch_multiclass_non_max_suppression, score_thresh=0.0,
          iou_thresh=0.6, max_size_per_class=5, max_total_size=MAX_DETECTIONS),
      second_stage_score_conversion_fn=tf.nn.softmax,
      second_stage_localization_loss_weight=2.0,
      second_stage_classification_loss_weight=1.0,
      second_stage_classification_loss=losses.WeightedSoftmaxClassificationLoss(),
      hard_example_miner=None)


train_graph = faster_rcnn_test.train_graph


class RFCNMetaArchTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    tf.compat.v1.reset_default_graph()
    tf.compat.v1.set_random_seed(1)

  def test_variables_of_rpn_and_predictor_scopes(self):
    train_graph(build_model(is_training=True), faster_rcnn_test.image_batch())
    expected = {
        'Conv/weights': [3, 3, 16, 12], 'Conv/biases': [12],
        'FirstStageBoxPredictor/BoxEncodingPredictor/weights': [1, 1, 12, 36],
        'FirstStageBoxPredictor/BoxEncodingPredictor/biases': [36],
        'FirstStageBoxPredictor/ClassPredictor/weights': [1, 1, 12, 18],
        'FirstStageBoxPredictor/ClassPredictor/biases': [18],
        'SecondStageBoxPredictor/reduce_depth/weights': [1, 1, 24, 8],
        'SecondStageBoxPredictor/reduce_depth/biases': [8],
        'SecondStageBoxPredictor/refined_locations/weights': [1, 1, 8, 4 * 3 * 4],
        'SecondStageBoxPredictor/refined_locations/biases': [4 * 3 * 4],
        'SecondStageBoxPredictor/class_predictions/weights': [1, 1, 8, 4 * 4],
        'SecondStageBoxPredictor/class_predictions/biases': [4 * 4],
        # The box classifier runs on the whole RPN feature map.
        'SecondStageFeatureExtractor/conv3/weights': [3, 3, 16, 24],
        'SecondStageFeatureExtractor/conv3/biases': [24],
    }
    actual = {name: shape for name, shape in zoo_testlib.graph_variables().items()
              if not name.startswith('FirstStageFeatureExtractor')}
    self.assertEqual(zoo_testlib.layout_difference(expected, actual), '')

  def test_zoo_layout_rfcn_resnet101_coco(self):
    extractor = faster_rcnn_test.TinyExtractor(True, depth=1024, box_depth=2048,
                                               zoo_like=True)
    model = build_model(is_training=True, num_classes=90, extractor=extractor, bins=(3, 3),
                        depth=1024, crop_size=(18, 18), rpn_depth=512, stride=16,
                        anchor_scales=(0.25, 0.5, 1.0, 2.0))
    train_graph(model, faster_rcnn_test.image_batch())
    scopes = ('Conv/', 'FirstStageBoxPredictor/', 'SecondStageBoxPredictor/')
    expected = {n: s for n, s in zoo_testlib.reference_variables(
        'rfcn_resnet101_coco.config').items() if n.startswith(scopes)}
    actual = {n: s for n, s in zoo_testlib.graph_variables().items() if n.startswith(scopes)}
    self.assertEqual(zoo_testlib.layout_difference(expected, actual), '')

  def test_predict_and_postprocess_with_dynamic_image_size(self):
    model = build_model(is_training=False)
    images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    preprocessed, shapes = model.preprocess(images)
    predictions = model.predict(preprocessed, shapes)
    detections = model.postprocess(predictions, shapes)
    feed = {images: faster_rcnn_test.image_batch(1, 72, 96)}
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      p, d = sess.run([predictions, detections], feed)
    self.assertEqual(p['rpn_box_encodings'].shape, (1, 9 * 12 * 9, 4))
    self.assertEqual(p['refined_box_encodings'].shape, (MAX_PROPOSALS, NUM_CLASSES, 4))
    self.assertEqual(p['class_predictions_with_background'].shape,
                     (MAX_PROPOSALS, NUM_CLASSES + 1))
    self.assertEqual(p['box_classifier_features'].shape, (1, 9, 12, 24))
    self.assertEqual(d['detection_boxes'].shape, (1, MAX_DETECTIONS, 4))
    self.assertGreater(d['num_detections'][0], 0)
    self.assertTrue(np.all(d['detection_boxes'] >= 0) and np.all(d['detection_boxes'] <= 1))

  def test_loss_keys_finite_and_decreasing(self):
    model = build_model(is_training=True)
    _, loss_dict, _ = train_graph(model, faster_rcnn_test.image_batch(seed=3))
    self.assertEqual(sorted(loss_dict), sorted([
        'Loss/RPNLoss/localization_loss', 'Loss/RPNLoss/objectness_loss',
        'Loss/BoxClassifierLoss/localization_loss',
        'Loss/BoxClassifierLoss/classification_loss']))
    total = tf.add_n(list(loss_dict.values()))
    train = tf.compat.v1.train.GradientDescentOptimizer(0.2).minimize(total)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      history = [sess.run([total, train])[0] for _ in range(50)]
    self.assertTrue(np.all(np.isfinite(history)))
    # Sampling makes single steps noisy; compare the first and last ten.
    self.assertLess(np.mean(history[-10:]), 0.6 * np.mean(history[:10]))

  def test_batch_of_two_images(self):
    model = build_model(is_training=True)
    predictions, loss_dict, shapes = train_graph(model, faster_rcnn_test.image_batch(2))
    detections = model.postprocess(predictions, shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      values, boxes = sess.run([loss_dict, detections['detection_boxes']])
    self.assertTrue(all(np.isfinite(v) for v in values.values()))
    self.assertEqual(boxes.shape, (2, MAX_DETECTIONS, 4))

  def test_number_of_stages_one_and_three(self):
    model = build_model(is_training=False, number_of_stages=1)
    preprocessed, shapes = model.preprocess(tf.constant(faster_rcnn_test.image_batch()))
    detections = model.postprocess(model.predict(preprocessed, shapes), shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      self.assertEqual(sess.run(detections['detection_boxes']).shape,
                       (1, MAX_PROPOSALS, 4))
    with self.assertRaisesRegex(ValueError, 'number_of_stages'):
      build_model(is_training=False, number_of_stages=3)


if __name__ == '__main__':
  tf.test.main()
