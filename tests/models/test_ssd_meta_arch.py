"""Tests of models/ssd_meta_arch.py: output shapes, losses, postprocess,
restore maps for both fine-tune types, clone reuse, and overfitting a tiny batch."""

import numpy as np
import tensorflow as tf
import tf_slim as slim
from google.protobuf import text_format

from builders import feature_extractor_registry
from builders import hyperparams_builder

from core import anchor_generator
from core import box_coder
from core import hard_example_miner
from core import losses
from core import matcher
from core import post_processing
from models import box_predictor
from models import slim_classifier
from models import ssd_meta_arch
from protos import hyperparams_pb2

tf.compat.v1.disable_eager_execution()

NUM_LAYERS = 3
_EXTRACTOR_HYPERPARAMS = """
  activation: RELU_6
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { variance_scaling_initializer { factor: 2.0 } }
  batch_norm { decay: 0.99 scale: true }
"""
_PREDICTOR_HYPERPARAMS = """
  activation: RELU_6
  regularizer { l2_regularizer { weight: 0.00004 } }
  initializer { truncated_normal_initializer { stddev: 0.03 } }
"""


def hyperparams(is_training, text):
  """conv_hyperparams_fn of a Hyperparams text proto."""
  return hyperparams_builder.build(text_format.Parse(text, hyperparams_pb2.Hyperparams()),
                                   is_training)


def build_ssd(is_training=True, num_classes=3, size=64, extractor='small_mobilenet_v1',
              depth_multiplier=0.25, miner=True):
  """A small SSD: 3 feature maps (8x8, 4x4, 2x2 for 64x64 inputs)."""
  generator = anchor_generator.create_ssd_anchors(
      num_layers=NUM_LAYERS, min_scale=0.2, max_scale=0.8, aspect_ratios=(1.0, 2.0, 0.5))
  return ssd_meta_arch.SSDMetaArch(
      is_training=is_training,
      anchor_generator=generator,
      box_predictor=box_predictor.ConvolutionalBoxPredictor(
          is_training, num_classes, hyperparams(is_training, _PREDICTOR_HYPERPARAMS),
          min_depth=0, max_depth=0, num_layers_before_predictor=0, use_dropout=False,
          dropout_keep_prob=0.8, kernel_size=3, box_code_size=4),
      box_coder=box_coder.FasterRcnnBoxCoder(),
      feature_extractor=feature_extractor_registry.lookup(extractor)(
          is_training, depth_multiplier=depth_multiplier, min_depth=8, pad_to_multiple=1,
          conv_hyperparams_fn=hyperparams(is_training, _EXTRACTOR_HYPERPARAMS),
          num_layers=NUM_LAYERS),
      matcher=matcher.ArgMaxMatcher(0.5, 0.4, force_match_for_each_row=True),
      image_resizer_fn=ssd_meta_arch.fixed_shape_resizer(size, size),
      non_max_suppression_fn=post_processing.non_max_suppression_fn(0.01, 0.6, 10, 10),
      score_conversion_fn=post_processing.score_converter_fn('SIGMOID'),
      classification_loss=losses.WeightedSigmoidClassificationLoss(),
      localization_loss=losses.WeightedSmoothL1LocalizationLoss(),
      hard_example_miner=hard_example_miner.HardExampleMiner(
          3000, 0.99, 'cls', max_negatives_per_positive=3, min_negatives_per_image=3)
      if miner else None)


