// Vendor-specific decoding and the RDMA sysfs poller, without privileges.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "backends/nccl/nccl_backend.h"
#include "backends/rdma/rdma_backend.h"
#include "hal/communicator_join.h"
#include "probe/record_decoder.h"
#include "probe/record_layout.h"
#include "tests/support/trace_db.h"

namespace ingero::backends {
namespace {

// A call record with every register and stack word kept (what a probe's recipe narrows).
hal::CallRecord all_words() {
  hal::CallRecord r;
  r.hdr.type = INGERO_REC_CALL;
  r.hdr.nregs = INGERO_REG_WORDS;
  r.hdr.nstack = INGERO_STACK_WORDS;
  return r;
}

using namespace ingero::hal;

const ProbeSpec& spec_of(const VendorBackend& b, std::string_view name) {
  for (auto t : b.tables())
    for (const auto& s : t)
      if (s.symbol == name) return s;
  throw std::runtime_error(std::string(name));
}

TEST(RdmaVerbs, AsyncEventTypeIsDecodedWithItsFabricErrorFlag) {
  auto b = make_rdma_backend(true);
  ProbeTable table;
  uint32_t id = table.add({b.get(),
                           &spec_of(*b, "ibv_get_async_event"),
                           {"rdma", "ibverbs", 0, false},
                           "/lib/libibverbs.so.1",
                           "ibv_get_async_event"});
  hal::CallRecord r = all_words();
  r.hdr.probe_id = id;
  r.hdr.ret = 0;
  uint64_t element = 0xababab'ab00000001ull;  // port 1, and the caller's old bytes beside it
  uint32_t type = 10;                         // IBV_EVENT_PORT_ERR
  std::memcpy(r.return_buf, &element, 8);
  std::memcpy(r.return_buf + 8, &type, 4);
  r.hdr.return_len = 16;
  Event ev;
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_EQ(ev.kind, EventKind::kRdmaAsyncEvent);
  EXPECT_EQ(ev.get(Field::kRdmaEvent), 10u);
  EXPECT_EQ(ev.get(Field::kFabricError), 1u);
  EXPECT_EQ(ev.get(Field::kFlags), 1u);  // the port: port_num is an int, not the union's 8 bytes
  EXPECT_EQ(rdma_event_name(10), "IBV_EVENT_PORT_ERR");
  type = 9;  // IBV_EVENT_PORT_ACTIVE
  std::memcpy(r.return_buf + 8, &type, 4);
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_EQ(ev.get(Field::kFabricError), 0u);
  type = 1;  // IBV_EVENT_QP_FATAL: the element is the queue pair's address
  std::memcpy(r.return_buf + 8, &type, 4);
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_EQ(ev.get(Field::kFlags), element);
  type = 8;  // IBV_EVENT_DEVICE_FATAL: no element
  std::memcpy(r.return_buf + 8, &type, 4);
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_FALSE(ev.has(Field::kFlags));
  for (uint64_t t : {9, 10, 11, 12, 13, 17, 18}) EXPECT_TRUE(rdma_event_is_port_event(t)) << t;
  for (uint64_t t : {0, 1, 8, 14, 16, 19}) EXPECT_FALSE(rdma_event_is_port_event(t)) << t;
  r.hdr.ret = uint64_t(-1);  // failed: nothing was written, and the old bytes name no error
  type = 10;
  std::memcpy(r.return_buf + 8, &type, 4);
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_FALSE(ev.has(Field::kRdmaEvent));
  EXPECT_FALSE(ev.has(Field::kFabricError));
  for (uint64_t t : {0, 1, 2, 3, 7, 8, 10, 14, 19}) EXPECT_TRUE(rdma_event_is_fabric_error(t)) << t;
  for (uint64_t t : {4, 5, 6, 9, 11, 12, 13, 15, 16, 17, 18})
    EXPECT_FALSE(rdma_event_is_fabric_error(t)) << t;
}

TEST(RdmaSysfs, FakeTreeWithInfinibandAndRoce) {
  std::string root = test::temp_path("sys");
  auto port = [&](const std::string& dev, int p, const char* link) {
    std::string d = root + "/class/infiniband/" + dev + "/ports/" + std::to_string(p);
    std::filesystem::create_directories(d + "/counters");
    std::filesystem::create_directories(d + "/hw_counters");
    std::ofstream(d + "/link_layer") << link << "\n";
    std::ofstream(d + "/state") << "4: ACTIVE\n";
    std::ofstream(d + "/rate") << "100 Gb/sec (4X EDR)\n";
    return d;
  };
  std::string ib = port("mlx5_0", 1, "InfiniBand");
  std::ofstream(ib + "/counters/port_xmit_data") << "250\n";
  std::ofstream(ib + "/counters/symbol_error") << "2\n";
  std::filesystem::create_directories(ib + "/counters/not_a_counter");  // unreadable
  std::string roce = port("mlx5_1", 1, "Ethernet");
  std::ofstream(roce + "/hw_counters/out_of_sequence") << "11\n";
  auto s = read_rdma_counters(root);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].device, "mlx5_0");
  EXPECT_EQ(s[0].transport, "InfiniBand");
  EXPECT_EQ(s[0].counters.at("port_xmit_data"), 250u);
  EXPECT_EQ(s[0].counters.at("symbol_error"), 2u);
  EXPECT_EQ(s[0].unreadable, std::vector<std::string>{"not_a_counter"});
  EXPECT_EQ(s[1].transport, "Ethernet");
  EXPECT_EQ(s[1].hw_counters.at("out_of_sequence"), 11u);
  EXPECT_EQ(rdma_counter_unit("port_xmit_data"),
            (std::pair<uint64_t, std::string_view>{4, "bytes"}));
  EXPECT_EQ(rdma_counter_unit("port_rcv_packets").second, "packets");
  EXPECT_TRUE(rdma_counter_is_error("symbol_error"));
  EXPECT_TRUE(rdma_counter_is_error("hw_counters/out_of_sequence"));
  EXPECT_FALSE(rdma_counter_is_error("port_xmit_data"));
  // No HCA: nothing, and no error.
  EXPECT_TRUE(read_rdma_counters(test::temp_path("empty")).empty());
}

