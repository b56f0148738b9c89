"""Training, evaluation and export: the library entry points and their command lines.

Two workflows read the same pipeline config. Start with `trainer.py` (the
legacy loop, `python -m trainer.train`) or `model_lib.py` (the Estimator
workflow, `python -m trainer.model_main`).

Map:

* Legacy training: `trainer.py` (`train()` = `build_training_graph()` +
  `run_training()`), `train_settings.py` (`TrainSettings`: train()'s run
  settings as one object), `training_loop.py` (the step function, progress
  and stopping), `supervised_loop.py` (the Supervisor sessions around it,
  as `slim.learning.train` runs them, closed within the fault runtime's
  bound), `train.py` (command line). `numerics.py` is the old import
  path of `core/numerics.py`; the gradient surgery and the fine-tune init_fn
  both workflows use are `core/gradient_surgery.py` and `core/fine_tune.py`.
  The cluster side (ps tasks, done signals, waiting for peers, sync replicas)
  lives in `deployment/` (`cluster_runtime.py`, `sync_replicas.py`).
* Evaluation: `evaluator.py` (metrics of each checkpoint), `eval_images.py`
  (boxes drawn for TensorBoard), `eval.py` (command line).
* Export: `exporter.py` (`export_inference_graph`), `export.py` (command line).
* Estimator workflow: `model_lib.py`, `model_main.py` (command line), on the
  top-level `estimator/` package (`import estimator as tfe`).
* `demo.py`: `make demo`, a small detector trained, evaluated and exported;
  `demo_zoo.py`: `make demo-zoo`, a zoo SSD fine-tuned from a zoo-layout
  checkpoint.
* `model_size.py`: `python -m trainer.model_size`, a model's variable bytes
  (the Kubernetes writer sizes the ps pods with it).

`trainer.estimator` is the estimator package's old address (it lived here
until issue 25 D). `from trainer import estimator as tfe`,
`import trainer.estimator.canned.dnn` and the like still work and hand out the
very module objects of `estimator` (so classes and isinstance agree whichever
path imported them). The alias costs nothing until used: importing `trainer`
or the legacy loop does not import the estimator package.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys

from core import compat  # noqa: F401  (must run before tf_slim is used)

_OLD_HOME = __name__ + '.estimator'
_NEW_HOME = 'estimator'


class _EstimatorAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Answers imports of `trainer.estimator[.sub]` with the `estimator[.sub]` module.

  A finder (rather than a `trainer/estimator/` shim package) because a shim
  would let the path finder load `trainer.estimator.canned` and the rest a
  second time from `estimator/`'s files, as separate modules with separate
  classes. This finder runs ahead of the path finder and never loads code: it
  imports the real module and registers that same object under the old name.
  """

  def find_spec(self, fullname, path=None, target=None):
    """A spec for an old-path name, after importing the module it stands for.

    Args:
      fullname: the dotted name being imported.
      path, target: unused (the finder protocol's).

    Returns:
      None for names outside `trainer.estimator` and for modules `estimator/`
      does not have (the import then fails under the name asked for); else a
      spec whose loader state is (the real module, the real module's own spec).
    """
    del path, target
    if fullname != _OLD_HOME and not fullname.startswith(_OLD_HOME + '.'):
      return None
    real_name = _NEW_HOME + fullname[len(_OLD_HOME):]
    try:
      module = importlib.import_module(real_name)
    except ModuleNotFoundError as e:
      if e.name != real_name:
        raise  # the module exists but something it imports does not
      return None
    return importlib.machinery.ModuleSpec(
        fullname, self, loader_state=(module, module.__spec__),
        is_package=hasattr(module, '__path__'))

  def create_module(self, spec):
    return spec.loader_state[0]

  def exec_module(self, module):
    # The import system stamped the alias spec on the module it was handed;
    # the module keeps its own (its name, reload and pickling go by it).
    module.__spec__ = module.__spec__.loader_state[1]


if not any(type(finder).__name__ == _EstimatorAlias.__name__ for finder in sys.meta_path):
  sys.meta_path.insert(0, _EstimatorAlias())


def __getattr__(name):
  # `import trainer; trainer.estimator.Estimator` works like the old subpackage
  # did once imported; nothing is imported before someone asks.
  if name == 'estimator':
    return importlib.import_module(_OLD_HOME)
  raise AttributeError('module {!r} has no attribute {!r}'.format(__name__, name))
