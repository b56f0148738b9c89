"""Test helpers for the zoo architectures: the OD API's variables, and a zoo-like arg_scope.

`tests/models/data/od_zoo_variables_451906e4.json.gz` holds, for each of the
OD API's 61 TF1 sample configs, the global variables (name -> shape) the OD
API creates for that config (../shared/reference/od_zoo_variables.md says
how it was made). A model built from our config of the same shape must
create the same variables, so that the zoo checkpoint restores completely.

Usage:

    expected = zoo_testlib.reference_variables('ssd_mobilenet_v1_coco.config',
                                               prefix='FeatureExtractor/')
    with tf.Graph().as_default():
      ... build ...
      assert zoo_testlib.graph_variables('FeatureExtractor/') == expected
"""

import functools
import gzip
import json
import os

import numpy as np
import tensorflow as tf
import tf_slim as slim

from builders import input_reader_builder
from builders import model_builder
from tests import test_util
from trainer import trainer

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                     'od_zoo_variables_451906e4.json.gz')


@functools.lru_cache(maxsize=1)
def _all_configs():
  with gzip.open(_DATA, 'rt') as f:
    return json.load(f)['configs']


def sample_config_names(meta_architecture=None):
  """Names of the sample configs with an entry, optionally of one meta-architecture."""
  return sorted(name for name, entry in _all_configs().items()
                if entry.get('ok') and (meta_architecture is None or
                                        entry['meta_architecture'] == meta_architecture))


def reference_variables(config_name, prefix=''):
  """{name: shape list} of the OD API's variables for `config_name` under `prefix`."""
  entry = _all_configs()[config_name]
  return {name: list(shape) for name, shape in entry['variables'].items()
          if name.startswith(prefix)}


def graph_variables(prefix='', graph=None):
  """{name: shape list} of the global variables of `graph` (default graph) under `prefix`."""
  graph = graph or tf.compat.v1.get_default_graph()
  with graph.as_default():
    variables = tf.compat.v1.global_variables()
  return {v.op.name: v.shape.as_list() for v in variables if v.op.name.startswith(prefix)}


def layout_difference(expected, actual):
  """A readable diff of two {name: shape} dicts ('' when equal)."""
  lines = []
  for name in sorted(set(expected) - set(actual)):
    lines.append('missing    %s %s' % (name, expected[name]))
  for name in sorted(set(actual) - set(expected)):
    lines.append('unexpected %s %s' % (name, actual[name]))
  for name in sorted(set(expected) & set(actual)):
    if expected[name] != actual[name]:
      lines.append('shape      %s expected %s got %s' % (name, expected[name], actual[name]))
  return '\n'.join(lines)


def write_zoo_layout_checkpoint(config_name, prefix, seed=0):
  """Saves a checkpoint in the OD API's layout of `config_name`, random values.

  What a downloaded zoo checkpoint of that sample config holds (names and
  shapes; the values are made up), plus a global step.

  Returns:
    {name: value} of its weights, biases, gammas and betas (the variables a
    training step with a zero learning rate leaves unchanged).
  """
  rng = np.random.RandomState(seed)
  values = {}
  for name, shape in reference_variables(config_name).items():
    value = rng.normal(0.0, 0.05, size=shape).astype(np.float32)
    values[name] = np.abs(value) + 0.5 if name.endswith('moving_variance') else value
  with tf.Graph().as_default():
    for name, value in values.items():
      tf.compat.v1.Variable(value, name=name)
    tf.compat.v1.train.get_or_create_global_step()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(sess, prefix)
  return {name: value for name, value in values.items()
          if not name.endswith(('moving_mean', 'moving_variance'))}


