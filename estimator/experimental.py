"""`tfe.experimental`: the names tf.estimator kept under `tf.estimator.experimental`.

    import estimator as tfe
    hook = tfe.experimental.stop_if_no_decrease_hook(estimator, 'loss', 1000)

See estimator/early_stopping.py for what the stop hooks do,
in_memory_eval.py for `InMemoryEvaluatorHook` and
`make_stop_at_checkpoint_step_hook`, and export/export.py for
`build_raw_supervised_input_receiver_fn`.
"""

from estimator.early_stopping import make_early_stopping_hook  # noqa: F401
from estimator.early_stopping import read_eval_metrics  # noqa: F401
from estimator.early_stopping import stop_if_higher_hook  # noqa: F401
from estimator.early_stopping import stop_if_lower_hook  # noqa: F401
from estimator.early_stopping import stop_if_no_decrease_hook  # noqa: F401
from estimator.early_stopping import stop_if_no_increase_hook  # noqa: F401
from estimator.export.export import build_raw_supervised_input_receiver_fn  # noqa: F401
from estimator.in_memory_eval import InMemoryEvaluatorHook  # noqa: F401
from estimator.in_memory_eval import make_stop_at_checkpoint_step_hook  # noqa: F401
