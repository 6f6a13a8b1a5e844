// oneDNN's linear-before-reset GRU at bench/train.py's layer shape (124 steps, batch 16, GRU-512), forward_training
// and backward, timed: the other route to a fused CPU GRU (examples/tiny/RESULTS.md#fused-cpu-gru). The input is
// the normalized projection (3 x 512 features) through input weights, which the primitive always has.
//   apt-get install libdnnl-dev && g++ -O2 -std=c++17 bench/onednn_gru.cc -ldnnl -o /tmp/onednn_gru
//   OMP_NUM_THREADS=2 /tmp/onednn_gru [input features, default 1536] [b(f16)|f(p32)]
// Debian's oneDNN 2.6 has no bf16 backward for it: the program says so and times the forward alone.
#include <oneapi/dnnl/dnnl.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace dnnl;
using dt = memory::data_type;
using tag = memory::format_tag;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const int T = 124, N = 16, H = 512, G = 3;
  const int C = argc > 1 ? atoi(argv[1]) : 3 * H;  // input features: 3H for identity input weights
  dt d = (argc > 2 && argv[2][0] == 'f') ? dt::f32 : dt::bf16;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  auto md = [&](memory::dims dims, dt t, tag f) { return memory::desc(dims, t, f); };
  auto src_layer = md({T, N, C}, d, tag::tnc), dst_layer = md({T, N, H}, d, tag::tnc);
  auto src_iter = md({1, 1, N, H}, d, tag::ldnc), dst_iter = md({1, 1, N, H}, d, tag::ldnc);
  auto wl_any = md({1, 1, C, G, H}, d, tag::any), wi_any = md({1, 1, H, G, H}, d, tag::any);
  auto bias = md({1, 1, G + 1, H}, dt::f32, tag::ldgo);
  lbr_gru_forward::primitive_desc fpd(
      lbr_gru_forward::desc(prop_kind::forward_training, rnn_direction::unidirectional_left2right, src_layer,
                            src_iter, wl_any, wi_any, bias, dst_layer, dst_iter), eng);
  dt dw = dt::f32;  // diff weights
  auto dwl = md({1, 1, C, G, H}, dw, tag::any), dwi = md({1, 1, H, G, H}, dw, tag::any);
  bool has_bwd = true; lbr_gru_backward::primitive_desc bpd;
  try { bpd = lbr_gru_backward::primitive_desc(
      lbr_gru_backward::desc(prop_kind::backward, rnn_direction::unidirectional_left2right, fpd.src_layer_desc(),
                             src_iter, wl_any, wi_any, bias, dst_layer, dst_iter,
                             src_layer, src_iter, dwl, dwi, md({1, 1, G + 1, H}, dt::f32, tag::ldgo), dst_layer,
                             dst_iter), eng, fpd); } catch (dnnl::error&) { has_bwd = false; printf("no backward primitive for this dtype\n"); }
  auto mem = [&](const memory::desc& m) { memory x(m, eng); std::fill_n((char*)x.get_data_handle(), m.get_size(), 0); return x; };
  memory msrc = mem(fpd.src_layer_desc()), msi = mem(src_iter), mwl = mem(fpd.weights_layer_desc()),
         mwi = mem(fpd.weights_iter_desc()), mb = mem(bias), mdst = mem(dst_layer), mdi = mem(dst_iter),
         mws = mem(fpd.workspace_desc());
  if (!has_bwd) bpd = lbr_gru_backward::primitive_desc(lbr_gru_backward::desc(prop_kind::backward, rnn_direction::unidirectional_left2right, md({T,N,C},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc), md({1,1,C,G,H},dt::f32,tag::any), md({1,1,H,G,H},dt::f32,tag::any), bias, md({T,N,H},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc), md({T,N,C},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc), md({1,1,C,G,H},dt::f32,tag::any), md({1,1,H,G,H},dt::f32,tag::any), bias, md({T,N,H},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc)), eng, lbr_gru_forward::primitive_desc(lbr_gru_forward::desc(prop_kind::forward_training, rnn_direction::unidirectional_left2right, md({T,N,C},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc), md({1,1,C,G,H},dt::f32,tag::any), md({1,1,H,G,H},dt::f32,tag::any), bias, md({T,N,H},dt::f32,tag::tnc), md({1,1,N,H},dt::f32,tag::ldnc)), eng));
  memory bwl = mem(bpd.weights_layer_desc()), bwi = mem(bpd.weights_iter_desc());
  memory mdsrc = mem(bpd.diff_src_layer_desc()), mdsi = mem(src_iter), mdwl = mem(bpd.diff_weights_layer_desc()),
         mdwi = mem(bpd.diff_weights_iter_desc()), mdb = mem(bpd.diff_bias_desc()), mddst = mem(dst_layer),
         mddi = mem(dst_iter);
  lbr_gru_forward fwd(fpd);
  lbr_gru_backward bwd(bpd);
  auto run_f = [&] { fwd.execute(s, {{DNNL_ARG_SRC_LAYER, msrc}, {DNNL_ARG_SRC_ITER, msi}, {DNNL_ARG_WEIGHTS_LAYER, mwl},
                                     {DNNL_ARG_WEIGHTS_ITER, mwi}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST_LAYER, mdst},
                                     {DNNL_ARG_DST_ITER, mdi}, {DNNL_ARG_WORKSPACE, mws}}); s.wait(); };
  auto run_b = [&] { bwd.execute(s, {{DNNL_ARG_SRC_LAYER, msrc}, {DNNL_ARG_SRC_ITER, msi}, {DNNL_ARG_WEIGHTS_LAYER, bwl},
                                     {DNNL_ARG_WEIGHTS_ITER, bwi}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST_LAYER, mdst},
                                     {DNNL_ARG_DST_ITER, mdi}, {DNNL_ARG_WORKSPACE, mws},
                                     {DNNL_ARG_DIFF_SRC_LAYER, mdsrc}, {DNNL_ARG_DIFF_SRC_ITER, mdsi},
                                     {DNNL_ARG_DIFF_WEIGHTS_LAYER, mdwl}, {DNNL_ARG_DIFF_WEIGHTS_ITER, mdwi},
                                     {DNNL_ARG_DIFF_BIAS, mdb}, {DNNL_ARG_DIFF_DST_LAYER, mddst},
                                     {DNNL_ARG_DIFF_DST_ITER, mddi}}); s.wait(); };
  std::vector<double> tf, tb;
  for (int i = 0; i < 23; ++i) {
    double a = now(); run_f(); double b = now(); if (has_bwd) run_b(); double c = now();
    if (i >= 3) { tf.push_back(b - a); tb.push_back(c - b); }
  }
  std::sort(tf.begin(), tf.end()); std::sort(tb.begin(), tb.end());
  const char* type = d == dt::bf16 ? "bf16" : "f32";
  printf("oneDNN %s lbr_gru T=%d N=%d C=%d H=%d: forward %.1f ms, backward %.1f ms (median of 20)\n", type, T, N, C, H,
         1e3 * tf[10], has_bwd ? 1e3 * tb[10] : 0.0);
  printf("[{\"name\": \"onednn_lbr_gru_%s/forward\", \"value\": %.1f, \"unit\": \"ms\"}", type, 1e3 * tf[10]);
  if (has_bwd) printf(", {\"name\": \"onednn_lbr_gru_%s/backward\", \"value\": %.1f, \"unit\": \"ms\"}", type, 1e3 * tb[10]);
  printf("]\n");
}
