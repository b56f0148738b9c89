"""The tf.estimator workflow on TF 2.21: `import estimator as tfe`.

`tf.estimator.X` ports as `tfe.X` (Estimator, EstimatorSpec, ModeKeys,
RunConfig, WarmStartSettings, export.*, TrainSpec, EvalSpec,
train_and_evaluate, exporters, experimental early-stopping hooks, the canned
Estimators). Start with
`estimator.py`, then `training.py` for `train_and_evaluate`.

A top-level package since issue 25 D (it was `trainer/estimator/`, though
the legacy trainer never used it). The old import, `from trainer import
estimator as tfe` or `trainer.estimator.<module>`, still works and yields
these same module objects (trainer/__init__.py keeps the alias).

Map:

* The Estimator: `estimator.py` (train / evaluate / predict / export),
  `model_fn.py` (`ModeKeys`, `EstimatorSpec`), `run_config.py` (`RunConfig`,
  TF_CONFIG), `util.py` (small shared helpers), `eval_summaries.py` (eval
  events), `warm_starting.py` (`WarmStartSettings`), `replicate.py` (several
  clones per step, `TowerOptimizer`), `distribute.py` (RunConfig's
  `train_distribute` / `eval_distribute`: OneDevice and Mirrored strategies
  as placements and clones, the others refused), `inputs.py` (`tfe.inputs`: input_fns over numpy
  arrays and pandas DataFrames).
* Exporting: `export/` (serving receivers and export outputs, `tfe.export`),
  `saved_model.py` (an Estimator's SavedModel: MetaGraphs and signatures),
  `exporter.py` (`FinalExporter`, `LatestExporter`, `BestExporter`).
* Canned Estimators: `canned/` (`head.py`: losses, metrics, predictions and
  signatures from logits; `optimizers.py`: the `optimizer` argument;
  `linear.py`: `LinearClassifier`, `LinearRegressor`; `baseline.py`:
  `BaselineClassifier`, `BaselineRegressor`; `dnn.py`: `DNNClassifier`,
  `DNNRegressor`; `dnn_linear_combined.py`: `DNNLinearCombinedClassifier`,
  `DNNLinearCombinedRegressor`; `partitioning.py`: splitting tables over ps tasks).
* Training and evaluating together: `training.py` (`TrainSpec`, `EvalSpec`,
  `train_and_evaluate`), `early_stopping.py` and `experimental.py` (the stop
  hooks).
* tf.contrib.learn / tf.contrib.training names: `experiment.py`,
  `learn_runner.py`, `hparams.py`, `learn.py` (`tfe.learn`: the
  `tf.contrib.learn` namespace, with contrib's `ModeKeys.INFER`).
* Keras: `keras.py` (`tfe.keras.model_to_estimator`: a compiled tf_keras
  model run as an Estimator, rebuilt in each graph from its weights).
* More tf.estimator 2.15 names: `hooks.py` (`tfe.LoggingTensorHook` ...:
  TF's own hook classes), `parsing_utils.py` (`classifier_parse_example_spec`,
  `regressor_parse_example_spec`), `extenders.py` (`add_metrics`),
  `in_memory_eval.py` (`experimental.InMemoryEvaluatorHook`,
  `experimental.make_stop_at_checkpoint_step_hook`), `canned/heads.py` and
  `canned/multi_heads.py` (`tfe.BinaryClassHead` ... `tfe.MultiHead`, for
  `DNNEstimator`, `LinearEstimator`, `DNNLinearCombinedEstimator`).
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
import tensorflow as tf

# Estimator core (estimator.py, model_fn.py, run_config.py, warm_starting.py, export/).
from estimator import export  # noqa: F401
from estimator import inputs  # noqa: F401  (tfe.inputs.numpy_input_fn, pandas_input_fn)
from estimator import keras  # noqa: F401  (tfe.keras.model_to_estimator)
from estimator.estimator import Estimator  # noqa: F401
from estimator.model_fn import EstimatorSpec  # noqa: F401
from estimator.model_fn import ModeKeys  # noqa: F401
from estimator.replicate import TowerOptimizer  # noqa: F401
from estimator.run_config import RunConfig  # noqa: F401
from estimator.warm_starting import WarmStartSettings  # noqa: F401

# Canned Estimators (canned/).
from estimator.canned.baseline import BaselineClassifier  # noqa: E402,F401
from estimator.canned.baseline import BaselineRegressor  # noqa: E402,F401
from estimator.canned.linear import LinearClassifier  # noqa: E402,F401
from estimator.canned.linear import LinearRegressor  # noqa: E402,F401
from estimator.canned.dnn import DNNClassifier  # noqa: E402,F401
from estimator.canned.dnn import DNNRegressor  # noqa: E402,F401
from estimator.canned.dnn_linear_combined import (  # noqa: E402,F401
    DNNLinearCombinedClassifier, DNNLinearCombinedRegressor)

# train_and_evaluate, exporters and early stopping (training.py, exporter.py, experimental.py).
from estimator import experimental  # noqa: E402,F401
from estimator.exporter import BestExporter  # noqa: E402,F401
from estimator.exporter import Exporter  # noqa: E402,F401
from estimator.exporter import FinalExporter  # noqa: E402,F401
from estimator.exporter import LatestExporter  # noqa: E402,F401
from estimator.training import EvalSpec  # noqa: E402,F401
from estimator.training import TrainSpec  # noqa: E402,F401
from estimator.training import train_and_evaluate  # noqa: E402,F401

# tf.contrib.learn / tf.contrib.training pieces (hparams.py, experiment.py, learn_runner.py,
# learn.py: the `tf.contrib.learn` namespace with contrib's ModeKeys).
from estimator import learn  # noqa: E402,F401
from estimator import learn_runner  # noqa: E402,F401
from estimator.experiment import Experiment  # noqa: E402,F401
from estimator.hparams import HParams  # noqa: E402,F401

# tf.estimator's re-exported session hooks (hooks.py): tfe.LoggingTensorHook, ...
from estimator.hooks import (  # noqa: E402,F401
    CheckpointSaverHook, CheckpointSaverListener, FeedFnHook, FinalOpsHook,
    GlobalStepWaiterHook, LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook,
    ProfilerHook, SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues,
    StepCounterHook, StopAtStepHook, SummarySaverHook)

# More tf.estimator 2.15 names (parsing_utils.py, extenders.py; VocabInfo is TF's own class).
from estimator.extenders import add_metrics  # noqa: E402,F401
from estimator.parsing_utils import classifier_parse_example_spec  # noqa: E402,F401
from estimator.parsing_utils import regressor_parse_example_spec  # noqa: E402,F401
VocabInfo = tf.compat.v1.train.VocabInfo

# Public heads and the head-based canned Estimators (canned/heads.py, canned/multi_heads.py).
from estimator.canned.heads import (  # noqa: E402,F401
    BinaryClassHead, LogisticRegressionHead, MultiClassHead, PoissonRegressionHead,
    RegressionHead)
from estimator.canned.multi_heads import MultiHead, MultiLabelHead  # noqa: E402,F401
from estimator.canned.dnn import DNNEstimator  # noqa: E402,F401
from estimator.canned.linear import LinearEstimator  # noqa: E402,F401
from estimator.canned.dnn_linear_combined import DNNLinearCombinedEstimator  # noqa: E402,F401
