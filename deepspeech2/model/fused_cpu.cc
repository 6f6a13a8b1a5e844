// The GRU time loop of deepspeech2/model/rnn.py (`gru_recurrence`) as two TensorFlow CPU ops, forward and backward,
// for training: one op per layer and direction instead of a graph loop of small ops per time step.
//
// Only the sequential parts live here. Outside, in TensorFlow as before: the input projection and its sequence-wise
// BN (DS2 eq. 4; this op gets their output `x`), and the recurrent weight gradient (one matmul over all steps).
//
// Per step, the threads split the units in blocks of 16: a thread multiplies the whole state by its own columns of
// U (its three gates' columns for its units, packed once per call for the AVX-512 kernels and then read from its
// core's cache at every step) and does those units' gate math, so the only synchronization is one spin barrier a
// step, after which every thread reads the whole new state. The forward op keeps each step's gates, so the backward
// op needs no recomputing matmul; its reverse loop is the same split over the units of dh.
//
// bf16 kernels (`dtype` bfloat16, i.e. Keras's mixed_bfloat16) multiply bf16 states by bf16 weights with fp32
// accumulation (AVX512-BF16's dot products), as the loop's bf16 matmuls do, and keep the fp32 sums (the loop's
// TF matmul rounds its output to bf16); all gate math is fp32.
//
// The kernels need AVX-512 (fp32) and AVX512-BF16 (bf16): `Ds2FusedCpuSupport` says which this CPU has, and Python
// uses the loop where it lacks them. The library compiles anywhere TensorFlow does (the kernels carry their own target
// attributes; nothing is compiled for the build machine's CPU only).

#include <algorithm>
#include <atomic>
#include <memory>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define DS2_X86 1
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/blocking_counter.h"
#include "tensorflow/core/platform/threadpool.h"

