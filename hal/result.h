// Recoverable errors are values. Result<T> holds either a T or an Error; Status is
// Result<void>. Exceptions are reserved for programming errors and CLI argument parsing.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ingero {

struct Error {
  std::string message;
  int sys_errno = 0;  // errno when the failure came from the OS, else 0

  static Error sys(std::string what, int err);  // appends strerror(err)
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Error make_error(std::string message) { return Error{std::move(message), 0}; }

}  // namespace ingero
