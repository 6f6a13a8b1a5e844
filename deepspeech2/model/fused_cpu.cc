// The GRU time loop of deepspeech2/model/rnn.py (`gru_recurrence`) as two TensorFlow CPU ops, forward and backward,
// for training: one op per layer and direction instead of a graph loop of small ops per time step.
//
// Only the sequential parts live here. Outside, in TensorFlow as before: the input projection and its sequence-wise
// BN (DS2 eq. 4; this op gets their output `x`), and the recurrent weight gradient (one matmul over all steps).
//
// Per step, the threads split the units in blocks of one vector (16 units on AVX-512, 8 on AVX2): a thread multiplies
// the whole state by its own columns of U (its three gates' columns for its units, packed once per call for the
// vector kernels and then read from its core's cache at every step) and does those units' gate math, so the only
// synchronization is one spin barrier a step, after which every thread reads the whole new state. The forward op
// keeps each step's gates, so the backward op needs no recomputing matmul; its reverse loop is the same split over
// the units of dh.
//
// bf16 kernels (`dtype` bfloat16, i.e. Keras's mixed_bfloat16) multiply bf16 states by bf16 weights with fp32
// accumulation (AVX512-BF16's dot products), as the loop's bf16 matmuls do, and keep the fp32 sums (the loop's
// TF matmul rounds its output to bf16); all gate math is fp32.
//
// The loops are written once (fused_gru.h) and compiled twice: for AVX-512 (fp32, and AVX512-BF16 for bf16) and for
// AVX2 and FMA (fp32 only: without AVX512-BF16 the loop's bf16 matmuls are emulated too, and bf16 is not the
// precision such CPUs train in). The ops pick AVX-512's where the CPU has it; `Ds2FusedCpuSupport` says what this
// CPU runs, and Python uses the loop where it runs neither.
//
// The library compiles anywhere TensorFlow does (the kernels carry their own target attributes; nothing is compiled
// for the build machine's CPU only).
//
// The same library holds the conv front end's BN + clipped ReLU for training (Ds2BnClippedRelu*, Ds2MaskedMomentSums;
// AVX2 and FMA; see below).

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

// kFp32: the fp32 GRU (its AVX-512 loops, else its AVX2 ones); kBf16: the bf16 GRU; kAvx2: the front end's BN +
// clipped ReLU, and the fp32 GRU's AVX2 loops; kAvx512: the fp32 GRU's AVX-512 loops.
enum Support { kFp32 = 1, kBf16 = 2, kAvx2 = 4, kAvx512 = 8 };

int cpu_support() {
#ifdef DS2_X86
  __builtin_cpu_init();
  int flags = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    flags |= kAvx512;
  if ((flags & kAvx512) && __builtin_cpu_supports("avx512bf16")) flags |= kBf16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) flags |= kAvx2;
  if (flags & (kAvx512 | kAvx2)) flags |= kFp32;
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

struct GruShapes {
  int64_t steps, batch;
  int units;
};