def zoo_conv_hyperparams_fn(is_training, activation_fn=tf.nn.relu6, batch_norm=True,
                            batch_norm_decay=0.9997, weight_decay=4e-5):
  """fn() -> the slim arg_scope most zoo SSD configs' conv_hyperparams build.

  (L2 regularizer, truncated-normal initializer, relu6, batch norm with
  scale and center.) The real one comes from builders/hyperparams_builder.
  """
  def arg_scope():
    normalizer = slim.batch_norm if batch_norm else None
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d, slim.conv2d_transpose],
                        weights_regularizer=slim.l2_regularizer(weight_decay),
                        weights_initializer=tf.compat.v1.truncated_normal_initializer(
                            stddev=0.03),
                        activation_fn=activation_fn,
                        normalizer_fn=normalizer) as scope:
      if not batch_norm:
        return scope
      with slim.arg_scope([slim.batch_norm], is_training=is_training,
                          decay=batch_norm_decay, epsilon=0.001, center=True,
                          scale=True) as scope_with_bn:
        return scope_with_bn
  return arg_scope


# The facts about each SSD-family sample config that decide its variables:
# (feature extractor options, anchor layout, box predictor), grouped by
# architecture, with the sample configs of each and their num_classes.
# anchors: ('ssd', num_layers, aspect ratios, reduce_boxes_in_lowest_layer)
#       or ('multiscale', min_level, max_level, aspect ratios, scales_per_octave)
# predictor: ('conv', kernel_size, use_depthwise, batch_norm)
#         or ('shared', depth, layers before predictor, kernel_size,
#             share_prediction_tower, use_depthwise)
_MOBILENET_V1 = dict(type='ssd_mobilenet_v1', anchors=('ssd', 6, 5, True),
                     predictor=('conv', 1, False, True), loss='sigmoid_hem')
_SSDLITE = dict(anchors=('ssd', 6, 5, True), predictor=('conv', 3, True, True),
                use_depthwise=True)
