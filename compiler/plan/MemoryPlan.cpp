//===- MemoryPlan.cpp - The step arena's static memory plan ---------------===//
//
// Liveness of a program's values (and instructions' scratch) in the step
// arena, the placements that reuse a dead value's bytes (first fit, best
// fit, and largest first), the memory plan that keeps the smallest, and
// where the arena peaks.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/MemoryPlan.h"
#include "compiler/plan/PlanEmitter.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>
#include <vector>

namespace loom {
namespace arena {
namespace {

/// Allocation of step-arena storage by liveness: a free block that holds
/// the value (the lowest, or with `bestFit` the smallest), else the free
/// block at the top of the arena grown to fit, else new space at the top.
/// Neither policy is better on every program; the emitter keeps the
/// smaller arena of the two.
class ArenaAllocator {
public:
  explicit ArenaAllocator(bool bestFit) : bestFit(bestFit) {}

  int64_t allocate(int64_t bytes) {
    bytes = alignUp(std::max<int64_t>(bytes, 1));
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes ||
          (best != free.end() && it->second >= best->second))
        continue;
      best = it;
      if (!bestFit)
        break;
    }
    if (best != free.end()) {
      int64_t offset = best->first, size = best->second;
      free.erase(best);
      if (size > bytes)
        free[offset + bytes] = size - bytes;
      return offset;
    }
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        int64_t offset = last->first;
        free.erase(last);
        top = offset + bytes;
        return offset;
      }
    }
    int64_t offset = top;
    top += bytes;
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    bytes = alignUp(std::max<int64_t>(bytes, 1));
    auto [it, inserted] = free.emplace(offset, bytes);
    (void)inserted;
    // Merge with the following and preceding free blocks.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }
  int64_t size() const { return top; }

private:
  bool bestFit;
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t top = 0;
};

/// When each value of a program lives in the step arena. Inputs (and the
/// hyperparameters) live for the whole step; a temporary lives from its
/// instruction to its last use (outputs to the end); a value stored in
/// place of a persistent one is not in the arena. An instruction's scratch
/// lives while it runs: the walk names it as item values_size() + its
/// index, after the values.
struct Liveness {
  explicit Liveness(const plan::Program &program) {
    int n = program.instructions_size();
    lastUse.assign(program.values_size(), -1);
    definedAt.assign(program.values_size(), -1);
    for (int i = 0; i < n; ++i) {
      for (int32_t id : program.instructions(i).operands())
        lastUse[id] = i;
      for (int32_t id : program.instructions(i).results())
        definedAt[id] = i;
    }
    for (const auto &out : program.outputs())
      lastUse[out.value()] = n;
    // An alias's uses keep its target's bytes live.
    for (const plan::Value &v : program.values())
      if (v.has_alias_of())
        lastUse[v.alias_of()] =
            std::max(lastUse[v.alias_of()], lastUse[v.id()]);
  }

  /// The bytes of item `id`: a value, or an instruction's scratch.
  static int64_t bytes(const plan::Program &program, int32_t id) {
    return id < program.values_size()
               ? program.values(id).bytes()
               : program.instructions(id - program.values_size())
                     .scratch_bytes();
  }
  static int32_t items(const plan::Program &program) {
    return program.values_size() + program.instructions_size();
  }

  /// The value whose bytes `id` is: its alias target, or itself.
  static int32_t home(const plan::Program &program, int32_t id) {
    const plan::Value &v = program.values(id);
    return v.has_alias_of() ? v.alias_of() : id;
  }

  /// Calls `allocate` and `release` in program order, and `after(i)` once
  /// instruction i's results are allocated, before what dies there is
  /// released (so no kernel reads and writes the same bytes).
  template <typename Allocate, typename Release, typename After>
  void walk(const plan::Program &program, Allocate allocate, Release release,
            After after) const {
    auto inArena = [&](int32_t id) {
      return !program.values(id).has_in_place_of() &&
             !program.values(id).has_alias_of();
    };
    for (const plan::Value &v : program.values())
      if (v.kind() == plan::Value::INPUT ||
          v.kind() == plan::Value::HYPERPARAMETER)
        allocate(v.id());
    for (int i = 0; i < program.instructions_size(); ++i) {
      const plan::Instruction &inst = program.instructions(i);
      for (int32_t id : inst.results())
        if (inArena(id))
          allocate(id);
      const int32_t scratch = program.values_size() + i;
      if (inst.scratch_bytes() > 0)
        allocate(scratch);
      after(i);
      if (inst.scratch_bytes() > 0)
        release(scratch);
      for (int32_t id : inst.results())
        if (lastUse[id] < 0 && inArena(id)) // never used: free right away
          release(id);
      std::vector<int32_t> dying;
      for (int32_t operand : inst.operands()) {
        int32_t id = home(program, operand);
        if (lastUse[id] == i &&
            program.values(id).kind() == plan::Value::TEMPORARY &&
            inArena(id) && !llvm::is_contained(dying, id))
          dying.push_back(id);
      }
      for (int32_t id : dying)
        release(id);
    }
  }