#ifdef DS2_X86
// The loops (fused_gru.h) once per instruction set, each namespace compiled for its own (lambdas included, which
// target attributes would miss); the ops run one only where cpu_support() says the CPU has it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
namespace avx512 {

constexpr int kLanes = 16;    // units per block: one AVX-512 vector of fp32
constexpr int kRows = 8;      // batch rows per register tile: 8 rows x 3 gates = 24 accumulators of 32 registers
constexpr int kBackRows = 8;  // the backward matmul's: 8 rows x 1 block

using Vec = __m512;
using Lanes = __mmask16;

inline Vec set1(float v) { return _mm512_set1_ps(v); }
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec fnmadd(Vec a, Vec b, Vec c) { return _mm512_fnmadd_ps(a, b, c); }
inline Vec vmin(Vec a, Vec b) { return _mm512_min_ps(a, b); }
inline Vec vmax(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline Vec round_nearest(Vec v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline Vec times_pow2(Vec v, Vec n) { return _mm512_scalef_ps(v, n); }
inline Vec loadu(const float* p) { return _mm512_loadu_ps(p); }
inline void storeu(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec load_aligned(const float* p) { return _mm512_load_ps(p); }
inline void store_aligned(float* p, Vec v) { _mm512_store_ps(p, v); }
inline Vec load(const float* p, Lanes m) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, Lanes m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }

inline void store_bf16(uint16_t* p, Lanes m, Vec v) {
  // Round to nearest even in integer arithmetic, so the fp32 kernels need no AVX512-BF16.
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

inline Lanes lanes(int units, int block) {
  const int left = units - block * kLanes;
  return left >= kLanes ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// out (R x NB*16, fp32) = A (R x 2 * pairs) . W for bf16 operands, W packed as [pairs][NB][16 lanes][2]: AVX512-BF16's
// dot products of pairs, fp32 accumulation.
template <int R, int NB>
void gemm(const uint16_t* a, int64_t lda, const uint16_t* w, int pairs, float* out) {
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

#include "fused_gru.h"

}  // namespace avx512
#pragma GCC pop_options

// The fp32 loops on CPUs with AVX2 and FMA but no AVX-512: 8 lanes, 16 vector registers. bf16 runs on AVX512-BF16
// only, so nothing here is instantiated for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {

constexpr int kLanes = 8;     // units per block: one AVX2 vector of fp32
constexpr int kRows = 4;      // 4 rows x 3 gates = 12 accumulators, 3 weight vectors and a broadcast: 16 registers
constexpr int kBackRows = 8;  // the backward matmul's: 8 rows x 1 block, 1 weight vector and a broadcast

using Vec = __m256;
struct Lanes {
  __m256i mask;  // all ones in the block's units
  bool full;     // all 8: plain loads and stores, cheaper than masked ones (much, on AMD's)
};

inline Vec set1(float v) { return _mm256_set1_ps(v); }
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec fnmadd(Vec a, Vec b, Vec c) { return _mm256_fnmadd_ps(a, b, c); }
inline Vec vmin(Vec a, Vec b) { return _mm256_min_ps(a, b); }
inline Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline Vec round_nearest(Vec v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline Vec times_pow2(Vec v, Vec n) {
  // 2^n from its exponent bits: n is in [-127, 127] (vexp's clamp), where 2^-127 (a denormal) becomes 0.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return v * _mm256_castsi256_ps(bits);
}
inline Vec loadu(const float* p) { return _mm256_loadu_ps(p); }
inline void storeu(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec load_aligned(const float* p) { return _mm256_load_ps(p); }
inline void store_aligned(float* p, Vec v) { _mm256_store_ps(p, v); }
inline Vec load(const float* p, Lanes m) { return m.full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.mask); }
inline void store(float* p, Lanes m, Vec v) {
  if (m.full)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, m.mask, v);
}
void store_bf16(uint16_t* p, Lanes m, Vec v);  // declared for fused_gru.h's bf16 branches, never instantiated here

inline Lanes lanes(int units, int block) {
  const int left = units - block * kLanes;
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), left >= kLanes};
}

#include "fused_gru.h"

}  // namespace avx2
#pragma GCC pop_options
#endif  // DS2_X86

// ---- the front end's BN + clipped ReLU -----------------------------------------------------------------------
//
// Each conv of the front end is followed by sequence-wise BN with batch statistics and the clipped ReLU times the
// frame mask: y = min(max(x * scale + shift, 0), clip) * mask, with scale = gamma * inv_std and shift = beta - mean *
// scale per channel (the last axis). TF runs that, and its gradient, as a dozen passes over the (large) activations;
// here it is one pass for the statistics' sums, one forward, and two backward: the per-channel sums the BN gradient
// needs, then dx. What is summed across replicas (the sums) stays between the ops, in TF. x and y are fp32 or bf16
// (the conv's and the next conv's dtype under mixed_bfloat16, so no cast pass either side); the math is fp32. The
// passes are bound by memory, not arithmetic, so AVX2 (8 lanes) is enough on every CPU: they have no AVX-512 loops.

struct BnShapes {
  int64_t rows, inner, channels;  // rows: (batch, time) frames; inner: the values of a frame, channels last
};

#ifdef DS2_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")

constexpr int kWide = 8;  // fp32 lanes of an AVX2 vector

inline float scalar(float v) { return v; }
inline float scalar(tensorflow::bfloat16 v) { return static_cast<float>(v); }
inline void put(float* p, float v) { *p = v; }
inline void put(tensorflow::bfloat16* p, float v) {
  const uint16_t h = to_bf16(v);
  std::memcpy(p, &h, 2);
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

inline __m256 load8(const tensorflow::bfloat16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }

inline void store8(tensorflow::bfloat16* p, __m256 v) {  // round to nearest even, as TensorFlow's cast
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);  // 8 x u16 in the low half
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

// A per-channel vector repeated over a frame's `inner` values, so the loops below read it alongside x.
std::vector<float> per_position(const float* v, const BnShapes& s) {
  std::vector<float> out(s.inner);
  for (int64_t j = 0; j < s.inner; ++j) out[j] = v[j % s.channels];
  return out;
}

// fn(chunk, begin, end) for every chunk of whole frames [begin, end), on this thread and the intra-op pool's. Each
// thread takes the next chunk no one has taken, and the op returns once every chunk is done, not once every closure
// has run: a closure that starts late (the pool busy with another op's work, e.g. a conv's gradient running beside
// this op) takes what is left or nothing, and one that starts after the op has returned finds nothing left to do.
inline int64_t frames_per_chunk(const BnShapes& s) {  // about 64K values
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, s.inner));
}

template <typename Fn>
void over_frames(OpKernelContext* ctx, const BnShapes& s, Fn fn) {
  const int64_t per_chunk = frames_per_chunk(s);
  const int64_t chunks = (s.rows + per_chunk - 1) / per_chunk;
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto shared = std::make_shared<Shared>();
  auto work = [&fn, &s, per_chunk, chunks](Shared* state) {
    for (int64_t c; (c = state->next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
      fn(c, c * per_chunk, std::min(s.rows, (c + 1) * per_chunk));
      state->done.fetch_add(1, std::memory_order_release);  // the last touch of this op's state
    }
  };
  const int helpers = static_cast<int>(
      std::min<int64_t>(ctx->device()->tensorflow_cpu_worker_threads()->num_threads, chunks) - 1);
  auto* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  for (int k = 0; k < helpers; ++k)
    pool->Schedule([shared, work] { work(shared.get()); });  // past the end it touches only `shared`, which it holds
  work(shared.get());
  for (int spins = 0; shared->done.load(std::memory_order_acquire) < chunks; ++spins) {
    if (spins < 2000) {
      _mm_pause();
      continue;
    }
    std::this_thread::yield();
  }
}

// y = min(max(x * scale + shift, 0), clip) * mask.
template <typename X, typename Y>
void bn_relu_forward(OpKernelContext* ctx, const BnShapes& s, const X* x, const float* scale, const float* shift,
                     const float* mask, float clip, Y* y) {
  const std::vector<float> sc = per_position(scale, s), sh = per_position(shift, s);
  over_frames(ctx, s, [&](int64_t, int64_t begin, int64_t end) {
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(clip);
    for (int64_t r = begin; r < end; ++r) {
      const float mr = mask[r];
      const __m256 m = _mm256_set1_ps(mr);
      const X* xr = x + r * s.inner;
      Y* yr = y + r * s.inner;
      int64_t j = 0;
      for (; j + kWide <= s.inner; j += kWide) {
        const __m256 z = _mm256_fmadd_ps(load8(xr + j), _mm256_loadu_ps(&sc[j]), _mm256_loadu_ps(&sh[j]));
        store8(yr + j, _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(z, zero), top), m));
      }
      for (; j < s.inner; ++j)
        put(yr + j, std::min(std::max(std::fma(scalar(xr[j]), sc[j], sh[j]), 0.0f), clip) * mr);
    }
  });
}

