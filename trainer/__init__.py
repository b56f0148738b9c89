"""Training, evaluation and export: the library entry points and their command lines.

Two workflows read the same pipeline config. Start with `trainer.py` (the
legacy loop, `python -m trainer.train`) or `model_lib.py` (the Estimator
workflow, `python -m trainer.model_main`).

Map:

* Legacy training: `trainer.py` (`train()` = `build_training_graph()` +
  `run_training()`), `train_settings.py` (`TrainSettings`: train()'s run
  settings as one object), `training_loop.py` (the step function, progress
  and stopping), `train.py` (command line). `numerics.py` is the old import
  path of `core/numerics.py`; the gradient surgery and the fine-tune init_fn
  both workflows use are `core/gradient_surgery.py` and `core/fine_tune.py`.
  The cluster side (ps tasks, done signals, waiting for peers, sync replicas)
  lives in `deployment/` (`cluster_runtime.py`, `sync_replicas.py`).
* Evaluation: `evaluator.py` (metrics of each checkpoint), `eval_images.py`
  (boxes drawn for TensorBoard), `eval.py` (command line).
* Export: `exporter.py` (`export_inference_graph`), `export.py` (command line).
* Estimator workflow: `model_lib.py`, `model_main.py` (command line), and the
  `estimator/` package (`from trainer import estimator as tfe`).
* `demo.py`: `make demo`, a small detector trained, evaluated and exported.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
