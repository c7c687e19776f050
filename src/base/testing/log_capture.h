#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dsh::testing {

// While it lives, the process-wide spdlog logger records every message (all
// levels) instead of printing it; the previous logger comes back on
// destruction. Create it before, and destroy it after, the threads that log:
// spdlog does not synchronize swapping its default logger with logging.
class LogCapture {
 public:
  struct Line {
    spdlog::level::level_enum level;
    std::string text;
  };

  LogCapture() : previous_(spdlog::default_logger()), sink_(std::make_shared<Sink>()) {
    auto logger = std::make_shared<spdlog::logger>("dsh-test-capture", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The messages logged at `level` or above so far.
  std::vector<std::string> Messages(spdlog::level::level_enum level) const {
    std::lock_guard lock(sink_->lines_mu);
    std::vector<std::string> out;
    for (const auto& l : sink_->lines) {
      if (l.level >= level) out.push_back(l.text);
    }
    return out;
  }

 private:
  struct Sink final : spdlog::sinks::base_sink<std::mutex> {
    mutable std::mutex lines_mu;
    std::vector<Line> lines;  // GUARDED_BY(lines_mu)

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      std::lock_guard lock(lines_mu);
      lines.push_back({msg.level, std::string(msg.payload.data(), msg.payload.size())});
    }
    void flush_() override {}
  };

  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<Sink> sink_;
};

}  // namespace dsh::testing