namespace ds2 {

using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

constexpr int kLanes = 16;  // units per block: one AVX-512 vector of fp32
constexpr int kRows = 8;    // batch rows per register tile: 8 rows x 3 gates = 24 accumulators of 32 registers

enum Support { kFp32 = 1, kBf16 = 2 };

int cpu_support() {
#ifdef DS2_X86
  __builtin_cpu_init();
  int flags = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    flags |= kFp32;
  if ((flags & kFp32) && __builtin_cpu_supports("avx512bf16")) flags |= kBf16;
  return flags;
#else
  return 0;
#endif
}

inline uint16_t to_bf16(float f) {  // round to nearest even, as TensorFlow's cast
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Runs fn(thread) on `threads` threads: this one and threads - 1 closures on TensorFlow's intra-op pool.
template <typename Fn>
void run_parallel(OpKernelContext* ctx, int threads, Fn fn) {
  if (threads == 1) {
    fn(0);
    return;
  }
  auto* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  tensorflow::BlockingCounter done(threads - 1);
  for (int k = 1; k < threads; ++k) {
    pool->Schedule([&fn, &done, k] {
      fn(k);
      done.DecrementCount();
    });
  }
  fn(0);
  done.Wait();
}

struct Split {  // unit blocks [begin, end) of thread `k` of `threads`
  int begin, end;
  Split(int blocks, int threads, int k) : begin(blocks * k / threads), end(blocks * (k + 1) / threads) {}
};

// fn(round, block) for every block of every round, round after round, on `threads` threads. Each thread takes the
// blocks of its own range first (so a block's weights stay in one core's cache from step to step), then any that
// another thread has not started: a thread that is descheduled (a busy machine) or whose closure starts late (a busy
// pool) holds up no round but the one it is inside, and the op never waits for a closure to start.
template <typename Fn>
void run_rounds(OpKernelContext* ctx, int threads, int blocks, int64_t rounds, Fn fn) {
  std::unique_ptr<std::atomic<int>[]> next(new std::atomic<int>[rounds * threads]);
  std::unique_ptr<std::atomic<int>[]> done(new std::atomic<int>[rounds]);
  for (int64_t i = 0; i < rounds * threads; ++i) next[i].store(0, std::memory_order_relaxed);
  for (int64_t r = 0; r < rounds; ++r) done[r].store(0, std::memory_order_relaxed);
  run_parallel(ctx, threads, [&](int thread) {
    for (int64_t r = 0; r < rounds; ++r) {
      for (int o = 0; o < threads; ++o) {
        const int owner = (thread + o) % threads;
        const Split range(blocks, threads, owner);
        for (;;) {
          const int block = range.begin + next[r * threads + owner].fetch_add(1, std::memory_order_relaxed);
          if (block >= range.end) break;
          fn(r, block);
          done[r].fetch_add(1, std::memory_order_release);
        }
      }
      // The next round needs all of this one (the whole new state): spin, as a round lasts microseconds; yield
      // after a while, when the block left is another thread's that was descheduled.
      for (int spins = 0; done[r].load(std::memory_order_acquire) < blocks; ++spins) {
#ifdef DS2_X86
        if (spins < 2000) {
          _mm_pause();
          continue;
        }
#endif
        std::this_thread::yield();
      }
    }
  });
}

// Threads for `blocks` unit blocks of `rows` batch rows: the intra-op pool's, fewer for small problems.
int thread_count(OpKernelContext* ctx, int blocks, int64_t rows) {
  int threads = ctx->device()->tensorflow_cpu_worker_threads()->num_threads;
  if (rows * blocks < 64) threads = 1;  // too small to share out
  return std::max(1, std::min(threads, blocks));
}

#ifdef DS2_X86
// Everything down to the ops is compiled for AVX-512 (lambdas included, which target attributes would miss); it runs
// only where cpu_support() says the CPU has it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

// ---- AVX-512 math --------------------------------------------------------------------------------------------

inline __m512 exp512(__m512 x) {
  // e^x = 2^n e^r with |r| <= ln2 / 2: a degree-6 Taylor polynomial (relative error ~1e-7), scaled by 2^n.
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

inline __m512 tanh512(__m512 x) {
  // 1 - 2 / (e^2x + 1): exact at both ends, absolute error ~1e-7 near 0.
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp512(_mm512_add_ps(x, x));
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
}

inline __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

inline void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }

inline void store_bf16(uint16_t* p, __mmask16 m, __m512 v) {
  // Round to nearest even in integer arithmetic, so the fp32 kernels need no AVX512-BF16.
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

inline __mmask16 lanes(int units, int block) {
  const int left = units - block * kLanes;
  return left >= kLanes ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// ---- GEMM micro-kernels: out (R x NB*16, fp32) = A (R x K) . W, W packed as [K (pairs for bf16)][NB][16 lanes] --

template <int R, int NB>
void gemm_bf16(const uint16_t* a, int64_t lda, const uint16_t* w, int pairs, float* out) {
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int p = 0; p < pairs; ++p) {
    __m512bh wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = (__m512bh)_mm512_loadu_si512(w + (static_cast<int64_t>(p) * NB + n) * 32);
    for (int r = 0; r < R; ++r) {
      int32_t two;  // a's k = 2p and 2p + 1, next to each other in a row
      std::memcpy(&two, a + r * lda + 2 * p, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(two);
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], av, wv[n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) _mm512_store_ps(out + (r * NB + n) * kLanes, acc[r][n]);
}

template <int R, int NB>
void gemm_f32(const float* a, int64_t lda, const float* w, int k, float* out) {
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int i = 0; i < k; ++i) {
    __m512 wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = _mm512_loadu_ps(w + (static_cast<int64_t>(i) * NB + n) * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + i]);
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_fmadd_ps(av, wv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) _mm512_store_ps(out + (r * NB + n) * kLanes, acc[r][n]);
}

// `rows` (<= kRows) rows of A through the micro-kernel of that height; `out` 64-byte aligned.
template <int NB, typename T>
void gemm_rows(int rows, const T* a, int64_t lda, const T* w, int k, float* out) {
#define DS2_CASE(R)                                 \
  case R:                                           \
    if constexpr (std::is_same<T, uint16_t>::value) \
      gemm_bf16<R, NB>(a, lda, w, k, out);          \
    else                                            \
      gemm_f32<R, NB>(a, lda, w, k, out);           \
    break;
  switch (rows) { DS2_CASE(1) DS2_CASE(2) DS2_CASE(3) DS2_CASE(4) DS2_CASE(5) DS2_CASE(6) DS2_CASE(7) DS2_CASE(8) }
#undef DS2_CASE
}

// ---- weight packing ----------------------------------------------------------------------------------------------

// Element (k, c) of the recurrent kernel U (H, 3H), in the packed type: bf16 bits or fp32.
template <typename T, typename K>
inline T weight(const K* u, int64_t cols, int64_t k, int64_t c) {
  if constexpr (std::is_same<T, uint16_t>::value) {
    return reinterpret_cast<const uint16_t*>(u)[k * cols + c];
  } else if constexpr (std::is_same<K, float>::value) {
    return u[k * cols + c];
  } else {
    return from_bf16(reinterpret_cast<const uint16_t*>(u)[k * cols + c]);
  }
}

// Forward panel of unit block `block`: for each k (pair, in bf16), the z, r and n columns of its 16 units; zero past H.
template <typename T, typename K>
void pack_forward(const K* u, int units, int block, int k_padded, T* panel) {
  const int64_t cols = 3 * static_cast<int64_t>(units);
  const int per = std::is_same<T, uint16_t>::value ? 2 : 1;  // k values per lane entry
  for (int k0 = 0; k0 < k_padded; k0 += per)
    for (int g = 0; g < 3; ++g)
      for (int l = 0; l < kLanes; ++l)
        for (int e = 0; e < per; ++e) {
          const int j = block * kLanes + l, k = k0 + e;
          *panel++ = (j < units && k < units) ? weight<T>(u, cols, k, g * units + j) : T(0);
        }
}

// Backward panel of output unit block `block`: U^T, whose rows are the 3 gates' padded columns c' = g * Hp + j.
template <typename T, typename K>
void pack_backward(const K* u, int units, int units_padded, int block, T* panel) {
  const int64_t cols = 3 * static_cast<int64_t>(units);
  const int per = std::is_same<T, uint16_t>::value ? 2 : 1;
  for (int c0 = 0; c0 < 3 * units_padded; c0 += per)
    for (int l = 0; l < kLanes; ++l)
      for (int e = 0; e < per; ++e) {
        const int i = block * kLanes + l, c = c0 + e, g = c / units_padded, j = c % units_padded;
        *panel++ = (i < units && j < units) ? weight<T>(u, cols, i, g * units + j) : T(0);
      }
}

// ---- the loops -----------------------------------------------------------------------------------------------

struct GruShapes {
  int64_t steps, batch;
  int units, blocks, units_padded;
};

// T: the packed weight and GEMM operand type (uint16_t: bf16 bits, or float); K: the kernel tensor's element type.
template <typename T, typename K>
void gru_forward(OpKernelContext* ctx, const GruShapes& s, const float* x, const float* mask, const float* h0,
                 const K* u, const float* bias, float* states, float* gates) {
  constexpr bool bf16 = std::is_same<T, uint16_t>::value;
  const int H = s.units, k_padded = bf16 ? (H + 1) / 2 * 2 : H;
  const int64_t B = s.batch, panel_size = static_cast<int64_t>(k_padded) * 3 * kLanes;
  std::vector<T> panels(static_cast<size_t>(panel_size) * s.blocks);
  // bf16: the state as the matmul's operand, double-buffered (a step reads one while it writes the other).
  std::vector<uint16_t> hb(bf16 ? 2 * B * k_padded : 0, 0);
  for (int64_t i = 0; i < (bf16 ? B * H : 0); ++i) hb[(i / H) * k_padded + i % H] = to_bf16(h0[i]);
  // Round 0 packs each block's weights; round t + 1 is step t.
  run_rounds(ctx, thread_count(ctx, s.blocks, B), s.blocks, s.steps + 1, [&](int64_t round, int blk) {
    T* panel = panels.data() + blk * panel_size;
    if (round == 0) return pack_forward<T>(u, H, blk, k_padded, panel);
    const int64_t t = round - 1;
    const float* h_prev = t ? states + (t - 1) * B * H : h0;
    const T* a;
    int64_t lda;
    if constexpr (bf16) {
      a = hb.data() + (t & 1) * B * k_padded;
      lda = k_padded;
    } else {
      a = h_prev;
      lda = H;
    }
    uint16_t* hb_next = bf16 ? hb.data() + ((t + 1) & 1) * B * k_padded : nullptr;
    const __mmask16 m16 = lanes(H, blk);
    const int j0 = blk * kLanes;
    const __m512 bz = load(bias + j0, m16), br = load(bias + H + j0, m16), bn = load(bias + 2 * H + j0, m16);
    alignas(64) float acc[kRows * 3 * kLanes];
    for (int64_t r0 = 0; r0 < B; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, B - r0));
      gemm_rows<3>(rows, a + r0 * lda, lda, panel, bf16 ? k_padded / 2 : H, acc);
      for (int r = 0; r < rows; ++r) {
        const int64_t b = r0 + r, row = t * B + b;
        const float* xr = x + row * 3 * H + j0;
        const float* ar = acc + r * 3 * kLanes;
        const __m512 z = sigmoid512(_mm512_add_ps(_mm512_add_ps(load(xr, m16), bz), _mm512_load_ps(ar)));
        const __m512 rg =
            sigmoid512(_mm512_add_ps(_mm512_add_ps(load(xr + H, m16), br), _mm512_load_ps(ar + kLanes)));
        const __m512 an = _mm512_add_ps(_mm512_load_ps(ar + 2 * kLanes), bn);
        const __m512 n = tanh512(_mm512_fmadd_ps(rg, an, load(xr + 2 * H, m16)));
        const __m512 hp = load(h_prev + b * H + j0, m16);
        const __m512 mz = _mm512_mul_ps(_mm512_set1_ps(mask[row]), z);
        const __m512 h = _mm512_fmadd_ps(mz, _mm512_sub_ps(n, hp), hp);
        store(states + row * H + j0, m16, h);
        float* gr = gates + row * 4 * H + j0;
        store(gr, m16, z);
        store(gr + H, m16, rg);
        store(gr + 2 * H, m16, n);
        store(gr + 3 * H, m16, an);
        if (bf16) store_bf16(hb_next + b * k_padded + j0, m16, h);
      }
    }
  });
}

template <typename T, typename K>
void gru_backward(OpKernelContext* ctx, const GruShapes& s, const float* d_out, const float* gates,
                  const float* states, const float* mask, const float* h0, const K* u, float* d_x, K* d_a,
                  float* d_bias, float* d_h0) {
  constexpr bool bf16 = std::is_same<T, uint16_t>::value;
  const int H = s.units, Hp = s.units_padded;
  const int64_t B = s.batch, c_padded = 3 * static_cast<int64_t>(Hp), panel_size = c_padded * kLanes;
  std::vector<T> panels(static_cast<size_t>(panel_size) * s.blocks);
  // The gradient of U h + b at a step, the matmul's operand (zero in the padding), and per unit: dh from the step
  // after, dh's direct path dh (1 - m z), and the recurrent bias gradient's sums.
  std::vector<T> g(B * c_padded, T(0));
  std::vector<float> dh_next(B * Hp, 0.0f), keep(B * Hp, 0.0f), bias_sum(3 * Hp, 0.0f);
  const __m512 one = _mm512_set1_ps(1.0f);
  // Round 0 packs each block's weights; then per step, from the last: the elementwise round (its units' gradients
  // and its part of g), then the matmul round (its units of dh_prev = keep + g U^T); a last round writes the sums.
  const int64_t rounds = 2 * s.steps + 2;
  run_rounds(ctx, thread_count(ctx, s.blocks, B), s.blocks, rounds, [&](int64_t round, int blk) {
    T* panel = panels.data() + blk * panel_size;
    const __mmask16 m16 = lanes(H, blk);
    const int j0 = blk * kLanes;
    if (round == 0) return pack_backward<T>(u, H, Hp, blk, panel);
    if (round == rounds - 1) {
      for (int64_t b = 0; b < B; ++b) store(d_h0 + b * H + j0, m16, _mm512_loadu_ps(&dh_next[b * Hp + j0]));
      for (int gate = 0; gate < 3; ++gate) store(d_bias + gate * H + j0, m16, _mm512_loadu_ps(&bias_sum[gate * Hp + j0]));
      return;
    }
    const int64_t t = s.steps - 1 - (round - 1) / 2;
    if ((round - 1) % 2 == 1) {
      alignas(64) float acc[kRows * kLanes];
      for (int64_t r0 = 0; r0 < B; r0 += kRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kRows, B - r0));
        gemm_rows<1>(rows, g.data() + r0 * c_padded, c_padded, panel,
                     static_cast<int>(bf16 ? c_padded / 2 : c_padded), acc);
        for (int r = 0; r < rows; ++r) {
          const int64_t b = r0 + r;
          _mm512_storeu_ps(&dh_next[b * Hp + j0],
                           _mm512_add_ps(_mm512_loadu_ps(&keep[b * Hp + j0]), _mm512_load_ps(acc + r * kLanes)));
        }
      }
      return;
    }
    const float* h_prev = t ? states + (t - 1) * B * H : h0;
    __m512 sz = _mm512_loadu_ps(&bias_sum[j0]), sr = _mm512_loadu_ps(&bias_sum[Hp + j0]),
           sn = _mm512_loadu_ps(&bias_sum[2 * Hp + j0]);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t row = t * B + b;
      const __m512 dh = _mm512_add_ps(_mm512_loadu_ps(&dh_next[b * Hp + j0]), load(d_out + row * H + j0, m16));
      const float* gr = gates + row * 4 * H + j0;
      const __m512 z = load(gr, m16), rg = load(gr + H, m16), n = load(gr + 2 * H, m16), an = load(gr + 3 * H, m16);
      const __m512 hp = load(h_prev + b * H + j0, m16);
      const __m512 mz = _mm512_mul_ps(_mm512_set1_ps(mask[row]), z);
      // h' = h + m z (n - h): d/d(pre-activation) of z, of r (through n) and of n, times dh.
      const __m512 gx = _mm512_mul_ps(dh, _mm512_mul_ps(mz, _mm512_fnmadd_ps(n, n, one)));
      const __m512 gz =
          _mm512_mul_ps(dh, _mm512_mul_ps(_mm512_mul_ps(mz, _mm512_sub_ps(one, z)), _mm512_sub_ps(n, hp)));
      const __m512 gr_ = _mm512_mul_ps(_mm512_mul_ps(gx, an), _mm512_mul_ps(rg, _mm512_sub_ps(one, rg)));
      const __m512 gn = _mm512_mul_ps(gx, rg);  // of U_n h + b_n, inside the reset gate
      float* dx = d_x + row * 3 * H + j0;
      store(dx, m16, gz);
      store(dx + H, m16, gr_);
      store(dx + 2 * H, m16, gx);
      K* da = d_a + row * 3 * H + j0;
      T* gb = g.data() + b * c_padded + j0;
      if constexpr (std::is_same<K, float>::value) {
        store(da, m16, gz);
        store(da + H, m16, gr_);
        store(da + 2 * H, m16, gn);
      } else {
        store_bf16(reinterpret_cast<uint16_t*>(da), m16, gz);
        store_bf16(reinterpret_cast<uint16_t*>(da) + H, m16, gr_);
        store_bf16(reinterpret_cast<uint16_t*>(da) + 2 * H, m16, gn);
      }
      if constexpr (bf16) {
        store_bf16(gb, m16, gz);
        store_bf16(gb + Hp, m16, gr_);
        store_bf16(gb + 2 * Hp, m16, gn);
      } else {
        store(gb, m16, gz);
        store(gb + Hp, m16, gr_);
        store(gb + 2 * Hp, m16, gn);
      }
      sz = _mm512_add_ps(sz, gz);
      sr = _mm512_add_ps(sr, gr_);
      sn = _mm512_add_ps(sn, gn);
      _mm512_storeu_ps(&keep[b * Hp + j0], _mm512_mul_ps(dh, _mm512_sub_ps(one, mz)));
    }
    _mm512_storeu_ps(&bias_sum[j0], sz);
    _mm512_storeu_ps(&bias_sum[Hp + j0], sr);
    _mm512_storeu_ps(&bias_sum[2 * Hp + j0], sn);
  });
}

