//===- Trace.h - Chrome trace (Perfetto) JSON writer -----------*- C++ -*-===//
//
// Collects timed spans per rank while a plan runs and writes them in the
// Chrome trace event JSON format, which chrome://tracing and
// ui.perfetto.dev open: one track per rank.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_TRACE_H
#define LOOM_RUNTIME_IO_TRACE_H

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::rt {

/// Accumulates spans and writes them as a Chrome trace. Every rank is one
/// track (pid 0, tid = rank) named by a thread_name metadata event. All
/// member functions are thread-safe, so rank threads may record spans
/// concurrently.
class TraceWriter {
public:
  using Args = std::vector<std::pair<std::string, std::string>>;

  /// Names the track of `rank` (default: "rank N").
  void setRankName(int rank, std::string name);

  /// Records a span ("complete" event) on the track of `rank`. Times are in
  /// microseconds from an origin the caller chooses; `args` are shown as
  /// key/value pairs when the span is selected.
  void addSpan(int rank, std::string name, std::string category,
               double startMicros, double durationMicros, Args args = {});

  /// The number of spans recorded so far.
  size_t numSpans() const;

  /// Microseconds since this writer was created: a time origin that every
  /// rank recording into one writer shares, so that their tracks line up.
  double elapsedMicros() const;

  /// The rank names and spans recorded so far, in a compact binary form to
  /// send to another process (the ranks of an MPI run send theirs to rank
  /// 0, which merges them into one trace).
  std::string serialize() const;
  /// Adds the rank names and spans of serialize()'s output. Returns false
  /// and sets `error` (adding nothing) when `bytes` is malformed.
  bool merge(std::string_view bytes, std::string &error);

  /// Renders the trace as JSON:
  /// {"traceEvents":[...], "displayTimeUnit":"ms"}, the metadata events
  /// first, then the spans ordered by rank and start time. Strings are
  /// escaped, with invalid UTF-8 replaced by U+FFFD. Returns std::nullopt
  /// and sets `error` when a span has a negative rank or a non-finite or
  /// negative time, which trace viewers cannot show.
  std::optional<std::string> toJson(std::string &error) const;

  /// Writes toJson() to `path`. Returns false and sets `error`, naming the
  /// file, when the trace is invalid or the file cannot be written.
  bool write(const std::string &path, std::string &error) const;

private:
  struct Span {
    int rank;
    std::string name;
    std::string category;
    double start;
    double duration;
    Args args;
  };

  const std::chrono::steady_clock::time_point created =
      std::chrono::steady_clock::now();
  mutable std::mutex mutex;
  std::map<int, std::string> rankNames;
  std::vector<Span> spans;
};

/// Appends `text` to `out` as a JSON string literal, quotes included.
/// Control characters are escaped and invalid UTF-8 is replaced by U+FFFD so
/// that the result is always valid JSON.
void appendJsonString(std::string &out, std::string_view text);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_TRACE_H
