//===- Launcher.cpp - Whether an MPI launcher started this process -------===//
//
// Read from the launcher's environment, without MPI: a build without MPI
// still tells a user who ran it under mpirun why it cannot take part.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include <cstdlib>

namespace loom::rt {

bool launchedByMpirun() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name))
      return true;
  return false;
}

} // namespace loom::rt
