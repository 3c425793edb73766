/*!
 * \file tl_templates/sim/sim/murand.h
 * \brief murand's device API (MUSA's port of curand_kernel.h) for the three generators T.rng_init offers:
 *        Philox4_32_10, XORWOW and MRG32k3a, each with murand_init, murand, murand_uniform[_double] and
 *        murand_normal[_double].
 *
 * The integer streams are bit-exact with cuRAND's documented algorithms (which murand mirrors):
 *  - Philox4_32_10: key = seed, counter = (0, 0, subsequence) + offset / 4, output word offset % 4; a new 4-word
 *    block (10 rounds) every 4 draws. Triton's tl.randint4x is the same function of (seed, counter).
 *  - XORWOW: the seed salted and mixed into the 5-word xorshift state and the Weyl counter d, then skipped ahead
 *    2^67 * subsequence + offset steps with powers of the 160x160 GF(2) step matrix (cuRAND precomputes them; here
 *    M^(2^k), k < 131, are squared once per library, on first use), d += 362437 per step.
 *  - MRG32k3a: both components seeded with 12345 (times the salted seed halves mod m1 / m2 when seed != 0), then
 *    skipped 2^76 * subsequence + offset steps with 3x3 matrix powers mod m1 / m2; exact integer arithmetic.
 *    cuRAND's subsequence tables end at 2^51 subsequences: a larger one is reported as not modelled.
 * Uniform and double conversions are cuRAND's formulas (exact: the scale factors are powers of two, or one
 * correctly rounded double product for MRG32k3a). The normal transforms are cuRAND's Box-Muller, caching the
 * second value, evaluated with the host's logf / sinf / cosf (cuRAND's own host path): the device's math library
 * may differ in the last bits of these.
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#pragma GCC visibility push(hidden)

struct murandStatePhilox4_32_10 {
  uint32_t ctr[4];
  uint32_t output[4];
  uint32_t key[2];
  uint32_t STATE;  // the index in `output` of the next value
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
struct murandStateXORWOW {
  uint32_t d, v[5];
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
struct murandStateMRG32k3a {
  uint32_t s1[3];
  uint32_t s2[3];
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef murandStatePhilox4_32_10 murandStatePhilox4_32_10_t;
typedef murandStateXORWOW murandStateXORWOW_t;
typedef murandStateXORWOW murandState_t;
typedef murandStateMRG32k3a murandStateMRG32k3a_t;

namespace tl_sim {
namespace murand {

// ---- Philox4_32_10 ---------------------------------------------------------------------------------------------
inline void PhiloxBlock(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round != 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    std::memcpy(c, next, sizeof(c));
  }
  std::memcpy(out, c, sizeof(c));
}

/*! \brief Add n to the counter's low 64 bits, carrying into the high ones as cuRAND's Philox_State_Incr does. */
inline void PhiloxAdd(murandStatePhilox4_32_10_t* s, uint64_t n) {
  const uint32_t nlo = static_cast<uint32_t>(n);
  uint32_t nhi = static_cast<uint32_t>(n >> 32);
  s->ctr[0] += nlo;
  if (s->ctr[0] < nlo) ++nhi;
  s->ctr[1] += nhi;
  if (nhi <= s->ctr[1]) return;
  if (++s->ctr[2] != 0) return;
  ++s->ctr[3];
}

inline void PhiloxAddHigh(murandStatePhilox4_32_10_t* s, uint64_t n) {
  const uint32_t nlo = static_cast<uint32_t>(n);
  uint32_t nhi = static_cast<uint32_t>(n >> 32);
  s->ctr[2] += nlo;
  if (s->ctr[2] < nlo) ++nhi;
  s->ctr[3] += nhi;
}

// ---- XORWOW ----------------------------------------------------------------------------------------------------
/*! \brief A linear map of the 160-bit xorshift state over GF(2): row i (5 words) is the image of state bit i
 *         (bit i % 32 of word i / 32), so a state maps to the XOR of the rows of its set bits. */
struct Gf2Matrix {
  uint32_t rows[160][5];
};

inline void Gf2Apply(const Gf2Matrix& m, const uint32_t in[5], uint32_t out[5]) {
  uint32_t r[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 160; ++i) {
    if ((in[i / 32] >> (i % 32)) & 1u) {
      for (int k = 0; k < 5; ++k) r[k] ^= m.rows[i][k];
    }
  }
  std::memcpy(out, r, sizeof(r));
}

