#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dsh {

// The outcome of an operation: ok, or an error with a stable machine `code`
// (snake_case, reaches users and API clients unchanged) and a human message.
// Errors are values: expected failures (bad input, missing rows, I/O) are
// returned, never thrown. Thread-compatible (a plain value type).
class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(std::string code, std::string message) : code_(std::move(code)), message_(std::move(message)) {
    assert(!code_.empty() && "an error Status needs a code");
  }

  static Status Ok() { return Status(); }

  bool ok() const { return code_.empty(); }
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }

  // "code: message", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context + ": "`.
  Status WithContext(const std::string& context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  std::string code_;
  std::string message_;
};

// Stable error codes shared across layers. A code is part of the public
// contract once shipped. Every code the program can produce — these, those
// of time/errors.h and the literals in `Status("…", …)` — is listed with its
// HTTP status in docs/API.md ("Errors") and in server::HttpStatusFor; a
// test (ErrorCodes.* in src/server) walks the sources and both tables.
namespace codes {
inline constexpr const char* kInvalidArguments = "invalid_arguments";
inline constexpr const char* kInvalidJson = "invalid_json";
inline constexpr const char* kNotFound = "not_found";
inline constexpr const char* kAlreadyExists = "already_exists";
inline constexpr const char* kConflict = "conflict";
// A row a write needs was held by another writer too long (a lock wait
// timed out, a deadlock): the store runs the write again (store::Database).
inline constexpr const char* kContended = "contended";
inline constexpr const char* kInternal = "internal";
inline constexpr const char* kUnavailable = "unavailable";
inline constexpr const char* kIo = "io_error";
inline constexpr const char* kStorage = "storage_error";
inline constexpr const char* kCommitFailed = "commit_failed";
inline constexpr const char* kPersistenceUncertain = "persistence_uncertain";
inline constexpr const char* kCorruptEvent = "corrupt_event";
inline constexpr const char* kSchemaTooNew = "schema_too_new";
inline constexpr const char* kInvalidConfig = "invalid_config";
inline constexpr const char* kShuttingDown = "shutting_down";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kUnknownCommand = "unknown_command";  // no slash command by that name
inline constexpr const char* kUnknownTool = "unknown_tool";        // no tool by that name (or not allowed)
// Model routes and model calls.
inline constexpr const char* kUnknownProvider = "unknown_provider";
inline constexpr const char* kUnknownModel = "unknown_model";
inline constexpr const char* kInvalidReasoningEffort = "invalid_reasoning_effort";
inline constexpr const char* kModelUnavailable = "model_unavailable";
inline constexpr const char* kModelTimeout = "model_timeout";
inline constexpr const char* kModelRateLimited = "model_rate_limited";
inline constexpr const char* kModelError = "model_error";
inline constexpr const char* kModelBadResponse = "model_bad_response";
// MCP servers (src/mcp): the server is down or cannot be started, did not
// answer in time, or answered a call with a JSON-RPC error.
inline constexpr const char* kMcpUnavailable = "mcp_unavailable";
inline constexpr const char* kMcpTimeout = "mcp_timeout";
inline constexpr const char* kMcpError = "mcp_error";
}  // namespace codes

inline Status InvalidArguments(std::string message) {
  return Status(codes::kInvalidArguments, std::move(message));
}
inline Status NotFound(std::string message) { return Status(codes::kNotFound, std::move(message)); }
inline Status Internal(std::string message) { return Status(codes::kInternal, std::move(message)); }

// A value or an error Status. Accessing value() of an error is a bug (asserts).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "a Result built from a Status must hold an error");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }

  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dsh

#define DSH_CONCAT_INNER(a, b) a##b
#define DSH_CONCAT(a, b) DSH_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is an error.
#define DSH_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::dsh::Status dsh_status_ = (expr);      \
    if (!dsh_status_.ok()) return dsh_status_; \
  } while (0)

// `DSH_ASSIGN_OR_RETURN(auto x, Compute());` declares x from a Result or
// returns its error Status.
#define DSH_ASSIGN_OR_RETURN(lhs, expr) \
  DSH_ASSIGN_OR_RETURN_IMPL(DSH_CONCAT(dsh_result_, __LINE__), lhs, expr)
#define DSH_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
