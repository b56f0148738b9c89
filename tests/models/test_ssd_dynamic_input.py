"""The SSD on images of their own size: anchors placed when the graph runs.

A keep_aspect_ratio_resizer without pad_to_max_dimension (the OD API's
ssd_mobilenet_v2_fullyconv_coco sample) or an identity_resizer gives images
whose height and width the graph does not know. The anchor generators then
compute the grid with TF ops; these tests check that

  * those anchors equal the numpy ones of the same grid, bit for bit, for
    several image sizes and every anchor layout the SSD builds;
  * an SSD of the fullyconv sample's shape has the OD API's variables, and
    predicts, scores and computes a loss on two image sizes fed to one
    placeholder [1, None, None, 3] in one session;
  * the legacy trainer runs a step of that model on a batch of two images of
    different sizes (padded to one batch) with a finite loss.
"""

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format

from builders import anchor_generator_builder
from builders import input_reader_builder
from builders import model_builder
from core import anchor_generator
from core import config_util
from models import box_predictor
from protos import model_pb2
from protos import pipeline_pb2
from tests.models import zoo_testlib
from tools import create_shapes_tf_record
from trainer import trainer

tf.compat.v1.disable_eager_execution()

FULLYCONV = 'ssd_mobilenet_v2_fullyconv_coco.config'
# The sample's anchor strides, in pixels, of its six feature maps.
FULLYCONV_STRIDES = [16, 32, 64, 128, 256, 512]

GENERATORS = {
    'ssd_reduced_lowest_layer': lambda: anchor_generator.create_ssd_anchors(
        num_layers=3, aspect_ratios=(1.0, 2.0, 0.5, 3.0, 0.3333)),
    'ssd_all_layers_non_square_base': lambda: anchor_generator.create_ssd_anchors(
        num_layers=3, min_scale=0.1, max_scale=0.7, aspect_ratios=(1.0, 2.0),
        reduce_boxes_in_lowest_layer=False, base_anchor_size=[1.0, 0.5]),
    'ssd_pixel_strides': lambda: anchor_generator.create_ssd_anchors(
        num_layers=3, anchor_strides=[(8, 8), (16, 16), (32, 32)]),
    'ssd_pixel_strides_and_offsets': lambda: anchor_generator.create_ssd_anchors(
        num_layers=3, anchor_strides=[(8, 10), (16, 20), (32, 40)],
        anchor_offsets=[(3, 4), (6, 8), (12, 16)]),
    'clipped': lambda: anchor_generator.MultipleGridAnchorGenerator(
        [[(0.9, 1.0), (0.5, 3.0)], [(1.2, 0.5)], [(0.3, 1.0)]],
        clip_window=[0.0, 0.0, 1.0, 1.0]),
    'multiscale': lambda: anchor_generator.MultiscaleGridAnchorGenerator(
        min_level=3, max_level=5, anchor_scale=4.0, aspect_ratios=[1.0, 2.0, 0.5],
        scales_per_octave=2),
}
# (image height, image width): square, landscape, portrait, odd sizes.
IMAGE_SIZES = [(64, 64), (64, 96), (97, 61), (300, 200)]


