"""Tests of models/box_predictor.py against the OD API's zoo SSD predictors.

For seven sample configs the predictor is built on zero feature maps of the
depths that config's feature extractor produces, and its variables must equal
the OD API's (everything outside FeatureExtractor/) name for name and shape
for shape, so the zoo checkpoints' heads restore. Also: output shapes, the
class-prediction bias init, projection layers, single-map scoping, errors.
"""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from models import box_predictor
from tests.models import zoo_testlib

tf.compat.v1.disable_eager_execution()

NUM_CLASSES = 90
# Map sizes are irrelevant to the variables (kernels are never shrunk), so
# small ones keep the graphs cheap.
SIX_MAP_SIZES = (6, 3, 2, 1, 1, 1)
FIVE_MAP_SIZES = (8, 4, 2, 1, 1)
# SSD anchor generator with reduce_boxes_in_lowest_layer: 3 anchors on the
# finest map, 5 aspect ratios + 1 interpolated scale elsewhere.
SSD_ANCHORS = (3, 6, 6, 6, 6, 6)


def _conv_predictor(kernel_size, use_depthwise=False, batch_norm=True, **kwargs):
  def build(is_training):
    args = dict(is_training=is_training, num_classes=NUM_CLASSES,
                conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(
                    is_training, batch_norm=batch_norm),
                min_depth=0, max_depth=0, num_layers_before_predictor=0,
                use_dropout=False, dropout_keep_prob=0.8, kernel_size=kernel_size,
                box_code_size=4, use_depthwise=use_depthwise)
    args.update(kwargs)
    return box_predictor.ConvolutionalBoxPredictor(**args)
  return build


def _shared_predictor(depth, num_layers, kernel_size, share_tower=False, use_depthwise=False):
  def build(is_training):
    return box_predictor.WeightSharedConvolutionalBoxPredictor(
        is_training=is_training, num_classes=NUM_CLASSES,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(
            is_training, batch_norm_decay=0.997),
        depth=depth, num_layers_before_predictor=num_layers, box_code_size=4,
        kernel_size=kernel_size, class_prediction_bias_init=-4.6,
        share_prediction_tower=share_tower, use_depthwise=use_depthwise)
  return build


# config name -> (predictor factory, feature map depths, sizes, anchors per location)
ZOO_PREDICTORS = {
    'ssd_mobilenet_v1_coco': (
        _conv_predictor(kernel_size=1),
        (512, 1024, 512, 256, 256, 128), SIX_MAP_SIZES, SSD_ANCHORS),
    'ssdlite_mobilenet_v2_coco': (
        _conv_predictor(kernel_size=3, use_depthwise=True),
        (576, 1280, 512, 256, 256, 128), SIX_MAP_SIZES, SSD_ANCHORS),
    'ssd_inception_v2_coco': (
        _conv_predictor(kernel_size=3, batch_norm=False),
        (576, 1024, 512, 256, 256, 128), SIX_MAP_SIZES, SSD_ANCHORS),
    'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync': (
        _shared_predictor(depth=256, num_layers=4, kernel_size=3),
        (256,) * 5, FIVE_MAP_SIZES, (6,) * 5),
    'ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco14_sync': (
        _shared_predictor(depth=256, num_layers=4, kernel_size=3),
        (256,) * 5, FIVE_MAP_SIZES, (6,) * 5),
    'ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync': (
        _shared_predictor(depth=512, num_layers=1, kernel_size=1, share_tower=True),
        (512,) * 6, SIX_MAP_SIZES, (6,) * 6),
    'ssd_mobilenet_v2_fpnlite_quantized_shared_box_predictor_256x256_'
    'depthmultiplier_75_coco14_sync': (
        _shared_predictor(depth=128, num_layers=4, kernel_size=3, share_tower=True,
                          use_depthwise=True),
        (96,) * 5, FIVE_MAP_SIZES, (6,) * 5),
}


def _zero_maps(depths, sizes, batch=1):
  return [tf.zeros([batch, size, size, depth]) for depth, size in zip(depths, sizes)]


def _predictor_variables(graph):
  return {name: shape for name, shape in zoo_testlib.graph_variables(graph=graph).items()
          if not name.startswith('FeatureExtractor/')}


def _reference_predictor_variables(config_name):
  return {name: shape for name, shape in
          zoo_testlib.reference_variables(config_name + '.config').items()
          if not name.startswith('FeatureExtractor/')}


def _run(outputs):
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    return sess.run(outputs)


class ZooLayoutTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*[(name[:60], name) for name in ZOO_PREDICTORS])
  def test_variables_and_output_shapes_match_od_api(self, config_name):
    build, depths, sizes, anchors = ZOO_PREDICTORS[config_name]
    with tf.Graph().as_default() as graph:
      out = build(is_training=True).predict(_zero_maps(depths, sizes), list(anchors))
      diff = zoo_testlib.layout_difference(_reference_predictor_variables(config_name),
                                           _predictor_variables(graph))
    self.assertEqual(diff, '', '\n' + diff)
    num_anchors = sum(size * size * a for size, a in zip(sizes, anchors))
    self.assertEqual(out[box_predictor.BOX_ENCODINGS].shape.as_list(), [1, num_anchors, 4])
    self.assertEqual(out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND].shape.as_list(),
                     [1, num_anchors, NUM_CLASSES + 1])


class BiasInitTest(tf.test.TestCase):

  def _class_logits_on_zero_maps(self, predictor, depths, sizes, anchors):
    with tf.Graph().as_default():
      out = predictor.predict(_zero_maps(depths, sizes), list(anchors))
      return _run(out)

  def test_convolutional_class_logits_start_at_the_bias_init(self):
    predictor = box_predictor.ConvolutionalBoxPredictor(
        is_training=False, num_classes=3,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(False),
        min_depth=0, max_depth=0, num_layers_before_predictor=0, use_dropout=False,
        dropout_keep_prob=0.8, kernel_size=3, box_code_size=4,
        class_prediction_bias_init=-4.6)
    out = self._class_logits_on_zero_maps(predictor, (16, 8), (4, 2), (3, 2))
    self.assertAllClose(out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND],
                        np.full([1, 4 * 4 * 3 + 2 * 2 * 2, 4], -4.6))
    self.assertAllClose(out[box_predictor.BOX_ENCODINGS], np.zeros([1, 56, 4]))

  def test_weight_shared_class_logits_start_at_the_bias_init(self):
    # In training mode batch norm maps the all-zero tower activations to beta = 0.
    predictor = _shared_predictor(depth=8, num_layers=2, kernel_size=3)(is_training=True)
    out = self._class_logits_on_zero_maps(predictor, (8, 8, 8), (4, 2, 1), (6, 6, 6))
    logits = out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]
    self.assertEqual(logits.shape, (1, (16 + 4 + 1) * 6, NUM_CLASSES + 1))
    self.assertAllClose(logits, np.full(logits.shape, -4.6))

  def test_ssdlite_class_predictor_keeps_a_zero_bias_like_the_od_api(self):
    predictor = _conv_predictor(kernel_size=3, use_depthwise=True,
                                class_prediction_bias_init=-4.6)(is_training=False)
    out = self._class_logits_on_zero_maps(predictor, (16,), (4,), (3,))
    self.assertAllClose(out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND],
                        np.zeros([1, 48, NUM_CLASSES + 1]))


