"""Tests of builders/model_builder.py and the sample configs under configs/."""

import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

from builders import model_builder
from core import losses
from models import slim_classifier
from models import ssd_meta_arch
from protos import model_pb2
from protos import pipeline_pb2

tf.compat.v1.disable_eager_execution()

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'configs')

SSD_CONFIG = """
ssd {
  num_classes: 2
  image_resizer { fixed_shape_resizer { height: 64 width: 64 } }
  feature_extractor { type: "small_resnet" depth_multiplier: 0.25 min_depth: 8
    conv_hyperparams { activation: RELU initializer { truncated_normal_initializer {} }
                       batch_norm { scale: true } } }
  box_coder { faster_rcnn_box_coder {} }
  matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.4 } }
  anchor_generator { ssd_anchor_generator { num_layers: 4 aspect_ratios: [1.0, 2.0] } }
  box_predictor { convolutional_box_predictor {
    kernel_size: 1 num_layers_before_predictor: 1 min_depth: 8 max_depth: 16 use_dropout: true
    conv_hyperparams { initializer { truncated_normal_initializer { stddev: 0.03 } }
                       batch_norm {} } } }
  post_processing { batch_non_max_suppression { max_detections_per_class: 5
                                                max_total_detections: 7 }
                    score_converter: SOFTMAX logit_scale: 2.0 }
  loss { classification_loss { weighted_softmax {} }
         localization_loss { weighted_smooth_l1 {} } }
}
"""


def parse(text):
  return text_format.Parse(text, model_pb2.DetectionModel())


def with_ssd(edit):
  config = parse(SSD_CONFIG)
  edit(config.ssd)
  return config


def load_pipeline(name):
  with open(os.path.join(CONFIG_DIR, name)) as f:
    return text_format.Parse(f.read(), pipeline_pb2.TrainEvalPipelineConfig())


