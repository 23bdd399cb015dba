//===- Mutators.cpp - Byte-level and JSON-aware mutations -----------------===//
//
// The fuzzer's mutations of raw bytes and of JSON text (Fuzz.h). Every
// choice is drawn from the caller's Rng, so an input is a function of the
// seed and its index alone.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace loom::fuzz {

namespace {

/// Values at the edges of integer types and of what readers bound.
const std::vector<uint64_t> kBoundaries = {0,
                                           1,
                                           2,
                                           3,
                                           7,
                                           8,
                                           16,
                                           63,
                                           64,
                                           65,
                                           127,
                                           128,
                                           255,
                                           256,
                                           1024,
                                           4096,
                                           32767,
                                           32768,
                                           65535,
                                           65536,
                                           0x7fffffff,
                                           0x80000000,
                                           0xffffffff,
                                           0x100000000,
                                           1ull << 48,
                                           1ull << 62,
                                           0x7fffffffffffffffull,
                                           0x8000000000000000ull,
                                           ~0ull,
                                           ~0ull - 1};

uint64_t boundary(Rng &rng) {
  uint64_t v = rng.pick(kBoundaries);
  // Also the negatives (two's complement) of the small ones.
  return rng.chance(25) ? ~v + 1 : v;
}

/// Overwrites `width` bytes at `pos` with `value`, little- or big-endian.
void putInteger(std::string &data, size_t pos, unsigned width, uint64_t value,
                bool bigEndian) {
  for (unsigned b = 0; b < width && pos + b < data.size(); ++b) {
    unsigned shift = 8 * (bigEndian ? width - 1 - b : b);
    data[pos + b] = static_cast<char>((value >> shift) & 0xff);
  }
}

/// A protobuf varint of `value` (how lengths and integers are encoded).
std::string varint(uint64_t value) {
  std::string out;
  do {
    unsigned char byte = value & 0x7f;
    value >>= 7;
    out.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
  } while (value);
  return out;
}

} // namespace

void mutateBytes(std::string &data, Rng &rng, const std::string &other) {
  size_t n = data.size();
  size_t pos = rng.below(n + 1);
  switch (rng.below(11)) {
  case 0: // flip one bit
    if (n)
      data[pos % n] = static_cast<char>(data[pos % n] ^ (1 << rng.below(8)));
    break;
  case 1: { // a byte set to a boundary or syntax character
    static const char kBytes[] = {0,   1,   0x7f, char(0x80), char(0xff),
                                  '"', '{', '}',  '[',        ']',
                                  ':', ',', '\\', '\n',       '-'};
    if (n)
      data[pos % n] = rng.chance(70) ? kBytes[rng.below(sizeof kBytes)]
                                     : static_cast<char>(rng.next());
    break;
  }
  case 2: { // insert random bytes, or one byte repeated
    size_t len = 1 + rng.below(rng.chance(10) ? 4096 : 16);
    std::string run(len, static_cast<char>(rng.next()));
    if (rng.chance(50))
      for (char &c : run)
        c = static_cast<char>(rng.next());
    data.insert(pos, run);
    break;
  }
  case 3: // delete a run
    if (n)
      data.erase(pos % n, 1 + rng.below(std::min<size_t>(n, 64)));
    break;
  case 4: { // duplicate a run elsewhere
    if (!n)
      break;
    size_t from = rng.below(n),
           len = 1 + rng.below(std::min<size_t>(n - from,
                                                rng.chance(20) ? 4096 : 64));
    std::string chunk = data.substr(from, len);
    data.insert(rng.below(n + 1), chunk);
    break;
  }
  case 5: // truncate
    data.resize(rng.below(n + 1));
    break;
  case 6: { // an integer replaced by a boundary value
    static const unsigned kWidths[] = {1, 2, 4, 8};
    if (n)
      putInteger(data, pos % n, kWidths[rng.below(4)], boundary(rng),
                 rng.chance(30));
    break;
  }
  case 7: { // a protobuf varint (a length, a tag's value) inserted
    data.insert(pos, varint(boundary(rng)));
    break;
  }
  case 8: // add or subtract a small delta
    if (n)
      data[pos % n] =
          static_cast<char>(data[pos % n] + int(rng.below(33)) - 16);
    break;
  case 9: { // splice: our head, the other's tail
    if (other.empty())
      break;
    size_t cut = rng.below(other.size() + 1);
    data = data.substr(0, pos) + other.substr(cut);
    break;
  }
  default: { // a chunk of the other inserted
    if (other.empty())
      break;
    size_t from = rng.below(other.size());
    size_t len = 1 + rng.below(std::min<size_t>(other.size() - from, 256));
    data.insert(pos, other.substr(from, len));
    break;
  }
  }
}

