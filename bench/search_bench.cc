// Load program for full-text search over sessions (docs/PERFORMANCE.md,
// "Search").
//
//   search_bench [--backend sqlite|postgres] [--dir DIR]
//                [--sessions N] [--messages N] [--queries N] [--quick]
//
// 1. Loads N sessions with M messages in all (user and assistant turns of
//    ~20 words drawn from a Zipf-distributed vocabulary of 20,000 made-up
//    words, so some words are in most sessions and most are rare), written
//    straight into the store's tables as a profile from before the index
//    would be.
// 2. Indexes them all as the background migration does (SearchIndex::CatchUp,
//    slices of 256 events), and reports events per second.
// 3. Runs searches of five kinds, in turn: a frequent word, a mid-frequency
//    word, a rare word, a 3-letter prefix, and two words of one message;
//    p50/p99/max per kind and over all of them, each a page of 20 sessions
//    with snippets (SearchIndex::Search, including the hop to a reader).
//
// PostgreSQL: a database of its own on the tests' server ($DSH_TEST_PG, or a
// cluster started with scripts/pg_test_server), dropped at the end.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench_cli.h"
#include "bench_util.h"
#include "session/event_hub.h"
#include "session/search_index.h"
#include "session/session_store.h"
#include "store/sqlite_connection.h"
#include "store/testing/pg_test_server.h"

using namespace dsh;
using Clock_ = std::chrono::steady_clock;

namespace {

struct Args {
  std::string backend = "sqlite";
  std::string dir;
  int64_t sessions = 10'000;
  int64_t messages = 1'000'000;
  int queries = 1000;
  bool quick = false;
};

// A made-up word per rank: syllables, so that prefixes are shared as in a
// real language.
std::string Word(int64_t rank) {
  static const char* kSyllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "ge",
                                     "hu", "ji", "bo", "fe", "wa", "xi", "yu", "qo", "ce", "la", "mo", "ni"};
  constexpr int64_t n = 24;
  std::string w;
  int64_t r = rank + n;  // at least two syllables
  while (r > 0) {
    w += kSyllables[r % n];
    r /= n;
  }
  return w;
}

class Zipf {
 public:
  Zipf(int64_t n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) cdf_[static_cast<size_t>(i)] = (sum += 1.0 / std::pow(static_cast<double>(i + 1), s));
    for (auto& c : cdf_) c /= sum;
  }
  int64_t operator()(std::mt19937_64& rng) const {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
  }

 private:
  std::vector<double> cdf_;
};

constexpr int64_t kVocabulary = 20'000;

