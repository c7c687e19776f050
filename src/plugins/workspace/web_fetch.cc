// fetch: one blocking GET through a curl easy handle driven by its own multi
// handle, so a cancel can wake the wait at once (curl_multi_wakeup). Every
// connection goes through an agent::AddressGuard; HTML is reduced to text with
// libxml2's forgiving HTML parser.

#include "plugins/workspace/web_fetch.h"

#include <curl/curl.h>
#include <iconv.h>
#include <libxml/HTMLparser.h>
#include <libxml/encoding.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <mutex>
#include <string_view>
#include <utility>

namespace dsh::workspace {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kMaxBytesLimit = int64_t{1} << 30;
constexpr int kMaxRedirectsLimit = 50;
// The longest the loop sleeps in curl_multi_poll; curl's own timers and a
// cancel's wakeup end it earlier.
constexpr int kMaxPollMs = 1000;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
  });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Status Unavailable(std::string message) { return Status(codes::kUnavailable, std::move(message)); }

// ---------------------------------------------------------------------------
// Text.

void AppendReplacement(std::string& out) { out += "\xEF\xBF\xBD"; }

// The length of the valid UTF-8 sequence at the start of `s`; 0 when it is
// not one, -1 when `s` ends inside what would be a valid one.
int Utf8SequenceLength(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // no overlongs
    if (c == 0xED) high = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return -1;
    const auto b = static_cast<unsigned char>(s[i]);
    if (i == 1 ? (b < low || b > high) : (b & 0xC0) != 0x80) return 0;
  }
  return length;
}

// `s` with each invalid byte replaced by U+FFFD. When `cut`, a character cut
// off at the end is dropped rather than replaced.
std::string SanitizeUtf8(std::string_view s, bool cut) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    int n = Utf8SequenceLength(s);
    if (n == -1 && cut) break;
    if (n <= 0) {
      AppendReplacement(out);
      s.remove_prefix(1);
      continue;
    }
    out.append(s.substr(0, static_cast<size_t>(n)));
    s.remove_prefix(static_cast<size_t>(n));
  }
  return out;
}

bool IsUtf8Charset(const std::string& charset) {
  return charset.empty() || charset == "utf-8" || charset == "utf8" || charset == "us-ascii" ||
         charset == "ascii";
}

// `bytes` in `charset` as UTF-8, characters that do not convert replaced;
// nullopt when iconv does not know the charset.
std::optional<std::string> ConvertToUtf8(std::string_view bytes, const std::string& charset, bool cut) {
  iconv_t cd = iconv_open("UTF-8", charset.c_str());
  const auto failed =
      reinterpret_cast<iconv_t>(-1);  // NOLINT(performance-no-int-to-ptr): iconv's error value
  if (cd == failed) return std::nullopt;
  std::string in(bytes);
  std::string out;
  char* in_ptr = in.data();
  size_t in_left = in.size();
  char buffer[4096];
  while (in_left > 0) {
    char* out_ptr = buffer;
    size_t out_left = sizeof buffer;
    size_t rc = iconv(cd, &in_ptr, &in_left, &out_ptr, &out_left);
    out.append(buffer, static_cast<size_t>(out_ptr - buffer));
    if (rc != static_cast<size_t>(-1) || errno == E2BIG) continue;
    if (errno == EINVAL && cut) break;  // a character cut off at the end
    AppendReplacement(out);             // EILSEQ, or EINVAL at a natural end
    ++in_ptr;
    --in_left;
  }
  char* out_ptr = buffer;  // the end of a stateful encoding's shift sequence
  size_t out_left = sizeof buffer;
  iconv(cd, nullptr, nullptr, &out_ptr, &out_left);
  out.append(buffer, static_cast<size_t>(out_ptr - buffer));
  iconv_close(cd);
  return SanitizeUtf8(out, false);
}

std::string TextToUtf8(std::string_view bytes, const std::string& charset, bool cut) {
  if (!IsUtf8Charset(charset)) {
    if (std::optional<std::string> converted = ConvertToUtf8(bytes, charset, cut))
      return *std::move(converted);
  }
  return SanitizeUtf8(bytes, cut);
}

// The media type of a Content-Type value, in lower case, and its charset.
struct ContentType {
  std::string media_type;
  std::string charset;  // lower case, "" when not given
};

