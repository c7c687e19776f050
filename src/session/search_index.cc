#include "session/search_index.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "base/strings.h"
#include "session/event.h"
#include "session/session_store.h"
#include "session/titles.h"

namespace dsh::session {
namespace {

using store::Dialect;
using store::Row;
using store::Tx;
using store::Value;

constexpr size_t kMaxTerms = 16;
constexpr size_t kMaxTermBytes = 64;
constexpr size_t kMaxTextBytes = 64 * 1024;
// Most index rows one page of results reads (newest first, one hit per
// session): a page of a word that one long session repeats thousands of
// times ends early, with a cursor to go on from.
constexpr int64_t kScanBudget = 4000;
constexpr int64_t kScanChunk = 200;

bool IsWordByte(unsigned char c) { return c >= 0x80 || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

// A term as the backend's query language wants it: a prefix unless it is a
// single ASCII character (a prefix of one letter matches most of the index).
std::string MatchExpression(Dialect d, const std::vector<std::string>& terms) {
  std::string out;
  for (const auto& t : terms) {
    bool prefix = t.size() > 1;
    if (d == Dialect::kSqlite) {
      if (!out.empty()) out += ' ';
      out += '"' + t + '"' + (prefix ? "*" : "");
    } else {
      if (!out.empty()) out += " & ";
      out += '\'' + t + '\'' + (prefix ? ":*" : "");
    }
  }
  return out;
}

void AppendEscaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\n':
      case '\r':
      case '\t': out += ' '; break;
      default: out += c;
    }
  }
}

// Whether `word` (as written) is what `term` (lower case) finds: the same
// word, or one it begins (for a term longer than one character). Case is
// folded for ASCII letters only; the index folds more (other scripts'
// capitals, SQLite also diacritics), so a match may go unmarked, never the
// other way round.
bool WordMatches(std::string_view word, const std::string& term) {
  if (word.size() < term.size() || (term.size() == 1 && word.size() != 1)) return false;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = word[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != term[i]) return false;
  }
  return true;
}

// The safe HTML snippet of a matching text (SearchHit::snippet): about
// kSnippetWords words from a little before the first matched word, with "…"
// where the text goes on.
std::string Snippet(std::string_view body, const std::vector<std::string>& terms) {
  constexpr size_t kBefore = 6, kSnippetWords = 24;
  struct Word {
    size_t begin, end;
    bool match;
  };
  std::vector<Word> words;
  for (size_t i = 0; i < body.size();) {
    if (!IsWordByte(static_cast<unsigned char>(body[i]))) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < body.size() && IsWordByte(static_cast<unsigned char>(body[i]))) ++i;
    std::string_view w = body.substr(start, i - start);
    bool match = std::any_of(terms.begin(), terms.end(), [&](const std::string& t) { return WordMatches(w, t); });
    words.push_back({start, i, match});
  }
  if (words.empty()) {
    std::string out;
    AppendEscaped(out, Utf8Prefix(body, 200));
    return out;
  }
  size_t first = 0;
  while (first < words.size() && !words[first].match) ++first;
  if (first == words.size()) first = 0;
  size_t from = first > kBefore ? first - kBefore : 0;
  size_t to = std::min(words.size(), from + kSnippetWords);  // exclusive
  size_t begin = from == 0 ? 0 : words[from].begin;
  size_t end = to == words.size() ? body.size() : words[to - 1].end;
  std::string out;
  if (begin > 0) out += "…";
  size_t at = begin;
  for (size_t k = from; k < to; ++k) {
    if (!words[k].match) continue;
    AppendEscaped(out, body.substr(at, words[k].begin - at));
    out += "<mark>";
    AppendEscaped(out, body.substr(words[k].begin, words[k].end - words[k].begin));
    out += "</mark>";
    at = words[k].end;
  }
  AppendEscaped(out, body.substr(at, end - at));
  if (end < body.size()) out += "…";
  return out;
}

std::string InList(size_t n) {
  std::string s = "(";
  for (size_t i = 0; i < n; ++i) s += i ? ", ?" : "?";
  return s + ")";
}

Result<int64_t> InsertDocument(Tx& tx, int64_t session_num, int64_t seq, int64_t at, std::string_view body) {
  if (tx.dialect() == Dialect::kSqlite) {
    return tx.Insert("INSERT INTO search_fts (body, session_num, seq, at) VALUES (?, ?, ?, ?)",
                     {body, session_num, seq, at});
  }
  return tx.Insert("INSERT INTO search_docs (session_num, seq, at, body) VALUES (?, ?, ?, ?)",
                   {session_num, seq, at, body});
}

