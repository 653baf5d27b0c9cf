// CUDA driver API (libcuda). cuda.h maps most memory calls to their _v2 ABI; the unsuffixed
// v1 symbols take 32-bit sizes and pointers and are only called by 32-bit-era code, so the
// tables attach the v2 family for those.
#pragma once

#include "hal/launch_layouts.h"
#include "hal/probe_spec.h"

namespace ingero::backends::cuda {

using namespace ingero::hal;  // NOLINT: table notation

inline constexpr uint16_t kStreamVariants = kBase | kPtsz;
inline constexpr uint16_t kV2StreamVariants = kV2 | kV2Ptsz;
inline constexpr uint16_t kV2SyncVariants = kV2 | kV2Ptds;

inline constexpr uint64_t kH2D = uint64_t(CopyDirection::kHostToDevice);
inline constexpr uint64_t kD2H = uint64_t(CopyDirection::kDeviceToHost);
inline constexpr uint64_t kD2D = uint64_t(CopyDirection::kDeviceToDevice);
inline constexpr uint64_t kAny = uint64_t(CopyDirection::kDefault);

inline constexpr ProbeSpec kDriverProbes[] = {
    // Eleven scalar arguments (hal/launch_layouts.h); cooperative kernels take cuLaunchKernel's
    // first nine (then kernelParams, no extra).
    with_variants(scalar_dims_launch("cuLaunchKernel"), kStreamVariants),
    with_variants(scalar_dims_launch("cuLaunchCooperativeKernel"), kStreamVariants),
    // Geometry is in the CUlaunchConfig the first argument points to.
    {.symbol = "cuLaunchKernelEx",
     .kind = EventKind::kLaunch,
     .args = {.entry_read = read_at_reg(0, 40)},
     .fields = {{Field::kFunc, reg(1)},
                {Field::kGridX, entry_buf(0, 4)},
                {Field::kGridY, entry_buf(4, 4)},
                {Field::kGridZ, entry_buf(8, 4)},
                {Field::kBlockX, entry_buf(12, 4)},
                {Field::kBlockY, entry_buf(16, 4)},
                {Field::kBlockZ, entry_buf(20, 4)},
                {Field::kSharedMem, entry_buf(24, 4)},
                {Field::kStream, entry_buf(32)}},
     .variants = kStreamVariants},
    // Output pointer: CUdeviceptr* read at return.
    {.symbol = "cuMemAlloc",
     .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kDptr, return_buf(0)}},
     .variants = kV2},
    {.symbol = "cuMemAllocManaged",
     .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kFlags, reg(2, 4)}, {Field::kDptr, return_buf(0)}},
     .variants = kBase},
    {.symbol = "cuMemAllocAsync",
     .kind = EventKind::kAlloc,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kBytes, reg(1)}, {Field::kStream, reg(2)}, {Field::kDptr, return_buf(0)}},
     .variants = kStreamVariants},
    {.symbol = "cuMemFree",
     .kind = EventKind::kFree,
     .fields = {{Field::kDptr, reg(0)}},
     .variants = kV2},
    {.symbol = "cuMemcpy",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, constant(kAny)}},
     .variants = kBase | kPtds},
    {.symbol = "cuMemcpyAsync",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)},
                {Field::kDirection, constant(kAny)},
                {Field::kStream, reg(3)}},
     .variants = kStreamVariants},
    {.symbol = "cuMemcpyHtoD",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, constant(kH2D)}},
     .variants = kV2SyncVariants},
    {.symbol = "cuMemcpyDtoH",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, constant(kD2H)}},
     .variants = kV2SyncVariants},
    {.symbol = "cuMemcpyDtoD",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)}, {Field::kDirection, constant(kD2D)}},
     .variants = kV2SyncVariants},
    {.symbol = "cuMemcpyHtoDAsync",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)},
                {Field::kDirection, constant(kH2D)},
                {Field::kStream, reg(3)}},
     .variants = kV2StreamVariants},
    {.symbol = "cuMemcpyDtoHAsync",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)},
                {Field::kDirection, constant(kD2H)},
                {Field::kStream, reg(3)}},
     .variants = kV2StreamVariants},
    {.symbol = "cuMemcpyDtoDAsync",
     .kind = EventKind::kMemcpy,
     .fields = {{Field::kBytes, reg(2)},
                {Field::kDirection, constant(kD2D)},
                {Field::kStream, reg(3)}},
     .variants = kV2StreamVariants},
    {.symbol = "cuCtxSynchronize", .kind = EventKind::kSync, .variants = kBase | kV2},
    {.symbol = "cuStreamSynchronize",
     .kind = EventKind::kSync,
     .fields = {{Field::kStream, reg(0)}},
     .variants = kStreamVariants},
    {.symbol = "cuGraphLaunch",
     .kind = EventKind::kGraphLaunch,
     .fields = {{Field::kGraphExec, reg(0)}, {Field::kStream, reg(1)}},
     .variants = kStreamVariants},
    // Kernel names (hal/kernel_names.h), once per kernel or module. Output pointers: the handle
    // cuLaunchKernel will get, written at return; the name is an entry argument.
    {.symbol = "cuModuleGetFunction",
     .kind = EventKind::kKernelName,
     .args = {.return_read = read_at_reg(0, 8)},
     .optional = true,
     .variants = kBase,
     .name = {.source = KernelNameSource::kDriverLookup,
              .func = return_buf(0),
              .name = reg(2),
              .needs_success = true}},
    {.symbol = "cuLibraryGetKernel",
     .kind = EventKind::kKernelName,
     .args = {.return_read = read_at_reg(0, 8)},
     .optional = true,
     .variants = kBase,
     .name = {.source = KernelNameSource::kDriverLookup,
              .func = return_buf(0),
              .name = reg(2),
              .needs_success = true}},
    // Output pointer: a CUkernel's CUfunction in the current context takes the kernel's name.
    {.symbol = "cuKernelGetFunction",
     .kind = EventKind::kKernelName,
     .args = {.return_read = read_at_reg(0, 8)},
     .optional = true,
     .variants = kBase,
     .name = {.source = KernelNameSource::kDriverLookup,
              .func = return_buf(0),
              .alias_of = reg(1),
              .needs_success = true}},
    // Output pointer: the program asks a handle's name; the const char* is read at return.
    {.symbol = "cuFuncGetName",
     .kind = EventKind::kKernelName,
     .args = {.return_read = read_at_reg(0, 8)},
     .optional = true,
     .variants = kBase,
     .name = {.source = KernelNameSource::kDriverLookup,
              .func = reg(1),
              .name = return_buf(0),
              .needs_success = true}},
    {.symbol = "cuKernelGetName",
     .kind = EventKind::kKernelName,
     .args = {.return_read = read_at_reg(0, 8)},
     .optional = true,
     .variants = kBase,
     .name = {.source = KernelNameSource::kDriverLookup,
              .func = reg(1),
              .name = return_buf(0),
              .needs_success = true}},
};

}  // namespace ingero::backends::cuda