inline void XorwowStepV(uint32_t v[5]) {
  const uint32_t t = v[0] ^ (v[0] >> 2);
  v[0] = v[1];
  v[1] = v[2];
  v[2] = v[3];
  v[3] = v[4];
  v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
}

/*! \brief M^(2^k) for k < 131 (offsets need k < 64, subsequences 67 <= k < 131), M the one-step map of v. Built
 *         once per library on first use (a function-local static: thread-safe), on the heap: fiber stacks are
 *         small. */
struct XorwowPowers {
  static constexpr int kCount = 131;
  Gf2Matrix power[kCount];
  XorwowPowers() {
    for (int i = 0; i < 160; ++i) {
      uint32_t v[5] = {0, 0, 0, 0, 0};
      v[i / 32] = 1u << (i % 32);
      XorwowStepV(v);
      std::memcpy(power[0].rows[i], v, sizeof(v));
    }
    for (int k = 1; k < kCount; ++k) {
      for (int i = 0; i < 160; ++i) Gf2Apply(power[k - 1], power[k - 1].rows[i], power[k].rows[i]);
    }
  }
};

inline const XorwowPowers& Powers() {
  static const XorwowPowers* const powers = new XorwowPowers();
  return *powers;
}

/*! \brief v <- v * M^(n * 2^shift); all the factors are powers of M, so their order does not matter. */
inline void XorwowSkip(murandStateXORWOW_t* s, uint64_t n, int shift) {
  const XorwowPowers& p = Powers();
  for (int bit = 0; bit < 64 && (n >> bit) != 0; ++bit) {
    if ((n >> bit) & 1u) Gf2Apply(p.power[bit + shift], s->v, s->v);
  }
}

// ---- MRG32k3a --------------------------------------------------------------------------------------------------
constexpr uint64_t kM1 = 4294967087u, kM2 = 4294944443u;
constexpr uint64_t kA12 = 1403580u, kA13n = 810728u, kA21 = 527612u, kA23n = 1370589u;
constexpr double kMrgNorm = 2.3283065498378288e-10;   // cuRAND's MRG32K3A_NORM
constexpr double kMrgBitsNorm = 1.000000048662;        // cuRAND's MRG32K3A_BITS_NORM

struct Mat3 {
  uint64_t a[3][3];
};

inline Mat3 Mat3Mul(const Mat3& x, const Mat3& y, uint64_t m) {
  Mat3 r{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      uint64_t sum = 0;  // each product < m^2 < 2^64: reduce before adding
      for (int k = 0; k < 3; ++k) sum = (sum + x.a[i][k] * y.a[k][j] % m) % m;
      r.a[i][j] = sum;
    }
  return r;
}

