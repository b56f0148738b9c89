"""NASNet-A large: its settings, its stem, and the stacking of its cells.

The network (Zoph et al., 2017) is a 3x3 stride-2 convolution ('conv0',
'conv0_bn'), two reduction cells that make the stem ('cell_stem_0',
'cell_stem_1'), then 18 normal cells 'cell_0'..'cell_17' with a reduction
cell before cell_6 and before cell_12 ('reduction_cell_0', '_1'). Each
reduction halves the size and doubles the cell depth (168 x 6 = 1008
channels out of cell_0..5, 2016 out of cell_6..11, 4032 out of cell_12..17;
output stride 16 after reduction_cell_0). Every cell reads the outputs of
the two cells before it (models/nasnet_cells.py).

A detector cuts the stack in two (models/faster_rcnn_nas_feature_extractor.py):
`build_stem` + `stack_cells(..., first_cell=0, end_cell=12)` on the image,
`stack_cells(..., first_cell=12, end_cell=18)` on each cropped proposal.
`stack_cells` knows where in the network it starts, so both halves get the
depths, drop-path schedule and names of one whole network.

Usage:

    normal, reduction = nasnet.make_cells(nasnet.LARGE, is_training=True)
    with slim.arg_scope(nasnet.large_arg_scope(batch_norm_training=True)):
      net, cell_outputs = nasnet.build_stem(images, nasnet.LARGE, reduction)
      net, endpoints = nasnet.stack_cells(net, cell_outputs, nasnet.LARGE,
                                          normal, reduction, 0, 12)
    endpoints['Cell_11']      # [B, H/16, W/16, 2016]

Differs on purpose: no classification head (global pool, dropout, logits,
auxiliary head); no detector builds them.
"""

import collections

import tf_slim as slim

from models import nasnet_cells

NasNetConfig = collections.namedtuple('NasNetConfig', [
    'stem_multiplier',          # conv0 has int(32 * stem_multiplier) filters
    'num_cells',                # normal cells (reduction and stem cells not counted)
    'num_conv_filters',         # base depth of the operations
    'filter_scaling_rate',      # depth factor at each reduction
    'num_reduction_layers',
    'skip_reduction_layer_input',  # cell after a reduction reads the cell before it
    'drop_path_keep_prob',
    'total_training_steps',     # drop path reaches drop_path_keep_prob here
])

# ImageNet NASNet-A large (the zoo's faster_rcnn_nas backbone).
LARGE = NasNetConfig(stem_multiplier=3.0, num_cells=18, num_conv_filters=168,
                     filter_scaling_rate=2.0, num_reduction_layers=2,
                     skip_reduction_layer_input=True, drop_path_keep_prob=0.7,
                     total_training_steps=250000)

_NUM_STEM_CELLS = 2


def large_arg_scope(weight_decay=5e-5, batch_norm_decay=0.9997, batch_norm_epsilon=1e-3,
                    batch_norm_training=False):
  """The slim arg_scope NASNet-A large was trained with.

  Convolutions: no activation (cells apply relu before), no bias (batch norm
  follows), L2 `weight_decay`, fan-out variance scaling; batch norm with
  scale, fused, training its statistics when `batch_norm_training`.
  """
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      weights_initializer=slim.variance_scaling_initializer(mode='FAN_OUT'),
                      activation_fn=None, biases_initializer=None):
    with slim.arg_scope([slim.batch_norm], decay=batch_norm_decay, epsilon=batch_norm_epsilon,
                        scale=True, fused=True, is_training=batch_norm_training) as scope:
      return scope


def total_num_cells(config):
  """Cells in the whole network: normal + reduction + stem."""
  return config.num_cells + config.num_reduction_layers + _NUM_STEM_CELLS


def make_cells(config, is_training):
  """(normal cell, reduction cell) of `config`; drop path only when training."""
  schedule = None
  if is_training and config.drop_path_keep_prob < 1.0:
    schedule = nasnet_cells.DropPathSchedule(config.drop_path_keep_prob,
                                             total_num_cells(config),
                                             config.total_training_steps)
  return (nasnet_cells.NasNetCell(nasnet_cells.NASNET_A_NORMAL, config.num_conv_filters,
                                  schedule),
          nasnet_cells.NasNetCell(nasnet_cells.NASNET_A_REDUCTION, config.num_conv_filters,
                                  schedule))


def build_stem(images, config, stem_cell):
  """conv0 (3x3, stride 2, VALID) and two strided stem cells: 1/8 of the size.

  Args:
    images: float [B, H, W, 3], static H and W.
    config: a `NasNetConfig`.
    stem_cell: the cell the stem stacks (NASNet: its reduction cell).

  Returns:
    (stem output, [None, conv0 output, cell_stem_0 output, cell_stem_1 output]),
    the list being every cell output so far (the cells read the last two).
  """
  net = slim.conv2d(images, int(32 * config.stem_multiplier), 3, stride=2, padding='VALID',
                    scope='conv0')
  net = slim.batch_norm(net, scope='conv0_bn')
  cell_outputs = [None, net]
  # The stem's cells are shallower than cell_0 by the rate per remaining stem cell.
  filter_scaling = config.filter_scaling_rate ** -_NUM_STEM_CELLS
  for index in range(_NUM_STEM_CELLS):
    net = stem_cell(net, scope='cell_stem_%d' % index, filter_scaling=filter_scaling, stride=2,
                    prev_layer=cell_outputs[-2], cell_index=index)
    cell_outputs.append(net)
    filter_scaling *= config.filter_scaling_rate
  return net, cell_outputs


def stack_cells(net, cell_outputs, config, normal_cell, reduction_cell, first_cell, end_cell):
  """Normal cells first_cell..end_cell-1, each reduction cell due before them.

  Args:
    net: the output of the cell before `first_cell` (its reduction included).
    cell_outputs: the outputs so far, last two at least (the last is `net`).
    config: a `NasNetConfig`.
    normal_cell, reduction_cell: `NasNetCell`s.
    first_cell, end_cell: range of normal cell numbers to build.

  Returns:
    (last output, {'Reduction_Cell_<k>' / 'Cell_<n>': output}).
  """
  reductions = nasnet_cells.reduction_cell_indices(config.num_cells,
                                                   config.num_reduction_layers)
  done = sum(1 for index in reductions if index < first_cell)
  filter_scaling = config.filter_scaling_rate ** done
  cell_index = _NUM_STEM_CELLS + first_cell + done
  cell_outputs = list(cell_outputs)
  endpoints = {}
  for cell_num in range(first_cell, end_cell):
    # Large NASNet: the cell after a reduction reads the cell before the
    # reduction's input, not the reduction's input.
    prev_layer = cell_outputs[-2]
    if cell_num in reductions:
      filter_scaling *= config.filter_scaling_rate
      name = 'reduction_cell_%d' % reductions.index(cell_num)
      net = reduction_cell(net, scope=name, filter_scaling=filter_scaling, stride=2,
                           prev_layer=cell_outputs[-2], cell_index=cell_index)
      endpoints['Reduction_Cell_%d' % reductions.index(cell_num)] = net
      cell_index += 1
      cell_outputs.append(net)
    if not config.skip_reduction_layer_input:
      prev_layer = cell_outputs[-2]
    net = normal_cell(net, scope='cell_%d' % cell_num, filter_scaling=filter_scaling,
                      stride=1, prev_layer=prev_layer, cell_index=cell_index)
    endpoints['Cell_%d' % cell_num] = net
    cell_index += 1
    cell_outputs.append(net)
  return net, endpoints
