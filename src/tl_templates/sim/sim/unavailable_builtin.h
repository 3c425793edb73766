/*!
 * \file tl_templates/sim/sim/unavailable_builtin.h
 * \brief Built-ins of another architecture: declared, so that a call compiles to a clear error instead of
 *        "not declared in this scope" (mcc likewise rejects a built-in the target arch lacks).
 */
#pragma once

#define TL_SIM_STRINGIFY_(x) #x
#define TL_SIM_STRINGIFY(x) TL_SIM_STRINGIFY_(x)

/*!
 * \brief Declare `name` as a template that fails to compile when called, naming the architectures that have it.
 *        It is a template so that only a call (not the declaration) trips the assertion.
 */
#define TL_SIM_UNAVAILABLE_BUILTIN(name, archs)                                                                        \
  template <int kNever = 0, class... Args>                                                                             \
  inline void name(Args&&...) {                                                                                        \
    static_assert(kNever != 0, #name " is a built-in of " archs " only, but this library is compiled with "            \
                               "-D__MUSA_ARCH__=" TL_SIM_STRINGIFY(__MUSA_ARCH__));                                    \
  }
