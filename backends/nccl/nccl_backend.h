// NCCL (NVIDIA) and RCCL (AMD): collectives, point-to-point, groups, communicator lifecycle.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "hal/backend.h"

namespace ingero::backends {

std::unique_ptr<hal::VendorBackend> make_nccl_backend();

// The communicator id: all 128 bytes of an ncclUniqueId, folded 8 bytes at a time with
// splitmix64 (h = splitmix64(h ^ word), little-endian words, h starting at 0).
uint64_t nccl_comm_hash(std::span<const uint8_t> unique_id);
// Bytes per element of an ncclDataType_t; 0 when unknown.
uint64_t nccl_datatype_size(uint64_t datatype);

}  // namespace ingero::backends