void mutateBytesStacked(std::string &data, Rng &rng, const std::string &other,
                        unsigned max) {
  unsigned count = 1 + static_cast<unsigned>(rng.below(max));
  for (unsigned i = 0; i < count; ++i)
    mutateBytes(data, rng, other);
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

using Json = nlohmann::ordered_json;

/// Raw text a placeholder string stands for after dumping: numbers JSON
/// allows but readers may not hold, and nestings too deep to build as a
/// tree (dumping one would recurse as deep).
const std::vector<std::string> kRawNumbers = {"1e999",
                                              "-1e999",
                                              "1e-400",
                                              "-0",
                                              "0.0",
                                              "1.5",
                                              "-1",
                                              "3.0",
                                              "1E2",
                                              "2147483648",
                                              "-2147483649",
                                              "4294967296",
                                              "9223372036854775807",
                                              "9223372036854775808",
                                              "-9223372036854775809",
                                              "18446744073709551615",
                                              "18446744073709551616",
                                              "123456789012345678901234567890",
                                              "1e308",
                                              "4.9e-324"};

std::string nesting(size_t depth, bool objects) {
  std::string open = objects ? "{\"a\":" : "[", close = objects ? "}" : "]";
  std::string out;
  out.reserve(depth * (open.size() + 1));
  for (size_t i = 0; i < depth; ++i)
    out += open;
  out += "1";
  for (size_t i = 0; i < depth; ++i)
    out += close;
  return out;
}

/// Collects the nodes of `j` (not deeper than 100 levels).
void collect(Json &j, std::vector<Json *> &out, int depth = 0) {
  out.push_back(&j);
  if (depth > 100)
    return;
  if (j.is_object() || j.is_array())
    for (Json &child : j)
      collect(child, out, depth + 1);
}

std::string placeholder(std::vector<std::string> &raws, std::string raw) {
  raws.push_back(std::move(raw));
  return "@@fuzz" + std::to_string(raws.size() - 1) + "@@";
}

/// A value of some other type, or an edge value of this one.
Json replacement(const Json &old, Rng &rng, std::vector<std::string> &raws) {
  switch (rng.below(12)) {
  case 0:
    return nullptr;
  case 1:
    return rng.chance(50);
  case 2:
    return Json::array();
  case 3:
    return Json::object();
  case 4:
    return std::string(rng.chance(50) ? 1 : 5000, 'x');
  case 5:
    return placeholder(raws, rng.pick(kRawNumbers));
  case 6: {
    static const size_t kDepths[] = {10, 63, 64, 65, 100, 1000, 100000};
    return placeholder(raws, nesting(kDepths[rng.below(7)], rng.chance(50)));
  }
  case 7: {
    static const char *kStrings[] = {"",     "*",   "[",     "[a-",
                                     "\\",   "../", "dp=0",  "dp=2,dp=2",
                                     "a**b", "tp",  "x=1=2", "\xff\xfe"};
    return std::string(kStrings[rng.below(12)]);
  }
  case 8:
    if (old.is_number_integer())
      return static_cast<int64_t>(old.get<uint64_t>() + rng.below(5) - 2);
    if (old.is_number())
      return -old.get<double>();
    return int64_t(rng.below(5)) - 1;
  case 9:
    if (old.is_string()) {
      std::string s = old.get<std::string>();
      mutateBytes(s, rng, "");
      return s;
    }
    return old;
  case 10: { // a long array of one value
    Json a = Json::array();
    size_t n = rng.chance(80) ? 1 + rng.below(8) : 1000;
    for (size_t i = 0; i < n; ++i)
      a.push_back(old.is_array() || old.is_object() ? Json(1) : old);
    return a;
  }
  default:
    return static_cast<int64_t>(boundary(rng));
  }
}

/// A value of `old`'s type: another string of the document (`nodes`), a
/// small number near it or the other boolean.
Json sameType(const Json &old, const std::vector<Json *> &nodes, Rng &rng) {
  if (old.is_string()) {
    for (int tries = 0; tries < 8; ++tries)
      if (const Json &other = *nodes[rng.below(nodes.size())];
          other.is_string())
        return other;
    return old;
  }
  if (old.is_boolean())
    return !old.get<bool>();
  if (old.is_number()) {
    static const int64_t kSmall[] = {0, 1, 2, 3, 4, 8, -1};
    return rng.chance(50) ? Json(kSmall[rng.below(7)])
                          : Json(static_cast<int64_t>(old.get<uint64_t>() +
                                                      rng.below(3) - 1));
  }
  return old;
}

/// One structural mutation of `root`; raw texts land in `raws`.
void mutateTree(Json &root, Rng &rng, const Json *other,
                std::vector<std::string> &raws) {
  std::vector<Json *> nodes;
  collect(root, nodes);
  Json &node = *nodes[rng.below(nodes.size())];
  unsigned op = static_cast<unsigned>(rng.below(10));
  if (op < 3 && node.is_primitive()) {
    // A value of the same type, as a user's edit would be: another string
    // of the document (a node name, a mesh axis), a nearby small number.
    node = sameType(node, nodes, rng);
  } else if (op < 4) {
    node = replacement(node, rng, raws);
  } else if (op < 6 && node.is_object() && !node.empty()) {
    auto it = node.begin();
    std::advance(it, rng.below(node.size()));
    if (op == 4) {
      node.erase(it);
    } else { // the same value under another key, maybe an unknown one
      std::string key = rng.chance(50) ? "unknown_key" : it.key() + "x";
      Json value = it.value();
      node[key] = std::move(value);
    }
  } else if (op < 8 && node.is_array() && !node.empty()) {
    size_t i = rng.below(node.size());
    if (op == 6) {
      node.erase(node.begin() + static_cast<long>(i));
    } else {
      Json copy = node[i];
      size_t times = rng.chance(90) ? 1 : 200;
      for (size_t k = 0; k < times; ++k)
        node.insert(node.begin() + static_cast<long>(rng.below(node.size())),
                    copy);
    }
  } else if (op == 8 && other) { // a subtree of the other document
    std::vector<Json *> theirs;
    Json copy = *other;
    collect(copy, theirs);
    node = *theirs[rng.below(theirs.size())];
  } else {
    node = replacement(node, rng, raws);
  }
}

/// The dumped text with each placeholder replaced by its raw text.
std::string substitute(std::string text, const std::vector<std::string> &raws) {
  for (size_t i = raws.size(); i-- > 0;) {
    std::string token = "\"@@fuzz" + std::to_string(i) + "@@\"";
    size_t at = text.find(token);
    if (at != std::string::npos)
      text.replace(at, token.size(), raws[i]);
  }
  return text;
}

/// A duplicate of an existing key, written into the text after a '{'.
void duplicateKey(std::string &text, Rng &rng) {
  std::vector<size_t> braces;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '{')
      braces.push_back(i);
  size_t quote = text.find('"', braces.empty() ? 0 : rng.pick(braces));
  size_t end = quote == std::string::npos ? quote : text.find('"', quote + 1);
  if (braces.empty() || end == std::string::npos)
    return;
  std::string key = text.substr(quote, end - quote + 1);
  text.insert(rng.pick(braces) + 1,
              key + ":" + std::to_string(rng.below(3)) + ",");
}

