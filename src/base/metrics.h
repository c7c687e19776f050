#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

// Metrics in the Prometheus text exposition format 0.0.4 (docs/DEPLOY.md,
// "Metrics"), written by hand: Debian 12 has no prometheus-cpp, and what a
// host needs (counters, gauges, fixed-bucket histograms, label sets, text
// rendering) is small.
//
// A Registry owns its metric families; a family owns one metric per label
// set. References handed out stay valid for the registry's lifetime, so a
// hot path looks its metric up once and then only does atomic adds (a
// Counter::Inc is one relaxed fetch_add; a Histogram::Observe a short scan
// of its bounds and two).
namespace dsh::metrics {

// A monotonically increasing count. Thread-safe, lock-free.
class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. Thread-safe, lock-free.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  void Inc() { Add(1); }
  void Dec() { Add(-1); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into fixed buckets (upper bounds, increasing; +Inf
// is implied). Thread-safe, lock-free. A snapshot taken while observations
// run may have a sum that lags its counts by those observations; the
// counts themselves are always consistent (the +Inf bucket is _count).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; the last is +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative; bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Bucket bounds in seconds for latencies from 100 µs to 60 s.
std::vector<double> LatencyBuckets();
// `count` bounds start, start*factor, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

enum class Type { kCounter, kGauge, kHistogram };

// One metric per label set (values in the order of the family's label
// names). Thread-safe: WithLabels takes a mutex; keep the reference on hot paths.
template <typename Metric>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The metric of these label values, created at zero on first use. The
  // number of values must equal the number of label names (a programming
  // error otherwise: it aborts).
  Metric& WithLabels(const std::vector<std::string>& values);
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Calls fn(values, metric) for each label set, in order of the values.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    std::lock_guard lock(mu_);
    for (const auto& [values, metric] : children_) fn(values, *metric);
  }

 private:
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<Metric>()> make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> children_;  // GUARDED_BY(mu_)
};

// A value computed when the metrics are rendered (a gauge cheaper to read
// then than to keep current: the live map's size, say).
struct Sample {
  std::vector<std::string> label_values;
  double value = 0;
};
using CollectFn = std::function<std::vector<Sample>()>;

// The metrics of one host. Thread-safe. Names must follow Prometheus'
// rules (`[a-zA-Z_:][a-zA-Z0-9_:]*`, labels `[a-zA-Z_][a-zA-Z0-9_]*`, no
// `le` label, which histograms use) — a programming error otherwise (it
// aborts). Adding a name again returns the family already there when type,
// labels (and bounds) match, and aborts when they do not.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Family<Counter>& AddCounterFamily(std::string name, std::string help, std::vector<std::string> labels);
  Family<Gauge>& AddGaugeFamily(std::string name, std::string help, std::vector<std::string> labels);
  Family<Histogram>& AddHistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                                        std::vector<double> bounds);
  // Without labels.
  Counter& AddCounter(std::string name, std::string help) {
    return AddCounterFamily(std::move(name), std::move(help), {}).WithLabels({});
  }
  Gauge& AddGauge(std::string name, std::string help) {
    return AddGaugeFamily(std::move(name), std::move(help), {}).WithLabels({});
  }
  Histogram& AddHistogram(std::string name, std::string help, std::vector<double> bounds) {
    return AddHistogramFamily(std::move(name), std::move(help), {}, std::move(bounds)).WithLabels({});
  }
  // A family whose samples `collect` computes at each Render (type counter
  // or gauge). `collect` runs on the rendering thread, must be quick and
  // thread-safe, and must stay callable while anything may still render.
  void AddCallback(std::string name, std::string help, Type type, std::vector<std::string> labels,
                   CollectFn collect);

  // The text exposition format 0.0.4: `# HELP` and `# TYPE` per family,
  // families in name order, samples in label order; histograms as
  // cumulative `_bucket{le=...}` series ending in `+Inf`, then `_sum` and
  // `_count`. A family with no label set yet shows only its HELP and TYPE.
  std::string Render() const;

  // The Content-Type of Render's output.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  struct Entry {
    std::string help;
    Type type = Type::kCounter;
    std::vector<std::string> labels;
    std::vector<double> bounds;  // histograms
    std::unique_ptr<Family<Counter>> counters;
    std::unique_ptr<Family<Gauge>> gauges;
    std::unique_ptr<Family<Histogram>> histograms;
    CollectFn collect;
  };
  Entry& Add(std::string name, std::string help, Type type, std::vector<std::string> labels);

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;  // GUARDED_BY(mu_); entries are never removed
};

// Escapes a label value (`\` `"` and newline) and a HELP text (`\` and
// newline) as the text format wants them.
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);
// A sample value: integers without a fraction, else the shortest round-trip
// form; `+Inf`, `-Inf`, `NaN`.
std::string FormatValue(double value);

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& values) {
  if (values.size() != label_names_.size()) std::abort();
  std::lock_guard lock(mu_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(values, make_()).first;
  return *it->second;
}

}  // namespace dsh::metrics
