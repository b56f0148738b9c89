"""builders/faster_rcnn_builder.py: configs/zoo's two-stage configs build; bad fields are named."""

import os

import tensorflow as tf

from builders import model_builder
from core import config_util
from core import grid_anchor_generator
from core import losses
from models import faster_rcnn_meta_arch
from models import faster_rcnn_resnet_v1_feature_extractors
from models import rfcn_meta_arch
from models import two_stage_box_predictors

tf.compat.v1.disable_eager_execution()

_ZOO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    'configs', 'zoo')


def _model_config(name):
  return config_util.get_configs_from_pipeline_file(
      os.path.join(_ZOO, name + '.config'))['model']


class FasterRcnnBuilderTest(tf.test.TestCase):

  def test_zoo_configs_build_the_meta_architecture_their_predictor_names(self):
    faster = model_builder.build(_model_config('faster_rcnn_resnet50_coco'), is_training=True)
    self.assertIsInstance(faster, faster_rcnn_meta_arch.FasterRCNNMetaArch)
    self.assertNotIsInstance(faster, rfcn_meta_arch.RFCNMetaArch)
    self.assertIsInstance(faster._feature_extractor,
                          faster_rcnn_resnet_v1_feature_extractors
                          .FasterRCNNResnet50FeatureExtractor)
    self.assertEqual(faster.num_classes, 3)
    self.assertEqual(faster.max_num_proposals, 64)  # second_stage_batch_size in training
    rfcn = model_builder.build(_model_config('rfcn_resnet101_coco'), is_training=False)
    self.assertIsInstance(rfcn, rfcn_meta_arch.RFCNMetaArch)
    self.assertEqual(rfcn.max_num_proposals, 300)  # first_stage_max_proposals at inference
    mask = model_builder.build(_model_config('mask_rcnn_inception_v2_coco'), is_training=True)
    self.assertIsInstance(mask._mask_rcnn_box_predictor,
                          two_stage_box_predictors.MaskRCNNBoxPredictor)

  def test_the_anchors_and_the_losses_come_from_the_config(self):
    config = _model_config('faster_rcnn_resnet50_coco')
    model = model_builder.build(config, is_training=True)
    anchors = model._first_stage_anchor_generator
    self.assertIsInstance(anchors, grid_anchor_generator.GridAnchorGenerator)
    self.assertEqual(anchors.num_anchors_per_location(), [12])
    self.assertIsInstance(model._second_stage_classification_loss,
                          losses.WeightedSoftmaxClassificationLoss)
    config.faster_rcnn.second_stage_classification_loss.weighted_sigmoid.anchorwise_output = True
    model = model_builder.build(config, is_training=True)
    self.assertIsInstance(model._second_stage_classification_loss,
                          losses.WeightedSigmoidClassificationLoss)

  def test_errors_name_the_field(self):
    path = 'model.faster_rcnn'

    def broken(change, name='faster_rcnn_resnet50_coco'):
      config = _model_config(name)
      change(config.faster_rcnn)
      return config

    mask = 'second_stage_box_predictor.mask_rcnn_box_predictor'
    cases = [
        (broken(lambda f: f.ClearField('num_classes')), path + '.num_classes'),
        (broken(lambda f: setattr(f, 'number_of_stages', 4)), path + '.number_of_stages'),
        (broken(lambda f: setattr(f, 'second_stage_batch_size', 400)),
         path + r'.second_stage_batch_size \(400\) must not exceed first_stage_max_proposals'),
        (broken(lambda f: setattr(f, 'first_stage_nms_iou_threshold', 1.5)),
         path + '.first_stage_nms_iou_threshold'),
        (broken(lambda f: setattr(f, 'second_stage_balance_fraction', -0.1)),
         path + '.second_stage_balance_fraction'),
        (broken(lambda f: setattr(f, 'initial_crop_size', 0)), path + '.initial_crop_size'),
        (broken(lambda f: setattr(f.feature_extractor, 'type', 'faster_rcnn_vgg16')),
         path + '.feature_extractor.type: unknown feature extractor'),
        (broken(lambda f: setattr(f.feature_extractor, 'first_stage_features_stride', 32)),
         'first_stage_features_stride'),
        (broken(lambda f: setattr(f.context_config, 'max_num_context_features', 10)),
         path + '.context_config is set, but slimtrain does not build it'),
        (broken(lambda f: setattr(f, 'use_static_shapes', True)),
         path + '.use_static_shapes is set, but slimtrain does not build it'),
        (broken(lambda f: f.second_stage_box_predictor.convolutional_box_predictor
                .SetInParent()),
         path + '.second_stage_box_predictor.convolutional_box_predictor is set, but'),
        (broken(lambda f: setattr(f.second_stage_box_predictor.mask_rcnn_box_predictor,
                                  'predict_keypoints', True)),
         path + '.' + mask + '.predict_keypoints is set, but slimtrain does not build it'),
        (broken(lambda f: f.second_stage_box_predictor.mask_rcnn_box_predictor.ClearField(
            'conv_hyperparams'), 'mask_rcnn_inception_v2_coco'),
         path + '.' + mask + '.conv_hyperparams must be set'),
        (broken(lambda f: f.second_stage_box_predictor.mask_rcnn_box_predictor
                .fc_hyperparams.ClearField('initializer')),
         path + '.' + mask + '.fc_hyperparams.initializer'),
        (broken(lambda f: f.first_stage_box_predictor_conv_hyperparams
                .ClearField('initializer')),
         path + '.first_stage_box_predictor_conv_hyperparams.initializer'),
        (broken(lambda f: setattr(f.first_stage_anchor_generator.grid_anchor_generator,
                                  'height_stride', 0)),
         path + '.first_stage_anchor_generator.grid_anchor_generator.height_stride'),
        (broken(lambda f: setattr(f.second_stage_classification_loss.weighted_sigmoid,
                                  'anchorwise_output', False)),
         path + '.second_stage_classification_loss.weighted_sigmoid.anchorwise_output'),
        (broken(lambda f: setattr(f.image_resizer.keep_aspect_ratio_resizer,
                                  'min_dimension', 2000)),
         path + '.image_resizer.keep_aspect_ratio_resizer'),
        (broken(lambda f: setattr(
            f.second_stage_post_processing.batch_non_max_suppression, 'iou_threshold', 2.0)),
         path + '.second_stage_post_processing.batch_non_max_suppression.iou_threshold'),
        (broken(lambda f: setattr(f.second_stage_box_predictor.rfcn_box_predictor,
                                  'depth', 0), 'rfcn_resnet101_coco'),
         path + '.second_stage_box_predictor.rfcn_box_predictor.depth'),
    ]
    for config, message in cases:
      with self.subTest(message=message):
        with self.assertRaisesRegex(ValueError, message):
          model_builder.build(config, is_training=True)


if __name__ == '__main__':
  tf.test.main()