// The BN output's gradient: upstream times the mask where 0 < x * scale + shift < clip (the clipped ReLU passes
// it), 0 elsewhere.
inline __m256 relu_gradient(__m256 u, __m256 x, __m256 sc, __m256 sh, __m256 m, float clip) {
  const __m256 z = _mm256_fmadd_ps(x, sc, sh);
  const __m256 pass = _mm256_and_ps(_mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GT_OQ),
                                    _mm256_cmp_ps(z, _mm256_set1_ps(clip), _CMP_LT_OQ));
  return _mm256_and_ps(pass, _mm256_mul_ps(u, m));
}

inline float relu_gradient(float u, float x, float sc, float sh, float m, float clip) {
  const float z = std::fma(x, sc, sh);
  return z > 0.0f && z < clip ? u * m : 0.0f;
}

// sums (2, C): per channel, two terms summed over the frames of nonzero mask; row(r, mask[r], t0, t1) adds frame r's
// terms of each of its `inner` values to t0 and t1.
template <typename Row>
void channel_sums(OpKernelContext* ctx, const BnShapes& s, const float* mask, Row row, float* sums) {
  // Each chunk's sums in fp32 per value, then in fp64 per channel, and the chunks' in order: the same sums whichever
  // thread took which chunk.
  const int64_t per_chunk = frames_per_chunk(s);
  std::vector<double> partial(((s.rows + per_chunk - 1) / per_chunk) * 2 * s.channels, 0.0);
  over_frames(ctx, s, [&](int64_t chunk, int64_t begin, int64_t end) {
    std::vector<float> acc(2 * s.inner, 0.0f);
    for (int64_t r = begin; r < end; ++r)
      if (mask[r] != 0.0f) row(r, mask[r], acc.data(), acc.data() + s.inner);
    double* out = partial.data() + chunk * 2 * s.channels;
    for (int64_t j = 0; j < s.inner; ++j) {
      out[j % s.channels] += acc[j];
      out[s.channels + j % s.channels] += acc[s.inner + j];
    }
  });
  std::vector<double> total(2 * s.channels, 0.0);
  for (size_t i = 0; i < partial.size(); ++i) total[i % (2 * s.channels)] += partial[i];
  for (int64_t c = 0; c < 2 * s.channels; ++c) sums[c] = static_cast<float>(total[c]);
}