std::string Message(std::mt19937_64& rng, const Zipf& zipf) {
  std::string text;
  int words = 12 + static_cast<int>(rng() % 16);
  for (int i = 0; i < words; ++i) {
    if (i) text += ' ';
    text += Word(zipf(rng));
  }
  return text;
}

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};
Latency Summarize(std::vector<double> ms) {
  return {bench::Percentile(ms, 0.5), bench::Percentile(ms, 0.99), bench::Percentile(ms, 1.0)};
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  using dsh::bench::AtLeast;
  CLI::App app("Load program for full-text search over sessions (docs/PERFORMANCE.md, \"Search\").", "search_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("--backend", args.backend, "the store's backend")->check(CLI::IsMember({"sqlite", "postgres"}));
  app.add_option("--dir", args.dir, "directory of the SQLite database (default: a temporary one)");
  app.add_option("--sessions", args.sessions, "sessions to load")->check(AtLeast<int64_t>(1));
  app.add_option("--messages", args.messages, "messages to load, over all sessions")->check(AtLeast<int64_t>(1));
  app.add_option("--queries", args.queries, "searches to run")->check(AtLeast(5));
  app.add_flag("--quick", args.quick, "a short run (the smoke test)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (args.quick) {
    args.sessions = std::min<int64_t>(args.sessions, 200);
    args.messages = std::min<int64_t>(args.messages, 4'000);
    args.queries = std::min(args.queries, 50);
  }
  std::vector<store::Migration> migrations = session::SessionStore::Migrations();
  for (auto& m : session::SearchIndex::Migrations()) migrations.push_back(std::move(m));

  std::unique_ptr<store::ConnectionFactory> factory;
  std::filesystem::path dir;
  std::string pg_database;
  if (args.backend == "sqlite") {
    dir = args.dir.empty() ? std::filesystem::temp_directory_path() / "dsh-search-bench" : std::filesystem::path(args.dir);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    factory = std::make_unique<store::SqliteConnectionFactory>(
        store::SqliteOptions{.path = (dir / "bench.db").string(), .synchronous = store::SqliteOptions::Synchronous::kNormal});
  } else {
    auto created = store::testing::PgTestServer::NewDatabase();
    if (!created.ok()) bench::Fail("create database", created.status());
    pg_database = *created;
    factory = store::testing::PgTestServer::Factory(pg_database);
  }
  auto opened = store::Database::Open(std::move(factory), migrations, store::DatabaseOptions{.readers = 2});
  if (!opened.ok()) bench::Fail("open", opened.status());
  auto db = std::move(opened).value();

  // 1. Load.
  std::mt19937_64 rng(7);
  Zipf zipf(kVocabulary, 1.0);
  const int64_t per_session = std::max<int64_t>(1, args.messages / args.sessions);
  auto t0 = Clock_::now();
  constexpr int64_t kStart = 1'760'000'000'000;
  for (int64_t s = 0; s < args.sessions;) {
    int64_t batch = std::min<int64_t>(args.sessions - s, std::max<int64_t>(1, 20'000 / per_session));
    Status st = db->WriteSync([&](store::Tx& tx) -> Status {
      for (int64_t i = s; i < s + batch; ++i) {
        std::string id = "ses_bench_" + std::to_string(i);
        DSH_ASSIGN_OR_RETURN(
            int64_t num, tx.Insert("INSERT INTO sessions (id, created_at, updated_at, provider, model, time_zone, "
                                   "seed_length, delegation_depth, origin, last_seq, title_fallback) "
                                   "VALUES (?, ?, ?, 'echo', 'echo', 'UTC', 0, 0, 'bench', ?, ?)",
                                   {std::string_view(id), kStart + i, kStart + i * 1000 + per_session, per_session,
                                    std::string_view(Message(rng, zipf).substr(0, 60))}));
        for (int64_t k = 1; k <= per_session;) {
          std::string sql = "INSERT INTO events (session_num, seq, type, at, data) VALUES ";
          std::vector<std::string> texts;
          std::vector<store::Value> params;
          int64_t rows = std::min<int64_t>(per_session - k + 1, 100);
          texts.reserve(static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r) {
            texts.push_back(DumpJson(Json{{"text", Message(rng, zipf)}}));
          }
          for (int64_t r = 0; r < rows; ++r) {
            sql += r ? ", (?, ?, ?, ?, ?)" : "(?, ?, ?, ?, ?)";
            params.emplace_back(num);
            params.emplace_back(k + r);
            params.emplace_back(std::string_view((k + r) % 2 ? "message/user" : "message/assistant"));
            params.emplace_back(kStart + i * 1000 + k + r);
            params.emplace_back(std::string_view(texts[static_cast<size_t>(r)]));
          }
          DSH_RETURN_IF_ERROR(tx.Exec(sql, params).status());
          k += rows;
        }
      }
      return Status::Ok();
    });
    if (!st.ok()) bench::Fail("load", st);
    s += batch;
  }
  double load_s = std::chrono::duration<double>(Clock_::now() - t0).count();
  const int64_t total = per_session * args.sessions;
  std::printf("## Search over %lld sessions, %lld messages (%s)\n\n", static_cast<long long>(args.sessions),
              static_cast<long long>(total), args.backend.c_str());
  std::printf("loaded in %.1f s\n", load_s);

  // 2. Index, as the background migration does.
  session::SearchIndex index(*db, RealClock(), nullptr);
  t0 = Clock_::now();
  auto indexed = index.CatchUp();
  if (!indexed.ok()) bench::Fail("index", indexed.status());
  double index_s = std::chrono::duration<double>(Clock_::now() - t0).count();
  std::printf("indexed %lld events in %.1f s: %.0f events/s\n\n", static_cast<long long>(*indexed), index_s,
              static_cast<double>(*indexed) / index_s);

  // 3. Search.
  const char* kKinds[] = {"frequent word", "mid-frequency word", "rare word", "3-letter prefix", "two words of a message"};
  std::vector<std::vector<double>> ms(5);
  std::vector<int64_t> hits(5);
  std::mt19937_64 qrng(11);
  for (int i = 0; i < args.queries; ++i) {
    int kind = i % 5;
    std::string q;
    switch (kind) {
      case 0: q = Word(static_cast<int64_t>(qrng() % 10)); break;
      case 1: q = Word(100 + static_cast<int64_t>(qrng() % 900)); break;
      case 2: q = Word(5'000 + static_cast<int64_t>(qrng() % 15'000)); break;
      case 3: q = Word(static_cast<int64_t>(qrng() % kVocabulary)).substr(0, 3); break;
      default: {
        std::string m = Message(qrng, zipf);
        auto a = m.find(' ');
        auto b = m.find(' ', a + 1);
        q = m.substr(0, a) + " " + m.substr(a + 1, b - a - 1);
      }
    }
    auto start = Clock_::now();
    auto page = index.Search({q, 20, std::nullopt});
    ms[static_cast<size_t>(kind)].push_back(std::chrono::duration<double, std::milli>(Clock_::now() - start).count());
    if (!page.ok()) bench::Fail(("search " + q).c_str(), page.status());
    hits[static_cast<size_t>(kind)] += static_cast<int64_t>(page->results.size());
  }
  std::printf("| query | p50 | p99 | max | sessions per page (mean) |\n|---|---:|---:|---:|---:|\n");
  std::vector<double> all;
  for (size_t k = 0; k < 5; ++k) {
    Latency l = Summarize(ms[k]);
    all.insert(all.end(), ms[k].begin(), ms[k].end());
    std::printf("| %s | %.2f ms | %.2f ms | %.2f ms | %.1f |\n", kKinds[k], l.p50, l.p99, l.max,
                static_cast<double>(hits[k]) / static_cast<double>(ms[k].size()));
  }
  Latency l = Summarize(all);
  std::printf("| all %d | %.2f ms | %.2f ms | %.2f ms | |\n", args.queries, l.p50, l.p99, l.max);
  db->Close();
  db.reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  if (!pg_database.empty()) store::testing::PgTestServer::DropDatabase(pg_database);
  return 0;
}
