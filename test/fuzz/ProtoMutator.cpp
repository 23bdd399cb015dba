//===- ProtoMutator.cpp - Protobuf-aware mutations through reflection -----===//
//
// Mutates a parsed message (an ONNX model, a TensorProto, a plan) field by
// field and reserializes it, so that mutated inputs still parse and reach
// the checks behind the parser: shapes, indices, references by name.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cmath>
#include <limits>

namespace loom::fuzz {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// A field of one message in the tree (a repeated field as a whole).
struct Slot {
  Message *message;
  const FieldDescriptor *field;
};

/// What one walk over the tree found. The strings are the fields' own,
/// valid until the message changes.
struct Tree {
  std::vector<Slot> slots;
  std::vector<Message *> messages;
  std::vector<const std::string *> strings;

  /// A string of the tree, or "" when it has none.
  std::string anyString(Rng &rng) const {
    return strings.empty() ? "" : *rng.pick(strings);
  }
  /// The messages of type `d`.
  std::vector<Message *> ofType(const Descriptor *d) const {
    std::vector<Message *> out;
    for (Message *m : messages)
      if (m->GetDescriptor() == d)
        out.push_back(m);
    return out;
  }
};

/// Keeps `s` when it is the field's own string (not the scratch copy
/// reflection made) and short: a name rather than data.
void pushString(Tree &tree, const std::string &s, const std::string &scratch) {
  if (&s != &scratch && s.size() <= 256)
    tree.strings.push_back(&s);
}

void walk(Message &m, Tree &tree, int depth) {
  std::string scratch;
  tree.messages.push_back(&m);
  const Reflection *r = m.GetReflection();
  std::vector<const FieldDescriptor *> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor *f : fields) {
    tree.slots.push_back({&m, f});
    bool isMessage = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    bool isString = f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
    if (f->is_repeated()) {
      int n = r->FieldSize(m, f);
      // Long lists (weights as float_data, thousands of values) are
      // mutated as lists; their first elements stand for their contents.
      for (int i = 0; i < std::min(n, 512); ++i) {
        if (isMessage && depth < 64)
          walk(*r->MutableRepeatedMessage(&m, f, i), tree, depth + 1);
        else if (isString && tree.strings.size() < 4096)
          pushString(tree, r->GetRepeatedStringReference(m, f, i, &scratch),
                     scratch);
      }
    } else if (isMessage && depth < 64) {
      walk(*r->MutableMessage(&m, f), tree, depth + 1);
    } else if (isString && tree.strings.size() < 4096) {
      pushString(tree, r->GetStringReference(m, f, &scratch), scratch);
    }
  }
}

