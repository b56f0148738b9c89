"""Tests of trainer/exporter.py: real training, export, and TF2 eager serving.

A small SSD (with moving averages) and a small classifier train for a few
steps; each is exported for every input type; one fresh eager TF2 process
loads every export with `tf.saved_model.load` and runs `serving_default` on
the same images; its outputs must equal the graph-mode detections computed
from the checkpoint here. The frozen graph and the checkpoint written beside
the SavedModel must give the SavedModel's outputs too.
"""

import os
import pickle
import stat
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from builders import model_builder
from builders import optimizer_builder
from core import config_util
from core import standard_fields as fields
from tests.export import train_util
from tools import create_shapes_tf_record
from tools import dataset_util
from trainer import exporter

tf.compat.v1.disable_eager_execution()

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SSD_SIZE = 96
CLASSIFIER_SIZE = 32
SERVING_VERSION = 7
# What the OD API's exporter writes into output_directory.
OD_LAYOUT = ['checkpoint', 'frozen_inference_graph.pb', 'model.ckpt.data-00000-of-00001',
             'model.ckpt.index', 'model.ckpt.meta', 'pipeline.config', 'saved_model']

# Runs in a fresh interpreter: TF2 defaults (eager), nothing from slimtrain imported.
EAGER_PREDICT = r'''
import pickle, sys
import tensorflow as tf
assert tf.executing_eagerly()
with open(sys.argv[1], 'rb') as f:
  jobs = pickle.load(f)
results = {}
for name, (path, inputs) in jobs.items():
  signature = tf.saved_model.load(path).signatures['serving_default']
  results[name] = {k: v.numpy() for k, v in signature(inputs=tf.constant(inputs)).items()}
with open(sys.argv[2], 'wb') as f:
  pickle.dump(results, f)
'''


def _images(size, count, seed):
  rng = np.random.default_rng(seed)
  return np.stack([create_shapes_tf_record.generate_example(rng, size, size)[0]
                   for _ in range(count)]).astype(np.uint8)


def _encode(images):
  """PNG bytes (lossless, so decoding gives the images back) and tf.Examples."""
  codec = dataset_util.ImageCodec()
  try:
    pngs = [codec.encode(image, 'png') for image in images]
  finally:
    codec.close()
  examples = [dataset_util.detection_example(png, 'png', image.shape[0], image.shape[1],
                                             [], []).SerializeToString()
              for png, image in zip(pngs, images)]
  return pngs, examples


def _inputs(images, input_type):
  pngs, examples = _encode(images)
  return {'image_tensor': images, 'encoded_image_string_tensor': pngs,
          'tf_example': examples}[input_type]


def graph_mode_outputs(pipeline_config, checkpoint, images):
  """What the graph-mode evaluator computes: the model restored from the checkpoint."""
  with tf.Graph().as_default() as graph:
    model = model_builder.build(pipeline_config.model, is_training=False, add_summaries=False)
    preprocessed, shapes = model.preprocess(tf.constant(images, tf.float32))
    outputs = model.postprocess(model.predict(preprocessed, shapes), shapes)
    variables = tf.compat.v1.global_variables()
    if pipeline_config.train_config.optimizer.use_moving_average:
      variables = optimizer_builder.moving_average_restore_map(variables, checkpoint)
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint)
      return sess.run(outputs)


