// TraceWriter's host events: into blocks of columns as they come (store/host_block.h), written
// once per commit to host_store (store/host_store.h), as calls are; never folded.
#include "store/host_store.h"
#include "store/trace_writer.h"

namespace ingero::store {

void TraceWriter::add_host(const hal::Event& ev, const OpIds& ids) {
  hosts_.filling().add(next_id_++, int64_t(ev.ts_ns) + mono_offset_ns_, ev, ids.source, ids.op,
                       node_, session_id_);
  if (hosts_.filling().size() >= kHostBlockRows) hosts_.close();
}

ingero::Status TraceWriter::write_host_blocks(bool final) {
  return hosts_.write(final, [this](const HostBlock& b, int64_t id, bool) {
    return write_host_block(insert_host_block_, id, b, host_encoded_);
  });
}

}  // namespace ingero::store
