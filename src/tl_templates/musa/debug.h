/*!
 * \file tl_templates/musa/debug.h
 * \brief Device-side debugging: `T.print` (values and buffer elements, tagged with block and thread) and
 *        `T.device_assert` (print the message, then trap: the launch fails).
 */
#pragma once

#include <stdio.h>

#include "common.h"

namespace tl {

namespace detail {
template <class T>
TL_DEVICE void print_one(const char* msg, const char* name, long long index, T value) {
  if constexpr (std::is_integral<T>::value) {
    printf("%s%s[%lld] = %lld [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, name, index,
           static_cast<long long>(value), (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x,
           (int)threadIdx.y, (int)threadIdx.z);
  } else {
    printf("%s%s[%lld] = %g [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, name, index,
           static_cast<double>(static_cast<float>(value)), (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z,
           (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
  }
}
}  // namespace detail

/*! \brief `msg: value [block (...), thread (...)]`, printed by the calling thread. */
template <class T>
TL_DEVICE void print_value(const char* msg, T value) {
  if constexpr (std::is_integral<T>::value) {
    printf("%s: %lld [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, static_cast<long long>(value),
           (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
  } else {
    printf("%s: %g [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, static_cast<double>(static_cast<float>(value)),
           (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
  }
}

/*! \brief `msg [block (...), thread (...)]`, printed by the calling thread (T.print(msg=...) with no value). */
TL_DEVICE void print_message(const char* msg) {
  printf("%s [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z,
         (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
}

/*! \brief `msg name[index] = value [block (...), thread (...)]` for one element of a buffer. */
template <class T>
TL_DEVICE void print_element(const char* msg, const char* name, long long index, T value) {
  detail::print_one(msg, name, index, value);
}

/*! \brief A failed `T.device_assert`: report it, then trap (the launch fails with the device's error). */
TL_DEVICE void device_assert_fail(const char* msg) {
  printf("Device assertion failed: %s [block (%d, %d, %d), thread (%d, %d, %d)]\n", msg, (int)blockIdx.x,
         (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
  __trap();
}

}  // namespace tl
