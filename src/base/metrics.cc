#include "base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace dsh::metrics {
namespace {

bool ValidName(std::string_view s, bool colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string_view TypeName(Type type) {
  switch (type) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `{a="x",b="y"}` (with `extra` last, e.g. `le`), or "" without labels.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
  return out;
}

void Line(std::string& out, std::string_view name, std::string_view suffix, const std::string& labels,
          const std::string& value) {
  out += name;
  out += suffix;
  out += labels;
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end()) {
    std::abort();
  }
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // `le` is inclusive: the first bound >= v.
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = total;
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

Registry::Entry& Registry::Add(std::string name, std::string help, Type type,
                               std::vector<std::string> labels) {
  if (!ValidName(name, true)) std::abort();
  for (const auto& l : labels) {
    if (!ValidName(l, false) || l == "le" || l.rfind("__", 0) == 0) std::abort();
  }
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    if (it->second.type != type || it->second.labels != labels || it->second.collect) std::abort();
    return it->second;
  }
  Entry& e = entries_[std::move(name)];
  e.help = std::move(help);
  e.type = type;
  e.labels = std::move(labels);
  return e;
}

Family<Counter>& Registry::AddCounterFamily(std::string name, std::string help,
                                            std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  Entry& e = Add(std::move(name), std::move(help), Type::kCounter, labels);
  if (!e.counters)
    e.counters = std::make_unique<Family<Counter>>(labels, [] { return std::make_unique<Counter>(); });
  return *e.counters;
}

Family<Gauge>& Registry::AddGaugeFamily(std::string name, std::string help, std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  Entry& e = Add(std::move(name), std::move(help), Type::kGauge, labels);
  if (!e.gauges) e.gauges = std::make_unique<Family<Gauge>>(labels, [] { return std::make_unique<Gauge>(); });
  return *e.gauges;
}

Family<Histogram>& Registry::AddHistogramFamily(std::string name, std::string help,
                                                std::vector<std::string> labels, std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  Entry& e = Add(std::move(name), std::move(help), Type::kHistogram, labels);
  if (!e.histograms) {
    e.bounds = bounds;
    e.histograms =
        std::make_unique<Family<Histogram>>(labels, [bounds] { return std::make_unique<Histogram>(bounds); });
  } else if (e.bounds != bounds) {
    std::abort();
  }
  return *e.histograms;
}

void Registry::AddCallback(std::string name, std::string help, Type type, std::vector<std::string> labels,
                           CollectFn collect) {
  if (type == Type::kHistogram) std::abort();
  std::lock_guard lock(mu_);
  if (entries_.count(name)) std::abort();
  Entry& e = Add(std::move(name), std::move(help), type, std::move(labels));
  e.collect = std::move(collect);
}

std::string Registry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, e] : entries_) {
    out += "# HELP " + name + " " + EscapeHelp(e.help) + "\n";
    out += "# TYPE " + name + " " + std::string(TypeName(e.type)) + "\n";
    if (e.collect) {
      std::vector<Sample> samples = e.collect();
      std::sort(samples.begin(), samples.end(),
                [](const Sample& a, const Sample& b) { return a.label_values < b.label_values; });
      for (const Sample& s : samples) {
        if (s.label_values.size() != e.labels.size()) std::abort();
        Line(out, name, "", LabelText(e.labels, s.label_values), FormatValue(s.value));
      }
    } else if (e.counters) {
      e.counters->ForEach([&](const std::vector<std::string>& values, const Counter& c) {
        Line(out, name, "", LabelText(e.labels, values), FormatValue(static_cast<double>(c.value())));
      });
    } else if (e.gauges) {
      e.gauges->ForEach([&](const std::vector<std::string>& values, const Gauge& g) {
        Line(out, name, "", LabelText(e.labels, values), FormatValue(g.value()));
      });
    } else if (e.histograms) {
      e.histograms->ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
        Histogram::Snapshot s = h.snapshot();
        for (size_t i = 0; i <= s.bounds.size(); ++i) {
          std::string le = i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf";
          Line(out, name, "_bucket", LabelText(e.labels, values, "le", le),
               FormatValue(static_cast<double>(s.cumulative[i])));
        }
        Line(out, name, "_sum", LabelText(e.labels, values), FormatValue(s.sum));
        Line(out, name, "_count", LabelText(e.labels, values), FormatValue(static_cast<double>(s.count)));
      });
    }
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general);
  return std::string(buf, end);
}

}  // namespace dsh::metrics