#pragma GCC pop_options
#endif  // DS2_X86

// ---- the ops -------------------------------------------------------------------------------------------------

tensorflow::Status check_shapes(OpKernelContext* ctx, const Tensor& x, const Tensor& mask, const Tensor& h0,
                                const Tensor& u, const GruShapes& s) {
  if (x.dims() != 3 || x.dim_size(2) != 3 * int64_t{s.units})
    return InvalidArgument("x must be (time, batch, 3 * units), got ", x.shape().DebugString());
  if (mask.shape() != TensorShape({s.steps, s.batch, 1}))
    return InvalidArgument("mask must be (time, batch, 1), got ", mask.shape().DebugString());
  if (h0.shape() != TensorShape({s.batch, s.units}))
    return InvalidArgument("initial_state must be (batch, units), got ", h0.shape().DebugString());
  if (u.shape() != TensorShape({s.units, 3 * int64_t{s.units}}))
    return InvalidArgument("kernel must be (units, 3 * units), got ", u.shape().DebugString());
  return tensorflow::OkStatus();
}

GruShapes shapes_of(const Tensor& x, const Tensor& h0) {
  GruShapes s;
  s.steps = x.dims() == 3 ? x.dim_size(0) : 0;
  s.batch = x.dims() == 3 ? x.dim_size(1) : 0;
  s.units = h0.dims() == 2 ? static_cast<int>(h0.dim_size(1)) : 0;
  s.blocks = (s.units + kLanes - 1) / kLanes;
  s.units_padded = s.blocks * kLanes;
  return s;
}