// The BN statistics' sums: per channel, sum(w * x) and sum(w * x^2) over all frames, w the frame weights.
template <typename X>
void masked_moment_sums(OpKernelContext* ctx, const BnShapes& s, const X* x, const float* weights, float* sums) {
  channel_sums(ctx, s, weights, [&](int64_t r, float wr, float* t0, float* t1) {
    const __m256 w = _mm256_set1_ps(wr);
    const X* xr = x + r * s.inner;
    int64_t j = 0;
    for (; j + kWide <= s.inner; j += kWide) {
      const __m256 xw = _mm256_mul_ps(load8(xr + j), w);
      _mm256_storeu_ps(t0 + j, _mm256_add_ps(_mm256_loadu_ps(t0 + j), xw));
      _mm256_storeu_ps(t1 + j, _mm256_fmadd_ps(xw, load8(xr + j), _mm256_loadu_ps(t1 + j)));
    }
    for (; j < s.inner; ++j) {
      const float xv = scalar(xr[j]);
      t0[j] += wr * xv;
      t1[j] += wr * xv * xv;
    }
  }, sums);
}

// The BN gradient's sums: per channel, sum(g) and sum(g * (x - mean)) over all frames, g the BN output's gradient.
template <typename X, typename Y>
void bn_relu_grad_sums(OpKernelContext* ctx, const BnShapes& s, const Y* upstream, const X* x, const float* scale,
                       const float* shift, const float* mask, const float* mean, float clip, float* sums) {
  const std::vector<float> sc = per_position(scale, s), sh = per_position(shift, s), mu = per_position(mean, s);
  channel_sums(ctx, s, mask, [&](int64_t r, float mr, float* ag, float* agx) {
    const __m256 m = _mm256_set1_ps(mr);
    const X* xr = x + r * s.inner;
    const Y* ur = upstream + r * s.inner;
    int64_t j = 0;
    for (; j + kWide <= s.inner; j += kWide) {
      const __m256 xv = load8(xr + j);
      const __m256 g = relu_gradient(load8(ur + j), xv, _mm256_loadu_ps(&sc[j]), _mm256_loadu_ps(&sh[j]), m, clip);
      _mm256_storeu_ps(ag + j, _mm256_add_ps(_mm256_loadu_ps(ag + j), g));
      const __m256 centred = _mm256_sub_ps(xv, _mm256_loadu_ps(&mu[j]));
      _mm256_storeu_ps(agx + j, _mm256_fmadd_ps(g, centred, _mm256_loadu_ps(agx + j)));
    }
    for (; j < s.inner; ++j) {
      const float xv = scalar(xr[j]), g = relu_gradient(scalar(ur[j]), xv, sc[j], sh[j], mr, clip);
      ag[j] += g;
      agx[j] += g * (xv - mu[j]);
    }
  }, sums);
}