  std::vector<int> lastUse, definedAt;
};

/// Offline placement, largest value first (the "greedy by size" policy of
/// static memory planners): each value of the arena at the lowest offset
/// clear of every value placed before it whose lifetime meets its own. A
/// lifetime runs from the value's allocation to its release in the
/// liveness walk, in the walk's order of events, so the placement is valid
/// exactly where the online allocators' are. Returns the arena's size, or
/// -1 past the work budget below (then `offsets` is unset).
constexpr double kPlaceBySizeBudget = 2e7;
int64_t placeBySize(const plan::Program &program, const Liveness &live,
                    std::vector<int64_t> &offsets) {
  const size_t n = static_cast<size_t>(Liveness::items(program));
  std::vector<int64_t> born(n, -1), dies(n, -1);
  int64_t event = 0;
  live.walk(
      program, [&](int32_t id) { born[id] = event++; },
      [&](int32_t id) { dies[id] = event++; }, [](int) {});
  std::vector<int32_t> order;
  for (size_t id = 0; id < n; ++id)
    if (born[id] >= 0) {
      if (dies[id] < 0) // live to the end
        dies[id] = event;
      order.push_back(static_cast<int32_t>(id));
    }
  // Each value meets up to the most values live at once: past a budget of
  // that product, no placement (a pipelined stage of GPT-3 shapes over 96
  // micro-batches has 154k values, 513 live at once: its 8 stages took 50 s
  // more, to save 2% of the arena).
  std::vector<int64_t> change(static_cast<size_t>(event) + 2, 0);
  for (int32_t id : order) {
    ++change[born[id]];
    --change[dies[id] + 1];
  }
  int64_t liveNow = 0, mostLive = 0;
  for (int64_t c : change)
    mostLive = std::max(mostLive, liveNow += c);
  if (static_cast<double>(order.size()) * static_cast<double>(mostLive) >
      kPlaceBySizeBudget)
    return -1;
  auto bytesOf = [&](int32_t id) {
    return alignUp(std::max<int64_t>(Liveness::bytes(program, id), 1));
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    int64_t x = bytesOf(a), y = bytesOf(b);
    return x != y ? x > y : born[a] < born[b];
  });
  offsets.assign(n, -1);
  // The placed values by birth, in a segment tree holding the latest
  // death among the placed ones in each range: the values placed so far
  // that meet [b, d] are those born by d whose death is at least b.
  std::vector<int32_t> byBirth = order;
  std::sort(byBirth.begin(), byBirth.end(), [&](int32_t a, int32_t b) {
    return born[a] != born[b] ? born[a] < born[b] : a < b;
  });
  const size_t m = byBirth.size();
  std::vector<size_t> slot(n, 0);
  std::vector<int64_t> bornAt(m);
  for (size_t k = 0; k < m; ++k) {
    slot[byBirth[k]] = k;
    bornAt[k] = born[byBirth[k]];
  }
  size_t leaves = 1;
  while (leaves < std::max<size_t>(m, 1))
    leaves *= 2;
  std::vector<int64_t> latest(2 * leaves, -1);
  std::vector<std::pair<int64_t, int64_t>> taken; // offset, end
  std::vector<std::pair<size_t, size_t>> stack;   // node, its first slot
  int64_t size = 0;
  for (int32_t id : order) {
    taken.clear();
    size_t hi = static_cast<size_t>(
        std::upper_bound(bornAt.begin(), bornAt.end(), dies[id]) -
        bornAt.begin());
    // The placed values in slots [0, hi) that die at born[id] or later.
    stack.assign(1, {1, 0});
    while (!stack.empty()) {
      auto [node, lo] = stack.back();
      stack.pop_back();
      if (lo >= hi || latest[node] < born[id])
        continue;
      if (node >= leaves) {
        int32_t other = byBirth[lo];
        taken.push_back({offsets[other], offsets[other] + bytesOf(other)});
        continue;
      }
      size_t half = leaves >> (63 - __builtin_clzll(node) + 1);
      stack.push_back({2 * node + 1, lo + half});
      stack.push_back({2 * node, lo});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0, bytes = bytesOf(id);
    for (const auto &[begin, end] : taken) {
      if (begin >= offset + bytes)
        break;
      offset = std::max(offset, end);
    }
    offsets[id] = offset;
    size = std::max(size, offset + bytes);
    for (size_t node = leaves + slot[id]; node >= 1; node /= 2)
      latest[node] = std::max(latest[node], dies[id]);
  }
  return size;
}

} // namespace

