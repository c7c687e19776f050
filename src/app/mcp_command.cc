#include "app/mcp_command.h"

#include <cctype>
#include <condition_variable>
#include <iostream>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <variant>

#include "app/host_client.h"
#include "base/log.h"
#include "server/mcp_endpoint.h"

namespace dsh::app {
namespace {

using server::McpEndpoint;
using server::McpMessage;

// JSON-RPC's "server error" range: the host could not answer.
constexpr int kHostError = -32000;

std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

Json HostError(const Json& id, const Status& st) {
  return McpEndpoint::ErrorResponse(id, kHostError, st.ToString(),
                                    Json{{"code", st.code()}, {"message", st.message()}});
}

class McpProxy {
 public:
  McpProxy(const McpProxyOptions& options, std::ostream& out, std::ostream& err)
      : options_(options), out_(out), err_(err) {
    path_ = "/mcp";
    if (options_.session_id) path_ += "?session_id=" + PercentEncode(*options_.session_id);
  }

  int Run(std::istream& in) {
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      auto json = ParseJson(line);
      if (!json.ok()) {
        Write(McpEndpoint::ParseErrorResponse(json.status().message()));
        continue;
      }
      auto parsed = McpEndpoint::Parse(*json);
      if (const Json* error = std::get_if<Json>(&parsed)) {
        Write(*error);
        continue;
      }
      Start(std::get<McpMessage>(std::move(parsed)), std::move(line));
    }
    JoinAll();
    return kExitOk;
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;  // GUARDED_BY(mu_)
  };

  // Forwards `message` (its text `body`) on a thread of its own, after
  // reaping finished workers. With every slot taken it answers a request at
  // once with `unavailable` (and drops a notification): reading never stops,
  // so the client's pings and later requests are still seen.
  void Start(McpMessage message, std::string body) {
    std::unique_lock lock(mu_);
    Reap(lock);
    if (in_flight_ >= options_.max_in_flight) {
      lock.unlock();
      Status busy(codes::kUnavailable, "dsh mcp is already forwarding " + std::to_string(options_.max_in_flight) +
                                           " requests to the host; try again once some are answered");
      if (message.kind == McpMessage::Kind::kRequest) {
        Write(HostError(message.id, busy));
      } else {
        Log("dropped a " + message.method + " notification: " + busy.message());
      }
      return;
    }
    ++in_flight_;
    workers_.emplace_back();
    Worker* worker = &workers_.back();  // list elements stay put
    worker->thread = std::thread([this, worker, message = std::move(message), body = std::move(body)] {
      std::optional<Json> answer = Forward(message, body);
      if (answer) Write(*answer);
      std::lock_guard done_lock(mu_);
      worker->done = true;
      --in_flight_;
      slot_free_.notify_all();
    });
  }

  // Joins the workers that finished. Needs mu_ (unlocks it while joining).
  void Reap(std::unique_lock<std::mutex>& lock) {
    std::list<Worker> finished;
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), workers_, it);
      it = next;
    }
    lock.unlock();
    for (Worker& w : finished) w.thread.join();
    lock.lock();
  }

  void JoinAll() {
    std::list<Worker> all;
    {
      std::lock_guard lock(mu_);
      all.swap(workers_);
    }
    for (Worker& w : all) w.thread.join();
  }

  // The answer to write for `message`, if any: the host's JSON-RPC body, or
  // a -32000 error when it gave none.
  std::optional<Json> Forward(const McpMessage& message, const std::string& body) {
    const bool wants_answer = message.kind == McpMessage::Kind::kRequest;
    auto res = Post(body);
    if (!res.ok()) {
      if (!wants_answer)
        Log("cannot forward a " + message.method + " notification: " + res.status().ToString());
      return wants_answer ? std::optional(HostError(message.id, res.status())) : std::nullopt;
    }
    auto parsed = ParseJson(res->body);
    if (!wants_answer) {
      if (res->status != 202)
        Log("the host refused a notification (HTTP " + std::to_string(res->status) + ")");
      return std::nullopt;
    }
    if (parsed.ok() && parsed->is_object() && parsed->contains("jsonrpc")) return std::move(parsed).value();
    return HostError(message.id, HostClient::ErrorFromBody(
                                     parsed.ok() ? *parsed : Json(),
                                     Status(codes::kInternal, "the host answered HTTP " + std::to_string(res->status) +
                                                                  " without a JSON-RPC response")));
  }

  // POST /mcp of the profile's running host, found anew for every message
  // (as `dsh tool` finds it) so that a restarted host is reached.
  Result<server::HttpClientResponse> Post(const std::string& body) const {
    DSH_ASSIGN_OR_RETURN(HostClient host, HostClient::ForProfile(options_.home));
    return host.PostRaw(path_, body, options_.request_timeout);
  }

  void Write(const Json& message) {
    std::string line = DumpJson(message);  // compact: never a newline inside
    std::lock_guard lock(out_mu_);
    out_ << line << '\n' << std::flush;
  }
  void Log(const std::string& text) {
    std::lock_guard lock(out_mu_);
    err_ << "dsh mcp: " << text << std::endl;
  }

  const McpProxyOptions options_;
  std::string path_;
  std::ostream& out_;
  std::ostream& err_;
  std::mutex out_mu_;  // whole lines on out_ and err_

  std::mutex mu_;
  std::condition_variable slot_free_;
  std::list<Worker> workers_;  // GUARDED_BY(mu_)
  size_t in_flight_ = 0;       // GUARDED_BY(mu_)
};

struct McpFlags {
  std::string home;
  std::string session;
};

}  // namespace

int RunMcpProxy(const McpProxyOptions& options, std::istream& in, std::ostream& out, std::ostream& err) {
  McpProxy proxy(options, out, err);
  return proxy.Run(in);
}

void AddMcpCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<McpFlags>();
  CLI::App* mcp = root.add_subcommand(
      "mcp", "Serve MCP over stdio (JSON-RPC lines), forwarded to the running host's /mcp");
  mcp->add_option("--home", flags->home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  CLI::Option* session =
      mcp->add_option("--session", flags->session, "Calling session id (default: root calls)");
  mcp->callback([flags, session, &ctx] {
    if (session->count() > 0 && flags->session.empty()) {
      ctx.err << "error: invalid_arguments: --session must name the calling session (a non-empty id)\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    // stdout carries the protocol: every log line goes to stderr.
    if (Status st = InitLogging("warn"); !st.ok()) ctx.err << "error: " << st.ToString() << "\n";
    McpProxyOptions options;
    if (!flags->home.empty()) options.home = flags->home;
    if (!flags->session.empty()) options.session_id = flags->session;
    ctx.exit_code = RunMcpProxy(options, std::cin, ctx.out, ctx.err);
  });
}

}  // namespace dsh::app
