#include "hal/kernel_names.h"

#include <vector>

namespace ingero::hal {

std::string_view kernel_name_source_name(KernelNameSource s) {
  switch (s) {
    case KernelNameSource::kRegistration:
      return "registration";
    case KernelNameSource::kDriverLookup:
      return "driver_lookup";
    case KernelNameSource::kElfSymbol:
      return "elf_symbol";
    case KernelNameSource::kNone:
      break;
  }
  return "";
}

KernelNameSource kernel_name_source_from(std::string_view name) {
  for (auto s : {KernelNameSource::kRegistration, KernelNameSource::kDriverLookup,
                 KernelNameSource::kElfSymbol})
    if (kernel_name_source_name(s) == name) return s;
  return KernelNameSource::kNone;
}

namespace {

constexpr std::string_view kAnonymous = "(anonymous namespace)";

// Index of the bracket closing the one opened at `open`, or npos.
size_t closing(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '<' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == '>' || c == ']' || c == '}')
      if (--depth == 0) return i;
  }
  return std::string_view::npos;
}

bool only_qualifiers(std::string_view rest) {
  // " const", " volatile", " &", " &&" after a member function's parameters.
  for (char c : rest)
    if (c != ' ' && c != '&' && !(c >= 'a' && c <= 'z')) return false;
  return rest.empty() || rest[0] == ' ';
}

}  // namespace

std::string short_kernel_name(std::string_view name) {
  // The parameter list: the top-level '(' whose group ends the name (qualifiers aside). Angle
  // brackets count as nesting except in operator names ("operator<"), which kernels never are.
  size_t params = std::string_view::npos;
  std::vector<size_t> spaces;  // top-level spaces before the parameters
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (name.substr(i, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (c == '(') {
      size_t end = closing(name, i);
      if (end == std::string_view::npos) break;
      if (only_qualifiers(name.substr(end + 1))) {
        params = i;
        break;
      }
      i = end;
      continue;
    }
    if (c == '<' || c == '[' || c == '{') {
      size_t end = closing(name, i);
      if (end == std::string_view::npos) break;
      i = end;
      continue;
    }
    if (c == ' ') spaces.push_back(i);
  }
  std::string_view head = name.substr(0, params);
  // The return type is what comes before the last top-level space ("void scale<float>").
  size_t start = 0;
  for (size_t sp : spaces)
    if (sp < head.size()) start = sp + 1;
  std::string_view out = head.substr(start);
  while (!out.empty() && out.back() == ' ') out.remove_suffix(1);
  return out.empty() ? std::string(name) : std::string(out);
}

}  // namespace ingero::hal