/*! \brief a^(n * 2^shift) mod m by squaring. */
inline Mat3 Mat3Pow(Mat3 a, uint64_t n, int shift, uint64_t m) {
  for (int i = 0; i < shift; ++i) a = Mat3Mul(a, a, m);
  Mat3 r{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
  for (; n != 0; n >>= 1) {
    if (n & 1u) r = Mat3Mul(r, a, m);
    a = Mat3Mul(a, a, m);
  }
  return r;
}

inline void Mat3Apply(const Mat3& a, uint32_t s[3], uint64_t m) {
  uint64_t r[3];
  for (int i = 0; i < 3; ++i) {
    uint64_t sum = 0;
    for (int k = 0; k < 3; ++k) sum = (sum + a.a[i][k] * s[k] % m) % m;
    r[i] = sum;
  }
  for (int i = 0; i < 3; ++i) s[i] = static_cast<uint32_t>(r[i]);
}

// One step: s1 <- (s1[1], s1[2], a12 s1[1] - a13n s1[0]), s2 <- (s2[1], s2[2], a21 s2[2] - a23n s2[0]).
inline Mat3 MrgStep1() { return Mat3{{{0, 1, 0}, {0, 0, 1}, {kM1 - kA13n, kA12, 0}}}; }
inline Mat3 MrgStep2() { return Mat3{{{0, 1, 0}, {0, 0, 1}, {kM2 - kA23n, 0, kA21}}}; }

inline void MrgSkip(murandStateMRG32k3a_t* s, uint64_t n, int shift) {
  if (n == 0) return;
  Mat3Apply(Mat3Pow(MrgStep1(), n, shift, kM1), s->s1, kM1);
  Mat3Apply(Mat3Pow(MrgStep2(), n, shift, kM2), s->s2, kM2);
}

/*! \brief The next combined value, an integer in [1, m1], as a double (cuRAND's curand_MRG32k3a). */
inline double MrgNext(murandStateMRG32k3a_t* s) {
  // each product < 2^64; their sum may not be, so reduce them first
  const uint64_t p1 = (kA12 * s->s1[1] % kM1 + (kM1 - kA13n) * s->s1[0] % kM1) % kM1;
  s->s1[0] = s->s1[1];
  s->s1[1] = s->s1[2];
  s->s1[2] = static_cast<uint32_t>(p1);
  const uint64_t p2 = (kA21 * s->s2[2] % kM2 + (kM2 - kA23n) * s->s2[0] % kM2) % kM2;
  s->s2[0] = s->s2[1];
  s->s2[1] = s->s2[2];
  s->s2[2] = static_cast<uint32_t>(p2);
  return p1 <= p2 ? static_cast<double>(p1 + kM1 - p2) : static_cast<double>(p1 - p2);
}

// ---- conversions (cuRAND's constants) --------------------------------------------------------------------------
constexpr float k2Pow32Inv = 2.3283064e-10f;                // 2^-32 exactly
constexpr float k2Pow32Inv2Pi = 2.3283064e-10f * 6.2831855f;
constexpr float k2Pi = 6.2831855f;
constexpr double k2Pow32InvDouble = 2.3283064365386963e-10;  // 2^-32
constexpr double k2Pow53InvDouble = 1.1102230246251565e-16;  // 2^-53
constexpr double kPiDouble = 3.1415926535897932;
constexpr int kExtraFlagNormal = 1;

inline float Uniform(uint32_t x) { return x * k2Pow32Inv + (k2Pow32Inv / 2.0f); }
inline double UniformDouble(uint32_t x) { return x * k2Pow32InvDouble + k2Pow32InvDouble; }
inline double UniformDoubleHq(uint32_t x, uint32_t y) {
  const uint64_t z = static_cast<uint64_t>(x) ^ (static_cast<uint64_t>(y) << (53 - 32));
  return z * k2Pow53InvDouble + (k2Pow53InvDouble / 2.0);
}

inline void BoxMuller(uint32_t x, uint32_t y, float* first, float* second) {
  const float u = x * k2Pow32Inv + (k2Pow32Inv / 2);
  // fused, as a GPU compiler contracts it (u's product is exact, so fusing it changes nothing)
  const float v = fmaf(static_cast<float>(y), k2Pow32Inv2Pi, k2Pow32Inv2Pi / 2);
  const float s = sqrtf(-2.0f * logf(u));
  *first = sinf(v) * s;
  *second = cosf(v) * s;
}

inline void BoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1, double* first, double* second) {
  const double u = UniformDoubleHq(x0, x1);
  const uint64_t zy = static_cast<uint64_t>(y0) ^ (static_cast<uint64_t>(y1) << (53 - 32));
  const double v = zy * (k2Pow53InvDouble * 2.0) + k2Pow53InvDouble;
  const double s = std::sqrt(-2.0 * std::log(u));
  *first = std::sin(v * kPiDouble) * s;
  *second = std::cos(v * kPiDouble) * s;
}

/*! \brief curand_normal's caching: a pair every other call, the second value on the call after. `flag` and
 *         `extra` are the state's fields for T (float and double keep their own). */
template <class T, class Pair>
inline T CachedPair(int* flag, T* extra, Pair pair) {
  if (*flag != kExtraFlagNormal) {
    T first, second;
    pair(&first, &second);
    *extra = second;
    *flag = kExtraFlagNormal;
    return first;
  }
  *flag = 0;
  return *extra;
}

template <class State, class Pair>
inline float CachedNormal(State* s, Pair pair) {
  return CachedPair<float>(&s->boxmuller_flag, &s->boxmuller_extra, pair);
}

