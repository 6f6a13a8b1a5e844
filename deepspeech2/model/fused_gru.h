// The fused GRU's loops (fused_cpu.cc), written once for every instruction set: fused_cpu.cc includes this file in
// each of its kernel namespaces (avx512, avx2), under that namespace's target pragma, after defining what the code
// below takes from it: the fp32 vector `Vec` of `kLanes` lanes (a unit block), the tile heights kRows (the forward
// matmul: kRows x 3 gates accumulators) and kBackRows (the backward one: kBackRows x 1), `Lanes` and `lanes()` (a
// block's units, for the masked loads and stores), set1, zero, fmadd, fnmadd, vmin, vmax, round_nearest and
// times_pow2 (v 2^n, n integral), load/store (masked by Lanes), loadu/storeu, load_aligned/store_aligned, store_bf16
// and, for bf16 operands, gemm<R, NB>(const uint16_t*, ...). No include guard: it is meant to be included twice.

// ---- math ---------------------------------------------------------------------------------------------------

inline Vec vexp(Vec x) {
  // e^x = 2^n e^r with |r| <= ln2 / 2: a degree-6 Taylor polynomial (relative error ~1e-7), scaled by 2^n.
  x = vmax(vmin(x, set1(88.0f)), set1(-88.0f));
  const Vec n = round_nearest(x * set1(1.44269504088896341f));
  Vec r = fnmadd(n, set1(0.693145751953125f), x);
  r = fnmadd(n, set1(1.428606765330187045e-06f), r);
  Vec p = set1(1.0f / 720);
  p = fmadd(p, r, set1(1.0f / 120));
  p = fmadd(p, r, set1(1.0f / 24));
  p = fmadd(p, r, set1(1.0f / 6));
  p = fmadd(p, r, set1(0.5f));
  p = fmadd(p, r, set1(1.0f));
  p = fmadd(p, r, set1(1.0f));
  return times_pow2(p, n);
}

inline Vec vsigmoid(Vec x) { return set1(1.0f) / (set1(1.0f) + vexp(zero() - x)); }

inline Vec vtanh(Vec x) {
  // 1 - 2 / (e^2x + 1): exact at both ends, absolute error ~1e-7 near 0.
  return set1(1.0f) - set1(2.0f) / (vexp(x + x) + set1(1.0f));
}

// ---- GEMM micro-kernels: out (R x NB*kLanes, fp32) = A (R x K) . W, W packed as [K][NB][kLanes] ------------------