def _feature_map_shapes(height, width):
  """Grids of strides 8, 16, 32 over a height x width image (SAME padding)."""
  return [(-(-height // stride), -(-width // stride)) for stride in (8, 16, 32)]


@pytest.mark.parametrize('name', sorted(GENERATORS))
def test_dynamic_anchors_equal_the_static_ones(name):
  generator = GENERATORS[name]()
  with tf.Graph().as_default():
    grid_sizes = tf.compat.v1.placeholder(tf.int32, [3, 2])
    image_size = tf.compat.v1.placeholder(tf.int32, [2])
    dynamic = generator.generate([(grid_sizes[i, 0], grid_sizes[i, 1]) for i in range(3)],
                                 im_height=image_size[0], im_width=image_size[1])
    assert dynamic.shape.as_list() == [None, 4]
    static = {size: generator.generate(_feature_map_shapes(*size), im_height=size[0],
                                       im_width=size[1]) for size in IMAGE_SIZES}
    with tf.compat.v1.Session() as sess:
      for size in IMAGE_SIZES:
        expected = sess.run(static[size])
        actual = sess.run(dynamic, {grid_sizes: _feature_map_shapes(*size),
                                    image_size: size})
        assert actual.dtype == np.float32
        np.testing.assert_array_equal(actual, expected, err_msg=str(size))


def test_static_shapes_still_give_a_constant():
  generator = anchor_generator.create_ssd_anchors(num_layers=2)
  with tf.Graph().as_default():
    anchors = generator.generate([(2, 2), (1, 1)])
  assert anchors.op.type == 'Const'
  assert anchors.shape.as_list() == [2 * 2 * 3 + 6, 4]


def test_a_mixed_static_and_dynamic_grid_equals_the_static_one():
  generator = anchor_generator.create_ssd_anchors(num_layers=2, aspect_ratios=(1.0, 2.0))
  with tf.Graph().as_default():
    width = tf.compat.v1.placeholder(tf.int32, [])
    mixed = generator.generate([(3, width), (2, 2)], im_height=48, im_width=80)
    static = generator.generate([(3, 5), (2, 2)], im_height=48, im_width=80)
    with tf.compat.v1.Session() as sess:
      np.testing.assert_array_equal(sess.run(mixed, {width: 5}), sess.run(static))


def fullyconv_model_config(num_classes, min_dimension=64, max_dimension=96):
  """A DetectionModel of the ssd_mobilenet_v2_fullyconv_coco sample's shape.

  The architecture (MobileNet-v2 extractor, six SSD anchor layers of five
  aspect ratios, 1x1 convolutional box predictor, sigmoid loss with hard
  example mining) is the zoo_testlib entry of that sample; on top of it go
  the sample's own settings: images resized keeping their aspect ratio and
  not padded, explicit padding in the extractor, anchor strides of 16 to 512
  pixels, and box coder scales 10, 10, 5, 5. The resizer is small here
  (the sample's is 320..640).
  """
  architecture = next(architecture for architecture, configs in zoo_testlib.SSD_ARCHITECTURES
                      if FULLYCONV in configs)
  config = text_format.Parse(zoo_testlib.ssd_model_config(architecture, num_classes),
                             model_pb2.DetectionModel())
  ssd = config.ssd
  resizer = ssd.image_resizer.keep_aspect_ratio_resizer
  resizer.min_dimension, resizer.max_dimension = min_dimension, max_dimension
  ssd.feature_extractor.use_explicit_padding = True
  anchors = ssd.anchor_generator.ssd_anchor_generator
  anchors.height_stride.extend(FULLYCONV_STRIDES)
  anchors.width_stride.extend(FULLYCONV_STRIDES)
  coder = ssd.box_coder.faster_rcnn_box_coder
  coder.y_scale, coder.x_scale, coder.height_scale, coder.width_scale = 10.0, 10.0, 5.0, 5.0
  return config


def test_fullyconv_ssd_predicts_two_image_sizes_from_one_placeholder():
  config = fullyconv_model_config(num_classes=90)
  assert not config.ssd.image_resizer.keep_aspect_ratio_resizer.pad_to_max_dimension
  with tf.Graph().as_default() as graph:
    tf.compat.v1.set_random_seed(0)
    model = model_builder.build(config, is_training=True, add_summaries=False)
    raw_images = tf.compat.v1.placeholder(tf.float32, [1, None, None, 3])
    images, true_shapes = model.preprocess(raw_images)
    assert images.shape.as_list() == [1, None, None, 3]
    predictions = model.predict(images, true_shapes)
    # The variables exist once predict has run; the OD API's, name and shape.
    assert zoo_testlib.layout_difference(zoo_testlib.reference_variables(FULLYCONV),
                                         zoo_testlib.graph_variables(graph=graph)) == ''
    encodings = predictions[box_predictor.BOX_ENCODINGS]
    assert encodings.shape.as_list() == [1, None, 4]
    model.provide_groundtruth([tf.constant([[0.1, 0.2, 0.6, 0.7]])], [tf.one_hot([4], 90)])
    losses = model.loss(predictions, true_shapes)
    detections = model.postprocess(predictions, true_shapes)
    feature_map_sizes = [tf.shape(f)[1:3] for f in predictions['feature_maps']]
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      results = {}
      for raw_size in ((120, 80), (60, 150)):
        image = np.random.RandomState(1).uniform(0, 255, (1,) + raw_size + (3,))
        results[raw_size] = sess.run(
            dict(images=images, anchors=predictions['anchors'], encodings=encodings,
                 losses=losses, detections=detections, grids=feature_map_sizes),
            {raw_images: image})
  # The numpy anchors of the same grids, from the config's anchor generator.
  generator = anchor_generator_builder.build(config.ssd.anchor_generator)
  # Shorter side to 64, longer at most 96: 120x80 -> 96x64; 60x150 -> 38x96.
  expected_image_sizes = {(120, 80): (96, 64), (60, 150): (38, 96)}
  for raw_size, result in results.items():
    height, width = result['images'].shape[1:3]
    assert (height, width) == expected_image_sizes[raw_size]
    grids = [tuple(int(v) for v in grid) for grid in result['grids']]
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
      static_anchors = sess.run(generator.generate(grids, im_height=height, im_width=width))
    np.testing.assert_array_equal(result['anchors'], static_anchors)
    assert result['encodings'].shape == (1, len(static_anchors), 4)
    assert all(np.isfinite(value) for value in result['losses'].values())
    boxes = result['detections']['detection_boxes']
    assert boxes.shape == (1, 100, 4)
    assert np.all((boxes >= 0.0) & (boxes <= 1.0))
  assert len(results[(120, 80)]['anchors']) != len(results[(60, 150)]['anchors'])


# A small SSD behind an identity_resizer: RetinaNet-style anchors and the
# weight-shared box predictor, the other anchor generator and predictor.
IDENTITY_SSD = """
ssd {
  num_classes: 2
  image_resizer { identity_resizer {} }
  feature_extractor { type: "small_resnet" depth_multiplier: 0.25 min_depth: 8
    conv_hyperparams { activation: RELU initializer { truncated_normal_initializer {} }
                       batch_norm { scale: true } } }
  box_coder { faster_rcnn_box_coder {} }
  matcher { argmax_matcher { matched_threshold: 0.5 unmatched_threshold: 0.4 } }
  anchor_generator { multiscale_anchor_generator { min_level: 3 max_level: 5
    anchor_scale: 4.0 aspect_ratios: [1.0, 2.0] scales_per_octave: 1 } }
  box_predictor { weight_shared_convolutional_box_predictor {
    depth: 8 num_layers_before_predictor: 1 kernel_size: 3
    conv_hyperparams { initializer { truncated_normal_initializer { stddev: 0.03 } }
                       batch_norm {} } } }
  post_processing { batch_non_max_suppression { max_detections_per_class: 5
                                                max_total_detections: 7 }
                    score_converter: SIGMOID }
  loss { classification_loss { weighted_sigmoid_focal {} }
         localization_loss { weighted_smooth_l1 {} } }
  encode_background_as_zeros: true
}
"""


def test_identity_resizer_ssd_trains_and_detects_at_two_image_sizes():
  config = text_format.Parse(IDENTITY_SSD, model_pb2.DetectionModel())
  with tf.Graph().as_default():
    tf.compat.v1.set_random_seed(0)
    model = model_builder.build(config, is_training=True, add_summaries=False)
    raw_images = tf.compat.v1.placeholder(tf.float32, [2, None, None, 3])
    images, true_shapes = model.preprocess(raw_images)
    predictions = model.predict(images, true_shapes)
    model.provide_groundtruth([tf.constant([[0.1, 0.1, 0.5, 0.6]]),
                               tf.constant([[0.3, 0.2, 0.9, 0.8], [0.0, 0.0, 0.2, 0.2]])],
                              [tf.one_hot([0], 2), tf.one_hot([1, 0], 2)])
    losses = model.loss(predictions, true_shapes)
    total = tf.add_n(list(losses.values()))
    gradients = tf.gradients(total, tf.compat.v1.trainable_variables())
    detections = model.postprocess(predictions, true_shapes)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      for size in ((64, 96), (80, 48)):
        image = np.random.RandomState(2).uniform(0, 255, (2,) + size + (3,))
        result = sess.run(dict(anchors=predictions['anchors'], total=total,
                               gradients=gradients, shapes=true_shapes,
                               scores=detections['detection_scores']), {raw_images: image})
        np.testing.assert_array_equal(result['shapes'], [size + (3,)] * 2)
        assert np.isfinite(result['total'])
        assert all(g is not None and np.all(np.isfinite(v))
                   for g, v in zip(gradients, result['gradients']))
        assert result['scores'].shape == (2, 7)
        assert len(result['anchors']) > 0


@pytest.fixture(scope='module')
def two_sized_shapes_data(tmp_path_factory):
  """Two shapes datasets: square 96x96 images and wide 64x128 ones."""
  root = tmp_path_factory.mktemp('shapes')
  square = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'square'), num_train=2, num_val=0, height=96, width=96, num_shards=1)
  wide = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'wide'), num_train=2, num_val=0, height=64, width=128, num_shards=1, seed=1)
  return square, wide


