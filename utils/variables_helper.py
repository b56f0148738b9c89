"""`object_detection.utils.variables_helper`: the functions of `core.variables_helper`.

    from utils import variables_helper

    grads_and_vars = variables_helper.multiply_gradients_matching_regex(
        grads_and_vars, ['.*/biases'], multiplier=2.0)
    grads_and_vars = variables_helper.freeze_gradients_matching_regex(
        grads_and_vars, ['FeatureExtractor/.*'])
    available = variables_helper.get_variables_available_in_checkpoint(
        var_map, train_config.fine_tune_checkpoint)

These are the objects of `core.variables_helper` under the OD module name, so code
ported from the OD API and slimtrain's own code share one implementation (and one set of
checks: the checkpoint match compares shapes too).
"""

from core.variables_helper import filter_variables
from core.variables_helper import freeze_gradients_matching_regex
from core.variables_helper import get_variables_available_in_checkpoint
from core.variables_helper import multiply_gradients_matching_regex

__all__ = [
    'filter_variables',
    'freeze_gradients_matching_regex',
    'get_variables_available_in_checkpoint',
    'multiply_gradients_matching_regex',
]
