"""The 2018 generation of the OD API's `model_lib`, told apart from the 2019 one by its calls.

`trainer.model_lib` serves the `model_main.py` of both generations through the same three
names. They differ in their arguments:

    # 2018: one eval input, eval_steps everywhere.
    d = model_lib.create_estimator_and_inputs(
        run_config=config, hparams=model_hparams.create_hparams(FLAGS.hparams_overrides),
        pipeline_config_path=FLAGS.pipeline_config_path,
        train_steps=FLAGS.num_train_steps, eval_steps=FLAGS.num_eval_steps)
    train_spec, eval_specs = model_lib.create_train_and_eval_specs(
        d['train_input_fn'], d['eval_input_fn'], d['eval_on_train_input_fn'],
        d['predict_input_fn'], d['train_steps'], d['eval_steps'], eval_on_train_data=False)
    model_lib.continuous_eval(estimator, model_dir, input_fn, eval_steps, train_steps, name)

    # 2019: a list of eval inputs, each evaluated whole (no eval_steps).
    d = model_lib.create_estimator_and_inputs(run_config=config, hparams=...,
        pipeline_config_path=..., train_steps=..., sample_1_of_n_eval_examples=...)
    train_spec, eval_specs = model_lib.create_train_and_eval_specs(
        d['train_input_fn'], d['eval_input_fns'], d['eval_on_train_input_fn'],
        d['predict_input_fn'], d['train_steps'], eval_on_train_data=False)
    model_lib.continuous_eval(estimator, model_dir, input_fn, train_steps, name)

Called with the other generation's signature, each positional argument would land on
another parameter (the 2018 `eval_steps` on the 2019 `eval_on_train_data`, the 2018
`name` on `min_interval_secs`) and run without an error. So every call is read first
(the `is_2018_*` functions below): an `eval_steps` (or other 2018-only) keyword, a
single callable where 2019 has a list, an int where 2019 has a string, say 2018; a
call both generations could mean differently raises a `TypeError` asking for keywords.

2018 results: `create_estimator_and_inputs` returns the 2018 keys (`eval_input_fn`,
the first eval reader's, and `eval_steps`: the argument, else
`eval_config.num_examples`, which `eval_steps` also sets, as 2018's config_util did);
the eval reader keeps its `num_epochs` (2018 had no `override_eval_num_epochs`; pass it
to get the 2019 behaviour). The 2019 dict answers a 2018 key with a `KeyError` that
says how to get the 2018 dict.
"""

import inspect
import numbers

import estimator as tfe

# Keys of the 2018 dict; the 2019 dict has `eval_input_fns` and `eval_input_names` instead.
KEYS_2018 = ('estimator', 'train_input_fn', 'eval_input_fn', 'eval_on_train_input_fn',
             'predict_input_fn', 'train_steps', 'eval_steps')


