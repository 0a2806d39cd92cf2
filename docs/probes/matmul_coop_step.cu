// Not part of the build: matmul_coop.wgsl's step (session 21's main) written
// in CUDA with WMMA 16x16x16 f16 -> f32, so that Nsight Compute can say
// where such a step's time goes on an H100 (the Vulkan driver shows no
// SASS and no counters). One launch is one layer's routed gate+up shape:
// 64 experts of 3,072 Q4_0 rows (gate and up) by 2,048 columns, one
// 64-token tile each, 24 workgroups of 128 rows a tile, 32 steps of 64
// columns. Numbers and the ncu metrics used: docs/perf-journal.md,
// session 21. On the GPU machine:
//   nvcc -O3 -arch=sm_90 -Xptxas -v -o probe matmul_coop_step.cu && ./probe
//   ncu --clock-control none --launch-skip 3 --launch-count 1 \
//       --section SpeedOfLight --section WarpStateStats ./probe
// The journal describes the variant that staged the weights row-major
// with 16-byte stores (-12% here, +5% in WGSL).
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

constexpr int WG = 256, TOK = 64, ROWS = 128, KU = 2, AS = ROWS + 8, HALF = 32 * AS + 32, KS = 72;

struct Params { int rows, units; };

__global__ void __launch_bounds__(WG, 2) mm(const uint4* __restrict__ nib, const uint32_t* __restrict__ scl,
    const float4* __restrict__ x, float* __restrict__ y, Params p) {
  __shared__ __align__(16) half wa[KU * HALF];
  __shared__ __align__(16) half xs[TOK * KS];
  int lid = threadIdx.x, warp = lid / 32;
  int tile = blockIdx.y;            // one expert per tile
  int r0 = blockIdx.x * ROWS;
  int lr = lid / KU, lu = lid % KU;
  size_t mat = (size_t)tile * p.rows * p.units;
  size_t base = mat + (size_t)(r0 + lr) * p.units;
  int wo = lu * HALF + lr;
  int j = lid / 16, q = lid % 16;
  const float4* xt = x + (size_t)tile * TOK * (p.units * 8);
  int rb = 2 * (warp % 4), hq = 2 * ((warp / 4) % 2);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c00, c01, c10, c11;
  wmma::fill_fragment(c00, 0.f); wmma::fill_fragment(c01, 0.f);
  wmma::fill_fragment(c10, 0.f); wmma::fill_fragment(c11, 0.f);
  auto ld_w = [&](int u, uint4& n, uint32_t& s) { if (u < p.units) { n = nib[base + u]; s = scl[(base + u) >> 1]; } else { n = make_uint4(0,0,0,0); s = 0; } };
  auto ld_x = [&](int m, int u0) { return u0 < p.units ? xt[(size_t)(j + 16 * m) * p.units * 8 + 8 * u0 + q] : make_float4(0,0,0,0); };
  uint4 n; uint32_t s; ld_w(lu, n, s);
  float4 x0 = ld_x(0, 0), x1 = ld_x(1, 0), x2 = ld_x(2, 0), x3 = ld_x(3, 0);
  for (int u0 = 0; u0 < p.units; u0 += KU) {
    // dequant Q4_0: w = d * (q - 8)
    __half2 d2 = *reinterpret_cast<__half2*>(&s);
    float d = __half2float(((base + u0 + lu) & 1) ? d2.y : d2.x);
    uint32_t wv[4] = {n.x, n.y, n.z, n.w};
    #pragma unroll
    for (int i = 0; i < 4; i++) {
      #pragma unroll
      for (int b = 0; b < 4; b++) {
        int lo = (wv[i] >> (8 * b)) & 15, hi = (wv[i] >> (8 * b + 4)) & 15;
        wa[wo + (4 * i + b) * AS] = __float2half(d * (lo - 8));
        wa[wo + (16 + 4 * i + b) * AS] = __float2half(d * (hi - 8));
      }
    }
    float4 xv[4] = {x0, x1, x2, x3};
    #pragma unroll
    for (int m = 0; m < 4; m++) {
      half* at = xs + (j + 16 * m) * KS + 4 * q;
      at[0] = __float2half(xv[m].x); at[1] = __float2half(xv[m].y); at[2] = __float2half(xv[m].z); at[3] = __float2half(xv[m].w);
    }
    __syncthreads();
    ld_w(u0 + KU + lu, n, s);
    x0 = ld_x(0, u0 + KU); x1 = ld_x(1, u0 + KU); x2 = ld_x(2, u0 + KU); x3 = ld_x(3, u0 + KU);
    #pragma unroll
    for (int k = 0; k < KU * 32; k += 16) {
      int ka = (k / 32) * HALF + (k % 32) * AS;
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> a0, a1;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b0, b1;
      wmma::load_matrix_sync(a0, wa + ka + 16 * rb, AS);
      wmma::load_matrix_sync(a1, wa + ka + 16 * rb + 16, AS);
      wmma::load_matrix_sync(b0, xs + hq * 16 * KS + k, KS);
      wmma::load_matrix_sync(b1, xs + hq * 16 * KS + 16 * KS + k, KS);
      wmma::mma_sync(c00, a0, b0, c00); wmma::mma_sync(c01, a0, b1, c01);
      wmma::mma_sync(c10, a1, b0, c10); wmma::mma_sync(c11, a1, b1, c11);
    }
    __syncthreads();
  }
  // epilogue straight to y: y[token][row], row-major per token
  float* yt = y + (size_t)tile * TOK * p.rows;
  wmma::store_matrix_sync(yt + (hq * 16) * p.rows + r0 + 16 * rb, c00, p.rows, wmma::mem_col_major);
  wmma::store_matrix_sync(yt + (hq * 16 + 16) * p.rows + r0 + 16 * rb, c01, p.rows, wmma::mem_col_major);
  wmma::store_matrix_sync(yt + (hq * 16) * p.rows + r0 + 16 * rb + 16, c10, p.rows, wmma::mem_col_major);
  wmma::store_matrix_sync(yt + (hq * 16 + 16) * p.rows + r0 + 16 * rb + 16, c11, p.rows, wmma::mem_col_major);
}

