//===- NpyHeader.cpp - The preamble and header of .npy files --------------===//
//
// Format reference: numpy/lib/format.py. A file is the magic "\x93NUMPY", a
// major and minor version byte, the header length (2 bytes little-endian in
// version 1.0, 4 bytes in 2.0 and 3.0), a Python dict literal such as
// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" padded with
// spaces and a newline, then the raw elements.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/NpyHeader.h"

#include <cstdio>
#include <limits>

namespace loom::rt::npy {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

constexpr ElemInfo kElems[] = {
    {Elem::F4, "<f4", 4, DType::F32},  {Elem::F2, "<f2", 2, DType::F16},
    {Elem::I4, "<i4", 4, DType::I32},  {Elem::I8, "<i8", 8, DType::I64},
    {Elem::B1, "|b1", 1, DType::Bool}, {Elem::F8, "<f8", 8, DType::F32},
};

std::string shapeTuple(const Shape &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// Quotes a piece of untrusted header text for an error message: printable
/// ASCII as is, everything else as \xNN, cut after 60 characters.
std::string quoteForError(std::string_view text) {
  std::string s = "'";
  size_t n = 0;
  for (unsigned char c : text) {
    if (++n > 60) {
      s += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      s += buf;
    }
  }
  return s + "'";
}

/// A recursive-descent parser for the small subset of Python literal syntax
/// that .npy headers use: a dict of string keys to strings, booleans and
/// tuples of non-negative integers.
class HeaderParser {
public:
  HeaderParser(std::string_view text, std::string &error)
      : text(text), error(error) {}

  bool parse(Layout &layout) {
    skipSpace();
    if (!expect('{'))
      return false;
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    while (!atEnd() && peek() != '}') {
      std::string key;
      if (!parseString(key, "a key"))
        return false;
      skipSpace();
      if (!expect(':'))
        return false;
      skipSpace();
      if (key == "descr") {
        if (haveDescr)
          return fail("the key 'descr' appears twice");
        haveDescr = true;
        if (!parseDescr(layout.elem))
          return false;
      } else if (key == "fortran_order") {
        if (haveOrder)
          return fail("the key 'fortran_order' appears twice");
        haveOrder = true;
        bool fortran = false;
        if (!parseBool(fortran))
          return false;
        if (fortran)
          return fail("Fortran-order (column-major) arrays are not supported; "
                      "save np.ascontiguousarray(arr) instead");
      } else if (key == "shape") {
        if (haveShape)
          return fail("the key 'shape' appears twice");
        haveShape = true;
        if (!parseShape(layout.shape))
          return false;
      } else {
        return fail("unexpected key " + quoteForError(key) +
                    " (a .npy header has exactly 'descr', "
                    "'fortran_order' and 'shape')");
      }
      skipSpace();
      if (atEnd() || peek() != ',')
        break;
      ++pos;
      skipSpace();
    }
    if (!expect('}'))
      return false;
    skipSpace();
    if (!atEnd())
      return fail("unexpected text after the header dict: " +
                  quoteForError(text.substr(pos)));
    if (!haveDescr || !haveOrder || !haveShape)
      return fail(std::string("the header lacks the key '") +
                  (!haveDescr   ? "descr"
                   : !haveOrder ? "fortran_order"
                                : "shape") +
                  "'");
    return true;
  }

private:
  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }

  void skipSpace() {
    while (!atEnd() && (peek() == ' ' || peek() == '\n' || peek() == '\t' ||
                        peek() == '\r'))
      ++pos;
  }

  bool fail(const std::string &message) {
    error = "bad header: " + message;
    return false;
  }

  std::string found() const {
    return atEnd() ? std::string("the end of the header")
                   : quoteForError(text.substr(pos, 20));
  }

  bool expect(char c) {
    if (atEnd() || peek() != c)
      return fail(std::string("expected '") + c + "' but found " + found());
    ++pos;
    return true;
  }

  bool parseString(std::string &out, const char *what) {
    if (atEnd() || (peek() != '\'' && peek() != '"'))
      return fail(std::string("expected ") + what +
                  " (a quoted string) but "
                  "found " +
                  found());
    char quote = text[pos++];
    size_t start = pos;
    while (!atEnd() && peek() != quote) {
      if (peek() == '\\')
        return fail("escape sequences in header strings are not supported");
      ++pos;
    }
    if (atEnd())
      return fail("unterminated string");
    out = std::string(text.substr(start, pos - start));
    ++pos;
    return true;
  }

  bool parseBool(bool &out) {
    if (text.substr(pos, 4) == "True") {
      out = true;
      pos += 4;
      return true;
    }
    if (text.substr(pos, 5) == "False") {
      out = false;
      pos += 5;
      return true;
    }
    return fail("'fortran_order' must be True or False, found " + found());
  }

  bool parseDescr(Elem &elem) {
    if (!atEnd() && peek() == '[')
      return fail("structured arrays (a list 'descr') are not supported");
    std::string descr;
    if (!parseString(descr, "the element type 'descr'"))
      return false;
    for (const ElemInfo &info : kElems) {
      if (descr == info.descr) {
        elem = info.elem;
        return true;
      }
    }
    if (descr.find('O') != std::string::npos)
      return fail("object arrays ('descr' " + quoteForError(descr) +
                  ") are not supported");
    if (!descr.empty() && descr[0] == '>')
      return fail("big-endian element type " + quoteForError(descr) +
                  " is not supported; save arr.astype(arr.dtype."
                  "newbyteorder('<')) instead");
    return fail("element type " + quoteForError(descr) +
                " is not supported (supported: <f4, <f2, <i4, <i8, |b1, and "
                "<f8 read as f32)");
  }

  bool parseDim(int64_t &dim) {
    if (!atEnd() && peek() == '-')
      return fail("negative dimension in 'shape'");
    if (atEnd() || peek() < '0' || peek() > '9')
      return fail("expected a dimension in 'shape' but found " + found());
    uint64_t value = 0;
    while (!atEnd() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail("dimension in 'shape' is too large");
      ++pos;
    }
    if (!atEnd() && peek() == 'L') // Python 2 long literal
      ++pos;
    dim = static_cast<int64_t>(value);
    return true;
  }

  bool parseShape(Shape &shape) {
    if (!expect('('))
      return false;
    skipSpace();
    while (!atEnd() && peek() != ')') {
      int64_t dim;
      if (!parseDim(dim))
        return false;
      shape.push_back(dim);
      skipSpace();
      if (atEnd() || peek() != ',')
        break;
      ++pos;
      skipSpace();
    }
    return expect(')');
  }

  std::string_view text;
  std::string &error;
  size_t pos = 0;
};

} // namespace

