/*! \file testing/device_compilers/nvcc_musa/musa_robust.h \brief Robust descriptors (../musa_robust_decl.h). */
#pragma once
#include "../musa_robust_decl.h"