tensorflow::Status check_support(bool bf16) {
  const int need = bf16 ? kBf16 : kFp32;
  if (!(cpu_support() & need))
    return tensorflow::errors::Unimplemented("Ds2Gru ops need ", bf16 ? "AVX512-BF16" : "AVX-512",
                                             " on this CPU (Ds2FusedCpuSupport says which it has)");
  return tensorflow::OkStatus();
}

template <typename K>
class GruForwardOp : public OpKernel {
 public:
  explicit GruForwardOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &mask = ctx->input(1), &h0 = ctx->input(2), &u = ctx->input(3),
                 &bias = ctx->input(4);
    const GruShapes s = shapes_of(x, h0);
    OP_REQUIRES_OK(ctx, check_shapes(ctx, x, mask, h0, u, s));
    OP_REQUIRES(ctx, bias.shape() == TensorShape({3 * int64_t{s.units}}),
                InvalidArgument("bias must be (3 * units,), got ", bias.shape().DebugString()));
    constexpr bool bf16 = !std::is_same<K, float>::value;
    OP_REQUIRES_OK(ctx, check_support(bf16));
    Tensor *states, *gates;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({s.steps, s.batch, s.units}), &states));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({s.steps, s.batch, 4 * int64_t{s.units}}), &gates));
    if (s.steps == 0 || s.batch == 0 || s.units == 0) return;