class ModelBuilderTest(tf.test.TestCase):

  def _run_ssd(self, model, size_in=40):
    images = tf.zeros([2, size_in, size_in, 3])
    preprocessed, shapes = model.preprocess(images)
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.6, 0.6]])] * 2,
                              [tf.one_hot([0], model.num_classes)] * 2)
    predictions = model.predict(preprocessed, shapes)
    loss_dict = model.loss(predictions, shapes)
    detections = model.postprocess(predictions, shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run([predictions['feature_maps'], loss_dict, detections])

  def test_ssd_from_proto(self):
    with tf.Graph().as_default():
      model = model_builder.build(parse(SSD_CONFIG), is_training=True)
      self.assertIsInstance(model, ssd_meta_arch.SSDMetaArch)
      self.assertIsInstance(model._classification_loss, losses.WeightedSoftmaxClassificationLoss)
      self.assertIsNone(model._hard_example_miner)
      feature_maps, loss_dict, detections = self._run_ssd(model)
      self.assertIn('FeatureExtractor/SmallResnet/block2/unit_1/conv1/weights',
                    model.restore_map('detection'))
    self.assertEqual([f.shape[1] for f in feature_maps], [8, 4, 2, 1])
    self.assertTrue(all(np.isfinite(v) for v in loss_dict.values()))
    self.assertEqual(detections['detection_boxes'].shape, (2, 7, 4))

  def test_defaults_spelled_out_are_not_refused(self):
    def edit(ssd):
      ssd.add_background_class = True               # its default
      ssd.post_processing.batch_non_max_suppression.use_static_shapes = True
      ssd.matcher.argmax_matcher.use_matmul_gather = True
    with tf.Graph().as_default():
      self.assertIsInstance(model_builder.build(with_ssd(edit), is_training=True),
                            ssd_meta_arch.SSDMetaArch)

  def test_ssd_focal_loss_and_miner(self):
    def edit(ssd):
      ssd.loss.classification_loss.weighted_sigmoid_focal.gamma = 2.0
      ssd.loss.hard_example_miner.num_hard_examples = 10
      ssd.feature_extractor.type = 'small_mobilenet_v1'
    with tf.Graph().as_default():
      model = model_builder.build(with_ssd(edit), is_training=False, add_summaries=False)
      self.assertIsInstance(model._classification_loss, losses.SigmoidFocalClassificationLoss)
      self.assertIsNotNone(model._hard_example_miner)
      _, loss_dict, _ = self._run_ssd(model)
    self.assertTrue(all(np.isfinite(v) for v in loss_dict.values()))

  def test_classifier_from_proto(self):
    config = parse('slim_classifier { num_classes: 4 net: "resnet_v1_50" image_height: 64 '
                   'image_width: 64 checkpoint_exclude_scopes: "resnet_v1_50/logits" }')
    model = model_builder.build(config, is_training=False)
    self.assertIsInstance(model, slim_classifier.SlimClassifier)
    self.assertEqual(model.num_classes, 4)
    self.assertEqual(model.scope, 'resnet_v1_50')
    with tf.Graph().as_default():
      model.provide_groundtruth(tf.constant([1]))
      model.loss({'logits': tf.zeros([1, 4])})
      # The trainer adds the returned losses; the builder's model must not.
      self.assertEqual(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES), [])

  def test_errors_name_the_field(self):
    cases = [
        (model_pb2.DetectionModel(), 'model.ssd, model.faster_rcnn or model.slim_classifier'),
        (parse('slim_classifier { net: "small_cnn" }'), 'slim_classifier.num_classes'),
        (parse('slim_classifier { num_classes: 3 net: "lenet" }'), 'slim_classifier.net'),
        (with_ssd(lambda s: s.ClearField('num_classes')), 'ssd.num_classes'),
        (with_ssd(lambda s: setattr(s.feature_extractor, 'type', 'vgg')),
         'ssd.feature_extractor.type'),
        (with_ssd(lambda s: s.ClearField('image_resizer')), 'ssd.image_resizer'),
        (with_ssd(lambda s: s.ClearField('anchor_generator')), 'ssd.anchor_generator'),
        (with_ssd(lambda s: setattr(s.anchor_generator.ssd_anchor_generator, 'num_layers', 12)),
         'num_layers'),
        (with_ssd(lambda s: setattr(s.matcher.argmax_matcher, 'unmatched_threshold', 0.7)),
         'ssd.matcher.argmax_matcher.unmatched_threshold'),
        (with_ssd(lambda s: s.matcher.bipartite_matcher.SetInParent()),
         r'^model.ssd.matcher.bipartite_matcher is set, but slimtrain does not build it'),
        (with_ssd(lambda s: setattr(s.mask_head_config, 'mask_height', 9)),
         r'^model.ssd.mask_head_config is set, but slimtrain does not build it'),
        (with_ssd(lambda s: setattr(s, 'use_confidences_as_targets', True)),
         'model.ssd.use_confidences_as_targets'),
        (with_ssd(lambda s: s.feature_extractor.conv_hyperparams.ClearField('initializer')),
         'model.ssd.feature_extractor.conv_hyperparams.initializer: set one of'),
        (with_ssd(lambda s: s.box_predictor.convolutional_box_predictor.conv_hyperparams
                  .ClearField('initializer')),
         'model.ssd.box_predictor.convolutional_box_predictor.conv_hyperparams.initializer'),
        (with_ssd(lambda s: s.box_predictor.mask_rcnn_box_predictor.SetInParent()),
         'model.ssd.box_predictor.mask_rcnn_box_predictor is set, but slimtrain does not'),
        (with_ssd(lambda s: text_format.Merge(
            'keep_aspect_ratio_resizer { min_dimension: 96 max_dimension: 64 }',
            s.image_resizer)),
         'keep_aspect_ratio_resizer needs 0 < min_dimension <= max_dimension'),
        (with_ssd(lambda s: setattr(s.post_processing.batch_non_max_suppression,
                                    'soft_nms_sigma', 0.5)),
         'batch_non_max_suppression.soft_nms_sigma is set'),
        (with_ssd(lambda s: s.loss.random_example_sampler.SetInParent()),
         'model.ssd.loss.random_example_sampler is set'),
        (parse('faster_rcnn { num_classes: 3 }'),
         'model.faster_rcnn.second_stage_box_predictor: set mask_rcnn_box_predictor or '
         'rfcn_box_predictor'),
        (with_ssd(lambda s: setattr(s.post_processing.batch_non_max_suppression,
                                    'iou_threshold', 2.0)), 'iou_threshold'),
    ]
    for config, message in cases:
      with self.subTest(message=message):
        with self.assertRaisesRegex(ValueError, message):
          model_builder.build(config, is_training=True)
    with self.assertRaisesRegex(ValueError, 'model_config not of type model_pb2.DetectionModel'):
      model_builder.build(pipeline_pb2.TrainEvalPipelineConfig(), is_training=True)


