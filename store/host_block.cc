#include "store/host_block.h"

#include <algorithm>

namespace ingero::store {

const std::vector<std::string>& host_column_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = call_column_names();
    for (const char* c : {"detail", "saddr", "daddr"}) v.emplace_back(c);
    return v;
  }();
  return names;
}

void HostBlock::add(int64_t id, int64_t ts_ns, const hal::Event& ev, int source, int op,
                    std::string_view node, int64_t session) {
  ColumnBlock& c = cols_;
  c.set_int(kCallId, id);
  c.set_text(kCallNode, node);
  c.set_int(kCallSession, session);
  c.set_int(kCallTs, ts_ns);
  c.set_int(kCallDur, int64_t(ev.dur_ns));
  c.set_int(kCallPid, ev.pid);
  c.set_int(kCallTid, ev.tid);
  c.set_int(kCallSource, source);
  c.set_int(kCallOp, op);
  if (ev.has_ret) c.set_int(kCallRet, ev.ret);
  c.set_int(kCallStatus, ev.unfinished ? 1 : 0);
  c.set_int(kCallCgroup, int64_t(ev.cgroup_id));
  c.set_text(kCallComm, ev.comm_view());
  if (ev.peer_comm[0]) c.set_text(kCallPeerComm, ev.peer_comm_view());
  if (!ev.detail.empty()) c.set_text(kHostDetail, ev.detail);
  if (!ev.saddr.empty()) c.set_text(kHostSaddr, ev.saddr);
  if (!ev.daddr.empty()) c.set_text(kHostDaddr, ev.daddr);
  c.set_int(kCallStack, int64_t(ev.stack_id));
  for (uint64_t m = ev.present; m; m &= m - 1) {
    int f = __builtin_ctzll(m);
    c.set_int(kCallFirstField + size_t(f), int64_t(ev.fields[size_t(f)]));
  }
  c.end_row();
  note(id, ts_ns, ts_ns + int64_t(ev.dur_ns), cols_.rows() == 1);
}

void HostBlock::note(int64_t id, int64_t ts, int64_t end, bool first) {
  if (first) {
    first_id_ = last_id_ = id;
    first_ts_ = last_ts_ = ts;
    end_ts_ = end;
    return;
  }
  first_id_ = std::min(first_id_, id);
  last_id_ = std::max(last_id_, id);
  first_ts_ = std::min(first_ts_, ts);
  last_ts_ = std::max(last_ts_, ts);
  end_ts_ = std::max(end_ts_, end);
}

void HostBlock::clear() {
  cols_.clear();
  first_id_ = last_id_ = first_ts_ = last_ts_ = end_ts_ = 0;
}

void HostBlock::truncate(size_t rows) {
  if (rows >= cols_.rows()) return;
  if (rows == 0) return clear();
  cols_.truncate(rows);
  for (size_t r = 0; r < rows; ++r) {
    int64_t ts = cols_.int64(r, kCallTs);
    note(cols_.int64(r, kCallId), ts, ts + cols_.int64(r, kCallDur), r == 0);
  }
}

}  // namespace ingero::store
