"""Tests for core.variables_helper: regex filters, gradients, checkpoints."""

import os

import numpy as np
import tensorflow as tf

from core import variables_helper

tf.compat.v1.disable_eager_execution()


def _save(variables, checkpoint_path):
  saver = tf.compat.v1.train.Saver(variables)
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    saver.save(sess, checkpoint_path)


class FilterVariablesTest(tf.test.TestCase):

  def _create_variables(self):
    return [tf.Variable(1.0, name='FeatureExtractor/InceptionV3/weights'),
            tf.Variable(1.0, name='FeatureExtractor/InceptionV3/biases'),
            tf.Variable(1.0, name='StackProposalGenerator/weights'),
            tf.Variable(1.0, name='StackProposalGenerator/biases')]

  def test_return_all_variables_when_empty_regex(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      out = variables_helper.filter_variables(variables, [''])
      self.assertCountEqual(out, variables)

  def test_return_all_variables_when_no_regex(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      self.assertEqual(variables_helper.filter_variables(variables, []),
                       variables)

  def test_return_variables_which_do_not_match_single_regex(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      out = variables_helper.filter_variables(variables,
                                              ['FeatureExtractor/.*'])
      self.assertCountEqual(out, variables[2:])

  def test_return_variables_which_do_not_match_any_regex_in_list(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      out = variables_helper.filter_variables(
          variables, ['FeatureExtractor.*biases', 'StackProposalGenerator.*biases'])
      self.assertCountEqual(out, [variables[0], variables[2]])

  def test_return_variables_matching_empty_regex_list(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      out = variables_helper.filter_variables(variables, [''], invert=True)
      self.assertCountEqual(out, [])

  def test_return_variables_matching_some_regex_in_list(self):
    with tf.Graph().as_default():
      variables = self._create_variables()
      out = variables_helper.filter_variables(
          variables, ['FeatureExtractor.*biases', 'StackProposalGenerator.*biases'],
          invert=True)
      self.assertCountEqual(out, [variables[1], variables[3]])

  def test_filter_empty_variable_list(self):
    self.assertEqual(variables_helper.filter_variables([], ['.*']), [])


class FilterTrainableVariablesTest(tf.test.TestCase):

  def test_include_and_exclude_patterns(self):
    with tf.Graph().as_default():
      fe_w = tf.Variable(1.0, name='FeatureExtractor/conv/weights')
      fe_b = tf.Variable(1.0, name='FeatureExtractor/conv/biases')
      bp_w = tf.Variable(1.0, name='BoxPredictor/conv/weights')
      bp_b = tf.Variable(1.0, name='BoxPredictor/conv/biases')
      variables = [fe_w, fe_b, bp_w, bp_b]
      fn = variables_helper.filter_trainable_variables
      self.assertEqual(fn(variables), variables)
      self.assertEqual(fn(variables, [], []), variables)
      self.assertEqual(fn(variables, include_patterns=['BoxPredictor']),
                       [bp_w, bp_b])
      self.assertEqual(fn(variables, exclude_patterns=['biases$']),
                       [fe_w, bp_w])
      self.assertEqual(
          fn(variables, include_patterns=['conv/'],
             exclude_patterns=['^FeatureExtractor']), [bp_w, bp_b])
      self.assertEqual(fn(variables, include_patterns=['Nothing']), [])


class MultiplyGradientsMatchingRegexTest(tf.test.TestCase):

  def _create_grads_and_vars(self):
    return [(tf.constant(1.0),
             tf.Variable(1.0, name='FeatureExtractor/InceptionV3/weights')),
            (tf.constant(2.0),
             tf.Variable(2.0, name='FeatureExtractor/InceptionV3/biases')),
            (tf.constant(3.0),
             tf.Variable(3.0, name='StackProposalGenerator/weights')),
            (tf.constant(4.0),
             tf.Variable(4.0, name='StackProposalGenerator/biases'))]

  def _run(self, grads_and_vars):
    with self.session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return sess.run(grads_and_vars)

  def test_multiply_all_feature_extractor_variables(self):
    with tf.Graph().as_default():
      grads_and_vars = variables_helper.multiply_gradients_matching_regex(
          self._create_grads_and_vars(), ['FeatureExtractor/.*'], 0.0)
      self.assertCountEqual(self._run(grads_and_vars),
                            [(0.0, 1.0), (0.0, 2.0), (3.0, 3.0), (4.0, 4.0)])

  def test_multiply_all_bias_variables(self):
    with tf.Graph().as_default():
      grads_and_vars = variables_helper.multiply_gradients_matching_regex(
          self._create_grads_and_vars(), ['.*/biases'], 0.0)
      self.assertCountEqual(self._run(grads_and_vars),
                            [(1.0, 1.0), (0.0, 2.0), (3.0, 3.0), (0.0, 4.0)])

  def test_no_match_returns_gradients_unchanged(self):
    with tf.Graph().as_default():
      original = self._create_grads_and_vars()
      grads_and_vars = variables_helper.multiply_gradients_matching_regex(
          original, ['NoSuchScope/.*'], 3.0)
      self.assertEqual(grads_and_vars, original)
      self.assertEqual(
          variables_helper.multiply_gradients_matching_regex([], ['.*'], 2.0),
          [])

  def test_none_gradient_and_indexed_slices(self):
    with tf.Graph().as_default():
      embedding = tf.Variable(np.ones([4, 2], np.float32),
                              name='Embedding/biases')
      loss = tf.reduce_sum(tf.gather(embedding, [0, 2, 2]))
      unused = tf.Variable(1.0, name='Unused/biases')
      grad = tf.gradients(loss, [embedding])[0]
      self.assertIsInstance(grad, tf.IndexedSlices)
      grads_and_vars = variables_helper.multiply_gradients_matching_regex(
          [(grad, embedding), (None, unused)], ['.*/biases'], 3.0)
      new_grad, var = grads_and_vars[0]
      self.assertIsInstance(new_grad, tf.IndexedSlices)
      self.assertIs(var, embedding)
      self.assertIsNone(grads_and_vars[1][0])
      dense = tf.convert_to_tensor(new_grad)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        self.assertAllClose(sess.run(dense),
                            [[3, 3], [0, 0], [6, 6], [0, 0]])


class FreezeGradientsMatchingRegexTest(tf.test.TestCase):

  def test_freeze_all_feature_extractor_variables(self):
    with tf.Graph().as_default():
      grads_and_vars = [
          (tf.constant(1.0),
           tf.Variable(1.0, name='FeatureExtractor/InceptionV3/weights')),
          (tf.constant(2.0),
           tf.Variable(2.0, name='FeatureExtractor/InceptionV3/biases')),
          (tf.constant(3.0),
           tf.Variable(3.0, name='StackProposalGenerator/weights')),
          (tf.constant(4.0),
           tf.Variable(4.0, name='StackProposalGenerator/biases'))]
      grads_and_vars = variables_helper.freeze_gradients_matching_regex(
          grads_and_vars, ['FeatureExtractor/.*'])
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        output = sess.run(grads_and_vars)
    self.assertCountEqual(output, [(3.0, 3.0), (4.0, 4.0)])


class GetVariablesAvailableInCheckpointTest(tf.test.TestCase):

  def test_return_all_variables_from_checkpoint(self):
    with tf.Graph().as_default():
      variables = [tf.Variable(1.0, name='weights'),
                   tf.Variable(1.0, name='biases')]
      checkpoint_path = os.path.join(self.get_temp_dir(), 'all', 'model.ckpt')
      _save(variables, checkpoint_path)
      out = variables_helper.get_variables_available_in_checkpoint(
          variables, checkpoint_path)
    self.assertCountEqual(out, variables)
    # Sorted name order, as the OD API returns it.
    self.assertEqual([v.op.name for v in out], ['biases', 'weights'])

  def test_return_all_variables_from_checkpoint_with_partition(self):
    with tf.Graph().as_default():
      partitioner = tf.compat.v1.fixed_size_partitioner(2)
      variables = [
          tf.compat.v1.get_variable(name='weights', shape=(2, 2),
                                    partitioner=partitioner),
          tf.Variable([1.0, 2.0], name='biases')]
      checkpoint_path = os.path.join(self.get_temp_dir(), 'partition',
                                     'model.ckpt')
      _save(variables, checkpoint_path)
      out = variables_helper.get_variables_available_in_checkpoint(
          variables, checkpoint_path)
      self.assertCountEqual(out, variables)
      # The partitions themselves, as tf.compat.v1.global_variables() lists
      # them, are matched to the full variable's name and shape.
      parts = variables_helper.get_variables_available_in_checkpoint(
          tf.compat.v1.global_variables(), checkpoint_path)
      self.assertCountEqual(parts, tf.compat.v1.global_variables())

  def test_return_variables_available_in_checkpoint(self):
    checkpoint_path = os.path.join(self.get_temp_dir(), 'available',
                                   'model.ckpt')
    with tf.Graph().as_default():
      weight_variable = tf.Variable(1.0, name='weights')
      global_step = tf.compat.v1.train.get_or_create_global_step()
      graph1_variables = [weight_variable, global_step]
      _save(graph1_variables, checkpoint_path)
    with tf.Graph().as_default():
      graph2_variables = graph1_variables + [tf.Variable(1.0, name='biases')]
      out = variables_helper.get_variables_available_in_checkpoint(
          graph2_variables, checkpoint_path, include_global_step=False)
      with_step = variables_helper.get_variables_available_in_checkpoint(
          graph2_variables, checkpoint_path, include_global_step=True)
    self.assertCountEqual(out, [weight_variable])
    self.assertCountEqual(with_step, [weight_variable, global_step])

  def test_return_variables_available_in_checkpoint_with_dict_inputs(self):
    checkpoint_path = os.path.join(self.get_temp_dir(), 'dict', 'model.ckpt')
    with tf.Graph().as_default():
      _save([tf.Variable(1.0, name='ckpt_weights')], checkpoint_path)
    with tf.Graph().as_default():
      graph2_variables_dict = {
          'ckpt_weights': tf.Variable(1.0, name='weights'),
          'ckpt_biases': tf.Variable(1.0, name='biases')}
      out = variables_helper.get_variables_available_in_checkpoint(
          graph2_variables_dict, checkpoint_path)
    self.assertIsInstance(out, dict)
    self.assertCountEqual(list(out.keys()), ['ckpt_weights'])
    self.assertEqual(out['ckpt_weights'].op.name, 'weights')

  def test_return_variables_with_correct_sizes(self):
    checkpoint_path = os.path.join(self.get_temp_dir(), 'sizes', 'model.ckpt')
    with tf.Graph().as_default():
      bias_variable = tf.Variable(3.0, name='biases')
      global_step = tf.compat.v1.train.get_or_create_global_step()
      graph1_variables = [
          tf.Variable([[1.0, 2.0], [3.0, 4.0]], name='weights'),
          bias_variable, global_step]
      _save(graph1_variables, checkpoint_path)
    with tf.Graph().as_default():
      graph2_variables = [
          tf.Variable([1.0, 2.0], name='weights'),  # New variable shape.
          bias_variable, global_step]
      with self.assertLogs(level='WARNING') as logs:
        out = variables_helper.get_variables_available_in_checkpoint(
            graph2_variables, checkpoint_path, include_global_step=True)
    self.assertCountEqual(out, [bias_variable, global_step])
    self.assertTrue(any('incompatible shape' in line for line in logs.output))

  def test_rejects_other_input_types(self):
    with self.assertRaisesRegex(ValueError, 'list or dict'):
      variables_helper.get_variables_available_in_checkpoint(
          'weights', '/nonexistent')

  def test_checkpoint_path_forms(self):
    train_dir = os.path.join(self.get_temp_dir(), 'forms')
    prefix = os.path.join(train_dir, 'model.ckpt-7')
    with tf.Graph().as_default():
      variables = [tf.Variable(1.0, name='weights')]
      _save(variables, prefix)
      resolve = variables_helper.resolve_checkpoint_path
      self.assertEqual(resolve(prefix), prefix)
      self.assertEqual(resolve(train_dir), prefix)
      self.assertEqual(
          variables_helper.get_variables_available_in_checkpoint(
              variables, train_dir), variables)
      for missing in (os.path.join(train_dir, 'model.ckpt-8'),
                      os.path.join(self.get_temp_dir(), 'empty_dir')):
        tf.io.gfile.makedirs(os.path.join(self.get_temp_dir(), 'empty_dir'))
        with self.assertRaisesRegex(ValueError, 'No checkpoint found.*' +
                                    os.path.basename(missing)):
          resolve(missing)
      with self.assertRaisesRegex(ValueError, 'empty'):
        resolve('')


if __name__ == '__main__':
  tf.test.main()