/// The deepest nesting of brackets in `text` (strings included: an
/// estimate is enough to keep deep documents away from recursive code).
size_t bracketDepth(const std::string &text) {
  size_t depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth)
      --depth;
  }
  return deepest;
}

} // namespace

std::string mutateJson(const std::string &text, Rng &rng,
                       const std::string &other) {
  // Dumping a tree recurses: documents nested deeper than a seed can be
  // (a regression input) get byte-level mutations only.
  bool deep = bracketDepth(text) > 200;
  Json root = deep ? Json() : Json::parse(text, nullptr, false);
  if (deep || root.is_discarded() || rng.chance(10)) {
    std::string out = text;
    mutateBytesStacked(out, rng, other);
    return out;
  }
  Json theirs = bracketDepth(other) > 200
                    ? Json(nullptr)
                    : Json::parse(other, nullptr, /*allow_exceptions=*/false);
  const Json *otherRoot = theirs.is_discarded() ? nullptr : &theirs;
  std::vector<std::string> raws;
  unsigned count = 1 + static_cast<unsigned>(rng.below(3));
  for (unsigned i = 0; i < count; ++i)
    mutateTree(root, rng, otherRoot, raws);
  std::string out =
      substitute(root.dump(rng.chance(50) ? 2 : -1, ' ', false,
                           nlohmann::json::error_handler_t::replace),
                 raws);
  if (rng.chance(10))
    duplicateKey(out, rng);
  if (rng.chance(10))
    mutateBytes(out, rng, other);
  return out;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

std::string readFileOrEmpty(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Seed> seedsFromDirectory(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string path = dir + "/" + e->d_name;
      struct stat st;
      if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::vector<Seed> seeds;
  for (const std::string &name : names)
    seeds.push_back({dir + "/" + name, readFileOrEmpty(dir + "/" + name)});
  return seeds;
}

} // namespace loom::fuzz