ContentType ParseContentType(std::string_view value) {
  ContentType out;
  size_t semicolon = value.find(';');
  out.media_type = Lower(Trim(value.substr(0, semicolon)));
  while (semicolon != std::string_view::npos) {
    value.remove_prefix(semicolon + 1);
    semicolon = value.find(';');
    std::string_view param = Trim(value.substr(0, semicolon));
    size_t equals = param.find('=');
    if (equals == std::string_view::npos || Lower(Trim(param.substr(0, equals))) != "charset") continue;
    std::string_view charset = Trim(param.substr(equals + 1));
    if (charset.size() >= 2 && charset.front() == '"' && charset.back() == '"') {
      charset = charset.substr(1, charset.size() - 2);
    }
    out.charset = Lower(charset);
  }
  return out;
}

enum class BodyKind { kHtml, kText, kBinary };

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

BodyKind KindOf(const std::string& media_type, std::string_view body) {
  if (media_type == "text/html" || media_type == "application/xhtml+xml") return BodyKind::kHtml;
  if (media_type.rfind("text/", 0) == 0 || EndsWith(media_type, "+json") || EndsWith(media_type, "+xml")) {
    return BodyKind::kText;
  }
  static constexpr std::string_view kTextApplications[] = {
      "application/json",         "application/xml",      "application/javascript", "application/ecmascript",
      "application/x-javascript", "application/x-ndjson", "application/yaml",       "application/x-yaml",
      "application/toml",         "application/x-sh",     "application/sql",        "application/graphql",
  };
  for (std::string_view type : kTextApplications) {
    if (media_type == type) return BodyKind::kText;
  }
  if (!media_type.empty()) return BodyKind::kBinary;
  // No type given: sniff.
  std::string head = Lower(Trim(body.substr(0, 512)));
  if (head.rfind("<!doctype html", 0) == 0 || head.rfind("<html", 0) == 0) return BodyKind::kHtml;
  if (body.find('\0') != std::string_view::npos) return BodyKind::kBinary;
  return BodyKind::kText;
}

// ---------------------------------------------------------------------------
// HTML to text.

bool IsHtmlSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Builds readable text: collapses whitespace, and turns the structure the
// walker reports into line breaks and prefixes.
class TextBuilder {
 public:
  // Text of the document; whitespace collapsed unless `verbatim`.
  void Text(std::string_view s, bool verbatim) {
    if (verbatim) {
      Flush();
      for (char c : s) {
        if (c != '\r') out_ += c;
      }
      return;
    }
    while (!s.empty()) {
      // A no-break space counts as a space: it separates words.
      if (IsHtmlSpace(s.front()) || s.rfind("\xC2\xA0", 0) == 0) {
        pending_space_ = true;
        s.remove_prefix(s.front() == '\xC2' ? 2 : 1);
        continue;
      }
      Flush();
      out_ += s.front();
      s.remove_prefix(1);
    }
  }

  // Written as is right after what came before (no pending space).
  void Attach(std::string_view s) {
    while (!out_.empty() && out_.back() == ' ') out_.pop_back();
    out_ += s;
  }

  // Ends the line (1) or the paragraph (2) before the next text.
  void Break(int lines) { pending_breaks_ = std::max(pending_breaks_, lines); }
  // <br>: one more line break, at most a blank line.
  void LineBreak() { pending_breaks_ = std::min(pending_breaks_ + 1, 2); }
  // Written at the start of the next text's line (which the call starts).
  void Prefix(std::string prefix) {
    Break(1);
    prefix_ = std::move(prefix);
  }
  // Before the next text on the same line.
  void Separator(std::string separator) { separator_ = std::move(separator); }

  bool AtLineStart() const { return out_.empty() || out_.back() == '\n'; }
  size_t size() const { return out_.size(); }
  std::string_view Since(size_t position) const { return std::string_view(out_).substr(position); }

  std::string Finish() {
    std::string text;
    size_t begin = 0;
    while (begin < out_.size()) {  // no spaces at line ends
      size_t end = out_.find('\n', begin);
      if (end == std::string::npos) end = out_.size();
      std::string_view line(out_.data() + begin, end - begin);
      while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
      text.append(line);
      if (end < out_.size()) text += '\n';
      begin = end + 1;
    }
    return std::string(Trim(text));
  }