Status DeleteDocument(Tx& tx, int64_t doc) {
  return tx
      .Exec(tx.dialect() == Dialect::kSqlite ? "DELETE FROM search_fts WHERE rowid = ?"
                                              : "DELETE FROM search_docs WHERE id = ?",
            {doc})
      .status();
}

struct SessionProgress {
  int64_t events = 0;
  int64_t documents = 0;
  bool more = false;
};

// Indexes up to `budget` events of one session after where the index is,
// and its title when that changed. The session's index row is locked first
// (PostgreSQL: FOR UPDATE), so a second host indexing the same session waits
// and then goes on from where the first one stopped.
Result<SessionProgress> IndexSessionTx(Tx& tx, const std::string& session_id, int64_t budget, int64_t now_ms) {
  SessionProgress p;
  std::optional<int64_t> num;
  int64_t last_seq = 0;
  Titles titles;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT num, last_seq, title_user, title_generated, title_fallback FROM sessions WHERE id = ?",
      {std::string_view(session_id)}, [&](const Row& row) {
        num = row.Int(0);
        last_seq = row.Int(1);
        titles = Titles{row.OptString(2), row.OptString(3), row.OptString(4)};
        return Status::Ok();
      }));
  if (!num) return p;  // gone
  struct State {
    int64_t indexed_seq = 0;
    std::optional<int64_t> title_doc;
    std::optional<std::string> title;
  };
  std::optional<State> state;
  auto read_state = [&] {
    return tx.Query(
        "SELECT indexed_seq, title_doc, title FROM search_state WHERE session_num = ? /*postgres: FOR UPDATE*/",
        {*num}, [&](const Row& row) {
          state = State{row.Int(0), row.OptInt(1), row.OptString(2)};
          return Status::Ok();
        });
  };
  DSH_RETURN_IF_ERROR(read_state());
  if (state && state->indexed_seq >= last_seq) return p;
  if (!state) {
    DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO search_state (session_num, indexed_seq) VALUES (?, 0) "
                                "ON CONFLICT (session_num) DO NOTHING",
                                {*num})
                            .status());
    DSH_RETURN_IF_ERROR(read_state());
    if (!state) return Internal("search_state row of session " + session_id + " vanished");
    if (state->indexed_seq >= last_seq) return p;
  }
  DSH_ASSIGN_OR_RETURN(std::vector<Event> events,
                       SessionStore::ReadEventsIn(tx, session_id, state->indexed_seq, budget));
  if (events.empty()) return p;
  p.events = static_cast<int64_t>(events.size());
  // The title first: a first prompt is often the fallback title too, and
  // its message, indexed after it, is then the newer match.
  std::optional<std::string> title = titles.Effective();
  int64_t title_doc = state->title_doc.value_or(0);  // 0: none (document ids start at 1)
  if (title != state->title) {
    if (title_doc != 0) DSH_RETURN_IF_ERROR(DeleteDocument(tx, title_doc));
    title_doc = 0;
    if (title && !title->empty()) {
      DSH_ASSIGN_OR_RETURN(title_doc, InsertDocument(tx, *num, 0, std::max(events.back().at, now_ms), *title));
      ++p.documents;
    }
  }
  for (const Event& e : events) {
    std::string text = SearchableText(e);
    if (text.empty()) continue;
    DSH_RETURN_IF_ERROR(InsertDocument(tx, *num, e.seq, e.at, text).status());
    ++p.documents;
  }
  DSH_RETURN_IF_ERROR(tx.Exec("UPDATE search_state SET indexed_seq = ?, title_doc = ?, title = ? WHERE session_num = ?",
                              {events.back().seq, title_doc != 0 ? Value(title_doc) : Value(nullptr),
                               store::OptValue(title), *num})
                          .status());
  p.more = events.back().seq < last_seq;
  return p;
}

struct Match {
  int64_t doc = 0;
  int64_t session_num = 0;
  int64_t seq = 0;
  int64_t at = 0;
};

