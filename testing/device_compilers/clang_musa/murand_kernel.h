/*!
 * \file testing/device_compilers/clang_musa/murand_kernel.h
 * \brief murand_kernel.h for clang's syntax check: the murand device API (bodies that trap).
 */
#pragma once

#include "../murand_declarations.h"
