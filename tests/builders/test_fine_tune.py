"""Tests for core.fine_tune: restore maps and init_fn from real checkpoints."""

import os

import numpy as np
import tensorflow as tf

from core import fine_tune

tf.compat.v1.disable_eager_execution()


def _constant_variable(name, shape, value):
  return tf.compat.v1.get_variable(
      name, initializer=np.full(shape, value, np.float32))


def _write_checkpoint(path, values, global_step=0, partitioned=None):
  """Saves {name: (shape, fill value)} (+ partitioned names) at `path`."""
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    for name, (shape, value) in sorted(values.items()):
      _constant_variable(name, shape, value)
    for name, (shape, value) in sorted((partitioned or {}).items()):
      tf.compat.v1.get_variable(
          name, shape=shape,
          initializer=tf.compat.v1.constant_initializer(value),
          partitioner=tf.compat.v1.fixed_size_partitioner(2))
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      sess.run(step.assign(global_step))
      return tf.compat.v1.train.Saver().save(sess, path)


class ClassificationRestoreMapTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self._checkpoint = _write_checkpoint(
        os.path.join(self.get_temp_dir(), 'imagenet', 'model.ckpt'), {
            'MobilenetV1/Conv2d_0/weights': ([3, 3, 3, 8], 1.0),
            'MobilenetV1/Conv2d_0/biases': ([8], 2.0),
            'MobilenetV1/Logits/weights': ([8, 1001], 3.0),
        }, global_step=5000)

  def _build_detector(self):
    variables = {
        'conv_w': _constant_variable(
            'FeatureExtractor/MobilenetV1/Conv2d_0/weights', [3, 3, 3, 8], 0.),
        'conv_b': _constant_variable(
            'FeatureExtractor/MobilenetV1/Conv2d_0/biases', [8], 0.),
        'logits': _constant_variable(
            'FeatureExtractor/MobilenetV1/Logits/weights', [8, 10], 0.),
        'box': _constant_variable('BoxPredictor/weights', [8, 4], 0.),
    }
    variables['step'] = tf.compat.v1.train.get_or_create_global_step()
    return variables

  def test_backbone_only_renamed_without_excluded_scopes(self):
    with tf.Graph().as_default():
      variables = self._build_detector()
      for excludes in (['MobilenetV1/Logits'], 'MobilenetV1/Logits,',
                       ['FeatureExtractor/MobilenetV1/Logits/']):
        restore_map = fine_tune.classification_restore_map(
            backbone_scope='FeatureExtractor',
            checkpoint_exclude_scopes=excludes)
        self.assertEqual(
            restore_map,
            {'MobilenetV1/Conv2d_0/weights': variables['conv_w'],
             'MobilenetV1/Conv2d_0/biases': variables['conv_b']})

  def test_scope_renamed_to_checkpoint_scope(self):
    with tf.Graph().as_default():
      variables = self._build_detector()
      restore_map = fine_tune.classification_restore_map(
          backbone_scope='FeatureExtractor/MobilenetV1',
          checkpoint_scope='MobilenetV1')
      self.assertCountEqual(
          restore_map.keys(),
          ['MobilenetV1/Conv2d_0/weights', 'MobilenetV1/Conv2d_0/biases',
           'MobilenetV1/Logits/weights'])
      # With the checkpoint, the 10-class logits (1001 there) drop out.
      restore_map = fine_tune.classification_restore_map(
          backbone_scope='FeatureExtractor/MobilenetV1',
          checkpoint_scope='MobilenetV1', checkpoint_path=self._checkpoint)
      self.assertCountEqual(
          restore_map.values(), [variables['conv_w'], variables['conv_b']])

  def test_init_fn_restores_backbone(self):
    with tf.Graph().as_default():
      variables = self._build_detector()
      init_fn = fine_tune.create_init_fn(
          fine_tune.classification_restore_map(
              backbone_scope='FeatureExtractor'),
          os.path.dirname(self._checkpoint))
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with self.assertLogs(logger='tensorflow', level='INFO') as logs:
          init_fn(sess)
        self.assertAllClose(sess.run(variables['conv_w']),
                            np.ones([3, 3, 3, 8]))
        self.assertAllClose(sess.run(variables['conv_b']),
                            np.full([8], 2.0))
        self.assertAllClose(sess.run(variables['logits']), np.zeros([8, 10]))
        self.assertAllClose(sess.run(variables['box']), np.zeros([8, 4]))
        self.assertEqual(sess.run(variables['step']), 0)
      self.assertTrue(any('Restoring 2 variables' in line
                          for line in logs.output), logs.output)


class DetectionRestoreMapTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self._checkpoint = _write_checkpoint(
        os.path.join(self.get_temp_dir(), 'detector', 'model.ckpt-100'), {
            'FeatureExtractor/conv/weights': ([3, 3, 3, 8], 1.0),
            'FeatureExtractor/conv/weights/Momentum': ([3, 3, 3, 8], 9.0),
            'BoxPredictor/BoxEncoding/weights': ([8, 4], 2.0),
            'BoxPredictor/ClassPredictor/weights': ([8, 4], 3.0),
        }, global_step=100, partitioned={'Embedding/table': ([6, 2], 4.0)})

  def _build_detector(self, num_classes):
    variables = {
        'conv': _constant_variable('FeatureExtractor/conv/weights',
                                   [3, 3, 3, 8], 0.),
        'slot': _constant_variable('FeatureExtractor/conv/weights/Momentum',
                                   [3, 3, 3, 8], 0.),
        'box': _constant_variable('BoxPredictor/BoxEncoding/weights',
                                  [8, 4], 0.),
        'cls': _constant_variable('BoxPredictor/ClassPredictor/weights',
                                  [8, num_classes + 1], 0.),
        'new': _constant_variable('BoxPredictor/Extra/weights', [2], 0.),
    }
    variables['table'] = tf.compat.v1.get_variable(
        'Embedding/table', shape=[6, 2],
        initializer=tf.compat.v1.zeros_initializer(),
        partitioner=tf.compat.v1.fixed_size_partitioner(2))
    variables['step'] = tf.compat.v1.train.get_or_create_global_step()
    return variables

  def test_everything_except_excluded_scopes(self):
    with tf.Graph().as_default():
      variables = self._build_detector(num_classes=3)
      restore_map = fine_tune.detection_restore_map()
      self.assertCountEqual(
          restore_map.keys(),
          ['FeatureExtractor/conv/weights',
           'FeatureExtractor/conv/weights/Momentum',
           'BoxPredictor/BoxEncoding/weights',
           'BoxPredictor/ClassPredictor/weights', 'BoxPredictor/Extra/weights',
           'Embedding/table', 'global_step'])
      self.assertEqual(restore_map['Embedding/table'], list(variables['table']))
      restore_map = fine_tune.detection_restore_map(
          checkpoint_exclude_scopes=['BoxPredictor/ClassPredictor'],
          include_scopes=['FeatureExtractor', 'BoxPredictor'])
      self.assertCountEqual(
          restore_map.keys(),
          ['FeatureExtractor/conv/weights',
           'FeatureExtractor/conv/weights/Momentum',
           'BoxPredictor/BoxEncoding/weights', 'BoxPredictor/Extra/weights'])

  def test_init_fn_skips_other_shapes_and_global_step(self):
    with tf.Graph().as_default():
      variables = self._build_detector(num_classes=5)
      restore_map = fine_tune.detection_restore_map()
      init_fn = fine_tune.create_init_fn(restore_map, self._checkpoint)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with self.assertLogs(level='WARNING') as logs:
          init_fn(sess)
          init_fn = fine_tune.create_init_fn(restore_map, self._checkpoint)
        variables['table'] = variables['table'].as_tensor()
        values = sess.run(variables)
      self.assertAllClose(values['conv'], np.ones([3, 3, 3, 8]))
      self.assertAllClose(values['slot'], np.full([3, 3, 3, 8], 9.0))
      self.assertAllClose(values['box'], np.full([8, 4], 2.0))
      self.assertAllClose(values['table'], np.full([6, 2], 4.0))
      self.assertAllClose(values['cls'], np.zeros([8, 6]))
      self.assertAllClose(values['new'], np.zeros([2]))
      self.assertEqual(values['step'], 0)
      skipped = [line for line in logs.output if 'skips 3 of 7' in line]
      self.assertLen(skipped, 1, logs.output)
      for name in ('BoxPredictor/ClassPredictor/weights',
                   'BoxPredictor/Extra/weights', 'global_step'):
        self.assertIn(name, skipped[0])

  def test_init_fn_with_global_step_and_variable_list(self):
    with tf.Graph().as_default():
      variables = self._build_detector(num_classes=3)
      init_fn = fine_tune.create_init_fn(
          tf.compat.v1.global_variables(), self._checkpoint,
          include_global_step=True)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        init_fn(sess)
        self.assertEqual(sess.run(variables['step']), 100)
        self.assertAllClose(sess.run(variables['cls']), np.full([8, 4], 3.0))

  def test_checkpoint_path_filters_map(self):
    with tf.Graph().as_default():
      variables = self._build_detector(num_classes=5)
      restore_map = fine_tune.detection_restore_map(
          checkpoint_path=self._checkpoint)
      self.assertNotIn('BoxPredictor/ClassPredictor/weights', restore_map)
      self.assertNotIn('global_step', restore_map)
      self.assertIs(restore_map['BoxPredictor/BoxEncoding/weights'],
                    variables['box'])

  def test_saved_model_paths(self):
    export_dir = os.path.join(self.get_temp_dir(), 'saved_model')
    with tf.Graph().as_default():
      with tf.compat.v1.Session() as sess:
        _constant_variable('FeatureExtractor/conv/weights', [3, 3, 3, 8], 7.0)
        sess.run(tf.compat.v1.global_variables_initializer())
        builder = tf.compat.v1.saved_model.Builder(export_dir)
        builder.add_meta_graph_and_variables(sess, ['serve'])
        builder.save()
    for path in (export_dir, os.path.join(export_dir, 'variables',
                                          'variables')):
      self.assertEqual(fine_tune.resolve_checkpoint_path(path),
                       os.path.join(export_dir, 'variables', 'variables'))
      with tf.Graph().as_default():
        variables = self._build_detector(num_classes=3)
        init_fn = fine_tune.create_init_fn(
            fine_tune.detection_restore_map(), path)
        with self.session() as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          init_fn(sess)
          self.assertAllClose(sess.run(variables['conv']),
                              np.full([3, 3, 3, 8], 7.0))

  def test_errors_name_the_path(self):
    missing = os.path.join(self.get_temp_dir(), 'no_such_model', 'model.ckpt')
    with tf.Graph().as_default():
      self._build_detector(num_classes=3)
      restore_map = fine_tune.detection_restore_map()
      with self.assertRaisesRegex(ValueError, 'No checkpoint found.*' +
                                  'no_such_model'):
        fine_tune.create_init_fn(restore_map, missing)
      unrelated = {'Other/weights': restore_map['BoxPredictor/Extra/weights']}
      with self.assertRaisesRegex(ValueError,
                                  'None of the 1 variables.*model.ckpt-100'):
        fine_tune.create_init_fn(unrelated, self._checkpoint)
      init_fn = fine_tune.create_init_fn(unrelated, self._checkpoint,
                                         allow_empty=True)
      with self.session() as sess:
        init_fn(sess)


if __name__ == '__main__':
  tf.test.main()