Result<SearchPage> SearchTx(Tx& tx, const SearchQuery& q) {
  DSH_ASSIGN_OR_RETURN(std::vector<std::string> terms, SearchTerms(q.text));
  if (q.limit < 1 || q.limit > 100) return InvalidArguments("`limit` must be between 1 and 100");
  int64_t cursor = std::numeric_limits<int64_t>::max();
  if (q.before) {
    const std::string& b = *q.before;
    bool digits = !b.empty() && b.size() <= 18 && std::all_of(b.begin(), b.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return InvalidArguments("`before` must be the `next` of an earlier page of results");
    cursor = std::stoll(b);
  }
  const bool sqlite = tx.dialect() == Dialect::kSqlite;
  const std::string match = MatchExpression(tx.dialect(), terms);
  // SQLite: one statement, stepped only as far as the page needs (FTS5
  // merges a prefix's doclists once per statement, so chunks would pay that
  // again each). PostgreSQL: chunks, since libpq reads a whole result.
  const char* chunk_sql =
      sqlite ? "SELECT rowid, session_num, seq, at FROM search_fts WHERE search_fts MATCH ? AND rowid < ? "
               "ORDER BY rowid DESC LIMIT ?"
             : "SELECT id, session_num, seq, at FROM search_docs WHERE tsv @@ to_tsquery('simple', ?) AND id < ? "
               "ORDER BY id DESC LIMIT ?";
  const int64_t chunk = sqlite ? kScanBudget + 1 : kScanChunk;
  static constexpr std::string_view kPageFull = "page_full";  // stops a statement early
  std::vector<Match> hits;
  std::set<int64_t> seen;
  int64_t scanned = 0;
  bool exhausted = false;
  while (true) {
    int64_t rows = 0;
    bool page_full = false;  // a match after the page's last one is in hand
    Status st = tx.Query(chunk_sql, {std::string_view(match), cursor, chunk}, [&](const Row& row) {
      ++rows;
      Match m{row.Int(0), row.Int(1), row.Int(2), row.Int(3)};
      bool is_new = !seen.contains(m.session_num);
      if ((is_new && static_cast<int64_t>(hits.size()) >= q.limit) || scanned >= kScanBudget) {
        // The first match of a session this page has no room for (or the
        // page read enough): the next page starts here.
        page_full = true;
        return Status(std::string(kPageFull), "");
      }
      ++scanned;
      cursor = m.doc;
      if (is_new) {
        seen.insert(m.session_num);
        hits.push_back(m);
      }
      return Status::Ok();
    });
    if (!st.ok() && st.code() != kPageFull) return st;
    if (page_full) break;
    if (rows < chunk) {
      exhausted = true;
      break;
    }
  }
  SearchPage page;
  if (hits.empty()) return page;

  std::vector<Value> params;
  std::map<int64_t, std::string> snippets;
  for (const auto& h : hits) params.emplace_back(h.doc);
  DSH_RETURN_IF_ERROR(tx.Query(std::string(sqlite ? "SELECT rowid, body FROM search_fts WHERE rowid IN "
                                                  : "SELECT id, body FROM search_docs WHERE id IN ") +
                                   InList(hits.size()),
                               params, [&](const Row& row) {
                                 snippets[row.Int(0)] = Snippet(row.Text(1), terms);
                                 return Status::Ok();
                               }));

  params.clear();
  for (const auto& h : hits) params.emplace_back(h.session_num);
  struct SessionRow {
    std::string id;
    Titles titles;
    bool archived = false;
  };
  std::map<int64_t, SessionRow> sessions;
  DSH_RETURN_IF_ERROR(tx.Query(
      "SELECT num, id, title_user, title_generated, title_fallback, archived FROM sessions WHERE num IN " +
          InList(hits.size()),
      params, [&](const Row& row) {
        sessions[row.Int(0)] =
            SessionRow{row.String(1), Titles{row.OptString(2), row.OptString(3), row.OptString(4)}, row.Int(5) != 0};
        return Status::Ok();
      }));
  for (const auto& h : hits) {
    auto s = sessions.find(h.session_num);
    if (s == sessions.end()) continue;
    page.results.push_back(SearchHit{.session_id = s->second.id,
                                     .title = s->second.titles.Effective(),
                                     .seq = h.seq,
                                     .at = h.at,
                                     .snippet = snippets[h.doc],
                                     .archived = s->second.archived});
  }
  if (!exhausted) page.next = std::to_string(cursor);
  return page;
}

}  // namespace

