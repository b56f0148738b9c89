"""The OD API's `model_hparams`: the hparams a `model_main.py` hands to `model_lib`.

    from trainer import model_hparams
    hparams = model_hparams.create_hparams('load_pretrained=false')
    hparams.load_pretrained          # -> False

`load_pretrained` (default True) is the only one: False trains without
restoring `train_config.fine_tune_checkpoint`. `model_lib.create_hparams` is
this same function.
"""

from core import compat  # noqa: F401  (must run before tf_slim is used)
from estimator.hparams import HParams


def create_hparams(hparams_overrides=None):
  """Returns the model hparams, `load_pretrained=True`, with the overrides applied.

  Args:
    hparams_overrides: optional 'name=value,...' string (see HParams.parse),
      e.g. the `--hparams_overrides` flag of model_main.

  Returns:
    An `estimator.hparams.HParams`.

  Raises:
    ValueError: an override naming an unknown hparam or a value of the wrong type.
  """
  hparams = HParams(load_pretrained=True)
  if hparams_overrides:
    hparams = hparams.parse(hparams_overrides)
  return hparams