def run_eager(jobs, tmp_dir):
  """Runs {name: (saved model dir, inputs)} in a fresh eager TF2 process."""
  jobs_path = os.path.join(tmp_dir, 'jobs.pkl')
  results_path = os.path.join(tmp_dir, 'results.pkl')
  with open(jobs_path, 'wb') as f:
    pickle.dump(jobs, f)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
  proc = subprocess.run([sys.executable, '-c', EAGER_PREDICT, jobs_path, results_path],
                        capture_output=True, text=True, env=env, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(results_path, 'rb') as f:
    return pickle.load(f)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """A few real training steps of the SSD (moving averages on) and the classifier."""
  root = tmp_path_factory.mktemp('trained')
  data = create_shapes_tf_record.create_shapes_dataset(
      str(root / 'shapes'), num_train=16, num_val=4, height=SSD_SIZE, width=SSD_SIZE,
      num_shards=1, seed=3)
  ssd = train_util.ssd_configs(data, num_steps=6, use_moving_average=True)
  _, ssd_checkpoint = train_util.train(ssd, str(root / 'ssd'))
  pattern, label_map = train_util.write_classification_dataset(
      str(root / 'classes'), num_examples=16, size=CLASSIFIER_SIZE)
  classifier = train_util.classifier_configs(pattern, label_map, num_steps=4)
  _, classifier_checkpoint = train_util.train(classifier, str(root / 'classifier'))
  return {
      'ssd': (train_util.pipeline_config(ssd), ssd_checkpoint),
      'classifier': (train_util.pipeline_config(classifier), classifier_checkpoint),
  }


@pytest.fixture(scope='module')
def exports(trained, tmp_path_factory):
  """Every export the tests check, and the eager outputs of each."""
  root = tmp_path_factory.mktemp('exports')
  ssd_config, ssd_checkpoint = trained['ssd']
  cls_config, cls_checkpoint = trained['classifier']
  ssd_images = _images(SSD_SIZE, 2, seed=11)
  cls_images = _images(CLASSIFIER_SIZE, 3, seed=12)
  jobs, paths = {}, {}
  for input_type in exporter.INPUT_TYPES:
    path = exporter.export_inference_graph(input_type, ssd_config, ssd_checkpoint,
                                           str(root / ('ssd_' + input_type)))
    paths['ssd_' + input_type] = path
    jobs['ssd_' + input_type] = (path, _inputs(ssd_images, input_type))
  for input_type in ('image_tensor', 'encoded_image_string_tensor'):
    path = exporter.export_inference_graph(input_type, cls_config, cls_checkpoint,
                                           str(root / ('classifier_' + input_type)))
    paths['classifier_' + input_type] = path
    jobs['classifier_' + input_type] = (path, _inputs(cls_images, input_type))
  serving_base = str(root / 'serving')
  paths['serving'] = exporter.export_inference_graph(
      'image_tensor', ssd_config, ssd_checkpoint, serving_base,
      serving_version=SERVING_VERSION)
  jobs['serving'] = (paths['serving'], ssd_images)
  return {
      'root': root, 'paths': paths, 'serving_base': serving_base,
      'images': {'ssd': ssd_images, 'classifier': cls_images},
      'eager': run_eager(jobs, str(root)),
      'ssd_reference': graph_mode_outputs(ssd_config, ssd_checkpoint, ssd_images),
      'classifier_reference': graph_mode_outputs(cls_config, cls_checkpoint, cls_images),
  }


def _assert_detections_equal(eager, reference):
  names = fields.DetectionResultFields
  np.testing.assert_allclose(eager[names.raw_detection_scores],
                             reference[names.raw_detection_scores], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(eager[names.raw_detection_boxes],
                             reference[names.raw_detection_boxes], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(eager[names.num_detections], reference[names.num_detections])
  np.testing.assert_allclose(eager[names.detection_scores], reference[names.detection_scores],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(eager[names.detection_boxes], reference[names.detection_boxes],
                             rtol=1e-5, atol=1e-5)
  # The export gives label-map ids (1-based), the model 0-based ones.
  np.testing.assert_array_equal(eager[names.detection_classes],
                                reference[names.detection_classes] + 1)


@pytest.mark.parametrize('input_type', exporter.INPUT_TYPES)
def test_detector_export_matches_graph_mode_in_eager_tf2(exports, input_type):
  eager = exports['eager']['ssd_' + input_type]
  assert set(eager) == {'detection_boxes', 'detection_scores', 'detection_classes',
                        'num_detections', 'raw_detection_boxes', 'raw_detection_scores'}
  assert eager['detection_classes'].dtype == np.float32
  assert eager['detection_boxes'].shape[:2] == eager['detection_scores'].shape
  _assert_detections_equal(eager, exports['ssd_reference'])


@pytest.mark.parametrize('input_type', ['image_tensor', 'encoded_image_string_tensor'])
def test_classifier_export_matches_graph_mode_in_eager_tf2(exports, input_type):
  eager = exports['eager']['classifier_' + input_type]
  reference = exports['classifier_reference']
  assert set(eager) == {'classes', 'probabilities'}
  np.testing.assert_allclose(eager['probabilities'], reference['probabilities'],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(eager['classes'], reference['classes'] + 1)


def test_export_holds_the_moving_averages(trained, exports):
  _, checkpoint = trained['ssd']
  variables = os.path.join(exports['paths']['ssd_image_tensor'], 'variables', 'variables')
  exported = dict(tf.train.list_variables(variables))
  weights = 'FeatureExtractor/SmallMobilenetV1/Conv2d_0/weights'
  assert weights in exported
  average = tf.train.load_variable(checkpoint, weights + '/ExponentialMovingAverage')
  raw = tf.train.load_variable(checkpoint, weights)
  assert not np.allclose(average, raw)
  np.testing.assert_array_equal(tf.train.load_variable(variables, weights), average)
  # Batch-norm statistics are not trained variables: exported as they are.
  mean = 'FeatureExtractor/SmallMobilenetV1/Conv2d_0/BatchNorm/moving_mean'
  np.testing.assert_array_equal(tf.train.load_variable(variables, mean),
                                tf.train.load_variable(checkpoint, mean))
  assert not any('ExponentialMovingAverage' in name or name == 'global_step'
                 for name in exported)


def test_od_layout(exports):
  output_directory = os.path.dirname(exports['paths']['ssd_tf_example'])
  assert sorted(os.listdir(output_directory)) == OD_LAYOUT
  assert os.path.exists(os.path.join(output_directory, 'saved_model', 'saved_model.pb'))
  written = config_util.load_pipeline_config(os.path.join(output_directory, 'pipeline.config'))
  assert written.model.ssd.num_classes == 3
  # No temporary directories are left beside the exports.
  assert not [n for n in os.listdir(str(exports['root'])) if n.startswith('.')]


def _frozen_graph_outputs(export_dir, inputs, input_name, output_names):
  """Runs frozen_inference_graph.pb as TF1 code would: import_graph_def, feed, fetch."""
  graph_def = tf.compat.v1.GraphDef()
  with tf.io.gfile.GFile(os.path.join(export_dir, exporter.FROZEN_GRAPH_NAME), 'rb') as f:
    graph_def.ParseFromString(f.read())
  # Folded for real: no variable left to restore.
  assert not [node.name for node in graph_def.node
              if node.op in ('VariableV2', 'VarHandleOp', 'ReadVariableOp')]
  with tf.Graph().as_default() as graph:
    tf.compat.v1.import_graph_def(graph_def, name='')
    assert graph.get_operation_by_name(input_name).type == 'Placeholder'
    with tf.compat.v1.Session(graph=graph) as sess:
      values = sess.run([name + ':0' for name in output_names], {input_name + ':0': inputs})
  return dict(zip(output_names, values))


@pytest.mark.parametrize('input_type', exporter.INPUT_TYPES)
def test_frozen_graph_gives_the_saved_model_detections(exports, input_type):
  export_dir = os.path.dirname(exports['paths']['ssd_' + input_type])
  saved_model = exports['eager']['ssd_' + input_type]
  frozen = _frozen_graph_outputs(export_dir, _inputs(exports['images']['ssd'], input_type),
                                 input_type, sorted(saved_model))
  assert frozen['detection_classes'].dtype == np.float32
  # The graph's weights are the moving averages, as in the SavedModel.
  _assert_detections_equal(frozen, exports['ssd_reference'])
  for name in saved_model:
    np.testing.assert_allclose(frozen[name], saved_model[name], rtol=1e-5, atol=1e-6,
                               err_msg=name)


def test_frozen_classifier_graph_gives_the_saved_model_outputs(exports):
  export_dir = os.path.dirname(exports['paths']['classifier_image_tensor'])
  frozen = _frozen_graph_outputs(export_dir, exports['images']['classifier'], 'image_tensor',
                                 ['classes', 'probabilities'])
  saved_model = exports['eager']['classifier_image_tensor']
  np.testing.assert_array_equal(frozen['classes'], saved_model['classes'])
  np.testing.assert_allclose(frozen['probabilities'], saved_model['probabilities'],
                             rtol=1e-5, atol=1e-6)


def test_exported_checkpoint_holds_the_exported_weights_and_restores(trained, exports):
  _, training_checkpoint = trained['ssd']
  export_dir = os.path.dirname(exports['paths']['ssd_image_tensor'])
  checkpoint = tf.train.latest_checkpoint(export_dir)
  assert checkpoint == os.path.join(export_dir, 'model.ckpt')
  saved = dict(tf.train.list_variables(checkpoint))
  in_saved_model = dict(tf.train.list_variables(
      os.path.join(exports['paths']['ssd_image_tensor'], 'variables', 'variables')))
  assert saved == in_saved_model
  weights = 'FeatureExtractor/SmallMobilenetV1/Conv2d_0/weights'
  np.testing.assert_array_equal(
      tf.train.load_variable(checkpoint, weights),
      tf.train.load_variable(training_checkpoint, weights + '/ExponentialMovingAverage'))
  # The .meta holds the inference graph: import it, restore, detect.
  with tf.Graph().as_default() as graph:
    saver = tf.compat.v1.train.import_meta_graph(checkpoint + '.meta')
    with tf.compat.v1.Session(graph=graph) as sess:
      saver.restore(sess, checkpoint)
      names = sorted(exports['eager']['ssd_image_tensor'])
      values = sess.run([name + ':0' for name in names],
                        {'image_tensor:0': exports['images']['ssd']})
  _assert_detections_equal(dict(zip(names, values)), exports['ssd_reference'])


def test_tf_serving_layout(trained, exports):
  base = exports['serving_base']
  assert exports['paths']['serving'] == os.path.join(base, str(SERVING_VERSION))
  assert os.listdir(base) == [str(SERVING_VERSION)]
  version_dir = os.path.join(base, str(SERVING_VERSION))
  assert os.path.exists(os.path.join(version_dir, 'saved_model.pb'))
  assert os.path.exists(os.path.join(version_dir, 'variables', 'variables.index'))
  assert os.path.exists(os.path.join(version_dir, 'pipeline.config'))
  # A serving version is a SavedModel only: no frozen graph, no checkpoint.
  assert sorted(os.listdir(version_dir)) == ['pipeline.config', 'saved_model.pb', 'variables']
  _assert_detections_equal(exports['eager']['serving'], exports['ssd_reference'])
  # A version never overwrites another.
  config, checkpoint = trained['ssd']
  with pytest.raises(ValueError, match='version 7 already exists'):
    exporter.export_inference_graph('image_tensor', config, checkpoint, base,
                                    serving_version=SERVING_VERSION)
  assert os.listdir(base) == [str(SERVING_VERSION)]


def test_next_serving_version_sits_beside_the_first(trained, tmp_path):
  config, checkpoint = trained['classifier']
  for version in (1, 2):
    exporter.export_inference_graph('image_tensor', config, checkpoint, str(tmp_path),
                                    serving_version=version)
  assert sorted(os.listdir(str(tmp_path))) == ['1', '2']


def test_export_is_readable_by_other_users_under_a_022_umask(trained, tmp_path):
  config, checkpoint = trained['classifier']
  previous = os.umask(0o022)
  try:
    exporter.export_inference_graph('image_tensor', config, checkpoint, str(tmp_path),
                                    serving_version=1)
    exporter.export_inference_graph('image_tensor', config, checkpoint,
                                    str(tmp_path / 'od_layout'))
  finally:
    os.umask(previous)
  assert stat.S_IMODE(os.stat(str(tmp_path / 'od_layout')).st_mode) == 0o755
  for export_dir in ('1', 'od_layout'):
    for root, dirs, files in os.walk(str(tmp_path / export_dir)):
      assert os.stat(root).st_mode & 0o777 == 0o755, root
      for name in files:
        assert os.stat(os.path.join(root, name)).st_mode & 0o044 == 0o044, name
  assert sorted(os.listdir(str(tmp_path / 'od_layout'))) == OD_LAYOUT


def test_fixed_input_shape_and_inference_graph(trained, tmp_path):
  config, checkpoint = trained['classifier']
  path = exporter.export_inference_graph(
      'image_tensor', config, checkpoint, str(tmp_path / 'out'),
      input_shape=[-1, CLASSIFIER_SIZE, CLASSIFIER_SIZE, 3], write_inference_graph=True)
  assert os.path.exists(str(tmp_path / 'out' / exporter.INFERENCE_GRAPH_NAME))
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta_graph = tf.compat.v1.saved_model.load(sess, [tf.saved_model.SERVING], path)
  shape = meta_graph.signature_def['serving_default'].inputs['inputs'].tensor_shape
  assert [d.size for d in shape.dim] == [-1, CLASSIFIER_SIZE, CLASSIFIER_SIZE, 3]


def _leftovers(directory):
  return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_failed_restore_leaves_nothing(trained, tmp_path):
  config, checkpoint = trained['classifier']
  broken = tmp_path / 'broken'
  broken.mkdir()
  for suffix in ('.index', '.data-00000-of-00001'):
    with open(checkpoint + suffix, 'rb') as source:
      content = source.read()
    if suffix != '.index':
      content = content[:len(content) // 2]  # truncated data file: restore fails midway
    (broken / ('model.ckpt' + suffix)).write_bytes(content)
  out = tmp_path / 'exports'
  out.mkdir()
  with pytest.raises(Exception):  # noqa: B017 (a DataLossError or OutOfRangeError)
    exporter.export_inference_graph('image_tensor', config, str(broken / 'model.ckpt'),
                                    str(out / 'model'))
  assert _leftovers(str(out)) == []


def test_failure_after_the_saved_model_leaves_nothing(trained, tmp_path, monkeypatch):
  config, checkpoint = trained['classifier']

  def fail(*args, **kwargs):
    raise OSError('disk full')

  # The SavedModel is complete in the temp dir when the config write fails.
  monkeypatch.setattr(config_util, 'save_pipeline_config', fail)
  with pytest.raises(OSError, match='disk full'):
    exporter.export_inference_graph('image_tensor', config, checkpoint,
                                    str(tmp_path / 'model'))
  with pytest.raises(OSError, match='disk full'):
    exporter.export_inference_graph('image_tensor', config, checkpoint,
                                    str(tmp_path / 'serving'), serving_version=1)
  assert _leftovers(str(tmp_path)) == ['serving']
  assert _leftovers(str(tmp_path / 'serving')) == []


def test_failed_checkpoint_write_leaves_no_frozen_graph(trained, tmp_path, monkeypatch):
  config, checkpoint = trained['classifier']

  def fail(*args, **kwargs):
    raise OSError('disk full')

  # The SavedModel and the frozen graph are complete in the staging dir by then.
  monkeypatch.setattr(exporter, 'write_checkpoint', fail)
  with pytest.raises(OSError, match='disk full'):
    exporter.export_inference_graph('image_tensor', config, checkpoint,
                                    str(tmp_path / 'model'))
  assert _leftovers(str(tmp_path)) == []


def test_existing_empty_output_directory_is_used(trained, tmp_path):
  config, checkpoint = trained['classifier']
  (tmp_path / 'model').mkdir()
  exporter.export_inference_graph('image_tensor', config, checkpoint, str(tmp_path / 'model'))
  assert sorted(os.listdir(str(tmp_path / 'model'))) == OD_LAYOUT


def test_bad_arguments_are_refused_before_writing(trained, tmp_path):
  config, checkpoint = trained['classifier']
  (tmp_path / 'full').mkdir()
  (tmp_path / 'full' / 'keep.txt').write_text('x')
  with pytest.raises(ValueError, match='output_directory .* is not empty'):
    exporter.export_inference_graph('image_tensor', config, checkpoint, str(tmp_path / 'full'))
  with pytest.raises(ValueError, match="input_type must be one of .* got 'jpeg'"):
    exporter.export_inference_graph('jpeg', config, checkpoint, str(tmp_path / 'a'))
  with pytest.raises(ValueError, match='input_shape applies to input_type image_tensor'):
    exporter.export_inference_graph('tf_example', config, checkpoint, str(tmp_path / 'a'),
                                    input_shape=[-1, 32, 32, 3])
  with pytest.raises(ValueError, match='input_shape must be'):
    exporter.export_inference_graph('image_tensor', config, checkpoint, str(tmp_path / 'a'),
                                    input_shape=[32, 32])
  with pytest.raises(ValueError, match='No checkpoint found at'):
    exporter.export_inference_graph('image_tensor', config, str(tmp_path / 'nothing'),
                                    str(tmp_path / 'a'))
  assert sorted(os.listdir(str(tmp_path))) == ['full']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q']))