Result<std::vector<std::string>> SearchTerms(std::string_view text) {
  std::vector<std::string> terms;
  size_t i = 0;
  while (i < text.size() && terms.size() < kMaxTerms) {
    while (i < text.size() && !IsWordByte(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && IsWordByte(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) {
      std::string term(Utf8Prefix(text.substr(start, i - start), kMaxTermBytes));
      std::transform(term.begin(), term.end(), term.begin(),
                     [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
      terms.push_back(std::move(term));
    }
  }
  if (terms.empty()) return InvalidArguments("`q` must hold at least one word (letters or digits)");
  return terms;
}

std::string SearchableText(const Event& event) {
  namespace et = event_types;
  if (event.type != et::kUserMessage && event.type != et::kAssistantMessage) return "";
  auto text = event.data.find("text");
  if (text == event.data.end() || !text->is_string()) return "";
  std::string_view s = text->get_ref<const std::string&>();
  std::string prompt;
  if (event.type == et::kUserMessage && s.starts_with("<loop>")) {
    prompt = LoopPrompt(s);
    s = prompt;
  }
  return std::string(Utf8Prefix(s, kMaxTextBytes));
}

std::vector<store::Migration> SearchIndex::Migrations() {
  return {
      {"search",
       1,
       {
           // The texts: SQLite keeps them in an FTS5 table (its rowid is
           // the document's id, in the order they were indexed); PostgreSQL
           // in a table with a generated tsvector under a GIN index.
           "/*sqlite: CREATE VIRTUAL TABLE search_fts USING fts5(body, session_num UNINDEXED, seq UNINDEXED, "
           "at UNINDEXED, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3 4 5 6')*/",
           "/*postgres: CREATE TABLE search_docs (id BIGSERIAL PRIMARY KEY, session_num BIGINT NOT NULL, "
           "seq BIGINT NOT NULL, at BIGINT NOT NULL, body TEXT NOT NULL, "
           "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED)*/",
           "/*postgres: CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv)*/",
           // Where the index is in each session's log, and its title's
           // document. A session without a row is indexed from its start.
           "CREATE TABLE search_state ("
           " session_num BIGINT PRIMARY KEY,"
           " indexed_seq BIGINT NOT NULL,"
           " title_doc BIGINT,"
           " title TEXT)",
       }},
  };
}

SearchIndex::SearchIndex(store::Database& db, const Clock& clock, EventHub* hub, SearchIndexOptions options)
    : db_(db), clock_(clock), options_(options) {
  if (hub != nullptr) {
    appends_ = hub->SubscribeAll([this](const std::string& session_id, const std::vector<Event>&) { Enqueue(session_id, true); });
  }
}

SearchIndex::~SearchIndex() {
  appends_.reset();
  Stop();
}

void SearchIndex::Start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Run(); });
}

void SearchIndex::Stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SearchIndex::Enqueue(const std::string& session_id, bool append) {
  std::lock_guard lk(mu_);
  if (append) last_append_ = std::chrono::steady_clock::now();
  EnqueueLocked(session_id);
  cv_.notify_all();
}

void SearchIndex::EnqueueLocked(const std::string& session_id) {
  if (queued_.insert(session_id).second) queue_.push_back(session_id);
  stats_.queued = static_cast<int64_t>(queue_.size());
}

std::vector<std::string> SearchIndex::TakeBatchLocked() {
  std::vector<std::string> batch;
  while (!queue_.empty() && batch.size() < static_cast<size_t>(options_.slice_events)) {
    queued_.erase(queue_.front());
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  stats_.queued = static_cast<int64_t>(queue_.size());
  return batch;
}

Result<size_t> SearchIndex::QueueBehind() {
  DSH_ASSIGN_OR_RETURN(std::vector<std::string> ids, db_.ReadValue<std::vector<std::string>>([](Tx& tx) -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT s.id FROM sessions s LEFT JOIN search_state st ON st.session_num = s.num "
                                 "WHERE s.last_seq > COALESCE(st.indexed_seq, 0) ORDER BY s.updated_at, s.id",
                                 {}, [&](const Row& row) {
                                   out.push_back(row.String(0));
                                   return Status::Ok();
                                 }));
    return out;
  }));
  for (const auto& id : ids) Enqueue(id, false);
  return ids.size();
}

