//===- loom.cpp - The `loom` command-line tool ----------------------------===//

#include "compiler/driver/LoomMain.h"

int main(int argc, char **argv) { return loom::driver::loomMain(argc, argv); }
