"""`tfe.classifier_parse_example_spec` / `regressor_parse_example_spec`.

The tf.Example parsing spec of a canned model's features *and* its label
(and weight), for an input_fn reading TFRecords:

    spec = tfe.classifier_parse_example_spec(feature_columns, label_key='kind',
                                             label_dtype=tf.string, weight_column='w')
    def input_fn():
      ds = tf.data.TFRecordDataset(files).batch(64).map(
          lambda s: tf.io.parse_example(s, spec))
      return ds.map(lambda f: (f, f.pop('kind')))

Labels get `FixedLenFeature([1])` (classifier) or
`FixedLenFeature([label_dimension])` (regressor); a weight column given by
name a float `FixedLenFeature([1])`. Columns of both feature-column
generations are accepted (v1-only ones such as `shared_embedding_columns`
included).
"""

import tensorflow as tf

__all__ = ['classifier_parse_example_spec', 'regressor_parse_example_spec']


def _feature_spec(feature_columns):
  """{key: parsing spec} of every column, v1 or v2."""
  spec = {}
  for column in feature_columns:
    column_spec = (column.parse_example_spec if hasattr(column, 'parse_example_spec')
                   else column._parse_example_spec)  # pylint: disable=protected-access
    for key, value in column_spec.items():
      if key in spec and spec[key] != value:
        raise ValueError('feature_columns contain different parse_spec for key {}. Given {} '
                         'and {}'.format(key, value, spec[key]))
      spec[key] = value
  return spec


def _add_label_and_weight(spec, label_key, label_spec, weight_column):
  if label_key in spec:
    raise ValueError('label should not be already in the feature columns. label_key: {}, '
                     'parsing_spec: {}'.format(label_key, spec))
  spec[label_key] = label_spec
  if weight_column is None:
    return spec
  if isinstance(weight_column, str):
    weight_column = tf.feature_column.numeric_column(weight_column)
  if not hasattr(weight_column, 'parse_example_spec'):
    raise ValueError('weight_column should be a string or a numeric_column, given: '
                     '{!r}'.format(weight_column))
  spec.update(weight_column.parse_example_spec)
  return spec


def classifier_parse_example_spec(feature_columns, label_key, label_dtype=tf.int64,
                                  label_default=None, weight_column=None):
  """The parsing spec of a classifier's features, label and weight.

  Args:
    feature_columns: the model's feature columns.
    label_key: the tf.Example key of the label.
    label_dtype: tf.int64 (class ids) or tf.string (with label_vocabulary).
    label_default: value for examples without a label (default: required).
    weight_column: None, a feature name or a numeric_column.

  Returns:
    dict {key: FixedLenFeature / VarLenFeature / ...}.

  Raises:
    ValueError: the label key is also a feature, or specs conflict.
  """
  spec = _feature_spec(feature_columns)
  label_spec = tf.io.FixedLenFeature((1,), dtype=label_dtype, default_value=label_default)
  return _add_label_and_weight(spec, label_key, label_spec, weight_column)


def regressor_parse_example_spec(feature_columns, label_key, label_dtype=tf.float32,
                                 label_default=None, label_dimension=1, weight_column=None):
  """The parsing spec of a regressor's features, label and weight.

  Args:
    feature_columns: the model's feature columns.
    label_key: the tf.Example key of the label.
    label_dtype: dtype of the label (float32).
    label_default: value for examples without a label (default: required).
    label_dimension: number of regression targets per example.
    weight_column: None, a feature name or a numeric_column.

  Returns:
    dict {key: parsing spec}.

  Raises:
    ValueError: the label key is also a feature, or specs conflict.
  """
  spec = _feature_spec(feature_columns)
  label_spec = tf.io.FixedLenFeature((label_dimension,), dtype=label_dtype,
                                     default_value=label_default)
  return _add_label_and_weight(spec, label_key, label_spec, weight_column)
