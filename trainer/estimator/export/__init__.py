"""`tfe.export`: serving receivers and export outputs (tf.estimator.export names)."""

from trainer.estimator.export.export import (  # noqa: F401
    ServingInputReceiver, SupervisedInputReceiver, TensorServingInputReceiver,
    UnsupervisedInputReceiver, build_parsing_serving_input_receiver_fn,
    build_raw_serving_input_receiver_fn)
from trainer.estimator.export.export_output import (  # noqa: F401
    ClassificationOutput, ExportOutput, PredictOutput, RegressionOutput)
