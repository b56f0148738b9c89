"""tf.estimator's canned Estimators on slimtrain's Estimator (`tfe.LinearClassifier` ...).

    columns = [tf.compat.v1.feature_column.numeric_column('age'),
               tf.compat.v1.feature_column.categorical_column_with_hash_bucket('city', 100)]
    est = tfe.LinearClassifier(columns, n_classes=3, model_dir='/tmp/linear')
    est.train(input_fn, max_steps=1000)

Map:

* `head.py`: logits -> loss, eval metrics, predictions, export signatures
  (`classification_head`, `regression_head`).
* `heads.py`, `multi_heads.py`: tf.estimator's public heads
  (`tfe.BinaryClassHead`, `MultiClassHead`, `MultiLabelHead`, `RegressionHead`,
  `PoissonRegressionHead`, `LogisticRegressionHead`, `MultiHead`) for the
  head-based `DNNEstimator`, `LinearEstimator`, `DNNLinearCombinedEstimator`.
* `optimizers.py`: the `optimizer` argument (name, v1 or Keras instance, or callable).
* `baseline.py`: `BaselineClassifier`, `BaselineRegressor` (a bias only).
* `linear.py`: `LinearClassifier`, `LinearRegressor`.
* `dnn.py`: `DNNClassifier`, `DNNRegressor` (hidden layers over an input layer).
* `dnn_linear_combined.py`: `DNNLinearCombinedClassifier`, `...Regressor`
  (wide and deep: both logits summed, two optimizers in one train op).
* `partitioning.py`: how weights and embedding tables split over the ps tasks.
"""
