"""The tf.estimator workflow on TF 2.21 (see trainer/estimator)."""
