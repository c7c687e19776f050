#pragma once

// Command lines of the load programs in bench/, with CLI11. Apart from
// bench_util.h so that a program needs neither the store's headers to parse
// its flags nor CLI11 to use the measuring helpers.
//
//   CLI::App app("what it measures", "name");
//   UseBenchOptionDefaults(app);
//   app.add_option("--loops", args.loops, "...")->check(AtLeast<int64_t>(10));
//   if (auto exit_code = ParseCommandLine(app, argc, argv)) return *exit_code;

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>

#include <CLI/CLI.hpp>

namespace dsh::bench {

// Call before adding options: --help shows each option's default, and an
// option given twice keeps its last value, as the hand-written parsers did.
inline void UseBenchOptionDefaults(CLI::App& app) {
  app.option_defaults()->always_capture_default()->take_last();
  app.get_formatter()->column_width(40);
}

// Parses argv into `app`'s options. Returns the code to exit with when the
// program must not go on: 0 after printing the help (--help, -h) to stdout,
// 2 after printing what is wrong with the command line to stderr. nullopt
// when every option is set and the program goes on.
[[nodiscard]] inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// An option check accepting a number of type T no smaller than `min`, shown
// in --help as POSITIVE (integer min 1), NONNEGATIVE (integer min 0) or
// ">=min". Replaces the old parsers' silent std::max clamps: a smaller value
// is a usage error naming the flag.
template <typename T>
CLI::Validator AtLeast(T min) {
  std::ostringstream text;
  text << min;
  std::string shown = ">=" + text.str();
  if constexpr (std::is_integral_v<T>) {
    if (min == 1) shown = "POSITIVE";
    if (min == 0) shown = "NONNEGATIVE";
  }
  return CLI::Validator(
      [min, bound = text.str()](std::string& input) -> std::string {
        const std::string too_small = "must be at least " + bound + ", not " + input;
        // CLI11 reads "-1" as a huge unsigned value, or fails to.
        if constexpr (std::is_unsigned_v<T>) {
          if (input.find('-') != std::string::npos) return too_small;
        }
        T value{};
        if (!CLI::detail::lexical_cast(input, value)) return "'" + input + "' is not a number";
        if (value < min) return too_small;
        return {};
      },
      shown);
}

}  // namespace dsh::bench