Status SearchIndex::IndexSlice(std::vector<std::string> sessions) {
  struct Outcome {
    int64_t events = 0;
    int64_t documents = 0;
    std::vector<std::string> more;
  };
  int64_t now_ms = ToUnixMillis(clock_.Now());
  auto out = db_.WriteValue<Outcome>([&](Tx& tx) -> Result<Outcome> {
    Outcome o;
    int64_t budget = options_.slice_events;
    for (size_t i = 0; i < sessions.size(); ++i) {
      if (budget <= 0) {
        o.more.insert(o.more.end(), sessions.begin() + static_cast<std::ptrdiff_t>(i), sessions.end());
        break;
      }
      DSH_ASSIGN_OR_RETURN(SessionProgress p, IndexSessionTx(tx, sessions[i], budget, now_ms));
      budget -= p.events;
      o.events += p.events;
      o.documents += p.documents;
      if (p.more) o.more.push_back(sessions[i]);
    }
    return o;
  });
  std::lock_guard lk(mu_);
  ++stats_.jobs;
  if (!out.ok()) {
    ++stats_.failures;
    for (auto& s : sessions) EnqueueLocked(s);
  } else {
    stats_.events_indexed += out->events;
    stats_.documents += out->documents;
    for (auto& s : out->more) EnqueueLocked(s);
  }
  cv_.notify_all();
  return out.status();
}

Result<int64_t> SearchIndex::CatchUp() {
  DSH_RETURN_IF_ERROR(QueueBehind().status());
  int64_t before = stats().events_indexed;
  while (true) {
    std::vector<std::string> batch;
    {
      std::lock_guard lk(mu_);
      batch = TakeBatchLocked();
    }
    if (batch.empty()) break;
    DSH_RETURN_IF_ERROR(IndexSlice(std::move(batch)));
  }
  return stats().events_indexed - before;
}

void SearchIndex::Run() {
  using Clock = std::chrono::steady_clock;
  auto behind = QueueBehind();
  if (!behind.ok()) spdlog::warn("search index: cannot find what to index: {}", behind.status().ToString());
  size_t initial = behind.ok() ? *behind : 0;
  if (initial > 0) {
    spdlog::info("search index: {} sessions have text the index does not hold yet; indexing them in the background",
                 initial);
  }
  auto last_progress = Clock::now();
  auto last_rescan = Clock::now();
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      if (initial > 0) {
        spdlog::info("search index: caught up ({} events indexed)", stats_.events_indexed);
        initial = 0;
      }
      cv_.wait_until(lk, last_rescan + options_.rescan, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      if (queue_.empty()) {
        lk.unlock();
        last_rescan = Clock::now();
        if (auto r = QueueBehind(); !r.ok()) spdlog::warn("search index: rescan failed: {}", r.status().ToString());
        lk.lock();
        continue;
      }
      // Appends come in bursts: index what a short while brings together.
      cv_.wait_for(lk, options_.gather, [&] { return stop_; });
      if (stop_) break;
    }
    std::vector<std::string> batch = TakeBatchLocked();
    lk.unlock();
    auto began = Clock::now();
    Status st = IndexSlice(std::move(batch));
    auto took = Clock::now() - began;
    if (!st.ok()) spdlog::warn("search index: indexing failed (will retry): {}", st.ToString());
    if (initial > 0 && Clock::now() - last_progress >= options_.progress_every) {
      last_progress = Clock::now();
      spdlog::info("search index: {} sessions left to index, {} events indexed so far", stats().queued,
                   stats().events_indexed);
    }
    lk.lock();
    if (!st.ok()) {
      cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stop_; });
    } else if (!queue_.empty()) {
      std::chrono::nanoseconds rest = options_.pause;
      if (Clock::now() - last_append_ < std::chrono::seconds(1)) {
        auto yield = std::chrono::duration_cast<std::chrono::nanoseconds>(took * (1 / options_.share_while_busy - 1));
        rest = std::clamp<std::chrono::nanoseconds>(yield, options_.pause, std::chrono::seconds(2));
      }
      cv_.wait_for(lk, rest, [&] { return stop_; });
    }
  }
}

Result<SearchPage> SearchIndex::Search(const SearchQuery& query) {
  return db_.ReadValue<SearchPage>([&](Tx& tx) { return SearchTx(tx, query); });
}

void SearchIndex::SearchAsync(SearchQuery query, std::function<void(Result<SearchPage>)> done) {
  auto page = std::make_shared<Result<SearchPage>>(SearchPage{});
  db_.Read([query = std::move(query), page](Tx& tx) -> Status {
        *page = SearchTx(tx, query);
        return page->status();
      },
      [page, done = std::move(done)](Status st) {
        if (!st.ok()) return done(st);
        done(std::move(*page));
      });
}

SearchIndex::Stats SearchIndex::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

bool SearchIndex::WaitFor(const std::function<bool(const Stats&)>& pred, std::chrono::milliseconds timeout) const {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return pred(stats_); });
}

}  // namespace dsh::session
