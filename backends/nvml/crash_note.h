// Words for a vendor library that crashes the process: while a CrashNote lives, a thread marked
// Inside that dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT first writes which library and
// call it was in, and how to trace without it, then dies of the same signal. A crash elsewhere
// (another thread, any other time) dies as it would have, unsaid.
#pragma once

#include <string>

namespace ingero::backends::nvml {

class CrashNote {
 public:
  CrashNote(const std::string& library, const char* call);
  ~CrashNote();  // the handlers there were before
  CrashNote(const CrashNote&) = delete;
  // From now on no CrashNote writes anything (NVML's own process, whose death the tracer
  // reports itself).
  static void silence();
  CrashNote& operator=(const CrashNote&) = delete;

  // On the thread that calls into the library, for the call's length.
  struct Inside {
    Inside();
    ~Inside();
  };
};

}  // namespace ingero::backends::nvml
