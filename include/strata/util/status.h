// Error values for everything that can fail on user input.
//
// Contract: library code never asserts or aborts on user input. A fallible function returns
// Result<T> (a value or an Error) or Status (success or an Error). An Error carries one
// human-readable message that already says where the problem is (file:line:col, graph op,
// rule of docs/mugraph-semantics.md) and what was expected.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace strata {

/// A failure with a complete, user-facing message.
struct Error {
  std::string message;
};

/// Makes an Error from a message.
inline Error make_error(std::string message) {
  return Error{std::move(message)};
}

/// Either a value of type T or an Error. Check ok() before value().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}
  static Status success() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace strata

/// Propagates an Error from a Status or Result expression out of the enclosing function.
#define STRATA_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    auto&& strata_status_ = (expr);                          \
    if (!strata_status_.ok()) return strata_status_.error(); \
  } while (0)

/// Evaluates a Result expression; on error returns it, otherwise moves the value into `lhs`.
#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(STRATA_CONCAT_(strata_r_, __LINE__), lhs, expr)
#define STRATA_CONCAT_INNER_(a, b) a##b
#define STRATA_CONCAT_(a, b) STRATA_CONCAT_INNER_(a, b)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.error();                  \
  lhs = std::move(tmp).value()
