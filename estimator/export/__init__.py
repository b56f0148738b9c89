"""`tfe.export`: serving receivers and export outputs (tf.estimator.export names).

Map:

* `export.py`: what a serving input function returns (`ServingInputReceiver`,
  `TensorServingInputReceiver`, ...) and the `build_*_serving_input_receiver_fn`
  helpers.
* `export_output.py`: what a model_fn exports per signature
  (`PredictOutput`, `ClassificationOutput`, `RegressionOutput`).

The SavedModel itself is written by `estimator/saved_model.py`.
"""

from estimator.export.export import (  # noqa: F401
    ServingInputReceiver, SupervisedInputReceiver, TensorServingInputReceiver,
    UnsupervisedInputReceiver, build_parsing_serving_input_receiver_fn,
    build_raw_serving_input_receiver_fn, build_raw_supervised_input_receiver_fn)
from estimator.export.export_output import (  # noqa: F401
    ClassificationOutput, EvalOutput, ExportOutput, PredictOutput, RegressionOutput,
    TrainOutput)
