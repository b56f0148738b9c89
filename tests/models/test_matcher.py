"""Tests of core/matcher.py: thresholds, ignored columns, forced matches."""

import numpy as np
import tensorflow as tf

from core import matcher

tf.compat.v1.disable_eager_execution()


class ArgMaxMatcherTest(tf.test.TestCase):

  def _match(self, m, similarity, valid_rows=None):
    with tf.Graph().as_default():
      sim = tf.constant(similarity, tf.float32)
      match = m.match(sim, valid_rows=None if valid_rows is None else tf.constant(valid_rows))
      with tf.compat.v1.Session() as sess:
        return sess.run([match.match_results, match.matched_column_indices(),
                         match.unmatched_column_indices(), match.ignored_column_indices(),
                         match.matched_row_indices()])

  def test_thresholds(self):
    similarity = [[0.9, 0.45, 0.1, 0.6],
                  [0.2, 0.30, 0.3, 0.7]]
    results, matched, unmatched, ignored, rows = self._match(
        matcher.ArgMaxMatcher(0.5, 0.4), similarity)
    self.assertAllEqual(results, [0, -2, -1, 1])
    self.assertAllEqual(matched, [0, 3])
    self.assertAllEqual(unmatched, [2])
    self.assertAllEqual(ignored, [1])
    self.assertAllEqual(rows, [0, 1])

  def test_no_thresholds_matches_everything(self):
    results = self._match(matcher.ArgMaxMatcher(None), [[0.1, 0.0], [0.0, 0.05]])[0]
    self.assertAllEqual(results, [0, 1])

  def test_negatives_higher_than_unmatched(self):
    results = self._match(matcher.ArgMaxMatcher(0.5, 0.3, negatives_lower_than_unmatched=False),
                          [[0.9, 0.4, 0.1]])[0]
    self.assertAllEqual(results, [0, -1, -2])

  def test_force_match_for_each_row(self):
    similarity = [[0.3, 0.2, 0.1],
                  [0.1, 0.8, 0.2],
                  [0.0, 0.1, 0.25]]
    plain = self._match(matcher.ArgMaxMatcher(0.5, 0.5), similarity)[0]
    self.assertAllEqual(plain, [-1, 1, -1])
    forced = self._match(matcher.ArgMaxMatcher(0.5, 0.5, force_match_for_each_row=True),
                         similarity)[0]
    self.assertAllEqual(forced, [0, 1, 2])

  def test_empty_groundtruth(self):
    results = self._match(matcher.ArgMaxMatcher(0.5), np.zeros([0, 4], np.float32))[0]
    self.assertAllEqual(results, [-1, -1, -1, -1])

  def test_invalid_rows_never_match(self):
    results = self._match(matcher.ArgMaxMatcher(0.5, force_match_for_each_row=True),
                          [[0.9, 0.8], [0.95, 0.1]], valid_rows=[True, False])[0]
    self.assertAllEqual(results, [0, 0])

  def test_gather_based_on_match(self):
    with tf.Graph().as_default():
      match = matcher.Match(tf.constant([1, -1, -2, 0]))
      gathered = match.gather_based_on_match(tf.constant([[1.0, 1.0], [2.0, 2.0]]),
                                             [-1.0, -1.0], [-2.0, -2.0])
      with tf.compat.v1.Session() as sess:
        self.assertAllEqual(sess.run(gathered), [[2, 2], [-1, -1], [-2, -2], [1, 1]])

  def test_bad_thresholds(self):
    with self.assertRaisesRegex(ValueError, 'unmatched_threshold'):
      matcher.ArgMaxMatcher(0.4, 0.5)


if __name__ == '__main__':
  tf.test.main()