#ifdef DS2_X86
    using T = typename std::conditional<bf16, uint16_t, float>::type;
    gru_forward<T>(ctx, s, x.flat<float>().data(), mask.flat<float>().data(), h0.flat<float>().data(),
                   u.flat<K>().data(), bias.flat<float>().data(), states->flat<float>().data(),
                   gates->flat<float>().data());
#endif
  }
};

template <typename K>
class GruBackwardOp : public OpKernel {
 public:
  explicit GruBackwardOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor &d_out = ctx->input(0), &gates = ctx->input(1), &states = ctx->input(2), &mask = ctx->input(3),
                 &h0 = ctx->input(4), &u = ctx->input(5);
    GruShapes s = shapes_of(states, h0);
    const TensorShape x_shape({s.steps, s.batch, 3 * int64_t{s.units}});
    OP_REQUIRES(ctx, states.dims() == 3, InvalidArgument("states must be (time, batch, units)"));
    OP_REQUIRES(ctx, d_out.shape() == states.shape() &&
                         gates.shape() == TensorShape({s.steps, s.batch, 4 * int64_t{s.units}}),
                InvalidArgument("upstream and gates must be the forward op's outputs' shapes, got ",
                                d_out.shape().DebugString(), " and ", gates.shape().DebugString()));
    constexpr bool bf16 = !std::is_same<K, float>::value;
    OP_REQUIRES_OK(ctx, check_support(bf16));
    OP_REQUIRES(ctx, mask.shape() == TensorShape({s.steps, s.batch, 1}) &&
                         h0.shape() == TensorShape({s.batch, s.units}) &&
                         u.shape() == TensorShape({s.units, 3 * int64_t{s.units}}),
                InvalidArgument("mask, initial_state or kernel do not match states ", states.shape().DebugString()));
    Tensor *d_x, *d_a, *d_bias, *d_h0;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_shape, &d_x));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x_shape, &d_a));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({3 * int64_t{s.units}}), &d_bias));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, h0.shape(), &d_h0));
    if (s.steps == 0 || s.batch == 0 || s.units == 0) {
      d_bias->flat<float>().setZero();
      d_h0->flat<float>().setZero();
      return;
    }
