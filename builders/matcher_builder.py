"""Builds a matcher from a `Matcher` proto.

    argmax_matcher -> core.matcher.ArgMaxMatcher (also when unset)

`use_matmul_gather` is accepted: it only changes how the OD API gathers
(a TPU speed knob), not which anchors match. bipartite_matcher is refused.

    matcher = matcher_builder.build(ssd_config.matcher)
"""

from builders import config_checks
from core import matcher as matcher_lib
from protos import matcher_pb2


def build(matcher_config, path='model.ssd.matcher'):
  """Returns the matcher `matcher_config` describes.

  Raises:
    ValueError: on a config of another type, an unsupported matcher or
      unmatched_threshold above matched_threshold (named).
  """
  if not isinstance(matcher_config, matcher_pb2.Matcher):
    raise ValueError('matcher_config not of type matcher_pb2.Matcher.')
  config_checks.oneof_choice(matcher_config, 'matcher_oneof', path, ('argmax_matcher',),
                             why={'bipartite_matcher': 'not implemented; use argmax_matcher'})
  config = matcher_config.argmax_matcher
  path += '.argmax_matcher'
  if config.ignore_thresholds:
    return matcher_lib.ArgMaxMatcher(None, None,
                                     force_match_for_each_row=config.force_match_for_each_row)
  if config.unmatched_threshold > config.matched_threshold:
    raise ValueError('%s.unmatched_threshold (%s) must not exceed matched_threshold (%s)'
                     % (path, config.unmatched_threshold, config.matched_threshold))
  return matcher_lib.ArgMaxMatcher(
      config.matched_threshold, config.unmatched_threshold,
      negatives_lower_than_unmatched=config.negatives_lower_than_unmatched,
      force_match_for_each_row=config.force_match_for_each_row)