class SampleConfigsTest(tf.test.TestCase):

  def test_ssd_shapes_config(self):
    pipeline = load_pipeline('ssd_shapes.config')
    self.assertEqual(pipeline.model.ssd.num_classes, 3)
    self.assertEqual(pipeline.deploy_config.num_clones, 2)
    self.assertIn('data/shapes/train', pipeline.train_input_reader.tf_record_input_reader
                  .input_path[0])
    self.assertTrue(pipeline.eval_input_reader[0].label_map_path.endswith('label_map.pbtxt'))
    with tf.Graph().as_default():
      model = model_builder.build(pipeline.model, is_training=True)
      images, shapes = model.preprocess(tf.zeros([1, 128, 128, 3]))
      predictions = model.predict(images, shapes)
      self.assertEqual(images.shape.as_list(), [1, 96, 96, 3])
      self.assertEqual(len(predictions['feature_maps']), 4)

  def test_classifier_small_config(self):
    pipeline = load_pipeline('classifier_small.config')
    with tf.Graph().as_default():
      model = model_builder.build(pipeline.model, is_training=True)
      self.assertIsInstance(model, slim_classifier.SlimClassifier)
      images, _ = model.preprocess(tf.zeros([2, 40, 40, 3]))
      self.assertEqual(model.predict(images)['logits'].shape.as_list(), [2, 3])



class FreezeBatchnormTest(tf.test.TestCase):
  """`ssd.freeze_batchnorm` freezes the base network's batch norm, as the OD API's slim SSDs."""

  def _base_network_updates(self, freeze):
    from tests.models import zoo_testlib  # pylint: disable=import-outside-toplevel
    architecture = dict(zoo_testlib.SSD_ARCHITECTURES[0][0], depth_multiplier=0.25)
    config = parse(zoo_testlib.ssd_model_config(architecture, 3, image_size=64))
    config.ssd.freeze_batchnorm = freeze
    with tf.Graph().as_default():
      model = model_builder.build(config, is_training=True, add_summaries=False)
      images, shapes = model.preprocess(tf.zeros([1, 64, 64, 3]))
      model.predict(images, shapes)
      updates = [op.name for op in tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.UPDATE_OPS)]
    base = [name for name in updates if '/Conv2d_0/BatchNorm/' in name]
    extra = [name for name in updates if '_2_Conv2d_2_3x3_s2_' in name]
    return base, extra

  def test_frozen_base_network_keeps_its_statistics(self):
    base, extra = self._base_network_updates(freeze=False)
    self.assertNotEmpty(base)
    self.assertNotEmpty(extra)
    base, extra = self._base_network_updates(freeze=True)
    self.assertEmpty(base)
    # The added layers follow their conv_hyperparams (batch_norm.train), as in the OD API.
    self.assertNotEmpty(extra)


if __name__ == '__main__':
  tf.test.main()