template <int R, int NB>
void gemm(const float* a, int64_t lda, const float* w, int k, float* out) {
  Vec acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = zero();
  for (int i = 0; i < k; ++i) {
    Vec wv[NB];
    for (int n = 0; n < NB; ++n) wv[n] = loadu(w + (static_cast<int64_t>(i) * NB + n) * kLanes);
    for (int r = 0; r < R; ++r) {
      const Vec av = set1(a[r * lda + i]);
      for (int n = 0; n < NB; ++n) acc[r][n] = fmadd(av, wv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) store_aligned(out + (r * NB + n) * kLanes, acc[r][n]);
}

// `rows` (1 to MaxR) rows of A through the micro-kernel of that height; `out` aligned for store_aligned.
template <int NB, int MaxR, typename T>
void gemm_rows(int rows, const T* a, int64_t lda, const T* w, int k, float* out) {
  if (rows == MaxR) return gemm<MaxR, NB>(a, lda, w, k, out);
  if constexpr (MaxR > 1) gemm_rows<NB, MaxR - 1>(rows, a, lda, w, k, out);
}

// ---- weight packing ----------------------------------------------------------------------------------------------

// Forward panel of unit block `block`: for each k (pair, in bf16), the z, r and n columns of its units; zero past H.
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

// T: the packed weight and GEMM operand type (uint16_t: bf16 bits, or float); K: the kernel tensor's element type.
template <typename T, typename K>
void gru_forward(OpKernelContext* ctx, const GruShapes& s, const float* x, const float* mask, const float* h0,
                 const K* u, const float* bias, float* states, float* gates) {
  constexpr bool bf16 = std::is_same<T, uint16_t>::value;
  const int H = s.units, k_padded = bf16 ? (H + 1) / 2 * 2 : H, blocks = (H + kLanes - 1) / kLanes;
  const int64_t B = s.batch, panel_size = static_cast<int64_t>(k_padded) * 3 * kLanes;
  std::vector<T> panels(static_cast<size_t>(panel_size) * blocks);
  // bf16: the state as the matmul's operand, double-buffered (a step reads one while it writes the other).
  std::vector<uint16_t> hb(bf16 ? 2 * B * k_padded : 0, 0);
  for (int64_t i = 0; i < (bf16 ? B * H : 0); ++i) hb[(i / H) * k_padded + i % H] = to_bf16(h0[i]);
  // Round 0 packs each block's weights; round t + 1 is step t.
  run_rounds(ctx, thread_count(ctx, blocks, B), blocks, s.steps + 1, [&](int64_t round, int blk) {
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
    const Lanes m = lanes(H, blk);
    const int j0 = blk * kLanes;
    const Vec bz = load(bias + j0, m), br = load(bias + H + j0, m), bn = load(bias + 2 * H + j0, m);
    alignas(64) float acc[kRows * 3 * kLanes];
    for (int64_t r0 = 0; r0 < B; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, B - r0));
      gemm_rows<3, kRows>(rows, a + r0 * lda, lda, panel, bf16 ? k_padded / 2 : H, acc);
      for (int r = 0; r < rows; ++r) {
        const int64_t b = r0 + r, row = t * B + b;
        const float* xr = x + row * 3 * H + j0;
        const float* ar = acc + r * 3 * kLanes;
        const Vec z = vsigmoid(load(xr, m) + bz + load_aligned(ar));
        const Vec rg = vsigmoid(load(xr + H, m) + br + load_aligned(ar + kLanes));
        const Vec an = load_aligned(ar + 2 * kLanes) + bn;
        const Vec n = vtanh(fmadd(rg, an, load(xr + 2 * H, m)));
        const Vec hp = load(h_prev + b * H + j0, m);
        const Vec mz = set1(mask[row]) * z;
        const Vec h = fmadd(mz, n - hp, hp);
        store(states + row * H + j0, m, h);
        float* gr = gates + row * 4 * H + j0;
        store(gr, m, z);
        store(gr + H, m, rg);
        store(gr + 2 * H, m, n);
        store(gr + 3 * H, m, an);
        if constexpr (bf16) store_bf16(hb_next + b * k_padded + j0, m, h);
      }
    }
  });
}

