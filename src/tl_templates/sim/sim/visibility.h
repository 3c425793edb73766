/*!
 * \file tl_templates/sim/sim/visibility.h
 * \brief Symbol visibility of the simulator inside a kernel library.
 *
 * Every kernel library carries a private copy of the simulator, so libraries built from different header versions
 * or for different archs coexist in one process: functions and variables are hidden (`#pragma GCC visibility
 * push(hidden)` in each header; hidden symbols are never unified across libraries, unlike default-visibility
 * inline variables, which GCC emits as process-wide unique symbols). Types that kernels and host entry points take
 * as parameters (half, bfloat16, vectors, dim3) keep default visibility, because GCC hides any function whose
 * signature names a hidden type and the kernels must stay exported; their member functions are marked
 * TL_SIM_HIDDEN instead.
 */
#pragma once

#define TL_SIM_HIDDEN __attribute__((visibility("hidden")))

// The simulator runtime (sim/runtime_abi.h). A kernel library is built either on its own, carrying the whole
// simulator (neither macro), or linked to the prebuilt runtime of its arch (TL_SIM_LINK_RUNTIME); the runtime
// itself is built with TL_SIM_BUILD_RUNTIME. In both linked forms the state that kernel code and the runtime both
// touch is one object, defined by the runtime under an arch-qualified symbol name, so runtimes of several archs
// coexist in one process.
#if defined(TL_SIM_LINK_RUNTIME) || defined(TL_SIM_BUILD_RUNTIME)
#define TL_SIM_SHARED_RUNTIME 1
#define TL_SIM_RT_STR2(x) #x
#define TL_SIM_RT_STR(x) TL_SIM_RT_STR2(x)
/*! \brief The runtime's symbol for `name` on this arch: tl_sim_rt310_launch and so on. */
#define TL_SIM_RT_SYMBOL(name) "tl_sim_rt" TL_SIM_RT_STR(__MUSA_ARCH__) "_" name
#define TL_SIM_RT_EXPORT __attribute__((visibility("default")))
// The shared thread state is constant-initialized: declared so, a read of it needs no TLS wrapper call. gcc spells
// that __constinit in C++17; clang (whose C++17 has no __constinit) the attribute constinit is made of.
#if defined(__clang__)
#define TL_SIM_CONSTINIT [[clang::require_constant_initialization]]
#else
#define TL_SIM_CONSTINIT __constinit
#endif
#endif

// A function whose body the runtime compiles once (a sim/*_outlined.h file, included by its header only where the
// simulator is compiled: the runtime and a library carrying its own copy), so that a kernel linking the runtime does
// not instantiate the standard-library templates that body uses. Declared TL_SIM_OUTLINED before the declaration
// and TL_SIM_OUTLINED_AS("name") after it: in the runtime an export under an arch-qualified name (members of hidden
// classes included: the attribute is explicit), elsewhere an ordinary inline function; TL_SIM_OUTLINED_DEF
// begins its definition.
#if defined(TL_SIM_SHARED_RUNTIME)
#define TL_SIM_OUTLINED TL_SIM_RT_EXPORT
#define TL_SIM_OUTLINED_AS(name) __asm__(TL_SIM_RT_SYMBOL(name))
#define TL_SIM_OUTLINED_DEF
#else
#define TL_SIM_OUTLINED
#define TL_SIM_OUTLINED_AS(name)
#define TL_SIM_OUTLINED_DEF inline
#endif
