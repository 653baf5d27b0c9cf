// Reading Prometheus's text exposition in tests: one sample's value, a family's series.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

namespace ingero::test {

// The value of the one sample line that starts with `series` ("name{labels}"); a failure when
// there is none or more than one.
inline double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  int found = 0;
  double v = -1;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(series + " ", 0) == 0) {
      ++found;
      v = std::stod(line.substr(series.size() + 1));
    }
  EXPECT_EQ(found, 1) << series << "\n" << text;
  return v;
}

// Distinct label sets of one metric name (histograms: of its _count line).
inline size_t series_count(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::set<std::string> s;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0)
      s.insert(line.substr(0, line.rfind(' ')));
  return s.size();
}

// Whether any line starts with `name` (a family's name, or a series up to some of its labels).
inline bool mentions(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name, 0) == 0) return true;
  return false;
}

}  // namespace ingero::test
