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
#include <cstring>
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

double TraceWriter::elapsedMicros() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - created)
      .count();
}

namespace {
/// Little helpers for serialize/merge: fixed-width integers and doubles in
/// host byte order (both ends are one build of Loom), strings with a
/// length.
template <typename T> void put(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof value);
}
void putString(std::string &out, const std::string &text) {
  put<uint64_t>(out, text.size());
  out += text;
}

struct Reader {
  std::string_view bytes;
  size_t at = 0;
  template <typename T> bool get(T &value) {
    if (bytes.size() - at < sizeof value)
      return false;
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return true;
  }
  bool getString(std::string &text) {
    uint64_t size;
    if (!get(size) || bytes.size() - at < size)
      return false;
    text.assign(bytes.data() + at, size);
    at += size;
    return true;
  }
};
} // namespace

std::string TraceWriter::serialize() const {
  std::lock_guard<std::mutex> lock(mutex);
  std::string out;
  put<uint64_t>(out, rankNames.size());
  for (const auto &[rank, name] : rankNames) {
    put<int32_t>(out, rank);
    putString(out, name);
  }
  put<uint64_t>(out, spans.size());
  for (const Span &span : spans) {
    put<int32_t>(out, span.rank);
    putString(out, span.name);
    putString(out, span.category);
    put<double>(out, span.start);
    put<double>(out, span.duration);
    put<uint64_t>(out, span.args.size());
    for (const auto &[key, value] : span.args) {
      putString(out, key);
      putString(out, value);
    }
  }
  return out;
}

bool TraceWriter::merge(std::string_view bytes, std::string &error) {
  Reader in{bytes};
  std::map<int, std::string> names;
  std::vector<Span> added;
  uint64_t count = 0;
  bool ok = in.get(count);
  for (uint64_t i = 0; ok && i < count; ++i) {
    int32_t rank = 0;
    std::string name;
    ok = in.get(rank) && in.getString(name);
    names[rank] = std::move(name);
  }
  ok = ok && in.get(count);
  for (uint64_t i = 0; ok && i < count; ++i) {
    Span span;
    int32_t rank = 0;
    uint64_t args = 0;
    ok = in.get(rank) && in.getString(span.name) &&
         in.getString(span.category) && in.get(span.start) &&
         in.get(span.duration) && in.get(args);
    span.rank = rank;
    for (uint64_t a = 0; ok && a < args; ++a) {
      std::pair<std::string, std::string> arg;
      ok = in.getString(arg.first) && in.getString(arg.second);
      span.args.push_back(std::move(arg));
    }
    added.push_back(std::move(span));
  }
  if (!ok || in.at != bytes.size()) {
    error = "malformed serialized trace";
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &[rank, name] : names)
    rankNames[rank] = std::move(name);
  for (Span &span : added)
    spans.push_back(std::move(span));
  return true;
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