// dx = mask * (g * scale - (x * c1 + c0)): the BN gradient through the batch statistics, c1 and c0 per channel.
template <typename X, typename Y>
void bn_relu_grad_input(OpKernelContext* ctx, const BnShapes& s, const Y* upstream, const X* x, const float* scale,
                        const float* shift, const float* mask, const float* c1, const float* c0, float clip, X* dx) {
  const std::vector<float> sc = per_position(scale, s), sh = per_position(shift, s), k1 = per_position(c1, s),
                           k0 = per_position(c0, s);
  over_frames(ctx, s, [&](int64_t, int64_t begin, int64_t end) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t r = begin; r < end; ++r) {
      const float mr = mask[r];
      const __m256 m = _mm256_set1_ps(mr);
      const X* xr = x + r * s.inner;
      const Y* ur = upstream + r * s.inner;
      X* dr = dx + r * s.inner;
      int64_t j = 0;
      for (; j + kWide <= s.inner; j += kWide) {
        const __m256 xv = load8(xr + j), scv = _mm256_loadu_ps(&sc[j]);
        const __m256 g = relu_gradient(load8(ur + j), xv, scv, _mm256_loadu_ps(&sh[j]), one, clip);
        const __m256 d =
            _mm256_fmsub_ps(g, scv, _mm256_fmadd_ps(xv, _mm256_loadu_ps(&k1[j]), _mm256_loadu_ps(&k0[j])));
        store8(dr + j, _mm256_mul_ps(d, m));
      }
      for (; j < s.inner; ++j) {
        const float xv = scalar(xr[j]), g = relu_gradient(scalar(ur[j]), xv, sc[j], sh[j], 1.0f, clip);
        put(dr + j, (g * sc[j] - std::fma(xv, k1[j], k0[j])) * mr);
      }
    }
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
  return s;
}

tensorflow::Status check_support(bool bf16) {
  const int need = bf16 ? kBf16 : kFp32;
  if (!(cpu_support() & need))
    return tensorflow::errors::Unimplemented("Ds2Gru ops need ", bf16 ? "AVX512-BF16" : "AVX-512 or AVX2 and FMA",
                                             " on this CPU (Ds2FusedCpuSupport says which it has)");
  return tensorflow::OkStatus();
}

#ifdef DS2_X86
// The loops for this CPU and the kernel's dtype K (check_support has passed): bf16's are AVX512-BF16's; fp32's are
// AVX-512's where the CPU has it, else AVX2's.
template <typename K, typename... Args>
void gru_forward_here(Args... args) {
  if constexpr (!std::is_same<K, float>::value)
    avx512::gru_forward<uint16_t>(args...);
  else if (cpu_support() & kAvx512)
    avx512::gru_forward<float>(args...);
  else
    avx2::gru_forward<float>(args...);
}

template <typename K, typename... Args>
void gru_backward_here(Args... args) {
  if constexpr (!std::is_same<K, float>::value)
    avx512::gru_backward<uint16_t>(args...);
  else if (cpu_support() & kAvx512)
    avx512::gru_backward<float>(args...);
  else
    avx2::gru_backward<float>(args...);
}
#endif

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
    gru_forward_here<K>(ctx, s, x.flat<float>().data(), mask.flat<float>().data(), h0.flat<float>().data(),
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
    gru_backward_here<K>(ctx, s, d_out.flat<float>().data(), gates.flat<float>().data(),
                         states.flat<float>().data(), mask.flat<float>().data(), h0.flat<float>().data(),
                         u.flat<K>().data(), d_x->flat<float>().data(), d_a->flat<K>().data(),
                         d_bias->flat<float>().data(), d_h0->flat<float>().data());
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
    .Doc("Which kernels run on this CPU: bit 0 Ds2Gru's fp32 (AVX-512, or AVX2 and FMA), bit 1 Ds2Gru's bf16 "
         "(AVX512-BF16), bit 2 Ds2BnClippedRelu's and Ds2Gru's fp32 AVX2 loops (AVX2 and FMA), bit 3 Ds2Gru's fp32 "
         "AVX-512 loops.");

REGISTER_KERNEL_BUILDER(Name("Ds2GruForward").Device(DEVICE_CPU).TypeConstraint<float>("dtype"), GruForwardOp<float>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruForward").Device(DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("dtype"),
                        GruForwardOp<tensorflow::bfloat16>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruBackward").Device(DEVICE_CPU).TypeConstraint<float>("dtype"),
                        GruBackwardOp<float>);
REGISTER_KERNEL_BUILDER(Name("Ds2GruBackward").Device(DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("dtype"),
                        GruBackwardOp<tensorflow::bfloat16>);
REGISTER_KERNEL_BUILDER(Name("Ds2FusedCpuSupport").Device(DEVICE_CPU), SupportOp);

tensorflow::Status bn_shapes(OpKernelContext* ctx, const Tensor& x, const Tensor& mask,
                             std::initializer_list<const Tensor*> per_channel, BnShapes* s) {
  if (x.dims() < 2 || mask.dims() != 2 || x.dim_size(0) != mask.dim_size(0) || x.dim_size(1) != mask.dim_size(1))
    return InvalidArgument("x must be (batch, time, ..., channels) and mask (batch, time), got ",
                           x.shape().DebugString(), " and ", mask.shape().DebugString());
  s->channels = x.dim_size(x.dims() - 1);
  s->rows = mask.NumElements();
  s->inner = s->rows ? x.NumElements() / s->rows : 0;
  for (const Tensor* v : per_channel)
    if (v->shape() != TensorShape({s->channels}))
      return InvalidArgument("per-channel inputs must be (", s->channels, ",), got ", v->shape().DebugString());
  if (!(cpu_support() & kAvx2))
    return tensorflow::errors::Unimplemented("Ds2BnClippedRelu and Ds2MaskedMomentSums ops need AVX2 and FMA");
  return tensorflow::OkStatus();
}

template <typename X>
class MaskedMomentSumsOp : public OpKernel {
 public:
  explicit MaskedMomentSumsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &weights = ctx->input(1);
    BnShapes s;
    OP_REQUIRES_OK(ctx, bn_shapes(ctx, x, weights, {}, &s));
    Tensor* sums;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({2, s.channels}), &sums));
    sums->flat<float>().setZero();
    if (x.NumElements() == 0) return;
#ifdef DS2_X86
    masked_moment_sums(ctx, s, x.flat<X>().data(), weights.flat<float>().data(), sums->flat<float>().data());
#endif
  }
};

