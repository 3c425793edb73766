/*!
 * \file tl_templates/sim/murand_kernel.h
 * \brief The simulator's murand_kernel.h (MUSA's curand_kernel.h): found instead of the SDK's through the include
 *        path, so a kernel's `#include <murand_kernel.h>` gets the model in sim/murand.h.
 */
#pragma once

#include <musa_runtime.h>

#include "sim/murand.h"
