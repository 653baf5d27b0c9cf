// NCCL and RCCL: the same API from two vendors. libnccl defines each call as pncclX and
// exports ncclX as a weak alias; hal/ resolves either.
#pragma once

#include "hal/probe_spec.h"

namespace ingero::backends::nccl {

using namespace ingero::hal;  // NOLINT: table notation

// ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream), under `symbol`.
constexpr ProbeSpec all_to_all(std::string_view symbol) {
  return {.symbol = symbol,
          .kind = EventKind::kCollective,
          .fields = {{Field::kCount, reg(2)},
                     {Field::kDatatype, reg(3, 4)},
                     {Field::kCommunicator, reg(4)},
                     {Field::kStream, reg(5)}},
          .optional = true};
}

inline constexpr ProbeSpec kNcclProbes[] = {
    // ncclUniqueId (128 bytes) is passed by value in memory: it is the stack argument area.
    // rank, after it, takes the next free register (rdx). The new communicator comes back
    // through the output pointer in rdi.
    {.symbol = "ncclCommInitRank",
     .kind = EventKind::kCommInit,
     .args = {.entry_read = read_stack_area(128), .return_read = read_at_reg(0, 8)},
     .fields = {{Field::kNranks, reg(1, 4)},
                {Field::kRank, reg(2, 4)},
                {Field::kCommunicator, return_buf(0)}}},
    {.symbol = "ncclCommInitRankConfig",
     .kind = EventKind::kCommInit,
     .args = {.entry_read = read_stack_area(128), .return_read = read_at_reg(0, 8)},
     .fields = {{Field::kNranks, reg(1, 4)},
                {Field::kRank, reg(2, 4)},
                {Field::kCommunicator, return_buf(0)}},
     .optional = true},
    // comms is an array of ndev communicators; the first is read back.
    {.symbol = "ncclCommInitAll",
     .kind = EventKind::kCommInit,
     .args = {.return_read = read_at_reg(0, 8)},
     .fields = {{Field::kNranks, reg(1, 4)}, {Field::kCommunicator, return_buf(0)}}},
    {.symbol = "ncclCommSplit",
     .kind = EventKind::kCommInit,
     .args = {.return_read = read_at_reg(3, 8)},
     .fields = {{Field::kPeer, reg(1, 4)},
                {Field::kFlags, reg(2, 4)},
                {Field::kCommunicator, return_buf(0)}},
     .optional = true},
    {.symbol = "ncclCommDestroy",
     .kind = EventKind::kCommDestroy,
     .fields = {{Field::kCommunicator, reg(0)}}},
    {.symbol = "ncclCommAbort",
     .kind = EventKind::kCommDestroy,
     .fields = {{Field::kCommunicator, reg(0)}}},
    // The 7th argument (stream) is on the stack.
    {.symbol = "ncclAllReduce",
     .kind = EventKind::kCollective,
     .args = {.stack_words = 1},
     .fields = {{Field::kCount, reg(2)},
                {Field::kDatatype, reg(3, 4)},
                {Field::kReduceOp, reg(4, 4)},
                {Field::kCommunicator, reg(5)},
                {Field::kStream, stack_arg(0)}}},
    {.symbol = "ncclAllGather",
     .kind = EventKind::kCollective,
     .fields = {{Field::kCount, reg(2)},
                {Field::kDatatype, reg(3, 4)},
                {Field::kCommunicator, reg(4)},
                {Field::kStream, reg(5)}}},
    {.symbol = "ncclReduceScatter",
     .kind = EventKind::kCollective,
     .args = {.stack_words = 1},
     .fields = {{Field::kCount, reg(2)},
                {Field::kDatatype, reg(3, 4)},
                {Field::kReduceOp, reg(4, 4)},
                {Field::kCommunicator, reg(5)},
                {Field::kStream, stack_arg(0)}}},
    {.symbol = "ncclBroadcast",
     .kind = EventKind::kCollective,
     .args = {.stack_words = 1},
     .fields = {{Field::kCount, reg(2)},
                {Field::kDatatype, reg(3, 4)},
                {Field::kPeer, reg(4, 4)},
                {Field::kCommunicator, reg(5)},
                {Field::kStream, stack_arg(0)}}},
    {.symbol = "ncclBcast",
     .kind = EventKind::kCollective,
     .fields = {{Field::kCount, reg(1)},
                {Field::kDatatype, reg(2, 4)},
                {Field::kPeer, reg(3, 4)},
                {Field::kCommunicator, reg(4)},
                {Field::kStream, reg(5)}}},
    // Eight arguments: comm and stream are stack words 0 and 1.
    {.symbol = "ncclReduce",
     .kind = EventKind::kCollective,
     .args = {.stack_words = 2},
     .fields = {{Field::kCount, reg(2)},
                {Field::kDatatype, reg(3, 4)},
                {Field::kReduceOp, reg(4, 4)},
                {Field::kPeer, reg(5, 4)},
                {Field::kCommunicator, stack_arg(0)},
                {Field::kStream, stack_arg(1)}}},
    // All-to-all: NCCL (2.28) spells it ncclAlltoAll, RCCL ncclAllToAll; each library has one.
    all_to_all("ncclAlltoAll"),
    all_to_all("ncclAllToAll"),
    {.symbol = "ncclSend",
     .kind = EventKind::kP2P,
     .fields = {{Field::kCount, reg(1)},
                {Field::kDatatype, reg(2, 4)},
                {Field::kPeer, reg(3, 4)},
                {Field::kCommunicator, reg(4)},
                {Field::kStream, reg(5)}}},
    {.symbol = "ncclRecv",
     .kind = EventKind::kP2P,
     .fields = {{Field::kCount, reg(1)},
                {Field::kDatatype, reg(2, 4)},
                {Field::kPeer, reg(3, 4)},
                {Field::kCommunicator, reg(4)},
                {Field::kStream, reg(5)}}},
    {.symbol = "ncclGroupStart", .kind = EventKind::kGroup},
    {.symbol = "ncclGroupEnd", .kind = EventKind::kGroup},
};

}  // namespace ingero::backends::nccl