bool planMemory(plan::Program &program, std::string &error) {
  // A reshape moves no bytes: its result is its operand's memory, when
  // both are arena temporaries (inputs are written from outside every step;
  // in-place updates live over their arguments). In program order, so that
  // a reshape of a reshape shares the first one's target.
  for (const plan::Instruction &inst : program.instructions()) {
    if (inst.op() != "reshape")
      continue;
    int32_t operand = Liveness::home(program, inst.operands(0));
    const plan::Value &from = program.values(operand);
    plan::Value *to = program.mutable_values(inst.results(0));
    if (from.kind() == plan::Value::TEMPORARY && !from.has_in_place_of() &&
        !to->has_in_place_of() && from.bytes() == to->bytes())
      to->set_alias_of(operand);
  }

  // Memory plan of the step arena (see Liveness).
  const Liveness live(program);
  const std::vector<int> &lastUse = live.lastUse, &definedAt = live.definedAt;
  // An in-place update must be the last reader of what it replaces.
  for (plan::Value &v : *program.mutable_values()) {
    if (!v.has_in_place_of())
      continue;
    const plan::Value &target = program.values(v.in_place_of());
    if (lastUse[target.id()] > definedAt[v.id()]) {
      error = "'" + target.name() +
              "' is read after the instruction that updates it in place";
      return false;
    }
    v.set_offset(target.offset());
  }
  // The arena's offsets under one policy, and its size.
  auto place = [&](bool bestFit, std::vector<int64_t> &offsets) {
    ArenaAllocator arena(bestFit);
    offsets.assign(Liveness::items(program), -1);
    live.walk(
        program,
        [&](int32_t id) {
          offsets[id] = arena.allocate(Liveness::bytes(program, id));
        },
        [&](int32_t id) {
          arena.release(offsets[id], Liveness::bytes(program, id));
        },
        [](int) {});
    return arena.size();
  };
  // Three policies; the smallest arena wins (the first at equal size).
  std::vector<int64_t> firstFit, bestFit, bySize;
  int64_t firstSize = place(false, firstFit), bestSize = place(true, bestFit),
          bySizeSize = placeBySize(program, live, bySize);
  const std::vector<int64_t> *offsets = &firstFit;
  int64_t arenaBytes = firstSize;
  for (auto [size, placement] : {std::make_pair(bestSize, &bestFit),
                                 std::make_pair(bySizeSize, &bySize)})
    if (size >= 0 && size < arenaBytes) {
      arenaBytes = size;
      offsets = placement;
    }
  for (plan::Value &v : *program.mutable_values())
    if ((*offsets)[v.id()] >= 0)
      v.set_offset((*offsets)[v.id()]);
  for (int i = 0; i < program.instructions_size(); ++i)
    if (program.instructions(i).scratch_bytes() > 0)
      program.mutable_instructions(i)->set_scratch_offset(
          (*offsets)[program.values_size() + i]);
  for (plan::Value &v : *program.mutable_values())
    if (v.has_alias_of())
      v.set_offset(program.values(v.alias_of()).offset());
  program.set_arena_bytes(arenaBytes);
  return true;
}

} // namespace arena

using arena::Liveness;

ArenaPeak arenaPeak(const plan::Program &program, size_t top) {
  const Liveness live(program);
  ArenaPeak peak;
  int64_t bytes = 0;
  std::vector<char> alive(Liveness::items(program), 0);
  auto allocate = [&](int32_t id) {
    alive[id] = 1;
    bytes += Liveness::bytes(program, id);
  };
  auto release = [&](int32_t id) {
    alive[id] = 0;
    bytes -= Liveness::bytes(program, id);
  };
  live.walk(program, allocate, release, [&](int i) {
    if (bytes > peak.bytes) {
      peak.bytes = bytes;
      peak.instruction = i;
    }
  });
  if (peak.instruction < 0)
    return peak;
  peak.scratch = program.instructions(peak.instruction).scratch_bytes();
  // The values live there: walk again up to it.
  std::fill(alive.begin(), alive.end(), 0);
  bool done = false;
  live.walk(
      program,
      [&](int32_t id) {
        if (!done)
          alive[id] = 1;
      },
      [&](int32_t id) {
        if (!done)
          alive[id] = 0;
      },
      [&](int i) { done |= i == peak.instruction; });
  for (const plan::Value &v : program.values())
    if (alive[v.id()])
      peak.largest.push_back(v.id());
  llvm::stable_sort(peak.largest, [&](int32_t a, int32_t b) {
    return program.values(a).bytes() > program.values(b).bytes();
  });
  if (peak.largest.size() > top)
    peak.largest.resize(top);
  for (int32_t id : peak.largest)
    peak.producers.push_back(live.definedAt[id]);
  return peak;
}

} // namespace loom
