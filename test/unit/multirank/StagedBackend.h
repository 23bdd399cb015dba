//===- StagedBackend.h - A CPU backend whose memory the host cannot touch -===//
//
// Tests the executor's device-memory path without a GPU: the CPU backend's
// kernels behind memory the executor must not read or write directly. Its
// "device" pointers are host pointers with bit 62 set (not canonical on
// x86-64, so a direct access faults at once); its copy hooks and kernels
// clear the bit. Everything the executor reads or writes goes through
// allocate, copyToDevice, copyToHost, copyOnDevice, copy2DOnDevice and
// zero, as it does for the CUDA backend.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_MULTIRANK_STAGEDBACKEND_H
#define LOOM_TEST_UNIT_MULTIRANK_STAGEDBACKEND_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"
#include "common/plan/plan.pb.h"

#include <cstdint>
#include <memory>
#include <string>

namespace loom::test {

std::unique_ptr<rt::Backend> createStagedBackend();

/// The backend the multi-rank tests run on: one-thread CPU, the staged
/// backend above when LOOM_TEST_BACKEND=staged, or with
/// LOOM_TEST_BACKEND=queued the staged backend with a second queue for
/// collectives that runs its work as late as the executor allows (as a
/// GPU stream may: see StagedBackend.cpp), to test that the executor waits
/// for every collective a kernel depends on.
std::unique_ptr<rt::Backend> createTestBackend();

/// `comm` for a rank whose backend createTestBackend made: under
/// LOOM_TEST_BACKEND=queued a communicator that takes the backend's memory
/// and queues collectives on its second queue; else `comm` itself.
std::unique_ptr<rt::Communicator>
wrapTestCommunicator(std::unique_ptr<rt::Communicator> comm,
                     rt::Backend &backend);

/// The error of creating rank `rank`'s executor of `plan` on the test
/// backend with a threads communicator of `worldSize` ranks (0: none); ""
/// if it loads.
std::string loadError(const plan::Plan &plan, int64_t worldSize = 0,
                      int64_t rank = 0);

} // namespace loom::test

#endif // LOOM_TEST_UNIT_MULTIRANK_STAGEDBACKEND_H
