"""`tfe.add_metrics(estimator, metric_fn)`: more eval metrics on an existing Estimator.

    def my_auc(labels, predictions):
      return {'auc': tf.compat.v1.metrics.auc(labels, predictions['logistic'])}

    estimator = tfe.DNNClassifier(...)
    estimator = tfe.add_metrics(estimator, my_auc)
    estimator.evaluate(input_fn)   # the classifier's metrics plus 'auc'

`metric_fn` declares any of `labels`, `predictions`, `features`, `config`
(by name) and returns {name: (value, update_op)} or {name: Keras metric};
its names override the model's metrics of the same name. The new Estimator
shares the old one's model_dir, config and warm-start settings, so it reads
the same checkpoints.
"""

from estimator import estimator as estimator_lib
from estimator import model_fn as model_fn_lib
from estimator import util

__all__ = ['add_metrics']

_METRIC_FN_ARGS = ('labels', 'predictions', 'features', 'config')


def _check_metric_fn(metric_fn):
  args = set(util.fn_args(metric_fn))
  unexpected = sorted(args - set(_METRIC_FN_ARGS))
  if unexpected:
    raise ValueError('metric_fn (%s) has following not expected args: %s' % (
        metric_fn, unexpected))


def add_metrics(estimator, metric_fn):
  """An Estimator like `estimator` whose evaluation also reports `metric_fn`'s metrics.

  Args:
    estimator: a `tfe.Estimator` (canned or not).
    metric_fn: fn(labels, predictions, features, config) (any subset, by
      name) returning a dict of metrics.

  Returns:
    A new `tfe.Estimator`.

  Raises:
    ValueError: metric_fn takes an argument other than those four.
  """
  _check_metric_fn(metric_fn)
  wrapped_model_fn = estimator.model_fn

  def new_model_fn(features, labels, mode, config):
    spec = wrapped_model_fn(features, labels, mode, config)
    if mode != model_fn_lib.ModeKeys.EVAL:
      return spec
    available = {'labels': labels, 'predictions': spec.predictions, 'features': features,
                 'config': config}
    new_metrics = metric_fn(**{k: available[k] for k in util.fn_args(metric_fn)})
    metrics = dict(spec.eval_metric_ops or {})
    metrics.update(new_metrics)
    return spec._replace(eval_metric_ops=metrics)

  return estimator_lib.Estimator(
      model_fn=new_model_fn, model_dir=estimator.model_dir, config=estimator.config,
      warm_start_from=estimator._warm_start_settings)  # pylint: disable=protected-access