_SSDLITE_V1_V2 = dict(_SSDLITE, loss='sigmoid_hem')
SSD_ARCHITECTURES = [
    (dict(_MOBILENET_V1), {'ssd_mobilenet_v1_coco.config': 90,
                           'ssd_mobilenet_v1_pets.config': 37,
                           'ssd_mobilenet_v1_focal_loss_pets.config': 37,
                           'ssd_mobilenet_v1_focal_loss_pets_inference.config': 37}),
    (dict(_MOBILENET_V1, override=True),
     {'ssd_mobilenet_v1_300x300_coco14_sync.config': 90,
      'ssd_mobilenet_v1_quantized_300x300_coco14_sync.config': 90}),
    (dict(_MOBILENET_V1, override=True, depth_multiplier=0.75),
     {'ssd_mobilenet_v1_0.75_depth_300x300_coco14_sync.config': 90,
      'ssd_mobilenet_v1_0.75_depth_quantized_300x300_coco14_sync.config': 90,
      'ssd_mobilenet_v1_0.75_depth_quantized_300x300_pets_sync.config': 37}),
    (dict(_MOBILENET_V1, type='embedded_ssd_mobilenet_v1', depth_multiplier=0.125,
          anchors=('ssd', 5, 5, True), size=256),
     {'embedded_ssd_mobilenet_v1_coco.config': 90}),
    (dict(_SSDLITE_V1_V2, type='ssd_mobilenet_v1'), {'ssdlite_mobilenet_v1_coco.config': 90}),
    (dict(type='ssd_mobilenet_v1_fpn', override=True, fpn=(3, 7, 256), size=640,
          anchors=('multiscale', 3, 7, 3, 2), predictor=('shared', 256, 4, 3, False, False)),
     {'ssd_mobilenet_v1_fpn_shared_box_predictor_640x640_coco14_sync.config': 90}),
    (dict(type='ssd_mobilenet_v1_ppn', override=True, anchors=('ssd', 6, 5, False),
          predictor=('shared', 512, 1, 1, True, False)),
     {'ssd_mobilenet_v1_ppn_shared_box_predictor_300x300_coco14_sync.config': 90}),
    (dict(type='ssd_mobilenet_v2', anchors=('ssd', 6, 5, True),
          predictor=('conv', 1, False, True), loss='sigmoid_hem'),
     {'ssd_mobilenet_v2_coco.config': 90, 'ssd_mobilenet_v2_oid_v4.config': 601,
      'ssd_mobilenet_v2_quantized_300x300_coco.config': 90,
      # Its keep_aspect_ratio_resizer changes no variable; built here at a fixed size.
      'ssd_mobilenet_v2_fullyconv_coco.config': 90}),
    (dict(type='ssd_mobilenet_v2', use_explicit_padding=True, pad_to_multiple=32, size=320,
          anchors=('ssd', 6, 5, True), predictor=('conv', 3, False, True)),
     {'facessd_mobilenet_v2_quantized_320x320_open_image_v4.config': 1}),
    (dict(_SSDLITE_V1_V2, type='ssd_mobilenet_v2'), {'ssdlite_mobilenet_v2_coco.config': 90}),
    (dict(type='ssd_mobilenet_v2_fpn', override=True, depth_multiplier=0.75,
          use_depthwise=True, fpn=(3, 7, 128), size=256, anchors=('multiscale', 3, 7, 3, 2),
          predictor=('shared', 128, 4, 3, True, True)),
     {'ssd_mobilenet_v2_fpnlite_quantized_shared_box_predictor_256x256_'
      'depthmultiplier_75_coco14_sync.config': 90}),
    (dict(type='ssd_mobilenet_v2_mnasfpn', override=True, fpn=(3, 6, 48), size=320,
          anchors=('multiscale', 3, 6, 3, 3), predictor=('shared', 64, 4, 3, True, True)),
     {'ssd_mobilenet_v2_mnasfpn_shared_box_predictor_320x320_coco_sync.config': 90}),
    (dict(_SSDLITE, type='ssd_mobilenet_v3_large', override=True, size=320),
     {'ssdlite_mobilenet_v3_large_320x320_coco.config': 90}),
    (dict(_SSDLITE, type='ssd_mobilenet_v3_small', override=True, size=320),
     {'ssdlite_mobilenet_v3_small_320x320_coco.config': 90}),
    (dict(_SSDLITE, type='ssd_mobilenet_edgetpu', override=True, size=320),
     {'ssdlite_mobilenet_edgetpu_320x320_coco.config': 90,
      'ssdlite_mobilenet_edgetpu_320x320_coco_quant.config': 90}),
    (dict(_SSDLITE, type='ssd_mobiledet_cpu', size=320),
     {'ssdlite_mobiledet_cpu_320x320_coco_sync_4x4.config': 90}),
    (dict(_SSDLITE, type='ssd_mobiledet_dsp', size=320),
     {'ssdlite_mobiledet_dsp_320x320_coco_sync_4x4.config': 90}),
    (dict(_SSDLITE, type='ssd_mobiledet_edgetpu', size=320),
     {'ssdlite_mobiledet_edgetpu_320x320_coco_sync_4x4.config': 90}),
    (dict(type='ssd_inception_v2', override=True, anchors=('ssd', 6, 5, True),
          predictor=('conv', 3, False, False), loss='sigmoid_hem'),
     {'ssd_inception_v2_coco.config': 90, 'ssd_inception_v2_pets.config': 37}),
    (dict(type='ssd_inception_v3', override=True, anchors=('ssd', 6, 5, True),
          predictor=('conv', 3, False, False), loss='sigmoid_hem'),
     {'ssd_inception_v3_pets.config': 37}),
    (dict(type='ssd_resnet50_v1_fpn', override=True, fpn=(3, 7, 256), size=640,
          anchors=('multiscale', 3, 7, 3, 2), predictor=('shared', 256, 4, 3, False, False)),
     {'ssd_resnet50_v1_fpn_shared_box_predictor_640x640_coco14_sync.config': 90}),
    (dict(type='ssd_resnet101_v1_fpn', override=True, fpn=(2, 7, 256), size=512,
          anchors=('multiscale', 2, 7, 3, 2), predictor=('shared', 256, 2, 3, False, False)),
     {'ssd_resnet101_v1_fpn_shared_box_predictor_oid_512x512_sync.config': 601}),
]

