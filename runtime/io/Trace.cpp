//===- Trace.cpp - Chrome trace (chrome://tracing, Perfetto) writer -------===//
//
// Format reference: "Trace Event Format" (Google), the JSON object form with
// complete ("X") events and metadata ("M") events.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Trace.h"

#include "runtime/io/FileUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace loom::rt {

/// The length of the valid UTF-8 sequence at the start of `s`, or 0 when it
/// does not start with one (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF).
static size_t utf8SequenceLength(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto inRange = [&](size_t i, unsigned lo, unsigned hi) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  unsigned c = byte(0);
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    return inRange(1, 0x80, 0xbf) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return inRange(1, lo, hi) && inRange(2, 0x80, 0xbf) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return inRange(1, lo, hi) && inRange(2, 0x80, 0xbf) &&
                   inRange(3, 0x80, 0xbf)
               ? 4
               : 0;
  }
  return 0;
}

void appendJsonString(std::string &out, std::string_view text) {
  out += '"';
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else if (c < 0x80) {
        out += static_cast<char>(c);
      } else if (size_t n = utf8SequenceLength(text.substr(i))) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      } else {
        out += "\\ufffd";
      }
    }
    ++i;
  }
  out += '"';
}

/// Appends a time in microseconds with nanosecond resolution.
static void appendMicros(std::string &out, double micros) {
  char buf[512]; // "%.3f" of the largest double needs 313 characters
  std::snprintf(buf, sizeof(buf), "%.3f", micros);
  out += buf;
}

void TraceWriter::setRankName(int rank, std::string name) {
  std::lock_guard<std::mutex> lock(mutex);
  rankNames[rank] = std::move(name);
}

void TraceWriter::addSpan(int rank, std::string name, std::string category,
                          double startMicros, double durationMicros,
                          Args args) {
  std::lock_guard<std::mutex> lock(mutex);
  spans.push_back({rank, std::move(name), std::move(category), startMicros,
                   durationMicros, std::move(args)});
}

size_t TraceWriter::numSpans() const {
  std::lock_guard<std::mutex> lock(mutex);
  return spans.size();
}

std::optional<std::string> TraceWriter::toJson(std::string &error) const {
  std::lock_guard<std::mutex> lock(mutex);
  std::set<int> ranks;
  for (const auto &[rank, name] : rankNames)
    ranks.insert(rank);
  std::vector<const Span *> ordered;
  ordered.reserve(spans.size());
  for (const Span &span : spans) {
    auto bad = [&](const std::string &what) {
      error = "span '" + span.name + "' on rank " + std::to_string(span.rank) +
              " has " + what;
      return std::nullopt;
    };
    if (!std::isfinite(span.start) || !std::isfinite(span.duration))
      return bad("a non-finite start or duration");
    if (span.start < 0 || span.duration < 0)
      return bad("a negative start or duration");
    ranks.insert(span.rank);
    ordered.push_back(&span);
  }
  if (!ranks.empty() && *ranks.begin() < 0) {
    error = "rank " + std::to_string(*ranks.begin()) + " is negative";
    return std::nullopt;
  }
  std::stable_sort(
      ordered.begin(), ordered.end(), [](const Span *a, const Span *b) {
        return a->rank != b->rank ? a->rank < b->rank : a->start < b->start;
      });

  std::string out = "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,"
         "\"args\":{\"name\":\"loom\"}}";
  for (int rank : ranks) {
    std::string tid = std::to_string(rank);
    auto named = rankNames.find(rank);
    out +=
        ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + tid +
        ",\"args\":{\"name\":";
    appendJsonString(out,
                     named != rankNames.end() ? named->second : "rank " + tid);
    out += "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,"
           "\"tid\":" +
           tid + ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  for (const Span *span : ordered) {
    out += ",\n{\"name\":";
    appendJsonString(out, span->name);
    out += ",\"cat\":";
    appendJsonString(out, span->category);
    out += ",\"ph\":\"X\",\"ts\":";
    appendMicros(out, span->start);
    out += ",\"dur\":";
    appendMicros(out, span->duration);
    out += ",\"pid\":0,\"tid\":" + std::to_string(span->rank);
    if (!span->args.empty()) {
      out += ",\"args\":{";
      for (size_t i = 0; i < span->args.size(); ++i) {
        if (i)
          out += ',';
        appendJsonString(out, span->args[i].first);
        out += ':';
        appendJsonString(out, span->args[i].second);
      }
      out += '}';
    }
    out += '}';
  }
  out += "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

bool TraceWriter::write(const std::string &path, std::string &error) const {
  std::optional<std::string> json = toJson(error);
  if (!json) {
    error = path + ": cannot write the trace: " + error;
    return false;
  }
  OutputFile file(path, error);
  if (!file.ok() || !file.write(json->data(), json->size(), error) ||
      !file.close(error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

} // namespace loom::rt
