// Compile check of the torch-free CUDA statistics kernels, for machines that
// have nvcc but no CUDA build of torch (this project's CI): every element type
// the launcher dispatches is instantiated (with the CUDA types of the same
// layout). scripts/check_cuda_compile.sh compiles it and checks its PTX for
// flush-to-zero conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "stats/checksum_kernel.cuh"
#include "stats/stats_kernel.cuh"

namespace graphprobe::kernels {

template __global__ void checksum_row<uint8_t>(const uint8_t*, int64_t, double*, const int64_t*);
template __global__ void checksum_row<uint16_t>(const uint16_t*, int64_t, double*, const int64_t*);
template __global__ void checksum_row<uint32_t>(const uint32_t*, int64_t, double*, const int64_t*);
template __global__ void checksum_row<uint64_t>(const uint64_t*, int64_t, double*, const int64_t*);

template __global__ void accumulate_row<float>(const float*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<double>(const double*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<__half>(const __half*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<__nv_bfloat16>(const __nv_bfloat16*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<int64_t>(const int64_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<int32_t>(const int32_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<int8_t>(const int8_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<uint8_t>(const uint8_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<bool>(const bool*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<int16_t>(const int16_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<uint16_t>(const uint16_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<uint32_t>(const uint32_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<uint64_t>(const uint64_t*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<__nv_fp8_e4m3>(const __nv_fp8_e4m3*, int64_t, double*, const int64_t*);
template __global__ void accumulate_row<__nv_fp8_e5m2>(const __nv_fp8_e5m2*, int64_t, double*, const int64_t*);

}  // namespace graphprobe::kernels