template <class State, class Pair>
inline double CachedNormalDouble(State* s, Pair pair) {
  return CachedPair<double>(&s->boxmuller_flag_double, &s->boxmuller_extra_double, pair);
}

template <class State>
inline void ResetBoxMuller(State* s) {
  s->boxmuller_flag = 0;
  s->boxmuller_flag_double = 0;
  s->boxmuller_extra = 0.f;
  s->boxmuller_extra_double = 0.;
}

}  // namespace murand
}  // namespace tl_sim

// ---- Philox4_32_10 ---------------------------------------------------------------------------------------------
inline void murand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                        murandStatePhilox4_32_10_t* state) {
  using namespace tl_sim::murand;
  std::memset(state->ctr, 0, sizeof(state->ctr));
  state->key[0] = static_cast<uint32_t>(seed);
  state->key[1] = static_cast<uint32_t>(seed >> 32);
  state->STATE = 0;
  ResetBoxMuller(state);
  PhiloxAddHigh(state, subsequence);  // skipahead_sequence
  state->STATE += static_cast<uint32_t>(offset & 3);  // skipahead(offset); STATE was 0, so it stays below 4
  PhiloxAdd(state, offset / 4);
  PhiloxBlock(state->ctr, state->key, state->output);
}

inline unsigned int murand(murandStatePhilox4_32_10_t* state) {
  const uint32_t value = state->output[state->STATE++];
  if (state->STATE == 4) {
    tl_sim::murand::PhiloxAdd(state, 1);
    tl_sim::murand::PhiloxBlock(state->ctr, state->key, state->output);
    state->STATE = 0;
  }
  return value;
}

/*! \brief cuRAND's curand4: the next four outputs, and the generator moves on by a whole block. */
inline void tl_sim_murand4(murandStatePhilox4_32_10_t* state, uint32_t out[4]) {
  uint32_t words[8];
  std::memcpy(words, state->output, sizeof(state->output));
  tl_sim::murand::PhiloxAdd(state, 1);
  tl_sim::murand::PhiloxBlock(state->ctr, state->key, state->output);
  std::memcpy(words + 4, state->output, sizeof(state->output));
  std::memcpy(out, words + state->STATE, 4 * sizeof(uint32_t));
}

inline float murand_uniform(murandStatePhilox4_32_10_t* state) { return tl_sim::murand::Uniform(murand(state)); }
inline double murand_uniform_double(murandStatePhilox4_32_10_t* state) {
  return tl_sim::murand::UniformDouble(murand(state));  // one draw, 32 random bits (cuRAND's Philox version)
}
inline float murand_normal(murandStatePhilox4_32_10_t* state) {
  return tl_sim::murand::CachedNormal(state, [state](float* a, float* b) {
    const uint32_t x = murand(state);
    const uint32_t y = murand(state);
    tl_sim::murand::BoxMuller(x, y, a, b);
  });
}
inline double murand_normal_double(murandStatePhilox4_32_10_t* state) {
  return tl_sim::murand::CachedNormalDouble(state, [state](double* a, double* b) {
    uint32_t x[4];
    tl_sim_murand4(state, x);
    tl_sim::murand::BoxMullerDouble(x[0], x[1], x[2], x[3], a, b);
  });
}

// ---- XORWOW ----------------------------------------------------------------------------------------------------
inline void murand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                        murandStateXORWOW_t* state) {
  const uint32_t s0 = static_cast<uint32_t>(seed) ^ 0xaad26b49u;
  const uint32_t s1 = static_cast<uint32_t>(seed >> 32) ^ 0xf7dcefddu;
  const uint32_t t0 = 1099087573u * s0;
  const uint32_t t1 = 2591861531u * s1;
  state->d = 6615241u + t1 + t0;
  state->v[0] = 123456789u + t0;
  state->v[1] = 362436069u ^ t0;
  state->v[2] = 521288629u + t1;
  state->v[3] = 88675123u ^ t1;
  state->v[4] = 5783321u + t0;
  tl_sim::murand::XorwowSkip(state, subsequence, 67);  // d moves by a multiple of 2^32: unchanged
  tl_sim::murand::XorwowSkip(state, offset, 0);
  state->d += 362437u * static_cast<uint32_t>(offset);
  tl_sim::murand::ResetBoxMuller(state);
}

