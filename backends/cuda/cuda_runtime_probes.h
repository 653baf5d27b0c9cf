// CUDA runtime API (libcudart, or a copy linked statically into a program or host object).
#pragma once

#include "hal/probe_spec.h"

namespace ingero::backends::cuda {

using namespace ingero::hal;  // NOLINT: table notation

inline constexpr ProbeSpec kRuntimeProbes[] = {
    // Output pointer: the allocated device pointer is read through arg 0 at return.
    {.symbol = "cudaMalloc", .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kDptr, return_buf(0)}}},
    {.symbol = "cudaMallocManaged", .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kFlags, reg(2, 4)}, {Field::kDptr, return_buf(0)}}},
    {.symbol = "cudaMallocAsync", .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kStream, reg(2)}, {Field::kDptr, return_buf(0)}}},
    {.symbol = "cudaMallocHost", .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kDptr, return_buf(0)}}},
    {.symbol = "cudaFree", .kind = EventKind::kFree, .fields = {{Field::kDptr, reg(0)}}},
    {.symbol = "cudaFreeAsync", .kind = EventKind::kFree,
     .fields = {{Field::kDptr, reg(0)}, {Field::kStream, reg(1)}}},
    {.symbol = "cudaMemcpy", .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, reg(3, 4)}}},
    {.symbol = "cudaMemcpyAsync", .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, reg(3, 4)}, {Field::kStream, reg(4)}}},
    // 7th argument (kind) and 8th (stream) are on the stack.
    {.symbol = "cudaMemcpy2D", .kind = EventKind::kMemcpy, .args = {.stack_words = 1},
     .fields = {{Field::kWidth, reg(4)}, {Field::kHeight, reg(5)},
                {Field::kDirection, stack_arg(0, 4)}}},
    {.symbol = "cudaMemcpy2DAsync", .kind = EventKind::kMemcpy, .args = {.stack_words = 2},
     .fields = {{Field::kWidth, reg(4)}, {Field::kHeight, reg(5)},
                {Field::kDirection, stack_arg(0, 4)}, {Field::kStream, stack_arg(1)}}},
    {.symbol = "cudaMemcpyPeer", .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(4)}, {Field::kDevice, reg(1, 4)}, {Field::kPeer, reg(3, 4)},
                {Field::kDirection, constant(uint64_t(CopyDirection::kPeer))}}},
    {.symbol = "cudaMemcpyPeerAsync", .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(4)}, {Field::kDevice, reg(1, 4)}, {Field::kPeer, reg(3, 4)},
                {Field::kStream, reg(5)},
                {Field::kDirection, constant(uint64_t(CopyDirection::kPeer))}}},
    {.symbol = "cudaMemset", .kind = EventKind::kMemset,
     .fields = {{Field::kDptr, reg(0)}, {Field::kBytes, reg(2)}}},
    {.symbol = "cudaMemsetAsync", .kind = EventKind::kMemset,
     .fields = {{Field::kDptr, reg(0)}, {Field::kBytes, reg(2)}, {Field::kStream, reg(3)}}},
    // dim3 gridDim and blockDim are 12-byte structs passed by value in two registers each
    // (x|y<<32, then z); sharedMem and stream spill to the stack.
    {.symbol = "cudaLaunchKernel", .kind = EventKind::kLaunch, .args = {.stack_words = 2},
     .fields = {{Field::kFunc, reg(0)}, {Field::kGridX, reg(1, 4)}, {Field::kGridY, reg(1, 4, 32)},
                {Field::kGridZ, reg(2, 4)}, {Field::kBlockX, reg(3, 4)},
                {Field::kBlockY, reg(3, 4, 32)}, {Field::kBlockZ, reg(4, 4)},
                {Field::kSharedMem, stack_arg(0)}, {Field::kStream, stack_arg(1)}}},
    // Launch geometry lives in the cudaLaunchConfig_t the first argument points to.
    {.symbol = "cudaLaunchKernelExC", .kind = EventKind::kLaunch,
     .args = {.entry_read = read_at_reg(0, 40)},
     .fields = {{Field::kFunc, reg(1)}, {Field::kGridX, entry_buf(0, 4)},
                {Field::kGridY, entry_buf(4, 4)}, {Field::kGridZ, entry_buf(8, 4)},
                {Field::kBlockX, entry_buf(12, 4)}, {Field::kBlockY, entry_buf(16, 4)},
                {Field::kBlockZ, entry_buf(20, 4)}, {Field::kSharedMem, entry_buf(24)},
                {Field::kStream, entry_buf(32)}}},
    {.symbol = "cudaStreamSynchronize", .kind = EventKind::kSync, .fields = {{Field::kStream, reg(0)}}},
    {.symbol = "cudaDeviceSynchronize", .kind = EventKind::kSync},
    {.symbol = "cudaEventSynchronize", .kind = EventKind::kSync},
    {.symbol = "cudaStreamWaitEvent", .kind = EventKind::kStreamWait,
     .fields = {{Field::kStream, reg(0)}, {Field::kFlags, reg(2, 4)}}},
    {.symbol = "cudaStreamBeginCapture", .kind = EventKind::kGraphBeginCapture,
     .fields = {{Field::kStream, reg(0)}, {Field::kFlags, reg(1, 4)}}},
    // Output pointer: the captured graph.
    {.symbol = "cudaStreamEndCapture", .kind = EventKind::kGraphEndCapture,
     .args = {.return_read = read_at_reg(1, 8)},
     .fields = {{Field::kStream, reg(0)}, {Field::kGraph, return_buf(0)}}},
    // Output pointer: the executable graph.
    {.symbol = "cudaGraphInstantiate", .kind = EventKind::kGraphInstantiate,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kGraph, reg(1)}, {Field::kFlags, reg(2)}, {Field::kGraphExec, return_buf(0)}}},
    {.symbol = "cudaGraphInstantiateWithFlags", .kind = EventKind::kGraphInstantiate,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kGraph, reg(1)}, {Field::kFlags, reg(2)}, {Field::kGraphExec, return_buf(0)}}},
    {.symbol = "cudaGraphLaunch", .kind = EventKind::kGraphLaunch,
     .fields = {{Field::kGraphExec, reg(0)}, {Field::kStream, reg(1)}}},
};

}  // namespace ingero::backends::cuda