#ifdef DS2_X86
    using T = typename std::conditional<bf16, uint16_t, float>::type;
    gru_backward<T>(ctx, s, d_out.flat<float>().data(), gates.flat<float>().data(), states.flat<float>().data(),
                    mask.flat<float>().data(), h0.flat<float>().data(), u.flat<K>().data(),
                    d_x->flat<float>().data(), d_a->flat<K>().data(), d_bias->flat<float>().data(),
                    d_h0->flat<float>().data());
#endif
  }
};

class SupportOp : public OpKernel {
 public:
  explicit SupportOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  void Compute(OpKernelContext* ctx) override {
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<int32_t>()() = cpu_support();
  }
};

REGISTER_OP("Ds2GruForward")
    .Input("x: float")
    .Input("mask: float")
    .Input("initial_state: float")
    .Input("kernel: dtype")
    .Input("bias: float")
    .Output("states: float")
    .Output("gates: float")
    .Attr("dtype: {float, bfloat16}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &x));
      auto units = c->Dim(c->input(2), 1);
      tensorflow::shape_inference::DimensionHandle four;
      TF_RETURN_IF_ERROR(c->Multiply(units, 4, &four));
      c->set_output(0, c->MakeShape({c->Dim(x, 0), c->Dim(x, 1), units}));
      c->set_output(1, c->MakeShape({c->Dim(x, 0), c->Dim(x, 1), four}));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
The GRU time loop of DS2 (reset gate on U_n h + b_n), forward: the states after each step, held at masked steps,
and each step's gates [z, r, n, U_n h + b_n] for Ds2GruBackward.
)doc");