 private:
  void Flush() {
    if (pending_breaks_ > 0 && !out_.empty()) {
      while (!out_.empty() && out_.back() == ' ') out_.pop_back();
      int have = 0;
      for (auto it = out_.rbegin(); it != out_.rend() && *it == '\n'; ++it) ++have;
      for (; have < pending_breaks_; ++have) out_ += '\n';
    }
    if (pending_breaks_ > 0 || AtLineStart()) {
      out_ += prefix_;
      prefix_.clear();
      separator_.clear();
    } else if (!separator_.empty()) {
      Attach(separator_);
      separator_.clear();
    } else if (pending_space_ && out_.back() != ' ') {
      out_ += ' ';
    }
    pending_breaks_ = 0;
    pending_space_ = false;
  }

  std::string out_;
  int pending_breaks_ = 0;
  bool pending_space_ = false;
  std::string prefix_;
  std::string separator_;
};

std::string_view NameOf(const xmlNode* node) {
  return node->name == nullptr ? std::string_view() : reinterpret_cast<const char*>(node->name);
}

bool NameIn(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::optional<std::string> Attribute(const xmlNode* node, const char* name) {
  xmlChar* value = xmlGetProp(node, reinterpret_cast<const xmlChar*>(name));
  if (value == nullptr) return std::nullopt;
  std::string out(reinterpret_cast<const char*>(value));
  xmlFree(value);
  return out;
}

int HeadingLevel(std::string_view name) {
  if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') return name[1] - '0';
  return 0;
}

// Blocks set apart by a blank line.
bool IsParagraph(std::string_view name) {
  return NameIn(name, {"p", "blockquote", "table", "dl", "figure", "hr"});
}

// Blocks on lines of their own.
bool IsLineBlock(std::string_view name) {
  return NameIn(name, {"div",    "section",  "article", "main",       "header", "footer",  "nav",
                       "aside",  "address",  "center",  "dd",         "dt",     "details", "summary",
                       "dialog", "fieldset", "legend",  "figcaption", "form",   "caption", "hgroup",
                       "menu",   "dir",      "tr",      "body",       "html"});
}

bool IsAbsoluteHttpUrl(std::string_view url) {
  std::string lower = Lower(url.substr(0, 8));
  return lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0;
}

// "https://example.com/" and "example.com" say the same as a link's text.
bool SameAsText(std::string_view href, std::string_view text) {
  auto bare = [](std::string_view s) {
    for (std::string_view scheme : {"https://", "http://"}) {
      if (Lower(s.substr(0, scheme.size())) == scheme) s.remove_prefix(scheme.size());
    }
    while (!s.empty() && s.back() == '/') s.remove_suffix(1);
    return s;
  };
  return bare(href) == bare(text);
}

// Walks the document tree (iteratively: pages nest deeply) into a TextBuilder.
class HtmlToText {
 public:
  std::string Convert(xmlDoc* doc) {
    std::string title;
    if (const xmlNode* node = FindElement(reinterpret_cast<xmlNode*>(doc), "title")) {
      TextBuilder t;
      AddText(t, node, false);
      title = t.Finish();
    }
    Walk(reinterpret_cast<xmlNode*>(doc));
    std::string body = text_.Finish();
    if (title.empty()) return body;
    return body.empty() ? title : title + "\n\n" + body;
  }

 private:
  struct Link {
    std::string href;
    size_t start;
  };

  static const xmlNode* FindElement(const xmlNode* root, std::string_view name) {
    for (const xmlNode* n = root->children; n != nullptr; n = n->next) {
      if (n->type != XML_ELEMENT_NODE) continue;
      if (NameOf(n) == name) return n;
      if (const xmlNode* found = FindElement(n, name)) return found;
    }
    return nullptr;
  }

  static void AddText(TextBuilder& t, const xmlNode* root, bool verbatim) {
    for (const xmlNode* n = root->children; n != nullptr; n = n->next) {
      if (n->type == XML_TEXT_NODE && n->content != nullptr) {
        t.Text(reinterpret_cast<const char*>(n->content), verbatim);
      }
    }
  }

  void Walk(xmlNode* root) {
    xmlNode* n = root;
    while (n != nullptr) {
      const bool descend = Enter(n);
      if (descend && n->children != nullptr) {
        n = n->children;
        continue;
      }
      if (descend) Leave(n);
      while (n != root && n->next == nullptr) {  // after a last child, leave its parent
        n = n->parent;
        if (n == nullptr) return;
        Leave(n);
      }
      if (n == root) return;
      n = n->next;
    }
  }

  // False when the node's children are not text to show.
  bool Enter(xmlNode* node) {
    if (node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) {
      if (node->content == nullptr) return false;
      std::string_view content(reinterpret_cast<const char*>(node->content));
      if (pre_ > 0 && pre_start_) {  // a newline right after <pre> is not content
        pre_start_ = false;
        if (content.rfind("\r\n", 0) == 0) content.remove_prefix(2);
        if (content.rfind('\n', 0) == 0) content.remove_prefix(1);
      }
      text_.Text(content, pre_ > 0);
      return false;
    }
    if (node->type == XML_HTML_DOCUMENT_NODE || node->type == XML_DOCUMENT_NODE) return true;
    if (node->type != XML_ELEMENT_NODE) return false;  // comments, processing instructions
    const std::string_view name = NameOf(node);
    if (NameIn(name, {"head", "script", "style", "noscript", "template", "svg", "iframe", "object", "embed",
                      "canvas", "select", "datalist", "audio", "video", "title"}) ||
        xmlHasProp(node, reinterpret_cast<const xmlChar*>("hidden")) != nullptr) {
      return false;
    }
    if (int level = HeadingLevel(name)) {
      text_.Break(2);
      text_.Prefix(std::string(static_cast<size_t>(level), '#') + " ");
    } else if (name == "br") {
      text_.LineBreak();
    } else if (name == "li") {
      text_.Prefix(std::string(2 * static_cast<size_t>(std::max(lists_ - 1, 0)), ' ') + "- ");
    } else if (name == "ul" || name == "ol") {
      text_.Break(lists_ == 0 ? 2 : 1);
      ++lists_;
    } else if (name == "pre") {
      text_.Break(2);
      ++pre_;
      pre_start_ = true;
    } else if (IsParagraph(name)) {
      text_.Break(2);
    } else if (name == "td" || name == "th") {
      if (!text_.AtLineStart()) text_.Separator(" | ");
    } else if (IsLineBlock(name)) {
      text_.Break(1);
    } else if (name == "a") {
      std::optional<std::string> href = Attribute(node, "href");
      links_.push_back(Link{href ? std::string(Trim(*href)) : "", text_.size()});
    }
    return true;
  }

  void Leave(xmlNode* node) {
    if (node->type != XML_ELEMENT_NODE) return;
    const std::string_view name = NameOf(node);
    if (HeadingLevel(name) != 0 || IsParagraph(name)) {
      text_.Break(2);
    } else if (name == "ul" || name == "ol") {
      --lists_;
      text_.Break(lists_ == 0 ? 2 : 1);
    } else if (name == "pre") {
      --pre_;
      text_.Break(2);
    } else if (name == "li" || IsLineBlock(name)) {
      text_.Break(1);
    } else if (name == "a" && !links_.empty()) {
      Link link = std::move(links_.back());
      links_.pop_back();
      std::string_view shown = Trim(text_.Since(std::min(link.start, text_.size())));
      if (!shown.empty() && IsAbsoluteHttpUrl(link.href) && !SameAsText(link.href, shown)) {
        text_.Attach(" (" + link.href + ")");
      }
    }
  }

  TextBuilder text_;
  int lists_ = 0;
  int pre_ = 0;
  bool pre_start_ = false;
  std::vector<Link> links_;
};

// True when libxml2 can decode `charset`.
bool LibxmlKnowsCharset(const std::string& charset) {
  xmlCharEncodingHandlerPtr handler = xmlFindCharEncodingHandler(charset.c_str());
  if (handler == nullptr) return false;
  xmlCharEncCloseFunc(handler);
  return true;
}

std::string HtmlToReadableText(const std::string& body, const std::string& charset, const std::string& url) {
  // Without a charset from the header, the parser finds one in a <meta>
  // (or assumes its default).
  const char* encoding = !charset.empty() && LibxmlKnowsCharset(charset) ? charset.c_str() : nullptr;
  std::unique_ptr<xmlDoc, decltype(&xmlFreeDoc)> doc(
      htmlReadMemory(body.data(), static_cast<int>(body.size()), url.c_str(), encoding,
                     HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET),
      &xmlFreeDoc);
  if (!doc) return "";
  return SanitizeUtf8(HtmlToText().Convert(doc.get()), false);
}

// ---------------------------------------------------------------------------
// The transfer.

// What curl's callbacks collect. Touched only by the fetching thread.
struct Transfer {
  size_t max_bytes = 0;
  std::string body;
  std::string content_type;  // the last response's header value
  bool truncated = false;

  static size_t OnBody(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    const size_t n = size * count;
    const size_t room = t.max_bytes - t.body.size();
    if (n <= room) {
      t.body.append(data, n);
      return n;
    }
    t.body.append(data, room);
    t.truncated = true;
    return 0;  // stops the transfer (CURLE_WRITE_ERROR, which Fetch expects)
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    const size_t n = size * count;
    std::string_view line(data, n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response: interim, a redirect, or the final one
      t.content_type.clear();
      t.body.clear();
      t.truncated = false;
      return n;
    }
    size_t colon = line.find(':');
    if (colon != std::string_view::npos && Lower(Trim(line.substr(0, colon))) == "content-type") {
      t.content_type = std::string(Trim(line.substr(colon + 1)));
    }
    return n;
  }
};

// Lets a cancel wake the fetching thread's curl_multi_poll. Shared with the
// CancelToken's callback, which can outlive the fetch (the token keeps its
// callbacks): Disarm ends its use of the multi handle.
class Waker {
 public:
  explicit Waker(CURLM* multi) : multi_(multi) {}
  void Wake() {
    std::lock_guard lock(mu_);
    if (multi_ != nullptr) curl_multi_wakeup(multi_);
  }
  void Disarm() {
    std::lock_guard lock(mu_);
    multi_ = nullptr;
  }

 private:
  std::mutex mu_;
  CURLM* multi_;  // GUARDED_BY(mu_)
};

Status ValidateUrl(const std::string& url) {
  if (url.empty()) return InvalidArguments("`url` is empty");
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  if (!parsed) return Internal("cannot parse URLs: out of memory");
  if (CURLUcode rc = curl_url_set(parsed.get(), CURLUPART_URL, url.c_str(), CURLU_NON_SUPPORT_SCHEME);
      rc != CURLUE_OK) {
    return InvalidArguments("`url` is not a valid URL: " + url + " (" + curl_url_strerror(rc) + ")");
  }
  char* scheme = nullptr;
  if (curl_url_get(parsed.get(), CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    return InvalidArguments("`url` has no scheme: " + url);
  }
  const std::string lower = Lower(scheme);
  curl_free(scheme);
  if (lower != "http" && lower != "https") {
    return InvalidArguments("`url` must be an http or https URL, not " + lower + ": " + url);
  }
  return Status::Ok();
}

Status ValidateOptions(const FetchOptions& options) {
  if (options.max_bytes <= 0 || options.max_bytes > kMaxBytesLimit) {
    return InvalidArguments("`max_bytes` must be between 1 and " + std::to_string(kMaxBytesLimit) + ", not " +
                            std::to_string(options.max_bytes));
  }
  if (options.timeout.count() <= 0) return InvalidArguments("the fetch timeout must be positive");
  if (options.connect_timeout.count() <= 0) return InvalidArguments("the connect timeout must be positive");
  if (options.max_redirects < 0 || options.max_redirects > kMaxRedirectsLimit) {
    return InvalidArguments("`max_redirects` must be between 0 and " + std::to_string(kMaxRedirectsLimit));
  }
  return Status::Ok();
}

// The options whose failure would weaken the rules are checked.
Status Configure(CURL* h, const std::string& url, const FetchOptions& options, Transfer& transfer,
                 char* error_buffer) {
  const auto timeout = static_cast<long>(options.timeout.count());
  const auto connect_timeout = static_cast<long>(std::min(options.connect_timeout, options.timeout).count());
  if (curl_easy_setopt(h, CURLOPT_URL, url.c_str()) != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L) != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_MAXREDIRS, static_cast<long>(options.max_redirects)) != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout) != CURLE_OK ||
      curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout) != CURLE_OK) {
    return Internal("curl does not take the options of a fetch");
  }
  curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // whatever curl can decompress
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dsh-fetch/1");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Transfer::OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
  return Status::Ok();
}