class StructureTest(tf.test.TestCase):

  def test_projection_layers_when_depths_differ(self):
    predictor = box_predictor.WeightSharedConvolutionalBoxPredictor(
        is_training=True, num_classes=2,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(True),
        depth=8, num_layers_before_predictor=1, box_code_size=4, kernel_size=3,
        share_prediction_tower=True)
    with tf.Graph().as_default() as graph:
      predictor.predict(_zero_maps((16, 16, 4), (4, 2, 1)), [2, 2, 2])
      variables = _predictor_variables(graph)
    prefix = 'WeightSharedConvolutionalBoxPredictor/ProjectionLayer/'
    projection = {name[len(prefix):]: shape for name, shape in variables.items()
                  if name.startswith(prefix)}
    expected = {}
    for level, depth in enumerate((16, 16, 4)):
      expected['conv2d_%d/weights' % level] = [1, 1, depth, 16]
      for stat in ('beta', 'gamma', 'moving_mean', 'moving_variance'):
        expected['conv2d_%d/BatchNorm/%s' % (level, stat)] = [16]
    self.assertEqual(zoo_testlib.layout_difference(expected, projection), '')
    self.assertEqual(
        variables['WeightSharedConvolutionalBoxPredictor/PredictionTower/conv2d_0/weights'],
        [3, 3, 16, 8])

  def test_single_feature_map_has_no_box_predictor_scope(self):
    predictor = _conv_predictor(kernel_size=1)(is_training=True)
    with tf.Graph().as_default() as graph:
      predictor.predict(_zero_maps((32,), (2,)), [3])
      names = sorted(_predictor_variables(graph))
    self.assertEqual(names, ['BoxEncodingPredictor/biases', 'BoxEncodingPredictor/weights',
                             'ClassPredictor/biases', 'ClassPredictor/weights'])

  def test_layers_before_predictor_take_the_clamped_depth(self):
    predictor = _conv_predictor(kernel_size=1, min_depth=0, max_depth=24,
                                num_layers_before_predictor=2)(is_training=True)
    with tf.Graph().as_default() as graph:
      predictor.predict(_zero_maps((32, 16), (2, 1)), [1, 1])
      variables = _predictor_variables(graph)
    self.assertEqual(variables['BoxPredictor_0/Conv2d_0_1x1_24/weights'], [1, 1, 32, 24])
    self.assertEqual(variables['BoxPredictor_0/Conv2d_1_1x1_24/weights'], [1, 1, 24, 24])
    self.assertIn('BoxPredictor_0/Conv2d_1_1x1_24/BatchNorm/gamma', variables)
    self.assertEqual(variables['BoxPredictor_1/Conv2d_0_1x1_16/weights'], [1, 1, 16, 16])
    self.assertEqual(variables['BoxPredictor_1/ClassPredictor/weights'],
                     [1, 1, 16, NUM_CLASSES + 1])

  def test_forward_pass_dynamic_batch_sigmoid_and_no_background(self):
    predictor = _conv_predictor(kernel_size=3, apply_sigmoid_to_scores=True,
                                add_background_class=False, use_dropout=True,
                                num_layers_before_predictor=1, min_depth=8,
                                max_depth=8)(is_training=True)
    with tf.Graph().as_default():
      maps = [tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 16]),
              tf.compat.v1.placeholder(tf.float32, [None, 2, 2, 32])]
      out = predictor.predict(maps, [2, 3])
      self.assertEqual(out[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND].shape.as_list(),
                       [None, 44, NUM_CLASSES])
      rng = np.random.RandomState(0)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        values = sess.run(out, {maps[0]: rng.randn(2, 4, 4, 16),
                                maps[1]: rng.randn(2, 2, 2, 32)})
    scores = values[box_predictor.CLASS_PREDICTIONS_WITH_BACKGROUND]
    self.assertEqual(values[box_predictor.BOX_ENCODINGS].shape, (2, 44, 4))
    self.assertTrue(np.all(np.isfinite(values[box_predictor.BOX_ENCODINGS])))
    self.assertTrue(np.all((scores >= 0) & (scores <= 1)))

  def test_box_encodings_clip_range(self):
    predictor = box_predictor.WeightSharedConvolutionalBoxPredictor(
        is_training=False, num_classes=1,
        conv_hyperparams_fn=zoo_testlib.zoo_conv_hyperparams_fn(False),
        depth=4, num_layers_before_predictor=0, box_code_size=4,
        box_encodings_clip_range=(-0.5, 0.5))
    with tf.Graph().as_default():
      out = predictor.predict([100.0 * tf.ones([1, 3, 3, 4])], [2])
      boxes = _run(out)[box_predictor.BOX_ENCODINGS]
    self.assertLessEqual(np.abs(boxes).max(), 0.5)


class ArgumentErrorTest(tf.test.TestCase):

  def test_weight_shared_needs_equal_anchor_counts(self):
    predictor = _shared_predictor(depth=8, num_layers=1, kernel_size=3)(is_training=True)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, 'num_anchors_per_location'):
        predictor.predict(_zero_maps((8, 8), (2, 1)), [3, 6])

  def test_list_lengths_must_agree(self):
    predictor = _conv_predictor(kernel_size=1)(is_training=True)
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, 'num_anchors_per_location'):
        predictor.predict(_zero_maps((8, 8), (2, 1)), [3])

  def test_depthwise_needs_a_kernel_larger_than_one(self):
    with self.assertRaisesRegex(ValueError, 'kernel_size'):
      _conv_predictor(kernel_size=1, use_depthwise=True)(is_training=True)
    with self.assertRaisesRegex(ValueError, 'kernel_size'):
      _shared_predictor(depth=8, num_layers=1, kernel_size=1, use_depthwise=True)(True)

  def test_bad_num_classes_and_hyperparams(self):
    with self.assertRaisesRegex(ValueError, 'num_classes'):
      _conv_predictor(kernel_size=1, num_classes=0)(is_training=True)
    with self.assertRaisesRegex(ValueError, 'conv_hyperparams_fn'):
      _conv_predictor(kernel_size=1, conv_hyperparams_fn=None)(is_training=True)

  def test_old_hyperparameter_arguments_are_gone(self):
    with self.assertRaisesRegex(TypeError, 'weight_decay'):
      _conv_predictor(kernel_size=1, weight_decay=4e-5)(is_training=True)


if __name__ == '__main__':
  tf.test.main()