REGISTER_OP("Ds2GruBackward")
    .Input("upstream: float")
    .Input("gates: float")
    .Input("states: float")
    .Input("mask: float")
    .Input("initial_state: float")
    .Input("kernel: dtype")
    .Output("d_x: float")
    .Output("d_a: dtype")
    .Output("d_bias: float")
    .Output("d_initial_state: float")
    .Attr("dtype: {float, bfloat16}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle states;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 3, &states));
      auto units = c->Dim(states, 2);
      tensorflow::shape_inference::DimensionHandle three;
      TF_RETURN_IF_ERROR(c->Multiply(units, 3, &three));
      c->set_output(0, c->MakeShape({c->Dim(states, 0), c->Dim(states, 1), three}));
      c->set_output(1, c->output(0));
      c->set_output(2, c->MakeShape({three}));
      c->set_output(3, c->input(4));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
The reverse loop of Ds2GruForward: the gradients of x, of U h + b (for the recurrent weight gradient, in the
kernel's dtype), of the recurrent bias, and of the initial state.
)doc");

REGISTER_OP("Ds2FusedCpuSupport")
    .Output("support: int32")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc("Which Ds2Gru kernels run on this CPU: bit 0 fp32 (AVX-512), bit 1 bf16 (AVX512-BF16).");

REGISTER_KERNEL_BUILDER(Name("Ds2GruForward").Device(DEVICE_CPU).TypeConstraint<float>("dtype"), GruForwardOp<float>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruForward").Device(DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("dtype"),
                        GruForwardOp<tensorflow::bfloat16>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruBackward").Device(DEVICE_CPU).TypeConstraint<float>("dtype"),
                        GruBackwardOp<float>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruBackward").Device(DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("dtype"),
                        GruBackwardOp<tensorflow::bfloat16>);
REGISTER_KERNEL_BUILDER(Name("Ds2FusedCpuSupport").Device(DEVICE_CPU), SupportOp);

}  // namespace ds2