def synthetic_batch(num_images, size, seed=0):
  """Images with 1-2 bright rectangles (class 0) or bright-ish squares (class 1)."""
  rng = np.random.RandomState(seed)
  images, boxes, classes = [], [], []
  for _ in range(num_images):
    image = np.full([size, size, 3], 30.0, np.float32) + rng.normal(0, 5, [size, size, 3])
    image_boxes, image_classes = [], []
    for k in range(rng.randint(1, 3)):
      h, w = rng.randint(size // 4, size // 2, size=2)
      y, x = (0, 0) if k == 0 else (size - h, size - w)
      cls = rng.randint(2)
      image[y:y + h, x:x + w] = [230.0, 40.0, 40.0] if cls == 0 else [40.0, 230.0, 230.0]
      image_boxes.append([y / size, x / size, (y + h) / size, (x + w) / size])
      image_classes.append(cls)
    images.append(image)
    boxes.append(np.array(image_boxes, np.float32))
    classes.append(np.array(image_classes, np.int32))
  return np.stack(images), boxes, classes


def iou(a, b):
  inter = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
  union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
  return inter / union


class SSDMetaArchTest(tf.test.TestCase):

  def test_output_shapes_batch_2(self):
    with tf.Graph().as_default():
      model = build_ssd()
      images = tf.compat.v1.placeholder(tf.float32, [2, 50, 70, 3])
      preprocessed, shapes = model.preprocess(images)
      model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.5]]), tf.zeros([0, 4])],
                                [tf.constant([[0.0, 1.0, 0.0]]), tf.zeros([0, 3])])
      predictions = model.predict(preprocessed, shapes)
      loss_dict = model.loss(predictions, shapes)
      detections = model.postprocess(predictions, shapes)
      num_anchors = 8 * 8 * 3 + 4 * 4 * 4 + 2 * 2 * 4
      self.assertEqual(preprocessed.shape.as_list(), [2, 64, 64, 3])
      self.assertEqual(predictions['box_encodings'].shape.as_list(), [2, num_anchors, 4])
      self.assertEqual(predictions['class_predictions_with_background'].shape.as_list(),
                       [2, num_anchors, 4])
      self.assertEqual(predictions['anchors'].shape.as_list(), [num_anchors, 4])
      self.assertEqual([f.shape.as_list()[1:3] for f in predictions['feature_maps']],
                       [[8, 8], [4, 4], [2, 2]])
      self.assertEqual(sorted(loss_dict),
                       ['Loss/classification_loss', 'Loss/localization_loss'])
      self.assertEqual(model.num_classes, 3)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        feed = {images: np.random.RandomState(0).uniform(0, 255, [2, 50, 70, 3])}
        pre, true_shapes, losses_out, dets = sess.run(
            [preprocessed, shapes, loss_dict, detections], feed)
    self.assertAllEqual(true_shapes, [[64, 64, 3], [64, 64, 3]])
    self.assertTrue(-1.0 <= pre.min() and pre.max() <= 1.0)
    for value in losses_out.values():
      self.assertTrue(np.isfinite(value) and value > 0)
    self.assertEqual(dets['detection_boxes'].shape, (2, 10, 4))
    self.assertEqual(dets['detection_scores'].shape, (2, 10))
    self.assertEqual(dets['detection_classes'].shape, (2, 10))
    self.assertEqual(dets['num_detections'].shape, (2,))
    self.assertEqual(dets['raw_detection_scores'].shape, (2, num_anchors, 3))
    self.assertTrue(np.all(dets['detection_classes'] >= 0) and
                    np.all(dets['detection_classes'] <= 2))
    self.assertTrue(np.all(dets['detection_boxes'] >= 0) and
                    np.all(dets['detection_boxes'] <= 1))

  def test_restore_map_types(self):
    with tf.Graph().as_default():
      model = build_ssd()
      preprocessed, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
      model.predict(preprocessed, shapes)
      tf.compat.v1.train.get_or_create_global_step()
      # Another model object (as the trainer uses) sees the same variables.
      other = build_ssd()
      classification = other.restore_map('classification')
      detection = other.restore_map('detection')
      full = other.restore_map('full')
      names = {v.op.name for v in slim.get_model_variables()}
    self.assertIn('SmallMobilenetV1/Conv2d_0/weights', classification)
    self.assertIn('SmallMobilenetV1/Conv2d_1_depthwise/BatchNorm/moving_mean', classification)
    self.assertFalse([k for k in classification if not k.startswith('SmallMobilenetV1/')])
    self.assertEqual(classification['SmallMobilenetV1/Conv2d_0/weights'].op.name,
                     'FeatureExtractor/SmallMobilenetV1/Conv2d_0/weights')
    self.assertEqual(set(detection), names)
    self.assertIn('BoxPredictor_0/ClassPredictor/weights', detection)
    self.assertFalse([k for k in classification if 'BoxPredictor' in k or 'Extra' in k])
    self.assertIn('global_step', full)
    self.assertNotIn('global_step', detection)
    with self.assertRaisesRegex(ValueError, 'fine_tune_checkpoint_type'):
      other.restore_map('imagenet')

  def test_classification_map_matches_classifier_checkpoint_names(self):
    for extractor, net in [('small_mobilenet_v1', 'small_mobilenet_v1'),
                           ('small_resnet', 'small_resnet')]:
      with tf.Graph().as_default():
        classifier = slim_classifier.SlimClassifier(True, 10, net=net, image_height=64,
                                                    image_width=64, depth_multiplier=0.25)
        images, _ = classifier.preprocess(tf.zeros([1, 64, 64, 3]))
        classifier.predict(images)
        classifier_vars = {v.op.name: v.shape.as_list() for v in slim.get_model_variables()}
      with tf.Graph().as_default():
        model = build_ssd(extractor=extractor)
        images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
        model.predict(images, shapes)
        ssd_map = model.restore_map('classification')
      self.assertTrue(ssd_map)
      for name, var in ssd_map.items():
        self.assertIn(name, classifier_vars)
        self.assertEqual(var.shape.as_list(), classifier_vars[name], name)

  def test_detection_map_across_num_classes(self):
    shapes = {}
    for num_classes in (3, 5):
      with tf.Graph().as_default():
        model = build_ssd(num_classes=num_classes)
        images, true_shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
        model.predict(images, true_shapes)
        shapes[num_classes] = {k: v.shape.as_list()
                               for k, v in model.restore_map('detection').items()}
    self.assertEqual(set(shapes[3]), set(shapes[5]))
    differing = sorted(k for k in shapes[3] if shapes[3][k] != shapes[5][k])
    self.assertTrue(differing)
    self.assertTrue(all('/ClassPredictor/' in k for k in differing), differing)

  def test_clones_share_variables(self):
    with tf.Graph().as_default():
      losses_per_clone = []
      for clone in range(2):
        with tf.compat.v1.name_scope('clone_%d' % clone):
          with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                           reuse=True if clone else None):
            model = build_ssd()
            images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
            model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.5, 0.5]])],
                                      [tf.constant([[1.0, 0.0, 0.0]])])
            losses_per_clone.append(model.loss(model.predict(images, shapes), shapes))
            if clone == 0:
              num_vars = len(tf.compat.v1.global_variables())
      self.assertEqual(len(tf.compat.v1.global_variables()), num_vars)
      self.assertEqual(sorted(losses_per_clone[1]), sorted(losses_per_clone[0]))

  def test_missing_groundtruth(self):
    with tf.Graph().as_default():
      model = build_ssd()
      images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
      predictions = model.predict(images, shapes)
      with self.assertRaisesRegex(RuntimeError, 'Groundtruth'):
        model.loss(predictions, shapes)

  def test_overfits_tiny_batch(self):
    size, num_images = 64, 4
    images_np, boxes_np, classes_np = synthetic_batch(num_images, size)
    with tf.Graph().as_default():
      tf.compat.v1.set_random_seed(0)
      model = build_ssd(num_classes=2, size=size)
      images = tf.constant(images_np)
      preprocessed, shapes = model.preprocess(images)
      model.provide_groundtruth([tf.constant(b) for b in boxes_np],
                                [tf.one_hot(c, 2) for c in classes_np])
      predictions = model.predict(preprocessed, shapes)
      loss_dict = model.loss(predictions, shapes)
      total = tf.add_n(list(loss_dict.values()))
      detections = model.postprocess(predictions, shapes)
      with tf.control_dependencies(model.updates()):
        train_op = tf.compat.v1.train.AdamOptimizer(0.005).minimize(total)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        first = sess.run(total)
        for _ in range(150):
          sess.run(train_op)
        last, dets = sess.run([total, detections])
    self.assertLess(last, 0.25 * first)
    for i in range(num_images):
      for box, cls in zip(boxes_np[i], classes_np[i]):
        best = max(range(int(dets['num_detections'][i])),
                   key=lambda j: iou(dets['detection_boxes'][i][j], box)
                   if dets['detection_classes'][i][j] == cls else -1)
        self.assertGreater(iou(dets['detection_boxes'][i][best], box), 0.5)
        self.assertEqual(dets['detection_classes'][i][best], cls)
      self.assertGreater(dets['detection_scores'][i][0], 0.5)


if __name__ == '__main__':
  tf.test.main()
