// Load program for the workspace tools (issue 33; docs/PERFORMANCE.md,
// "Workspace tools").
//
//   workspace_bench [--dir DIR] [--calls N] [--files F] [--searches S] [--quick]
//
// 1. What the sandbox costs one command: `true` run N times (default 200)
//    through RunBash under bubblewrap, then N times through RunBash with the
//    sandbox off (the same process group, clean environment and output
//    handling, no bubblewrap), alternating in batches of 10 so both see the
//    same machine; the latency of each call.
// 2. grep over a tree of F files (default 100,000, in 1,000 directories,
//    with a .gitignore): S searches (default 20) of a word in one file in a
//    hundred, through Grep (argv, JSON parsing, paths made relative, the
//    result capped at 200), against the same `rg --json` run directly with
//    the same arguments and its output read to the end.
//
// Every answer is checked (exit code 0; the expected number of matches), so
// the `--quick` smoke test fails on wrong behaviour. Timings are printed,
// never asserted.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "plugins/workspace/process.h"
#include "plugins/workspace/sandbox.h"
#include "plugins/workspace/search_tools.h"

namespace dsh::bench {
namespace {

namespace fs = std::filesystem;
namespace ws = dsh::workspace;

struct Args {
  std::string dir;
  int calls = 200;
  int files = 100'000;
  int searches = 20;
  bool quick = false;
};

struct Summary {
  double p50 = 0, p99 = 0, max = 0;
};
Summary Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  return {at(0.5), at(0.99), ms.back()};
}

double RunTrue(const fs::path& cwd, bool sandboxed) {
  ws::BashRequest request;
  request.command = "true";
  request.cwd = cwd;
  ws::SandboxOptions options;
  options.enabled = sandboxed;
  int64_t start = NowNs();
  auto r = ws::RunBash(request, options);
  double ms = static_cast<double>(NowNs() - start) / 1e6;
  if (!r.ok()) Fail("bash true", r.status());
  if (r->exit_code != 0) Fail("bash true", Status("bench", "exit code is not 0"));
  return ms;
}

void MakeTree(const fs::path& root, int files) {
  fs::create_directories(root);
  std::ofstream(root / ".gitignore") << "ignored/\n";
  fs::create_directories(root / "ignored");
  std::ofstream(root / "ignored" / "needle.txt") << "needle_word\n";  // never found: ignored
  for (int i = 0; i < files; ++i) {
    fs::path dir = root / ("d" + std::to_string(i / 100));
    if (i % 100 == 0) fs::create_directories(dir);
    std::ofstream out(dir / ("f" + std::to_string(i) + ".txt"));
    out << "line one of file " << i << "\nsome ordinary text here\n";
    if (i % 100 == 7) out << "the needle_word is here\n";
    out << "the end\n";
  }
}

int Main(const Args& args) {
  fs::path dir = args.dir.empty() ? fs::temp_directory_path() / "dsh-workspace-bench" : fs::path(args.dir);
  fs::remove_all(dir);
  fs::create_directories(dir / "cwd");
  if (Status st = ws::CheckSandbox(); !st.ok()) Fail("sandbox", st);

  // 1. One sandboxed `true` against the same without bubblewrap.
  std::vector<double> sandboxed, plain;
  for (int done = 0; done < args.calls; done += 10) {
    for (int i = 0; i < 10; ++i) sandboxed.push_back(RunTrue(dir / "cwd", true));
    for (int i = 0; i < 10; ++i) plain.push_back(RunTrue(dir / "cwd", false));
  }
  Summary s = Summarize(sandboxed), p = Summarize(plain);
  std::printf("bash `true`, %zu calls each (ms)        p50      p99      max\n", sandboxed.size());
  std::printf("  sandboxed (bubblewrap)            %8.2f %8.2f %8.2f\n", s.p50, s.p99, s.max);
  std::printf("  unsandboxed                       %8.2f %8.2f %8.2f\n", p.p50, p.p99, p.max);
  std::printf("  sandbox overhead at p50           %8.2f ms (%.1fx)\n", s.p50 - p.p50, s.p50 / std::max(p.p50, 1e-9));

  // 2. grep over F files against rg alone.
  fs::path tree = dir / "tree";
  int64_t made = NowNs();
  MakeTree(tree, args.files);
  std::printf("\ntree of %d files made in %.1f s\n", args.files, static_cast<double>(NowNs() - made) / 1e9);
  const int64_t expected = std::min<int64_t>(200, (args.files + 92) / 100);
  std::vector<double> ours, sorted, direct;
  for (int i = 0; i < args.searches; ++i) {
    ws::GrepRequest request;
    request.pattern = "needle_word";
    request.path = tree;
    request.display_root = tree;
    int64_t start = NowNs();
    auto r = ws::Grep(request);
    ours.push_back(static_cast<double>(NowNs() - start) / 1e6);
    if (!r.ok()) Fail("grep", r.status());
    const Json* matches = r->contains("matches") ? &(*r)["matches"] : nullptr;
    if (matches == nullptr || static_cast<int64_t>(matches->size()) != expected) {
      Fail("grep", Status("bench", "expected " + std::to_string(expected) + " matches, got " + r->dump().substr(0, 300)));
    }
    auto rg = [&](std::vector<std::string> argv, std::vector<double>& times) {
      ws::ProcessSpec spec;
      spec.argv = std::move(argv);
      spec.cwd = tree;
      spec.env = {"PATH=/usr/bin:/bin"};
      spec.output_cap = int64_t{64} << 20;
      int64_t began = NowNs();
      auto d = ws::RunProcess(spec);
      times.push_back(static_cast<double>(NowNs() - began) / 1e6);
      if (!d.ok()) Fail("rg", d.status());
      if (d->exit_code != 0) Fail("rg", Status("bench", "rg exited with " + std::to_string(d->exit_code.value_or(-1))));
    };
    rg({"rg", "--json", "--sort", "path", "--", "needle_word", tree.string()}, sorted);
    rg({"rg", "--json", "--", "needle_word", tree.string()}, direct);
  }
  Summary o = Summarize(ours), q = Summarize(sorted), r = Summarize(direct);
  std::printf("grep for a word in 1 file of 100, %d searches (ms)  p50      p99      max\n", args.searches);
  std::printf("  grep tool (Grep: rg --json --sort path)      %8.1f %8.1f %8.1f\n", o.p50, o.p99, o.max);
  std::printf("  rg --json --sort path alone                  %8.1f %8.1f %8.1f\n", q.p50, q.p99, q.max);
  std::printf("  rg --json alone (parallel, unsorted)         %8.1f %8.1f %8.1f\n", r.p50, r.p99, r.max);
  std::printf("  grep tool / rg with the same arguments, p50  %8.2fx\n", o.p50 / std::max(q.p50, 1e-9));
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace dsh::bench

int main(int argc, char** argv) {
  dsh::bench::Args args;
  CLI::App app("Load program for the workspace tools: the sandbox's cost per command, grep against rg");
  app.add_option("--dir", args.dir, "scratch directory (removed first)");
  app.add_option("--calls", args.calls, "bash calls of each kind");
  app.add_option("--files", args.files, "files in the grep tree");
  app.add_option("--searches", args.searches, "grep searches");
  app.add_flag("--quick", args.quick, "a smoke run: 20 calls, 2,000 files, 3 searches");
  CLI11_PARSE(app, argc, argv);
  if (args.quick) {
    args.calls = 20;
    args.files = 2'000;
    args.searches = 3;
  }
  return dsh::bench::Main(args);
}
