//===- loom-opt.cpp - The Loom optimizer driver ---------------------------===//

#include "compiler/pipeline/LoomPipeline.h"

int main(int argc, char **argv) { return loom::pipeline::optMain(argc, argv); }