template <typename T, typename K>
void gru_backward(OpKernelContext* ctx, const GruShapes& s, const float* d_out, const float* gates,
                  const float* states, const float* mask, const float* h0, const K* u, float* d_x, K* d_a,
                  float* d_bias, float* d_h0) {
  constexpr bool bf16 = std::is_same<T, uint16_t>::value;
  const int H = s.units, blocks = (H + kLanes - 1) / kLanes, Hp = blocks * kLanes;
  const int64_t B = s.batch, c_padded = 3 * static_cast<int64_t>(Hp), panel_size = c_padded * kLanes;
  std::vector<T> panels(static_cast<size_t>(panel_size) * blocks);
  // The gradient of U h + b at a step, the matmul's operand (zero in the padding), and per unit: dh from the step
  // after, dh's direct path dh (1 - m z), and the recurrent bias gradient's sums.
  std::vector<T> g(B * c_padded, T(0));
  std::vector<float> dh_next(B * Hp, 0.0f), keep(B * Hp, 0.0f), bias_sum(3 * Hp, 0.0f);
  const Vec one = set1(1.0f);
  // Round 0 packs each block's weights; then per step, from the last: the elementwise round (its units' gradients
  // and its part of g), then the matmul round (its units of dh_prev = keep + g U^T); a last round writes the sums.
  const int64_t rounds = 2 * s.steps + 2;
  run_rounds(ctx, thread_count(ctx, blocks, B), blocks, rounds, [&](int64_t round, int blk) {
    T* panel = panels.data() + blk * panel_size;
    const Lanes m = lanes(H, blk);
    const int j0 = blk * kLanes;
    if (round == 0) return pack_backward<T>(u, H, Hp, blk, panel);
    if (round == rounds - 1) {
      for (int64_t b = 0; b < B; ++b) store(d_h0 + b * H + j0, m, loadu(&dh_next[b * Hp + j0]));
      for (int gate = 0; gate < 3; ++gate) store(d_bias + gate * H + j0, m, loadu(&bias_sum[gate * Hp + j0]));
      return;
    }
    const int64_t t = s.steps - 1 - (round - 1) / 2;
    if ((round - 1) % 2 == 1) {
      alignas(64) float acc[kBackRows * kLanes];
      for (int64_t r0 = 0; r0 < B; r0 += kBackRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kBackRows, B - r0));
        gemm_rows<1, kBackRows>(rows, g.data() + r0 * c_padded, c_padded, panel,
                                static_cast<int>(bf16 ? c_padded / 2 : c_padded), acc);
        for (int r = 0; r < rows; ++r) {
          const int64_t b = r0 + r;
          storeu(&dh_next[b * Hp + j0], loadu(&keep[b * Hp + j0]) + load_aligned(acc + r * kLanes));
        }
      }
      return;
    }
    const float* h_prev = t ? states + (t - 1) * B * H : h0;
    Vec sz = loadu(&bias_sum[j0]), sr = loadu(&bias_sum[Hp + j0]), sn = loadu(&bias_sum[2 * Hp + j0]);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t row = t * B + b;
      const Vec dh = loadu(&dh_next[b * Hp + j0]) + load(d_out + row * H + j0, m);
      const float* gr = gates + row * 4 * H + j0;
      const Vec z = load(gr, m), rg = load(gr + H, m), n = load(gr + 2 * H, m), an = load(gr + 3 * H, m);
      const Vec hp = load(h_prev + b * H + j0, m);
      const Vec mz = set1(mask[row]) * z;
      // h' = h + m z (n - h): d/d(pre-activation) of z, of r (through n) and of n, times dh.
      const Vec gx = dh * (mz * fnmadd(n, n, one));
      const Vec gz = dh * ((mz * (one - z)) * (n - hp));
      const Vec gr_ = (gx * an) * (rg * (one - rg));
      const Vec gn = gx * rg;  // of U_n h + b_n, inside the reset gate
      float* dx = d_x + row * 3 * H + j0;
      store(dx, m, gz);
      store(dx + H, m, gr_);
      store(dx + 2 * H, m, gx);
      K* da = d_a + row * 3 * H + j0;
      T* gb = g.data() + b * c_padded + j0;
      if constexpr (std::is_same<K, float>::value) {
        store(da, m, gz);
        store(da + H, m, gr_);
        store(da + 2 * H, m, gn);
      } else {
        store_bf16(reinterpret_cast<uint16_t*>(da), m, gz);
        store_bf16(reinterpret_cast<uint16_t*>(da) + H, m, gr_);
        store_bf16(reinterpret_cast<uint16_t*>(da) + 2 * H, m, gn);
      }
      if constexpr (bf16) {
        store_bf16(gb, m, gz);
        store_bf16(gb + Hp, m, gr_);
        store_bf16(gb + 2 * Hp, m, gn);
      } else {
        store(gb, m, gz);
        store(gb + Hp, m, gr_);
        store(gb + 2 * Hp, m, gn);
      }
      sz = sz + gz;
      sr = sr + gr_;
      sn = sn + gn;
      storeu(&keep[b * Hp + j0], dh * (one - mz));
    }
    storeu(&bias_sum[j0], sz);
    storeu(&bias_sum[Hp + j0], sr);
    storeu(&bias_sum[2 * Hp + j0], sn);
  });
}
