/*! \file testing/device_compilers/nvcc_musa/musa.h \brief The driver API shim (../musa_driver.h). */
#pragma once
#include "../musa_driver.h"
