// A device sampler's answers as bytes (hal/device_sampler.h): what a sampler run in a process
// of its own (hal/sampler_process.h) sends the tracer. Varints and length-prefixed strings, each
// optional figure behind a presence bit; a reader checks every length against what is left and
// refuses what does not parse, so a child that died mid-write or wrote garbage is an error, never
// a figure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hal/device_sampler.h"

namespace ingero::hal::device_wire {

void put_info(std::string& out, const DeviceSamplerInfo& info);
void put_samples(std::string& out, const std::vector<DeviceSample>& samples);
void put_events(std::string& out, const std::vector<DeviceEvent>& events);
void put_pids(std::string& out, const std::vector<uint32_t>& pids);
void put_int(std::string& out, int64_t v);
void put_text(std::string& out, std::string_view s);

// Each reads from the front of `in` and advances it; false (and `in` in any state) where the
// bytes end early, say more items or longer strings than they hold or than any sampler sends
// (300,000 samples, 65,536 events or names), or give a figure outside its type.
bool get_info(std::string_view& in, DeviceSamplerInfo& info);
bool get_samples(std::string_view& in, std::vector<DeviceSample>& samples);
bool get_events(std::string_view& in, std::vector<DeviceEvent>& events);
bool get_pids(std::string_view& in, std::vector<uint32_t>& pids);
bool get_int(std::string_view& in, int64_t& v);
bool get_text(std::string_view& in, std::string& s);

}  // namespace ingero::hal::device_wire