template <typename X, typename Y>
class BnReluForwardOp : public OpKernel {
 public:
  explicit BnReluForwardOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clip", &clip_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &scale = ctx->input(1), &shift = ctx->input(2), &mask = ctx->input(3);
    BnShapes s;
    OP_REQUIRES_OK(ctx, bn_shapes(ctx, x, mask, {&scale, &shift}, &s));
    Tensor* y;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    if (x.NumElements() == 0) return;
#ifdef DS2_X86
    bn_relu_forward(ctx, s, x.flat<X>().data(), scale.flat<float>().data(), shift.flat<float>().data(),
                    mask.flat<float>().data(), clip_, y->flat<Y>().data());
#endif
  }

 private:
  float clip_;
};

template <typename X, typename Y>
class BnReluGradSumsOp : public OpKernel {
 public:
  explicit BnReluGradSumsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clip", &clip_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor &upstream = ctx->input(0), &x = ctx->input(1), &scale = ctx->input(2), &shift = ctx->input(3),
                 &mask = ctx->input(4), &mean = ctx->input(5);
    BnShapes s;
    OP_REQUIRES_OK(ctx, bn_shapes(ctx, x, mask, {&scale, &shift, &mean}, &s));
    OP_REQUIRES(ctx, upstream.shape() == x.shape(), InvalidArgument("upstream must be x's shape"));
    Tensor* sums;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({2, s.channels}), &sums));
    sums->flat<float>().setZero();
    if (x.NumElements() == 0) return;
#ifdef DS2_X86
    bn_relu_grad_sums(ctx, s, upstream.flat<Y>().data(), x.flat<X>().data(), scale.flat<float>().data(),
                      shift.flat<float>().data(), mask.flat<float>().data(), mean.flat<float>().data(), clip_,
                      sums->flat<float>().data());
#endif
  }

 private:
  float clip_;
};

template <typename X, typename Y>
class BnReluGradInputOp : public OpKernel {
 public:
  explicit BnReluGradInputOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("clip", &clip_));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor &upstream = ctx->input(0), &x = ctx->input(1), &scale = ctx->input(2), &shift = ctx->input(3),
                 &mask = ctx->input(4), &c1 = ctx->input(5), &c0 = ctx->input(6);
    BnShapes s;
    OP_REQUIRES_OK(ctx, bn_shapes(ctx, x, mask, {&scale, &shift, &c1, &c0}, &s));
    OP_REQUIRES(ctx, upstream.shape() == x.shape(), InvalidArgument("upstream must be x's shape"));
    Tensor* dx;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &dx));
    if (x.NumElements() == 0) return;
