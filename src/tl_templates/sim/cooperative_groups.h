/*!
 * \file tl_templates/sim/cooperative_groups.h
 * \brief The simulator's <cooperative_groups.h>: the grid group of a cooperative launch
 *        (cooperative_groups::this_grid().sync(), modelled in sim/grid_barrier.h, which musa_runtime.h includes).
 */
#pragma once

#include "musa_runtime.h"
