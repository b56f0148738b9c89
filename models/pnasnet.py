"""PNASNet-5 large: its cell, its settings, and the stacking of its cells.

PNASNet (Liu et al., 2017, https://arxiv.org/abs/1712.00559) keeps NASNet's
cell machinery (models/nasnet_cells.py) and stem (models/nasnet.py) but has
one cell type only: a reduction is the same cell called with stride 2. The
large ImageNet network is conv0 ('conv0', 'conv0_bn'), the stem cells
'cell_stem_0' and 'cell_stem_1' (that cell at stride 2), then 'cell_0'..
'cell_11', where cell_4 and cell_8 stride and double the depth. Five of a
cell's seven states are concatenated, so cells 0..3 give 216 x 5 = 1080
channels, cells 4..7 2160 (output stride 16) and cells 8..11 4320.

Usage:

    cell = pnasnet.make_cell(pnasnet.LARGE, is_training=True)
    with slim.arg_scope(pnasnet.large_arg_scope(batch_norm_training=True)):
      net, cell_outputs = nasnet.build_stem(images, pnasnet.LARGE, cell)
      net, endpoints = pnasnet.stack_cells(net, cell_outputs, pnasnet.LARGE,
                                           cell, 0, 8)
    endpoints['Cell_7']       # [B, H/16, W/16, 2160]

Differs on purpose: no classification head; only the large network's
setting that every cell reads the cell before the previous one
(skip_reduction_layer_input) is supported.
"""

from models import nasnet
from models import nasnet_cells

PNASNET_5 = nasnet_cells.CellSpec(
    operations=('separable_5x5_2', 'max_pool_3x3', 'separable_7x7_2', 'max_pool_3x3',
                'separable_5x5_2', 'separable_3x3_2', 'separable_3x3_2', 'max_pool_3x3',
                'separable_3x3_2', 'none'),
    hiddenstate_indices=(1, 1, 0, 0, 0, 0, 4, 0, 1, 0),
    used_hiddenstates=(1, 1, 0, 0, 0, 0, 0))

# ImageNet PNASNet-5 large (the OD API's faster_rcnn_pnas backbone).
LARGE = nasnet.NasNetConfig(stem_multiplier=3.0, num_cells=12, num_conv_filters=216,
                            filter_scaling_rate=2.0, num_reduction_layers=2,
                            skip_reduction_layer_input=True, drop_path_keep_prob=0.6,
                            total_training_steps=250000)

_NUM_STEM_CELLS = 2


def large_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997, batch_norm_epsilon=1e-3,
                    batch_norm_training=False):
  """NASNet-A large's arg_scope with PNASNet's default weight decay."""
  return nasnet.large_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon,
                                batch_norm_training)


def total_num_cells(config):
  """Cells in the whole network: the normal ones (reductions among them) + stem."""
  return config.num_cells + _NUM_STEM_CELLS


def make_cell(config, is_training):
  """The PNASNet-5 cell of `config`; drop path only when training."""
  schedule = None
  if is_training and config.drop_path_keep_prob < 1.0:
    schedule = nasnet_cells.DropPathSchedule(config.drop_path_keep_prob,
                                             total_num_cells(config),
                                             config.total_training_steps)
  return nasnet_cells.NasNetCell(PNASNET_5, config.num_conv_filters, schedule)


def stack_cells(net, cell_outputs, config, cell, first_cell, end_cell):
  """Cells first_cell..end_cell-1; those at the reduction indices stride 2.

  Args:
    net: the output of the cell before `first_cell`.
    cell_outputs: the outputs so far, last two at least (the last is `net`).
    config: a `NasNetConfig`.
    cell: the `NasNetCell` to stack.
    first_cell, end_cell: range of cell numbers to build.

  Returns:
    (last output, {'Cell_<n>': output}).
  """
  if not config.skip_reduction_layer_input:
    raise ValueError('config.skip_reduction_layer_input: only True is supported')
  reductions = nasnet_cells.reduction_cell_indices(config.num_cells,
                                                   config.num_reduction_layers)
  filter_scaling = config.filter_scaling_rate ** sum(
      1 for index in reductions if index < first_cell)
  cell_outputs = list(cell_outputs)
  endpoints = {}
  for cell_num in range(first_cell, end_cell):
    stride = 1
    if cell_num in reductions:
      filter_scaling *= config.filter_scaling_rate
      stride = 2
    net = cell(net, scope='cell_%d' % cell_num, filter_scaling=filter_scaling, stride=stride,
               prev_layer=cell_outputs[-2], cell_index=_NUM_STEM_CELLS + cell_num)
    endpoints['Cell_%d' % cell_num] = net
    cell_outputs.append(net)
  return net, endpoints