int64_t mutateInt(int64_t old, Rng &rng) {
  static const int64_t kValues[] = {0,
                                    1,
                                    -1,
                                    2,
                                    3,
                                    7,
                                    64,
                                    65536,
                                    std::numeric_limits<int32_t>::max(),
                                    std::numeric_limits<int32_t>::min(),
                                    int64_t(1) << 32,
                                    int64_t(1) << 48,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  // Wrapping arithmetic, in unsigned: the edges wrap around as a reader's
  // arithmetic would.
  uint64_t bits = static_cast<uint64_t>(old);
  switch (rng.below(5)) {
  case 0:
    return static_cast<int64_t>(bits + 1);
  case 1:
    return static_cast<int64_t>(bits - 1);
  case 2:
    return static_cast<int64_t>(bits * 2);
  case 3:
    return static_cast<int64_t>(rng.below(9));
  default:
    return kValues[rng.below(sizeof kValues / sizeof kValues[0])];
  }
}

double mutateFloat(double old, Rng &rng) {
  static const double kValues[] = {std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   0.0,
                                   -0.0,
                                   1e-45,
                                   1e38,
                                   1e300,
                                   -1.0,
                                   0.5};
  if (rng.chance(30))
    return old * (rng.chance(50) ? -1 : 2);
  return kValues[rng.below(sizeof kValues / sizeof kValues[0])];
}

/// A known value of `f`'s enum, or (in proto3, whose enums are open) one
/// that no enum has.
int mutateEnum(const FieldDescriptor *f, int old, Rng &rng) {
  const auto *e = f->enum_type();
  if (f->file()->syntax() == FileDescriptor::SYNTAX_PROTO3 && rng.chance(20))
    return static_cast<int>(mutateInt(old, rng));
  return e->value(static_cast<int>(rng.below(e->value_count())))->number();
}

/// A proto3 string must be UTF-8 (protobuf refuses to parse it otherwise,
/// and complains on writing): keep mutated text ASCII there.
void keepText(const FieldDescriptor *f, std::string &s) {
  if (f->type() != FieldDescriptor::TYPE_STRING ||
      f->file()->syntax() != FileDescriptor::SYNTAX_PROTO3)
    return;
  for (char &c : s)
    if (static_cast<unsigned char>(c) >= 0x80)
      c = '?';
}

std::string mutateString(const FieldDescriptor *f, std::string old,
                         const Tree &tree, Rng &rng) {
  switch (rng.below(4)) {
  case 0: // another name of the message: a value read where another was
    if (!tree.strings.empty()) {
      old = tree.anyString(rng);
      break;
    }
    [[fallthrough]];
  case 1:
    old = rng.chance(50) ? "" : old + old;
    break;
  default:
    mutateBytes(old, rng, tree.anyString(rng));
    break;
  }
  keepText(f, old);
  return old;
}

/// Sets the singular scalar `f` of `m` to a mutation of its value.
void mutateScalar(Message &m, const FieldDescriptor *f, const Tree &tree,
                  Rng &rng) {
  const Reflection *r = m.GetReflection();
  switch (f->cpp_type()) {
  case FieldDescriptor::CPPTYPE_INT32:
    r->SetInt32(&m, f, static_cast<int32_t>(mutateInt(r->GetInt32(m, f), rng)));
    break;
  case FieldDescriptor::CPPTYPE_INT64:
    r->SetInt64(&m, f, mutateInt(r->GetInt64(m, f), rng));
    break;
  case FieldDescriptor::CPPTYPE_UINT32:
    r->SetUInt32(&m, f,
                 static_cast<uint32_t>(mutateInt(r->GetUInt32(m, f), rng)));
    break;
  case FieldDescriptor::CPPTYPE_UINT64:
    r->SetUInt64(&m, f,
                 static_cast<uint64_t>(
                     mutateInt(static_cast<int64_t>(r->GetUInt64(m, f)), rng)));
    break;
  case FieldDescriptor::CPPTYPE_DOUBLE:
    r->SetDouble(&m, f, mutateFloat(r->GetDouble(m, f), rng));
    break;
  case FieldDescriptor::CPPTYPE_FLOAT:
    r->SetFloat(&m, f, static_cast<float>(mutateFloat(r->GetFloat(m, f), rng)));
    break;
  case FieldDescriptor::CPPTYPE_BOOL:
    r->SetBool(&m, f, !r->GetBool(m, f));
    break;
  case FieldDescriptor::CPPTYPE_ENUM:
    r->SetEnumValue(&m, f, mutateEnum(f, r->GetEnumValue(m, f), rng));
    break;
  case FieldDescriptor::CPPTYPE_STRING:
    r->SetString(&m, f, mutateString(f, r->GetString(m, f), tree, rng));
    break;
  case FieldDescriptor::CPPTYPE_MESSAGE:
    break;
  }
}

/// Changes one element of the repeated scalar `f` through a scratch
/// singular copy: the value is read, mutated as a singular one would be,
/// and written back.
void mutateRepeatedScalar(Message &m, const FieldDescriptor *f, int i,
                          const Tree &tree, Rng &rng) {
  const Reflection *r = m.GetReflection();
  switch (f->cpp_type()) {
  case FieldDescriptor::CPPTYPE_INT32:
    r->SetRepeatedInt32(
        &m, f, i,
        static_cast<int32_t>(mutateInt(r->GetRepeatedInt32(m, f, i), rng)));
    break;
  case FieldDescriptor::CPPTYPE_INT64:
    r->SetRepeatedInt64(&m, f, i, mutateInt(r->GetRepeatedInt64(m, f, i), rng));
    break;
  case FieldDescriptor::CPPTYPE_UINT32:
    r->SetRepeatedUInt32(
        &m, f, i,
        static_cast<uint32_t>(mutateInt(r->GetRepeatedUInt32(m, f, i), rng)));
    break;
  case FieldDescriptor::CPPTYPE_UINT64:
    r->SetRepeatedUInt64(
        &m, f, i,
        static_cast<uint64_t>(mutateInt(
            static_cast<int64_t>(r->GetRepeatedUInt64(m, f, i)), rng)));
    break;
  case FieldDescriptor::CPPTYPE_DOUBLE:
    r->SetRepeatedDouble(&m, f, i,
                         mutateFloat(r->GetRepeatedDouble(m, f, i), rng));
    break;
  case FieldDescriptor::CPPTYPE_FLOAT:
    r->SetRepeatedFloat(
        &m, f, i,
        static_cast<float>(mutateFloat(r->GetRepeatedFloat(m, f, i), rng)));
    break;
  case FieldDescriptor::CPPTYPE_BOOL:
    r->SetRepeatedBool(&m, f, i, !r->GetRepeatedBool(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_ENUM:
    r->SetRepeatedEnumValue(
        &m, f, i, mutateEnum(f, r->GetRepeatedEnumValue(m, f, i), rng));
    break;
  case FieldDescriptor::CPPTYPE_STRING:
    r->SetRepeatedString(
        &m, f, i, mutateString(f, r->GetRepeatedString(m, f, i), tree, rng));
    break;
  case FieldDescriptor::CPPTYPE_MESSAGE:
    break;
  }
}

/// Appends a copy of element `i` of the repeated `f`.
void duplicateElement(Message &m, const FieldDescriptor *f, int i) {
  const Reflection *r = m.GetReflection();
  switch (f->cpp_type()) {
  case FieldDescriptor::CPPTYPE_MESSAGE: {
    std::unique_ptr<Message> copy(r->GetRepeatedMessage(m, f, i).New());
    copy->CopyFrom(r->GetRepeatedMessage(m, f, i));
    r->AddMessage(&m, f)->CopyFrom(*copy);
    break;
  }
  case FieldDescriptor::CPPTYPE_INT32:
    r->AddInt32(&m, f, r->GetRepeatedInt32(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_INT64:
    r->AddInt64(&m, f, r->GetRepeatedInt64(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_UINT32:
    r->AddUInt32(&m, f, r->GetRepeatedUInt32(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_UINT64:
    r->AddUInt64(&m, f, r->GetRepeatedUInt64(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_DOUBLE:
    r->AddDouble(&m, f, r->GetRepeatedDouble(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_FLOAT:
    r->AddFloat(&m, f, r->GetRepeatedFloat(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_BOOL:
    r->AddBool(&m, f, r->GetRepeatedBool(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_ENUM:
    r->AddEnumValue(&m, f, r->GetRepeatedEnumValue(m, f, i));
    break;
  case FieldDescriptor::CPPTYPE_STRING:
    r->AddString(&m, f, r->GetRepeatedString(m, f, i));
    break;
  }
}

void mutateRepeated(Message &m, const FieldDescriptor *f, const Tree &tree,
                    Rng &rng) {
  const Reflection *r = m.GetReflection();
  int n = r->FieldSize(m, f);
  if (n == 0)
    return;
  int i = static_cast<int>(rng.below(n));
  switch (rng.below(6)) {
  case 0: // drop one element
    r->SwapElements(&m, f, i, n - 1);
    r->RemoveLast(&m, f);
    if (rng.chance(70) && i < n - 1) // keep the others' order
      for (int k = i; k + 1 < n - 1; ++k)
        r->SwapElements(&m, f, k, k + 1);
    break;
  case 1: // duplicate one, at the end or next to it
    duplicateElement(m, f, i);
    if (rng.chance(50))
      for (int k = n; k > i + 1; --k)
        r->SwapElements(&m, f, k, k - 1);
    break;
  case 2: // swap two
    r->SwapElements(&m, f, i, static_cast<int>(rng.below(n)));
    break;
  case 3:
    if (rng.chance(30)) {
      r->ClearField(&m, f);
      break;
    }
    [[fallthrough]];
  default:
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
      mutateRepeatedScalar(m, f, i, tree, rng);
    else
      r->RemoveLast(&m, f);
    break;
  }
}

/// Sets a field that was not set, in a random message of the tree.
void setUnsetField(const Tree &tree, Rng &rng) {
  Message &m = *rng.pick(tree.messages);
  const Descriptor *d = m.GetDescriptor();
  if (d->field_count() == 0)
    return;
  const FieldDescriptor *f = d->field(
      static_cast<int>(rng.below(static_cast<uint64_t>(d->field_count()))));
  const Reflection *r = m.GetReflection();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    std::vector<Message *> same = tree.ofType(f->message_type());
    Message *added =
        f->is_repeated() ? r->AddMessage(&m, f) : r->MutableMessage(&m, f);
    if (!same.empty() && rng.chance(70)) {
      const Message *from = rng.pick(same);
      if (from != added && from != &m) {
        std::unique_ptr<Message> copy(from->New());
        copy->CopyFrom(*from);
        added->CopyFrom(*copy);
      }
    }
    return;
  }
  if (f->is_repeated()) {
    // A first element to mutate: a string from the tree, or a zero.
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING)
      r->AddString(&m, f, tree.anyString(rng));
    else if (f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM)
      r->AddEnumValue(&m, f, f->enum_type()->value(0)->number());
    else
      switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        r->AddInt32(&m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->AddInt64(&m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->AddUInt32(&m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->AddUInt64(&m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        r->AddDouble(&m, f, 0);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        r->AddFloat(&m, f, 0);
        break;
      default:
        r->AddBool(&m, f, true);
        break;
      }
    mutateRepeatedScalar(m, f, r->FieldSize(m, f) - 1, tree, rng);
    return;
  }
  mutateScalar(m, f, tree, rng);
}

} // namespace

void mutateMessage(Message &message, Rng &rng) {
  Tree tree;
  walk(message, tree, 0);
  if (tree.slots.empty() || rng.chance(15)) {
    setUnsetField(tree, rng);
    return;
  }
  Slot slot = rng.pick(tree.slots);
  Message &m = *slot.message;
  const FieldDescriptor *f = slot.field;
  const Reflection *r = m.GetReflection();
  if (f->is_repeated()) {
    mutateRepeated(m, f, tree, rng);
  } else if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    if (rng.chance(10))
      r->ClearField(&m, f);
    else
      mutateScalar(m, f, tree, rng);
  } else if (rng.chance(30)) {
    r->ClearField(&m, f);
  } else {
    // Replaced by another message of its type from elsewhere in the tree.
    Message *mine = r->MutableMessage(&m, f);
    std::vector<Message *> same = tree.ofType(f->message_type());
    if (same.empty())
      return;
    std::unique_ptr<Message> copy(mine->New());
    copy->CopyFrom(*rng.pick(same));
    mine->CopyFrom(*copy);
  }
}

std::string mutateProtoBytes(const std::string &seed, const Message &prototype,
                             Rng &rng, const std::string &other) {
  std::string out = seed;
  std::unique_ptr<Message> message(prototype.New());
  if (rng.chance(15) || !message->ParseFromString(seed)) {
    mutateBytesStacked(out, rng, other, 8);
    return out;
  }
  unsigned count = 1 + static_cast<unsigned>(rng.below(4));
  for (unsigned i = 0; i < count; ++i)
    mutateMessage(*message, rng);
  out.clear();
  message->SerializePartialToString(&out);
  if (rng.chance(10))
    mutateBytes(out, rng, other);
  return out;
}

} // namespace loom::fuzz
