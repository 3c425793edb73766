/*! \file testing/device_compilers/clang_musa/musa.h \brief The driver API, as the simulator declares it. */
#pragma once
#include "tl_templates/sim/decl/musa_driver_decl.h"
