// Launches by kernel name, with bounded labels (serve/metrics/metrics.h, docs/metrics.md).
#include <algorithm>

#include "serve/metrics/metrics.h"

namespace ingero::serve {

ingero::Status Metrics::on_kernel_name(const hal::KernelName& k) {
  std::lock_guard<std::mutex> g(mu_);
  std::string label = hal::short_kernel_name(k.name);
  if (label.size() > kMaxKernelLabel) label = label.substr(0, kMaxKernelLabel - 3) + "...";
  auto [it, fresh] = kernel_index_.try_emplace(label, uint32_t(kernels_.size()));
  if (fresh) kernels_.push_back({label, 0, nullptr, 0});
  kernel_of_[k.pid][k.func] = it->second;
  return {};
}

void Metrics::observe_launch(const hal::Event& ev) {
  if (!kernel_other_) {
    kernel_other_ = &kernel_launches_->Add({{"kernel", "other"}});
    kernel_unnamed_ = &kernel_launches_->Add({{"kernel", "unnamed"}});
  }
  // Named before the launch reaches the sinks, when it has a name at all (capture/kernel_namer.h).
  const uint32_t* index = nullptr;
  if (auto f = ev.get(hal::Field::kFunc))
    if (auto p = kernel_of_.find(ev.pid); p != kernel_of_.end())
      if (auto k = p->second.find(*f); k != p->second.end()) index = &k->second;
  if (!index) {
    ++unnamed_pending_;
    return;
  }
  KernelSeries& s = kernels_[*index];
  ++s.launches;
  if (!s.pending++) pending_kernels_.push_back(*index);
}

void Metrics::refresh_kernel_series() {
  std::lock_guard<std::mutex> g(mu_);
  flush_pending();  // launches before a kernel's series stay in `other`
  if (kernels_given_ >= kernel_series_) return;
  std::vector<KernelSeries*> waiting;
  for (auto& s : kernels_)
    if (!s.series && s.launches) waiting.push_back(&s);
  std::sort(waiting.begin(), waiting.end(), [](const KernelSeries* a, const KernelSeries* b) {
    return a->launches != b->launches ? a->launches > b->launches : a->label < b->label;
  });
  for (KernelSeries* s : waiting) {
    if (kernels_given_ >= kernel_series_) break;
    s->series = &kernel_launches_->Add({{"kernel", s->label}});
    ++kernels_given_;
  }
}

}  // namespace ingero::serve