#ifdef DS2_X86
    bn_relu_grad_input(ctx, s, upstream.flat<Y>().data(), x.flat<X>().data(), scale.flat<float>().data(),
                       shift.flat<float>().data(), mask.flat<float>().data(), c1.flat<float>().data(),
                       c0.flat<float>().data(), clip_, dx->flat<X>().data());
#endif
  }

 private:
  float clip_;
};

REGISTER_OP("Ds2MaskedMomentSums")
    .Input("x: T")
    .Input("weights: float")
    .Output("sums: float")
    .Attr("T: {float, bfloat16}")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 2, &x));
      c->set_output(0, c->MakeShape({2, c->Dim(x, -1)}));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
The sums of sequence-wise BN's statistics in one pass: per channel (the last axis), sum(w * x) and sum(w * x^2) over
all other axes, w (batch, time) the frames' weights.
)doc");

REGISTER_OP("Ds2BnClippedReluForward")
    .Input("x: T")
    .Input("scale: float")
    .Input("shift: float")
    .Input("mask: float")
    .Output("y: Tout")
    .Attr("T: {float, bfloat16}")
    .Attr("Tout: {float, bfloat16}")
    .Attr("clip: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
Sequence-wise BN with given statistics and the clipped ReLU, times the frame mask, in one pass:
y = min(max(x * scale + shift, 0), clip) * mask, scale and shift per channel (the last axis), mask (batch, time).
)doc");

REGISTER_OP("Ds2BnClippedReluGradSums")
    .Input("upstream: Tout")
    .Input("x: T")
    .Input("scale: float")
    .Input("shift: float")
    .Input("mask: float")
    .Input("mean: float")
    .Output("sums: float")
    .Attr("T: {float, bfloat16}")
    .Attr("Tout: {float, bfloat16}")
    .Attr("clip: float")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->MakeShape({2, c->Dim(c->input(2), 0)}));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
The per-channel sums of Ds2BnClippedReluForward's gradient: sum(g) and sum(g * (x - mean)), g the upstream gradient
where the clipped ReLU passes it, times the mask (the gradients of the BN's shift and, over inv_std, its scale).
)doc");

REGISTER_OP("Ds2BnClippedReluGradInput")
    .Input("upstream: Tout")
    .Input("x: T")
    .Input("scale: float")
    .Input("shift: float")
    .Input("mask: float")
    .Input("c1: float")
    .Input("c0: float")
    .Output("d_x: T")
    .Attr("T: {float, bfloat16}")
    .Attr("Tout: {float, bfloat16}")
    .Attr("clip: float")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(1));
      return tensorflow::OkStatus();
    })
    .Doc(R"doc(
The gradient of x through Ds2BnClippedReluForward and the batch statistics: mask * (g * scale - (x * c1 + c0)).
)doc");

#define DS2_BN_KERNELS(X, Y)                                                                                      \
  REGISTER_KERNEL_BUILDER(                                                                                        \
      Name("Ds2BnClippedReluForward").Device(DEVICE_CPU).TypeConstraint<X>("T").TypeConstraint<Y>("Tout"),      \
      BnReluForwardOp<X, Y>);                                                                                     \
  REGISTER_KERNEL_BUILDER(                                                                                        \
      Name("Ds2BnClippedReluGradSums").Device(DEVICE_CPU).TypeConstraint<X>("T").TypeConstraint<Y>("Tout"),     \
      BnReluGradSumsOp<X, Y>);                                                                                    \
  REGISTER_KERNEL_BUILDER(                                                                                        \
      Name("Ds2BnClippedReluGradInput").Device(DEVICE_CPU).TypeConstraint<X>("T").TypeConstraint<Y>("Tout"),    \
      BnReluGradInputOp<X, Y>);
DS2_BN_KERNELS(float, float)
DS2_BN_KERNELS(float, tensorflow::bfloat16)
DS2_BN_KERNELS(tensorflow::bfloat16, float)
DS2_BN_KERNELS(tensorflow::bfloat16, tensorflow::bfloat16)
#undef DS2_BN_KERNELS
REGISTER_KERNEL_BUILDER(Name("Ds2MaskedMomentSums").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        MaskedMomentSumsOp<float>);
REGISTER_KERNEL_BUILDER(Name("Ds2MaskedMomentSums").Device(DEVICE_CPU).TypeConstraint<tensorflow::bfloat16>("T"),
                        MaskedMomentSumsOp<tensorflow::bfloat16>);

}  // namespace ds2