// Drives the transfer to its end; the curl result, or nullopt when cancelled.
Result<std::optional<CURLcode>> Run(CURLM* multi, CURL* easy, agent::CancelToken* cancel) {
  auto waker = std::make_shared<Waker>(multi);
  if (cancel != nullptr) cancel->OnCancel([waker] { waker->Wake(); });
  std::optional<CURLcode> result;
  Status error;
  for (;;) {
    if (cancel != nullptr && cancel->cancelled()) break;
    int running = 0;
    if (CURLMcode mc = curl_multi_perform(multi, &running); mc != CURLM_OK) {
      error = Internal(std::string("curl: ") + curl_multi_strerror(mc));
      break;
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) result = msg->data.result;
    }
    if (result) break;
    curl_multi_poll(multi, nullptr, 0, kMaxPollMs, nullptr);
  }
  waker->Disarm();
  if (!error.ok()) return error;
  return result;
}

Status TransferError(CURLcode code, const char* error_buffer, const std::string& url, CURL* easy,
                     const FetchOptions& options) {
  std::string reason = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
  char* effective = nullptr;
  curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &effective);
  const std::string where = effective != nullptr && url != effective ? url + " (at " + effective + ")" : url;
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return Unavailable("fetching " + where + " timed out: " + reason);
    case CURLE_TOO_MANY_REDIRECTS:
      return Unavailable("fetching " + url + " was redirected more than " +
                         std::to_string(options.max_redirects) + " times");
    case CURLE_UNSUPPORTED_PROTOCOL:
      return Unavailable("fetching " + url + " was redirected to a URL that is not http or https: " + reason);
    default:
      return Unavailable("cannot fetch " + where + ": " + reason);
  }
}

}  // namespace