const ElemInfo &infoOf(Elem elem) {
  for (const ElemInfo &info : kElems)
    if (info.elem == elem)
      return info;
  return kElems[0]; // unreachable: every Elem is in kElems
}

std::optional<size_t> dataOffsetOf(std::string_view prefix,
                                   std::string &error) {
  if (prefix.size() < kMagic.size() ||
      prefix.substr(0, kMagic.size()) != kMagic) {
    error = "not a .npy file (it does not start with \"\\x93NUMPY\")";
    return std::nullopt;
  }
  if (prefix.size() < kMagic.size() + 2) {
    error = "truncated: the file ends inside the version";
    return std::nullopt;
  }
  unsigned major = static_cast<unsigned char>(prefix[6]);
  unsigned minor = static_cast<unsigned char>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    error = "unsupported .npy version " + std::to_string(major) + "." +
            std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)";
    return std::nullopt;
  }
  size_t lengthBytes = major == 1 ? 2 : 4;
  if (prefix.size() < 8 + lengthBytes) {
    error = "truncated: the file ends inside the header length";
    return std::nullopt;
  }
  uint64_t headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLength |=
        static_cast<uint64_t>(static_cast<unsigned char>(prefix[8 + i]))
        << (8 * i);
  return 8 + lengthBytes + static_cast<size_t>(headerLength);
}

std::optional<Layout> parseLayout(std::string_view head, uint64_t dataSize,
                                  std::string &error) {
  std::optional<size_t> offset = dataOffsetOf(head, error);
  if (!offset)
    return std::nullopt;
  size_t headerStart = head[6] == 1 ? 10 : 12;
  Layout layout;
  layout.dataOffset = *offset;
  HeaderParser parser(head.substr(headerStart, *offset - headerStart), error);
  if (!parser.parse(layout))
    return std::nullopt;

  uint64_t count = 1;
  for (int64_t dim : layout.shape) {
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) {
      error = "bad header: shape " + shapeTuple(layout.shape) +
              " has too many elements";
      return std::nullopt;
    }
  }
  const ElemInfo &info = infoOf(layout.elem);
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(info.size),
                             &layout.dataBytes) ||
      layout.dataBytes >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    error = "bad header: shape " + shapeTuple(layout.shape) +
            " has too many elements";
    return std::nullopt;
  }
  if (dataSize != layout.dataBytes) {
    error = std::string(dataSize < layout.dataBytes ? "truncated: " : "") +
            "the header's shape " + shapeTuple(layout.shape) + " of '" +
            info.descr + "' needs " + std::to_string(layout.dataBytes) +
            " data bytes but the file has " + std::to_string(dataSize);
    return std::nullopt;
  }
  return layout;
}

std::string formatHeader(const TensorView &t) {
  const char *descr = "<f4";
  switch (t.dtype) {
  case DType::F32:
  case DType::BF16:
    descr = "<f4";
    break;
  case DType::F16:
    descr = "<f2";
    break;
  case DType::I32:
    descr = "<i4";
    break;
  case DType::I64:
    descr = "<i8";
    break;
  case DType::Bool:
    descr = "|b1";
    break;
  }
  std::string dict =
      std::string("{'descr': '") + descr +
      "', 'fortran_order': False, 'shape': " + shapeTuple(t.shape) + ", }";
  size_t preamble = 10;
  size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  if (total - preamble > 0xffff) {
    preamble = 12;
    total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t headerLength = total - preamble;
  std::string out(kMagic);
  out += static_cast<char>(preamble == 10 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i)
    out += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  out += dict;
  out.append(headerLength - dict.size() - 1, ' ');
  out += '\n';
  return out;
}

} // namespace loom::rt::npy