int main(int argc, char** argv) {
  int rows = 3072, units = 64, tiles = 64, reps = 20;
  size_t nu = (size_t)tiles * rows * units;
  uint4* nib; uint32_t* scl; float4* x; float* y;
  cudaMalloc(&nib, nu * 16); cudaMalloc(&scl, nu * 2 + 4); cudaMalloc(&x, (size_t)tiles * TOK * units * 32 * 4);
  cudaMalloc(&y, (size_t)tiles * TOK * rows * 4);
  cudaMemset(nib, 0x37, nu * 16); cudaMemset(scl, 0x11, nu * 2 + 4); cudaMemset(x, 0x3c, (size_t)tiles * TOK * units * 32 * 4);
  Params p{rows, units};
  dim3 grid(rows / ROWS, tiles);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; i++) mm<<<grid, WG>>>(nib, scl, x, y, p);
  cudaEventRecord(e0);
  for (int i = 0; i < reps; i++) mm<<<grid, WG>>>(nib, scl, x, y, p);
  cudaEventRecord(e1); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  double us = ms * 1000 / reps;
  double wg_steps = (double)grid.x * grid.y * (units / KU);
  printf("probe: %d WGs x %d steps: %.1f us a launch (routed gate+up layer in glmw: ~515 us); %.0f SM cycles a WG-step at 1.98 GHz over 132 SMs\n",
         grid.x * grid.y, units / KU, us, us * 1e-6 * 1.98e9 * 132 / wg_steps);
  cudaError_t err = cudaGetLastError(); if (err) printf("error %s\n", cudaGetErrorString(err));
  return 0;
}
