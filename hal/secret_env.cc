#include "hal/secret_env.h"

extern char** environ;

namespace ingero::hal {

std::vector<char*> environment_without_secrets() {
  std::vector<char*> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool secret = false;
    for (std::string_view s : kSecretVariables) secret = secret || name == s;
    if (!secret) out.push_back(*e);
  }
  out.push_back(nullptr);
  return out;
}

}  // namespace ingero::hal
