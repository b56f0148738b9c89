"""slimtrain's own log lines go through TensorFlow's 'tensorflow' logger.

Every slimtrain module logs with the functions of this module, imported under
the name `logging`:

    from core import logs as logging

    logging.info('Saving dict for global step %d: %s', step, results)
    logging.warning('Checkpoint %s was deleted before it could be read', path)

and a user program controls what it sees exactly as with tf.estimator or
tf-slim, whose lines went through the same logger:

    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)

Why the 'tensorflow' logger and not absl's. slimtrain used to log with
`absl.logging`, and that broke every program not started by `absl.app.run`
(a plain script, a `python -c` one-liner, a notebook):

1. `absl.logging.info` and its siblings call `logging.basicConfig()` whenever
   the root logger has no handler, so the first slimtrain line, even one
   below the level shown, put a stderr handler on the root logger. TensorFlow
   has its own stderr handler on 'tensorflow' and lets records propagate to
   the root, so from then on each TensorFlow and tf-slim line was printed
   twice. A library must not configure the root logger, so the absl calls
   had to go, not the handler.
2. Without `app.run` the 'absl' logger stays at WARNING, and
   `tf.compat.v1.logging.set_verbosity` only sets the 'tensorflow' logger,
   so slimtrain's INFO lines (eval results, "Loss for final step") never
   showed, whatever the user set.

Logging through the 'tensorflow' logger instead adds no handler anywhere
and follows the one verbosity TF 1 programs set. The launch styles then come
out as follows:

* plain script, `python -c`, notebook: TensorFlow's own handler prints each
  line once (`INFO:tensorflow:...`); INFO lines show after
  `set_verbosity(INFO)`, warnings always, as with tf.estimator.
* `absl.app.run(main)` and `tf.compat.v1.app.run(main)` (which is
  `absl.app.run`): absl puts its handler on the root logger, and the compat
  fix `logging.one_format` (core/compat.py) removes TensorFlow's handler once
  absl has initialised, so each line is printed once in absl's format. The
  'tensorflow' logger inherits the root level absl's `--verbosity` sets,
  unless the program sets its own with `set_verbosity`.

The log functions are TensorFlow's own (not wrappers), so a record names
the slimtrain file and line that logged it: TF's logger skips only its own
frames when it looks for the caller. `flush` is ours: TF's raises
NotImplementedError.
"""

import logging as _std_logging

import tensorflow as tf

_TF_LOGGING = tf.compat.v1.logging

debug = _TF_LOGGING.debug
info = _TF_LOGGING.info
warning = _TF_LOGGING.warning
error = _TF_LOGGING.error


def logger():
  """The logger slimtrain logs through: TensorFlow's 'tensorflow' logger.

  Returns:
    The `logging.Logger` named 'tensorflow' (what `tf.get_logger()` returns);
    tests attach a handler to it to collect slimtrain's lines.
  """
  return tf.get_logger()


def flush():
  """Writes out what the handlers our lines reach still hold (before a process exits).

  Those are the 'tensorflow' logger's own handlers and, as the logger
  propagates, the root logger's (absl's handler under `app.run`). A handler
  whose stream is already closed is skipped.
  """
  for handler in tf.get_logger().handlers + _std_logging.getLogger().handlers:
    try:
      handler.flush()
    except (OSError, ValueError):
      pass
