#include "store/pruner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace dsh::store {

Pruner::Pruner(Database& db, const Clock& clock, std::vector<PruneTask> tasks, PrunerOptions options)
    : db_(db), clock_(clock), tasks_(std::move(tasks)), options_(options) {}

Pruner::~Pruner() { Stop(); }

void Pruner::Start() {
  if (tasks_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Pruner::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Pruner::Stats Pruner::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Pruner::WaitFor(const std::function<bool(const Stats&)>& done, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return progress_.wait_for(lock, timeout, [&] { return done(stats_); });
}

bool Pruner::Wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  // Pacing only (how often the pruner may take the writer), so the real
  // steady clock: what is due is decided by clock_ inside each slice.
  cv_.wait_for(lock, d, [&] { return stopping_; });
  return !stopping_;
}

Result<bool> Pruner::RunSlice(PruneTask& task) {
  std::optional<PruneSlice> out;
  int64_t now = ToUnixMillis(clock_.Now());
  int64_t max_rows = std::max<int64_t>(1, options_.slice_rows);
  Status st = db_.WriteSync([&](Tx& tx) -> Status {
    auto r = task.slice(tx, now, max_rows);
    if (!r.ok()) return r.status();
    out = *r;
    return Status::Ok();
  });
  std::lock_guard lock(mu_);
  progress_.notify_all();  // with the stats below, under the lock
  ++stats_.slices;
  if (!st.ok()) {
    ++stats_.failures;
    return st;
  }
  stats_.deleted += out->deleted;
  stats_.max_slice = std::max(stats_.max_slice, out->deleted);
  return out->more;
}

Result<Pruner::Stats> Pruner::RunRound() {
  Stats before = stats();
  for (PruneTask& task : tasks_) {
    for (;;) {
      DSH_ASSIGN_OR_RETURN(bool more, RunSlice(task));
      if (!more) break;
    }
  }
  Stats after = stats();
  return Stats{after.slices - before.slices, after.deleted - before.deleted, after.max_slice,
               after.failures - before.failures};
}

void Pruner::Loop() {
  // The first round waits one pause, so a starting host's own work (claims
  // recovered, pending messages resumed) goes first.
  if (!Wait(options_.pause)) return;
  for (;;) {
    for (PruneTask& task : tasks_) {
      int64_t deleted = 0;
      for (;;) {
        // Deliveries first: a busy writer defers the slice (a bounded number
        // of times, so a host that is never idle still prunes).
        for (int i = 0; i < options_.max_deferrals && db_.write_load() > options_.busy_writes; ++i) {
          if (!Wait(options_.pause)) return;
        }
        int64_t before = stats().deleted;
        auto more = RunSlice(task);
        if (!more.ok()) {
          if (more.status().code() != "shutting_down") {
            spdlog::warn("retention: pruning {} failed: {} (tried again in {} s)", task.name,
                         more.status().ToString(), options_.interval.count() / 1000);
          }
          break;
        }
        deleted += stats().deleted - before;
        if (!*more) break;
        if (!Wait(options_.pause)) return;
      }
      if (deleted > 0) spdlog::info("retention: pruned {} {} row(s)", deleted, task.name);
    }
    if (!Wait(options_.interval)) return;
  }
}

}  // namespace dsh::store
