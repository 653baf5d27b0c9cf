#include "hal/inflight.h"

#include <array>

namespace ingero::hal {
namespace {

constexpr std::array<std::string_view, 7> kStates = {"unknown", "on-CPU", "runnable", "sleeping",
                                                     "in I/O",  "exited", "stopped"};
constexpr std::array<std::string_view, 2> kWhat = {"call", "idle"};
constexpr std::array<std::string_view, 4> kStatus = {"in_flight", "returned", "unfinished",
                                                     "stopped"};

template <class E, size_t N>
std::optional<E> from(const std::array<std::string_view, N>& names, std::string_view n) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == n) return E(i);
  return std::nullopt;
}

}  // namespace

std::string_view thread_state_name(ThreadState s) {
  return size_t(s) < kStates.size() ? kStates[size_t(s)] : "unknown";
}
std::optional<ThreadState> thread_state_from_name(std::string_view n) {
  return from<ThreadState>(kStates, n);
}
std::string_view inflight_what_name(Inflight::What w) { return kWhat[size_t(w)]; }
std::string_view inflight_status_name(Inflight::Status s) { return kStatus[size_t(s)]; }
std::optional<Inflight::What> inflight_what_from_name(std::string_view n) {
  return from<Inflight::What>(kWhat, n);
}
std::optional<Inflight::Status> inflight_status_from_name(std::string_view n) {
  return from<Inflight::Status>(kStatus, n);
}

}  // namespace ingero::hal
