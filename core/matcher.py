"""Matching anchors (columns) to groundtruth boxes (rows) by similarity.

Given an [N, M] similarity matrix (N groundtruth boxes, M anchors), a matcher
decides for every anchor one of

    match_results[j] >= 0   matched to groundtruth row match_results[j]
    match_results[j] == -1  unmatched (a negative: trained as background)
    match_results[j] == -2  ignored (neither positive nor negative)

The ArgMaxMatcher matches each anchor to its most similar groundtruth box when
that similarity is >= matched_threshold, calls it unmatched below
unmatched_threshold and ignores it in between. With force_match_for_each_row
every groundtruth box additionally claims its single best anchor, so no box
goes untrained because no anchor overlaps it well enough.

Usage:

    matcher = matcher_lib.ArgMaxMatcher(matched_threshold=0.5,
                                        unmatched_threshold=0.4)
    match = matcher.match(box_list_ops.iou(groundtruth_boxes, anchors))
    positives = match.matched_column_indices()
    targets = match.gather_based_on_match(groundtruth_boxes, [0.] * 4, [0.] * 4)
"""

import tensorflow as tf

UNMATCHED = -1
IGNORED = -2


class Match:
  """The result of a matcher: one int32 per column (anchor).

  Args:
    match_results: int32 [M] tensor with row indices, -1 or -2.
  """

  def __init__(self, match_results):
    if match_results.shape.ndims != 1:
      raise ValueError('match_results must be rank 1, got shape %s' % match_results.shape)
    if match_results.dtype != tf.int32:
      raise ValueError('match_results must be int32, got %s' % match_results.dtype)
    self._match_results = match_results

  @property
  def match_results(self):
    return self._match_results

  def _indices_where(self, condition):
    return tf.reshape(tf.cast(tf.where(condition), tf.int32), [-1])

  def matched_column_indices(self):
    """Returns int32 [num_matched] indices of matched columns."""
    return self._indices_where(self._match_results > -1)

  def matched_column_indicator(self):
    """Returns bool [M]: whether each column is matched."""
    return self._match_results >= 0

  def num_matched_columns(self):
    return tf.size(self.matched_column_indices())

  def unmatched_column_indices(self):
    return self._indices_where(tf.equal(self._match_results, UNMATCHED))

  def unmatched_column_indicator(self):
    return tf.equal(self._match_results, UNMATCHED)

  def num_unmatched_columns(self):
    return tf.size(self.unmatched_column_indices())

  def ignored_column_indices(self):
    return self._indices_where(tf.equal(self._match_results, IGNORED))

  def ignored_column_indicator(self):
    return tf.equal(self._match_results, IGNORED)

  def num_ignored_columns(self):
    return tf.size(self.ignored_column_indices())

  def unmatched_or_ignored_column_indices(self):
    return self._indices_where(self._match_results < 0)

  def matched_row_indices(self):
    """Returns int32 [num_matched]: the row each matched column matched."""
    return tf.gather(self._match_results, self.matched_column_indices())

  def gather_based_on_match(self, input_tensor, unmatched_value, ignored_value):
    """Picks, per column, the row of `input_tensor` it matched.

    Args:
      input_tensor: [N, d...] tensor with one row per groundtruth box.
      unmatched_value: [d...] value for unmatched columns.
      ignored_value: [d...] value for ignored columns.

    Returns:
      [M, d...] tensor.
    """
    input_tensor = tf.convert_to_tensor(input_tensor)
    unmatched_value = tf.cast(unmatched_value, input_tensor.dtype)
    ignored_value = tf.cast(ignored_value, input_tensor.dtype)
    extended = tf.concat([tf.stack([ignored_value, unmatched_value]), input_tensor], axis=0)
    return tf.gather(extended, self._match_results + 2)


