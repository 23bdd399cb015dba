//===- TraceTest.cpp - Tests for the Chrome trace writer ------------------===//

#include "runtime/io/Trace.h"

#include "IoTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

using namespace loom::rt;
using loom::rt::testing::runPython;
using loom::rt::testing::TempDir;

namespace {

std::string json(std::string_view text) {
  std::string out;
  appendJsonString(out, text);
  return out;
}

size_t countOf(const std::string &haystack, const std::string &needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

} // namespace

// Proves that string escaping follows RFC 8259: quotes, backslashes and
// control characters are escaped, valid UTF-8 passes through, and invalid
// UTF-8 (stray continuation bytes, truncated, overlong, surrogate and
// out-of-range sequences) becomes U+FFFD.
TEST(TraceTest, JsonStringEscaping) {
  EXPECT_EQ(json(""), "\"\"");
  EXPECT_EQ(json("plain"), "\"plain\"");
  EXPECT_EQ(json("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(json("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(json(std::string("\x00\x01\x1f\x7f", 4)),
            "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(json("\xce\xb1\xe2\x86\x92\xf0\x9f\x98\x80"), // alpha arrow emoji
            "\"\xce\xb1\xe2\x86\x92\xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json("\x80x"), "\"\\ufffdx\"");
  EXPECT_EQ(json("\xe2\x86"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");            // overlong '/'
  EXPECT_EQ(json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); // surrogate
  EXPECT_EQ(json("\xf4\x90\x80\x80"),
            "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); // above U+10FFFF
}

// Proves that the written file is valid JSON in the Chrome trace format:
// Python's json module parses it, it has displayTimeUnit "ms", one
// thread_name per rank (named or "rank N"), and every span as an "X" event
// on pid 0 / tid = rank with its name, category, times and args intact,
// including names that need escaping.
TEST(TraceTest, WrittenTraceParsesWithExpectedEvents) {
  if (!loom::rt::testing::havePython())
    GTEST_SKIP() << "needs /usr/bin/python3";
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  TraceWriter trace;
  trace.setRankName(0, "rank 0 (gpu \"a\")");
  trace.setRankName(1, "worker\t1");
  trace.addSpan(1, "matmul", "compute", 10.5, 2.25, {{"shape", "[4, 8]"}});
  trace.addSpan(0, "all_reduce \"grad\"\\\n", "comm", 1.0, 100.0,
                {{"bytes", "4096"}, {"algo", "ring"}});
  trace.addSpan(2, "bad \xff utf8 \xce\xb1", "compute", 0.0, 0.001);
  trace.addSpan(0, "relu", "compute", 0.25, 0.5);
  EXPECT_EQ(trace.numSpans(), 4u);
  std::string error;
  ASSERT_TRUE(trace.write(dir.path("trace.json"), error)) << error;

  EXPECT_EQ(runPython(dir, R"PY(
import json, sys
with open('trace.json', encoding='utf-8') as f:
    t = json.load(f)
assert set(t) == {'traceEvents', 'displayTimeUnit'}, t.keys()
assert t['displayTimeUnit'] == 'ms'
ev = t['traceEvents']
names = {e['tid']: e['args']['name'] for e in ev
         if e['ph'] == 'M' and e['name'] == 'thread_name'}
assert names == {0: 'rank 0 (gpu "a")', 1: 'worker\t1', 2: 'rank 2'}, names
spans = [e for e in ev if e['ph'] == 'X']
assert len(spans) == 4, spans
assert all(e['pid'] == 0 for e in ev), ev
# Ordered by rank, then start.
assert [(e['tid'], e['name']) for e in spans] == [
    (0, 'relu'), (0, 'all_reduce "grad"\\\n'), (1, 'matmul'),
    (2, 'bad \ufffd utf8 \u03b1')], spans
ar = spans[1]
assert ar['cat'] == 'comm' and ar['ts'] == 1.0 and ar['dur'] == 100.0, ar
assert ar['args'] == {'bytes': '4096', 'algo': 'ring'}, ar
mm = spans[2]
assert mm['ts'] == 10.5 and mm['dur'] == 2.25, mm
assert mm['args'] == {'shape': '[4, 8]'}, mm
assert 'args' not in spans[0]
assert spans[3]['dur'] == 0.001, spans[3]
)PY"),
            0);
}

// Proves that spans recorded from many threads at once are all kept (the
// writer is thread-safe; run under TSan/ASan this also checks for races).
TEST(TraceTest, ConcurrentSpansAreAllRecorded) {
  TraceWriter trace;
  constexpr int kThreads = 8, kSpans = 500;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kThreads; ++rank) {
    threads.emplace_back([&trace, rank] {
      trace.setRankName(rank, "rank " + std::to_string(rank));
      for (int i = 0; i < kSpans; ++i)
        trace.addSpan(rank, "op" + std::to_string(i), "compute", i * 2.0, 1.0,
                      {{"i", std::to_string(i)}});
    });
  }
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(trace.numSpans(), static_cast<size_t>(kThreads * kSpans));
  std::string error;
  std::optional<std::string> text = trace.toJson(error);
  ASSERT_TRUE(text) << error;
  EXPECT_EQ(countOf(*text, "\"ph\":\"X\""),
            static_cast<size_t>(kThreads * kSpans));
  EXPECT_EQ(countOf(*text, "\"name\":\"thread_name\""),
            static_cast<size_t>(kThreads));
}

// Proves that an empty trace is still a valid trace document.
TEST(TraceTest, EmptyTrace) {
  TraceWriter trace;
  std::string error;
  std::optional<std::string> text = trace.toJson(error);
  ASSERT_TRUE(text) << error;
  EXPECT_EQ(*text, "{\"traceEvents\":[\n"
                   "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
                   "\"tid\":0,\"args\":{\"name\":\"loom\"}}\n"
                   "],\n\"displayTimeUnit\":\"ms\"}\n");
}

// Proves that values a viewer cannot show (non-finite or negative times,
// negative ranks) and unwritable paths are reported as errors naming the
// span or the file.
TEST(TraceTest, InvalidSpansAndPathsGiveErrors) {
  std::string error;
  {
    TraceWriter trace;
    trace.addSpan(0, "nan", "c", std::nan(""), 1.0);
    EXPECT_FALSE(trace.toJson(error));
    EXPECT_EQ(error, "span 'nan' on rank 0 has a non-finite start or duration");
  }
  {
    TraceWriter trace;
    trace.addSpan(3, "back", "c", 5.0, -1.0);
    EXPECT_FALSE(trace.write("/nonexistent-dir/t.json", error));
    EXPECT_EQ(error, "/nonexistent-dir/t.json: cannot write the trace: span "
                     "'back' on rank 3 has a negative start or duration");
  }
  {
    TraceWriter trace;
    trace.setRankName(-1, "host");
    EXPECT_FALSE(trace.toJson(error));
    EXPECT_EQ(error, "rank -1 is negative");
  }
  {
    TraceWriter trace;
    trace.addSpan(0, "ok", "c", 0, 1);
    EXPECT_FALSE(trace.write("/nonexistent-dir/t.json", error));
    EXPECT_EQ(
        error.rfind("/nonexistent-dir/t.json: cannot open for writing", 0), 0u)
        << error;
  }
}