inline unsigned int murand(murandStateXORWOW_t* state) {
  tl_sim::murand::XorwowStepV(state->v);
  state->d += 362437u;
  return state->v[4] + state->d;
}

inline float murand_uniform(murandStateXORWOW_t* state) { return tl_sim::murand::Uniform(murand(state)); }
inline double murand_uniform_double(murandStateXORWOW_t* state) {
  const uint32_t x = murand(state);
  const uint32_t y = murand(state);
  return tl_sim::murand::UniformDoubleHq(x, y);
}
inline float murand_normal(murandStateXORWOW_t* state) {
  return tl_sim::murand::CachedNormal(state, [state](float* a, float* b) {
    const uint32_t x = murand(state);
    const uint32_t y = murand(state);
    tl_sim::murand::BoxMuller(x, y, a, b);
  });
}
inline double murand_normal_double(murandStateXORWOW_t* state) {
  return tl_sim::murand::CachedNormalDouble(state, [state](double* a, double* b) {
    const uint32_t x0 = murand(state);
    const uint32_t x1 = murand(state);
    const uint32_t y0 = murand(state);
    const uint32_t y1 = murand(state);
    tl_sim::murand::BoxMullerDouble(x0, x1, y0, y1, a, b);
  });
}

// ---- MRG32k3a --------------------------------------------------------------------------------------------------
inline void murand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                        murandStateMRG32k3a_t* state) {
  using namespace tl_sim::murand;
  if (subsequence >= (1ull << 51))
    tl_sim::CurrentBlock("murand_init")
        .Fail(musaErrorNotSupported,
              "murand_init(MRG32k3a): subsequence %llu is not modelled (the generator's skip-ahead tables cover "
              "subsequences below 2^51)",
              subsequence);
  for (int i = 0; i < 3; ++i) state->s1[i] = state->s2[i] = 12345u;
  if (seed != 0) {
    const uint64_t x1 = static_cast<uint32_t>(seed) ^ 0x55555555u;
    const uint64_t x2 = static_cast<uint32_t>(seed >> 32) ^ 0xAAAAAAAAu;
    state->s1[0] = static_cast<uint32_t>(x1 * state->s1[0] % kM1);
    state->s1[1] = static_cast<uint32_t>(x2 * state->s1[1] % kM1);
    state->s1[2] = static_cast<uint32_t>(x1 * state->s1[2] % kM1);
    state->s2[0] = static_cast<uint32_t>(x2 * state->s2[0] % kM2);
    state->s2[1] = static_cast<uint32_t>(x1 * state->s2[1] % kM2);
    state->s2[2] = static_cast<uint32_t>(x2 * state->s2[2] % kM2);
  }
  MrgSkip(state, subsequence, 76);
  MrgSkip(state, offset, 0);
  ResetBoxMuller(state);
}

inline unsigned int murand(murandStateMRG32k3a_t* state) {
  return static_cast<unsigned int>(tl_sim::murand::MrgNext(state) * tl_sim::murand::kMrgBitsNorm);
}
inline float murand_uniform(murandStateMRG32k3a_t* state) {
  return static_cast<float>(tl_sim::murand::MrgNext(state) * tl_sim::murand::kMrgNorm);
}
inline double murand_uniform_double(murandStateMRG32k3a_t* state) {
  return tl_sim::murand::MrgNext(state) * tl_sim::murand::kMrgNorm;
}
inline float murand_normal(murandStateMRG32k3a_t* state) {
  return tl_sim::murand::CachedNormal(state, [state](float* a, float* b) {
    const float x = murand_uniform(state);
    const float y = murand_uniform(state) * tl_sim::murand::k2Pi;
    const float s = sqrtf(-2.0f * logf(x));
    *a = sinf(y) * s;
    *b = cosf(y) * s;
  });
}
inline double murand_normal_double(murandStateMRG32k3a_t* state) {
  return tl_sim::murand::CachedNormalDouble(state, [state](double* a, double* b) {
    const double x = murand_uniform_double(state);
    const double y = murand_uniform_double(state) * 2.0;
    const double s = std::sqrt(-2.0 * std::log(x));
    *a = std::sin(y * tl_sim::murand::kPiDouble) * s;
    *b = std::cos(y * tl_sim::murand::kPiDouble) * s;
  });
}

#pragma GCC visibility pop