class ArgMaxMatcher:
  """Matches every column to its argmax row, subject to thresholds.

  Args:
    matched_threshold: similarity at or above which a column is matched; None
      means every column is matched to its argmax row (ignore thresholds).
    unmatched_threshold: similarity below which a column is unmatched
      (default: matched_threshold); between the two, columns are ignored.
    negatives_lower_than_unmatched: True makes columns below
      unmatched_threshold negatives and those between the thresholds ignored;
      False swaps that (columns below become ignored).
    force_match_for_each_row: every row also claims its best column.

  Raises:
    ValueError: if unmatched_threshold > matched_threshold, or a threshold is
      given without the other when thresholds are ignored.
  """

  def __init__(self,
               matched_threshold,
               unmatched_threshold=None,
               negatives_lower_than_unmatched=True,
               force_match_for_each_row=False):
    if matched_threshold is None and unmatched_threshold is not None:
      raise ValueError('unmatched_threshold needs a matched_threshold')
    self._matched_threshold = matched_threshold
    if unmatched_threshold is None:
      unmatched_threshold = matched_threshold
    elif unmatched_threshold > matched_threshold:
      raise ValueError('matcher unmatched_threshold (%s) must not exceed '
                       'matched_threshold (%s)' % (unmatched_threshold, matched_threshold))
    self._unmatched_threshold = unmatched_threshold
    if not negatives_lower_than_unmatched and unmatched_threshold == matched_threshold:
      raise ValueError('with negatives_lower_than_unmatched=False the thresholds must '
                       'differ, got %s and %s' % (matched_threshold, unmatched_threshold))
    self._negatives_lower_than_unmatched = negatives_lower_than_unmatched
    self._force_match_for_each_row = force_match_for_each_row

  def match(self, similarity_matrix, valid_rows=None, scope=None):
    """Matches the columns of an [N, M] similarity matrix.

    Args:
      similarity_matrix: float [N, M]; N may be 0 (then nothing matches).
      valid_rows: optional bool [N]; invalid rows (e.g. padding) never match.
      scope: name scope.

    Returns:
      A Match.
    """
    with tf.compat.v1.name_scope(scope, 'ArgMaxMatcher'):
      similarity_matrix = tf.convert_to_tensor(similarity_matrix, tf.float32)
      if valid_rows is not None:
        similarity_matrix = tf.where(
            tf.tile(tf.expand_dims(valid_rows, 1), [1, tf.shape(similarity_matrix)[1]]),
            similarity_matrix, tf.fill(tf.shape(similarity_matrix), -1.0))
      num_rows = tf.shape(similarity_matrix)[0]
      num_cols = tf.shape(similarity_matrix)[1]
      results = tf.cond(
          num_rows > 0,
          lambda: self._match_non_empty(similarity_matrix, valid_rows),
          lambda: UNMATCHED * tf.ones([num_cols], dtype=tf.int32))
      results.set_shape([similarity_matrix.shape[1]])
      return Match(results)

  def _match_non_empty(self, similarity, valid_rows):
    matches = tf.argmax(similarity, axis=0, output_type=tf.int32)
    if self._matched_threshold is not None:
      best = tf.reduce_max(similarity, axis=0)
      below_unmatched = best < self._unmatched_threshold
      between = tf.logical_and(best >= self._unmatched_threshold,
                               best < self._matched_threshold)
      if self._negatives_lower_than_unmatched:
        matches = tf.where(below_unmatched, UNMATCHED * tf.ones_like(matches), matches)
        matches = tf.where(between, IGNORED * tf.ones_like(matches), matches)
      else:
        matches = tf.where(below_unmatched, IGNORED * tf.ones_like(matches), matches)
        matches = tf.where(between, UNMATCHED * tf.ones_like(matches), matches)
    if self._force_match_for_each_row:
      num_rows = tf.shape(similarity)[0]
      num_cols = tf.shape(similarity)[1]
      best_col = tf.argmax(similarity, axis=1, output_type=tf.int32)        # [N]
      forced = tf.one_hot(best_col, depth=num_cols, dtype=tf.float32)      # [N, M]
      if valid_rows is not None:
        forced *= tf.expand_dims(tf.cast(valid_rows, tf.float32), 1)
      # Later rows win when two rows pick the same column.
      row_ids = tf.cast(tf.range(num_rows), tf.float32)[:, None] + 1.0
      forced_row = tf.cast(tf.reduce_max(forced * row_ids, axis=0), tf.int32) - 1
      matches = tf.where(forced_row >= 0, forced_row, matches)
    return matches
