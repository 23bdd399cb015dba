//===- MpiUnavailable.cpp - The mpi communicator in a build without MPI ---===//
//
// LOOM_ENABLE_MPI=OFF (the GPU bundle's runtime-only build): no `mpi`
// communicator; asking for one is an error that says how to get it.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

namespace loom::rt {

bool mpiAvailable() { return false; }

std::unique_ptr<Communicator> createMpiCommunicator(std::string &error,
                                                    double) {
  error = "this Loom was built without MPI (LOOM_ENABLE_MPI=OFF); run the "
          "ranks as threads of one process (--comm threads, or --comm nccl "
          "with --backend cuda) or use a build with MPI";
  return nullptr;
}

} // namespace loom::rt
