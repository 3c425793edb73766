// The matrix models' row kernels (tl_sim::mma::AccumulateRows / AccumulateRow, vectorized), called directly: the tests build this
// with contraction and fast-math flags and compare it bit for bit with the documented rounding order.
#include <musa_runtime.h>
#include <sim/mma_decoded_operand.h>  // not in a kernel's view: the test calls the model directly

#include <cstdint>
#include <cstring>
#include <vector>

static char tl_error_buf[1] = "";
extern "C" const char* get_last_error() { return tl_error_buf; }

// a: rows x depth, b: count x depth (row-major floats); c and out: rows x count words. D = C + A B^T.
extern "C" int accumulate_rows(const float* a, const float* b, const uint32_t* c, int rows, int depth, int count,
                               uint32_t* out) {
  std::vector<uint32_t> a_raw(size_t(rows) * depth), b_raw(size_t(count) * depth);
  std::memcpy(a_raw.data(), a, a_raw.size() * 4);
  std::memcpy(b_raw.data(), b, b_raw.size() * 4);
  tl_sim::mma::DecodedOperand da, db;
  da.Decode(rows, depth, tl_sim::mma::Elem::kTF32, false, a_raw.data());  // tf32: every value is kept as given
  db.Decode(count, depth, tl_sim::mma::Elem::kTF32, false, b_raw.data());
  std::vector<uint32_t> order(count);
  for (int j = 0; j < count; ++j) order[j] = j;
  std::vector<float> columns;
  std::vector<int32_t> unused;
  db.Columns(order.data(), count, &columns, &unused);
  std::vector<float> acc(size_t(rows) * count);
  std::memcpy(acc.data(), c, acc.size() * 4);
  tl_sim::mma::AccumulateRows(acc.data(), count, da.FloatRow(0), depth, rows, columns.data(), depth, count, count);
  std::memcpy(out, acc.data(), acc.size() * 4);
  return 0;
}