def _is_int(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _ambiguous(function, position, detail):
  return TypeError(
      '%s: positional argument %d is %s, which the 2018 and the 2019 OD API signatures '
      'read differently; pass the arguments after pipeline_config_path by keyword '
      '(2018: train_steps=, eval_steps=; 2019: config_override=, train_steps=)'
      % (function, position, detail))


def is_2018_estimator_call(args, kwargs):
  """Whether a `create_estimator_and_inputs(*args, **kwargs)` call has the 2018 shape.

  2018: (run_config, hparams, pipeline_config_path, train_steps, eval_steps,
  model_fn_creator, ...); 2019: (run_config, hparams, pipeline_config_path,
  config_override, train_steps, sample_1_of_n_eval_examples, ...).

  Raises:
    TypeError: for a positional call both generations could mean.
  """
  if 'eval_steps' in kwargs:
    return True
  if len(args) <= 3:
    return False
  fourth = args[3]
  if _is_int(fourth):  # 2018 train_steps; 2019's config_override is a text proto
    return True
  if fourth is None and len(args) > 4:
    if len(args) > 5 and callable(args[5]):  # 2018 model_fn_creator
      return True
    if len(args) == 5:
      raise _ambiguous('create_estimator_and_inputs', 4, 'None followed by %r' % (args[4],))
  return False


def is_2018_specs_call(args, kwargs):
  """Whether a `create_train_and_eval_specs(*args, **kwargs)` call has the 2018 shape.

  2018: (train_input_fn, eval_input_fn, eval_on_train_input_fn, predict_input_fn,
  train_steps, eval_steps, eval_on_train_data=False, final_exporter_name='Servo',
  eval_spec_name='eval'); 2019: (..., eval_input_fns (a list), ..., train_steps,
  eval_on_train_data=False, final_exporter_name='Servo', eval_spec_names=None).

  Raises:
    TypeError: a list of eval input_fns with an int where 2019 has eval_on_train_data.
  """
  if any(name in kwargs for name in ('eval_input_fn', 'eval_steps', 'eval_spec_name')):
    return True
  if len(args) > 1 and callable(args[1]) and not isinstance(args[1], (list, tuple)):
    return True
  if len(args) > 5 and _is_int(args[5]):
    raise TypeError(
        'create_train_and_eval_specs: eval_on_train_data (positional argument 6) is %r, '
        'an int: the 2018 signature passes eval_steps there, with one eval_input_fn; the '
        '2019 one takes a list of eval_input_fns and a bool' % (args[5],))
  return False


def is_2018_continuous_eval_call(args, kwargs):
  """Whether a `continuous_eval(*args, **kwargs)` call has the 2018 shape.

  2018: (estimator, model_dir, input_fn, eval_steps, train_steps, name);
  2019: (estimator, model_dir, input_fn, train_steps, name, min_interval_secs=180,
  timeout=None).
  """
  if 'eval_steps' in kwargs:
    return True
  if len(args) >= 6:
    return isinstance(args[5], str)  # the 2018 name; 2019 has min_interval_secs here
  if len(args) == 5:
    return not isinstance(args[4], str)  # 2019 name; 2018 train_steps
  return len(args) == 4 and 'train_steps' in kwargs


# The 2018 signatures (bodies unused: inspect binds a call to them, with Python's errors).
def _estimator_signature(run_config, hparams, pipeline_config_path, train_steps=None,
                         eval_steps=None, model_fn_creator=None, use_tpu_estimator=False,
                         use_tpu=False, num_shards=1, params=None, **kwargs):
  del run_config, hparams, pipeline_config_path, train_steps, eval_steps, model_fn_creator
  del use_tpu_estimator, use_tpu, num_shards, params, kwargs


def _continuous_eval_signature(estimator, model_dir, input_fn, eval_steps, train_steps, name,
                               min_interval_secs=180, timeout=None):
  del estimator, model_dir, input_fn, eval_steps, train_steps, name, min_interval_secs
  del timeout


def _bind(signature_fn, function, args, kwargs):
  try:
    bound = inspect.signature(signature_fn).bind(*args, **kwargs)
  except TypeError as e:
    raise TypeError('%s (2018 OD API signature): %s' % (function, e)) from None
  bound.apply_defaults()
  return dict(bound.arguments)


def create_estimator_and_inputs(build, args, kwargs):
  """The 2018 `create_estimator_and_inputs`, over model_lib's builder.

  Args:
    build: model_lib's function of the 2019 signature returning (dict, configs).
    args, kwargs: the call, of the 2018 signature (see the module docstring).

  Returns:
    The dict of the 2018 keys (`KEYS_2018`).
  """
  arguments = _bind(_estimator_signature, 'create_estimator_and_inputs', args, kwargs)
  extra = dict(arguments.pop('kwargs'))
  eval_steps = arguments.pop('eval_steps')
  if eval_steps is not None and (not _is_int(eval_steps) or eval_steps < 1):
    raise ValueError('create_estimator_and_inputs: eval_steps must be a positive int or '
                     'None, got %r' % (eval_steps,))
  if arguments['model_fn_creator'] is None:
    del arguments['model_fn_creator']
  extra.setdefault('override_eval_num_epochs', False)
  if eval_steps is not None:
    extra['eval_config.num_examples'] = eval_steps
  result, configs = build(**arguments, **extra)
  if eval_steps is None:
    eval_steps = configs['eval_config'].num_examples or None
  return {
      'estimator': result['estimator'],
      'train_input_fn': result['train_input_fn'],
      'eval_input_fn': result['eval_input_fns'][0],
      'eval_on_train_input_fn': result['eval_on_train_input_fn'],
      'predict_input_fn': result['predict_input_fn'],
      'train_steps': result['train_steps'],
      'eval_steps': eval_steps,
  }


class LaterGenerationDict(dict):
  """The 2019 dict; a 2018 key gets a KeyError saying how to get the 2018 dict."""

  def __missing__(self, key):
    if key in ('eval_input_fn', 'eval_steps'):
      raise KeyError(
          "%r is a key of the 2018 model_lib dict; this create_estimator_and_inputs call "
          "was read as the 2019 generation (no eval_steps argument), whose dict has "
          "'eval_input_fns' (a list). Pass eval_steps= (None is fine) for the 2018 dict."
          % key)
    raise KeyError(key)


def create_train_and_eval_specs(train_input_fn, eval_input_fn, eval_on_train_input_fn,
                                predict_input_fn, train_steps, eval_steps,
                                eval_on_train_data=False, final_exporter_name='Servo',
                                eval_spec_name='eval'):
  """The 2018 `create_train_and_eval_specs`: (train_spec, [eval_spec(s)]).

  One EvalSpec named `eval_spec_name` over `eval_input_fn`, `eval_steps` batches
  (None: the whole eval set), exporting with a FinalExporter named
  `final_exporter_name`; with `eval_on_train_data` a second one, 'eval_on_train'.
  """
  if not callable(eval_input_fn):
    raise TypeError('create_train_and_eval_specs: eval_input_fn must be an input_fn '
                    '(2018 signature), got %r' % (eval_input_fn,))
  train_spec = tfe.TrainSpec(input_fn=train_input_fn, max_steps=train_steps)
  exporter = tfe.FinalExporter(name=final_exporter_name,
                               serving_input_receiver_fn=predict_input_fn)
  eval_specs = [tfe.EvalSpec(name=eval_spec_name, input_fn=eval_input_fn, steps=eval_steps,
                             exporters=exporter)]
  if eval_on_train_data:
    eval_specs.append(tfe.EvalSpec(name='eval_on_train', input_fn=eval_on_train_input_fn,
                                   steps=eval_steps))
  return train_spec, eval_specs


def continuous_eval(follow, args, kwargs):
  """The 2018 `continuous_eval`, over model_lib's checkpoint follower.

  Args:
    follow: model_lib's follower, (estimator, model_dir, input_fn, train_steps, name,
      eval_steps=, min_interval_secs=, timeout=).
    args, kwargs: the call, of the 2018 signature (plus the 2019 keywords
      min_interval_secs and timeout).
  """
  arguments = _bind(_continuous_eval_signature, 'continuous_eval', args, kwargs)
  return follow(arguments['estimator'], arguments['model_dir'], arguments['input_fn'],
                arguments['train_steps'], arguments['name'],
                eval_steps=arguments['eval_steps'],
                min_interval_secs=arguments['min_interval_secs'],
                timeout=arguments['timeout'])