TEST(Nccl, BytesCommHashAndCommunicatorJoin) {
  auto b = make_nccl_backend();
  ProbeTable table;
  uint32_t init = table.add({b.get(),
                             &spec_of(*b, "ncclCommInitRank"),
                             {"nvidia", "nccl", 0, false},
                             "x",
                             "ncclCommInitRank"});
  uint32_t ar = table.add(
      {b.get(), &spec_of(*b, "ncclAllReduce"), {"nvidia", "nccl", 0, false}, "x", "ncclAllReduce"});
  hal::CallRecord r = all_words();
  r.hdr.probe_id = init;
  r.hdr.pid = 9;
  r.regs[1] = 8;  // nranks
  r.regs[2] = 3;  // rank
  for (int i = 0; i < 128; ++i) r.entry_buf[i] = uint8_t(i);
  r.hdr.entry_len = 128;
  uint64_t comm = 0xc0ffee;
  std::memcpy(r.return_buf, &comm, 8);
  r.hdr.return_len = 8;
  Event ev;
  ASSERT_TRUE(CallDecoder(table).decode(r, ev));
  EXPECT_EQ(ev.get(Field::kRank), 3u);
  EXPECT_EQ(ev.get(Field::kNranks), 8u);
  EXPECT_EQ(ev.get(Field::kCommunicator), comm);
  uint64_t h = *ev.get(Field::kCommHash);
  EXPECT_EQ(h, nccl_comm_hash(std::span<const uint8_t>(r.entry_buf, 128)));
  // Every byte matters: change the last one, the hash changes.
  r.entry_buf[127] ^= 1;
  EXPECT_NE(nccl_comm_hash(std::span<const uint8_t>(r.entry_buf, 128)), h);
  CommunicatorJoin join;
  join.observe(ev);
  hal::CallRecord c = all_words();
  c.hdr.probe_id = ar;
  c.hdr.pid = 9;
  c.regs[2] = 1000;  // count
  c.regs[3] = 6;     // float16
  c.regs[4] = 0;
  c.regs[5] = comm;
  c.stack[0] = 0x5;
  Event col;
  ASSERT_TRUE(CallDecoder(table).decode(c, col));
  EXPECT_EQ(col.get(Field::kBytes), 2000u);
  EXPECT_EQ(col.get(Field::kStream), 5u);
  EXPECT_FALSE(col.has(Field::kRank));
  join.observe(col);
  EXPECT_EQ(col.get(Field::kRank), 3u);
  EXPECT_EQ(col.get(Field::kNranks), 8u);
  EXPECT_EQ(col.get(Field::kCommHash), h);
  EXPECT_EQ(nccl_datatype_size(9), 2u);  // bfloat16
  EXPECT_EQ(nccl_datatype_size(99), 0u);
}

}  // namespace
}  // namespace ingero::backends

namespace ingero::backends {
namespace {

TEST(Nccl, RcclIsAmdAndNcclIsNvidia) {
  auto b = make_nccl_backend();
  auto idx = hal::SymbolIndex::load("/proc/self/exe");
  ASSERT_TRUE(idx);
  hal::MappedFile f{"/x/librccl.so.1", "/x/librccl.so.1", "librccl.so.1", idx->get(), false};
  auto m = b->match(f);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].vendor, "amd");
  EXPECT_EQ(m[0].api, "rccl");
  f.basename = "libnccl.so.2";
  m = b->match(f);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].vendor, "nvidia");
  EXPECT_EQ(m[0].api, "nccl");
}

}  // namespace
}  // namespace ingero::backends