_HYPERPARAMS = """
      activation: RELU_6
      regularizer { l2_regularizer { weight: 0.00004 } }
      initializer { truncated_normal_initializer { stddev: 0.03 } }
      %s"""
_BATCH_NORM = 'batch_norm { decay: 0.97 epsilon: 0.001 scale: true center: true }'
_FOCAL_LOSS = ('classification_loss { weighted_sigmoid_focal { alpha: 0.25 gamma: 2.0 } } '
               'localization_loss { weighted_smooth_l1 {} }')
_SIGMOID_HEM_LOSS = ('classification_loss { weighted_sigmoid {} } '
                     'localization_loss { weighted_smooth_l1 {} } '
                     'hard_example_miner { num_hard_examples: 3000 iou_threshold: 0.99 '
                     'loss_type: CLASSIFICATION max_negatives_per_positive: 3 '
                     'min_negatives_per_image: 3 } '
                     'classification_weight: 1.0 localization_weight: 1.0')


def ssd_model_config(architecture, num_classes, image_size=None):
  """DetectionModel text of an SSD of `architecture` (a SSD_ARCHITECTURES entry).

  Args:
    architecture: dict of the facts above.
    num_classes: classes without background.
    image_size: fixed_shape_resizer side (default: the sample config's).
  """
  size = image_size or architecture.get('size', 300)
  extractor = ['type: "%s"' % architecture['type'], 'min_depth: 16',
               'depth_multiplier: %s' % architecture.get('depth_multiplier', 1.0),
               'conv_hyperparams {%s }' % (_HYPERPARAMS % _BATCH_NORM)]
  for flag in ('use_depthwise', 'use_explicit_padding'):
    if architecture.get(flag):
      extractor.append('%s: true' % flag)
  if architecture.get('override'):
    extractor.append('override_base_feature_extractor_hyperparams: true')
  if architecture.get('pad_to_multiple'):
    extractor.append('pad_to_multiple: %d' % architecture['pad_to_multiple'])
  if architecture.get('fpn'):
    extractor.append('fpn { min_level: %d max_level: %d additional_layer_depth: %d }'
                     % architecture['fpn'])
  anchors = architecture['anchors']
  ratios = [1.0, 2.0, 0.5, 3.0, 0.3333][:anchors[-2] if anchors[0] == 'ssd' else anchors[3]]
  ratio_text = ' '.join('aspect_ratios: %s' % r for r in ratios)
  if anchors[0] == 'ssd':
    anchor_text = ('ssd_anchor_generator { num_layers: %d min_scale: 0.2 max_scale: 0.95 %s '
                   'reduce_boxes_in_lowest_layer: %s }'
                   % (anchors[1], ratio_text, str(anchors[3]).lower()))
  else:
    anchor_text = ('multiscale_anchor_generator { min_level: %d max_level: %d anchor_scale: 4.0'
                   ' %s scales_per_octave: %d }' % (anchors[1], anchors[2], ratio_text,
                                                    anchors[4]))
  predictor = architecture['predictor']
  if predictor[0] == 'conv':
    predictor_text = ('convolutional_box_predictor { kernel_size: %d use_depthwise: %s '
                      'use_dropout: false box_code_size: 4 conv_hyperparams {%s } }'
                      % (predictor[1], str(predictor[2]).lower(),
                         _HYPERPARAMS % (_BATCH_NORM if predictor[3] else '')))
  else:
    predictor_text = ('weight_shared_convolutional_box_predictor { depth: %d '
                      'num_layers_before_predictor: %d kernel_size: %d '
                      'share_prediction_tower: %s use_depthwise: %s '
                      'class_prediction_bias_init: -4.6 conv_hyperparams {%s } }'
                      % (predictor[1], predictor[2], predictor[3], str(predictor[4]).lower(),
                         str(predictor[5]).lower(), _HYPERPARAMS % _BATCH_NORM))
  if architecture.get('loss') == 'sigmoid_hem':
    # The first zoo generation: sigmoid loss over mined hard examples.
    background, loss = '', _SIGMOID_HEM_LOSS
  else:
    # RetinaNet and the later generation: focal loss, background as zeros.
    background, loss = 'encode_background_as_zeros: true', _FOCAL_LOSS
  return """
ssd {
  num_classes: %d
  image_resizer { fixed_shape_resizer { height: %d width: %d } }
  feature_extractor { %s }
  box_coder { faster_rcnn_box_coder {} }
  matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.5
                             force_match_for_each_row: true } }
  similarity_calculator { iou_similarity {} }
  %s
  anchor_generator { %s }
  box_predictor { %s }
  post_processing {
    batch_non_max_suppression { score_threshold: 1e-8 iou_threshold: 0.6
                                max_detections_per_class: 100 max_total_detections: 100 }
    score_converter: SIGMOID
  }
  normalize_loss_by_num_matches: true
  normalize_loc_loss_by_codesize: true
  loss { %s }
}
""" % (num_classes, size, size, ' '.join(extractor), background, anchor_text, predictor_text,
       loss)