def _training_configs(data, num_classes=3):
  """Pipeline of one step, batch 2, alternating a square and a wide image."""
  square, wide = data
  pipeline = pipeline_pb2.TrainEvalPipelineConfig()
  pipeline.model.CopyFrom(fullyconv_model_config(num_classes))
  train = pipeline.train_config
  train.batch_size = 2
  train.num_steps = 1
  # One batching thread keeps the reader's order: square, wide, square, ...
  train.num_batch_queue_threads = 1
  train.optimizer.rms_prop_optimizer.learning_rate.constant_learning_rate.learning_rate = (
      0.004)
  reader = pipeline.train_input_reader
  reader.label_map_path = square['label_map_path']
  reader.tf_record_input_reader.input_path.extend([square['train_pattern'],
                                                   wide['train_pattern']])
  reader.shuffle = False
  reader.num_readers = 2
  reader.read_block_length = 1
  return config_util.create_configs_from_pipeline_proto(pipeline)


def test_legacy_trainer_step_on_a_batch_of_two_image_sizes(two_sized_shapes_data, tmp_path):
  configs = _training_configs(two_sized_shapes_data)
  assert (configs['model'].ssd.image_resizer.WhichOneof('image_resizer_oneof')
          == 'keep_aspect_ratio_resizer')
  # What the trainer dequeues: one batch holding both sizes.
  with tf.Graph().as_default():
    queue = trainer.create_input_queue(
        2, lambda: input_reader_builder.build(configs['train_input_config']),
        batch_queue_capacity=4, num_batch_queue_threads=1, prefetch_queue_capacity=2,
        data_augmentation_options=[])
    images = next(iter(trainer.get_inputs(queue, num_classes=3)))
    with tf.compat.v1.Session() as sess:
      sess.run([tf.compat.v1.local_variables_initializer(),
                tf.compat.v1.tables_initializer()])
      coordinator = tf.train.Coordinator()
      threads = tf.compat.v1.train.start_queue_runners(sess, coord=coordinator)
      batch = sess.run(images)
      coordinator.request_stop()
      coordinator.join(threads)
  assert sorted(image.shape[1:3] for image in batch) == [(64, 128), (96, 96)]

  loss = zoo_testlib.train_with_legacy_trainer(configs, str(tmp_path / 'train'))
  assert np.isfinite(loss)
  trained = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'train')))
  assert trained.get_tensor('global_step') == 1


if __name__ == '__main__':
  import sys
  sys.exit(pytest.main([__file__]))