Result<Json> Fetch(const std::string& url, const FetchOptions& options) {
  DSH_RETURN_IF_ERROR(ValidateUrl(url));
  DSH_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.cancel && options.cancel->cancelled()) {
    return Status(codes::kCancelled, "the fetch of " + url + " was cancelled");
  }
  GlobalInit();

  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(), &curl_multi_cleanup);
  if (!easy || !multi) return Internal("cannot create a curl handle");
  CURL* h = easy.get();
  Transfer transfer;
  transfer.max_bytes = static_cast<size_t>(options.max_bytes);
  char error_buffer[CURL_ERROR_SIZE] = {};
  agent::AddressGuard guard(agent::AddressGuardOptions{options.allow_private, options.public_for_testing});
  DSH_RETURN_IF_ERROR(Configure(h, url, options, transfer, error_buffer));
  DSH_RETURN_IF_ERROR(guard.Install(h));

  if (CURLMcode mc = curl_multi_add_handle(multi.get(), h); mc != CURLM_OK) {
    return Internal(std::string("cannot start a fetch: ") + curl_multi_strerror(mc));
  }
  Result<std::optional<CURLcode>> ran = Run(multi.get(), h, options.cancel.get());
  curl_multi_remove_handle(multi.get(), h);
  if (!ran.ok()) return ran.status();
  if (!ran.value()) return Status(codes::kCancelled, "the fetch of " + url + " was cancelled");
  const CURLcode code = **ran;
  if (code == CURLE_COULDNT_CONNECT && guard.refusal()) return *guard.refusal();
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && transfer.truncated)) {
    return TransferError(code, error_buffer, url, h, options);
  }

  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  char* effective = nullptr;
  curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &effective);
  const std::string final_url = effective != nullptr ? effective : url;

  const ContentType type = ParseContentType(transfer.content_type);
  std::string text;
  switch (KindOf(type.media_type, transfer.body)) {
    case BodyKind::kHtml:
      text = HtmlToReadableText(transfer.body, type.charset, final_url);
      break;
    case BodyKind::kText:
      text = TextToUtf8(transfer.body, type.charset, transfer.truncated);
      break;
    case BodyKind::kBinary:
      text = "binary content (" + (type.media_type.empty() ? "of no given type" : type.media_type) + ", " +
             (transfer.truncated ? "more than " : "") + std::to_string(transfer.body.size()) +
             " bytes) not shown";
      break;
  }
  return Json{{"url", url},
              {"final_url", final_url},
              {"status", status},
              {"content_type", SanitizeUtf8(transfer.content_type, false)},
              {"bytes", transfer.body.size()},
              {"truncated", transfer.truncated},
              {"text", std::move(text)}};
}

}  // namespace dsh::workspace
