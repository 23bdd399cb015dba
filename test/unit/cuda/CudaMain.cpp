//===- CudaMain.cpp - GoogleTest main that skips without a GPU ------------===//
//
// Exits with 77, which ctest reports as skipped (SKIP_RETURN_CODE), after
// printing why, when this machine has no CUDA device.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"

#include "gtest/gtest.h"

#include <iostream>

int main(int argc, char **argv) {
  std::string why;
  if (loom::rt::cudaDeviceCount(why) == 0) {
    std::cout << "skipped: " << why << "\n";
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