def is_class_head(name):
  """Whether variable `name` is a class-predictor variable whose shape depends on num_classes."""
  return ('ClassPredictor' in name and '_depthwise/' not in name
          and not name.endswith('depthwise_weights'))


def with_num_classes(layout, from_classes, to_classes):
  """`layout` with every class-predictor output dimension rescaled to `to_classes`.

  The class head's last dimension is anchors x (num_classes + 1); nothing else
  depends on num_classes.
  """
  rescaled = {}
  for name, shape in layout.items():
    if is_class_head(name) and shape[-1] % (from_classes + 1) == 0:
      shape = shape[:-1] + [shape[-1] // (from_classes + 1) * (to_classes + 1)]
    rescaled[name] = shape
  return rescaled


def train_with_legacy_trainer(configs, train_dir, num_clones=1):
  """Runs trainer.train on `configs` (config_util's dict), clones on virtual CPUs.

  Returns:
    the last step's total loss.
  """
  session_config = test_util.session_config(num_cpus=num_clones)
  # Grappler's rewrites of these large graphs cost seconds and change no value.
  session_config.graph_options.rewrite_options.disable_meta_optimizer = True
  return trainer.train(
      functools.partial(input_reader_builder.build, configs['train_input_config']),
      functools.partial(model_builder.build, model_config=configs['model'], is_training=True),
      configs['train_config'], master='', task=0, num_clones=num_clones, worker_replicas=1,
      clone_on_cpu=True, ps_tasks=0, worker_job_name='worker', is_chief=True,
      train_dir=train_dir, session_config_override=session_config,
      deployment_options={'clone_devices': ['/device:CPU:%d' % i for i in range(num_clones)]})


def train_one_step_from(configs, data, checkpoint):
  """`configs` set to train one step at a zero learning rate from `checkpoint` on `data`.

  Args:
    configs: config_util's dict of a zoo config (changed in place).
    data: create_shapes_tf_record.create_shapes_dataset's dict (train split).
    checkpoint: the fine_tune_checkpoint prefix.

  Returns:
    `configs`. With the learning rate at zero the trained checkpoint shows
    exactly what was restored.
  """
  train_config = configs['train_config']
  train_config.num_steps = 1
  train_config.fine_tune_checkpoint = checkpoint
  optimizer = train_config.optimizer
  optimizer.ClearField('optimizer')
  optimizer.momentum_optimizer.learning_rate.constant_learning_rate.learning_rate = 0.0
  train_input = configs['train_input_config']
  del train_input.tf_record_input_reader.input_path[:]
  train_input.tf_record_input_reader.input_path.append(data['train_pattern'])
  train_input.label_map_path = data['label_map_path']
  return configs
