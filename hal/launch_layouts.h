// The argument layouts kernel launch APIs share across vendors (x86-64 SysV), as probe specs
// under a symbol: HIP mirrors CUDA argument for argument, so a runtime's launch and a driver's
// module launch read the same registers and stack words in both. A backend names its symbols;
// the layout is written once here.
#pragma once

#include <string_view>

#include "hal/probe_spec.h"

namespace ingero::hal {

// launch(func, dim3 grid, dim3 block, args, sharedMem, stream): each dim3, a 12-byte struct
// passed by value, takes two registers (x | y << 32, then z); sharedMem and stream spill to the
// stack (cudaLaunchKernel, cudaLaunchCooperativeKernel, hipLaunchKernel, hipExtLaunchKernel).
constexpr ProbeSpec struct_dims_launch(std::string_view symbol) {
  return {.symbol = symbol,
          .kind = EventKind::kLaunch,
          .args = {.stack_words = 2},
          .fields = {{Field::kFunc, reg(0)},
                     {Field::kGridX, reg(1, 4)},
                     {Field::kGridY, reg(1, 4, 32)},
                     {Field::kGridZ, reg(2, 4)},
                     {Field::kBlockX, reg(3, 4)},
                     {Field::kBlockY, reg(3, 4, 32)},
                     {Field::kBlockZ, reg(4, 4)},
                     {Field::kSharedMem, stack_arg(0)},
                     {Field::kStream, stack_arg(1)}}};
}

// launch(func, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMem, stream, ...): eleven
// scalars, blockZ, sharedMem and stream on the stack as words 0..2 (cuLaunchKernel,
// cuLaunchCooperativeKernel, hipModuleLaunchKernel).
constexpr ProbeSpec scalar_dims_launch(std::string_view symbol) {
  return {.symbol = symbol,
          .kind = EventKind::kLaunch,
          .args = {.stack_words = 3},
          .fields = {{Field::kFunc, reg(0)},
                     {Field::kGridX, reg(1, 4)},
                     {Field::kGridY, reg(2, 4)},
                     {Field::kGridZ, reg(3, 4)},
                     {Field::kBlockX, reg(4, 4)},
                     {Field::kBlockY, reg(5, 4)},
                     {Field::kBlockZ, stack_arg(0, 4)},
                     {Field::kSharedMem, stack_arg(1, 4)},
                     {Field::kStream, stack_arg(2)}}};
}

// `spec` attached under these symbol variants too (a CUDA _ptsz twin).
constexpr ProbeSpec with_variants(ProbeSpec spec, uint16_t variants) {
  spec.variants = variants;
  return spec;
}

}  // namespace ingero::hal
